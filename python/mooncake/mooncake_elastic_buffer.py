"""The reference's module path for the elastic EP buffer: ``from mooncake.mooncake_elastic_buffer
import ElasticBuffer`` keeps working. The implementation is ``mooncake.ep`` (docs/ep.md)."""

from mooncake.ep._common import EventOverlap
from mooncake.ep._elastic import ElasticBuffer, EPHandle

__all__ = ["ElasticBuffer", "EPHandle", "EventOverlap"]
