"""Field checks the weight contracts share: each returns the normalized value or raises ValueError
naming the field."""

import hashlib
import json
from collections.abc import Sequence

from ..contracts.fragments import fits_u64

_U64_MAX = (1 << 64) - 1


def strict_json(value, what):
    """json.loads of a manifest document, refusing what a canonical one never holds: duplicate
    keys and NaN / Infinity. ValueError naming `what` for anything that is not valid JSON."""
    def no_constant(name):
        raise ValueError(f"non-finite JSON number is unsupported: {name}")

    def no_duplicates(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"duplicate JSON field: {k}")
            out[k] = v
        return out

    try:
        return json.loads(value, parse_constant=no_constant, object_pairs_hook=no_duplicates)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} is not valid JSON") from exc


def text(value, name):
    if type(value) is not str or not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


def text_fields(obj, *names):
    """text() of each named attribute of obj, in order (a dataclass's __post_init__)."""
    for name in names:
        text(getattr(obj, name), name)


def integer(value, name, minimum=None):
    if type(value) is not int:  # bool is refused too
        raise ValueError(f"{name} must be an integer")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}")
    return value


def u64(value, name, minimum=0):
    return fits_u64(integer(value, name, minimum), name)


def sequence(value, name):
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a sequence")
    return tuple(value)


def int_tuple(value, name, minimum):
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must contain integers")
    return tuple(integer(v, name, minimum) for v in value)


def items_of(value, name, kind):
    out = sequence(value, name)
    if not all(isinstance(v, kind) for v in out):
        raise ValueError(f"{name} must contain {kind.__name__}")
    return out


def sha256_digest(value, name):
    text(value, name)
    if len(value) != 64 or value.strip("0123456789abcdef"):
        raise ValueError(f"{name} must be a lowercase SHA-256 digest")
    return value


def content_id(content):
    """"sha256:<hex>" of content's canonical JSON (sorted keys, no spaces): the identity of a
    canonical value, equal for equal content in any process."""
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()
