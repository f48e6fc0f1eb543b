"""A catalog of logical rows over immutable DataProto fragments (see
``mooncake._structured.catalog``). Pure Python; imports numpy only when a handle is checked."""

from mooncake._structured.catalog import DataProtoCatalog

__all__ = ["DataProtoCatalog"]
