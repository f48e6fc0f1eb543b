"""The reference's module path for the low-latency EP buffer: ``from mooncake.mooncake_ep_buffer
import Buffer`` keeps working. The implementation is ``mooncake.ep`` (docs/ep.md)."""

from mooncake.ep._buffer import Buffer
from mooncake.ep._common import EventOverlap

__all__ = ["Buffer", "EventOverlap"]
