"""Who may use the store's REST service: the bearer token and the listening address.

The token, first found:

1. ``--token-file PATH`` (the service's flag);
2. ``MC_REST_TOKEN_FILE`` (a file holding it);
3. ``MC_REST_TOKEN`` (the token itself);
4. derived from the cluster secret (``MC_CLUSTER_SECRET``, else ``MC_CLUSTER_SECRET_FILE``, as
   the master and every store client read it): ``hex(HMAC-SHA256(secret, "mc-rest-token"))``.

The secret itself is never the token: a bearer token crosses the wire in every request, in clear
unless a TLS proxy is in front, and the cluster secret never crosses it anywhere else. Anyone who
knows the secret can compute the derived token (``mc_store_rest_server --print-token``); anyone
who only sees the token cannot get the secret back.

A file's trailing whitespace is ignored, as for the cluster secret file. A token is 16 to 4096
printable ASCII characters without spaces (it travels in a header).
"""

import hashlib
import hmac
import ipaddress
import os
import re

__all__ = ["TokenError", "load_token", "derive_token", "check_bearer", "is_loopback"]

_MIN_TOKEN = 16
_MAX_TOKEN = 4096
_MAX_SECRET = 1024  # MC_AUTH_MAX_SECRET (mooncake/common/auth.h)
_TOKEN_CHARS = re.compile(rb"[\x21-\x7e]+")
_DERIVE_LABEL = b"mc-rest-token"


class TokenError(ValueError):
    """The configured token or secret cannot be used (unreadable, empty, malformed)."""


def _strip(data):
    return data.rstrip(b"\n\r \t")


def _read(path, what, limit):
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise TokenError(f"cannot read the {what} file {path}: {exc.strerror}") from None
    if len(data) > limit:
        raise TokenError(f"the {what} file {path} is longer than {limit} bytes")
    return _strip(data)


def derive_token(secret):
    """The REST token of a cluster secret (bytes): 64 hex digits."""
    return hmac.new(secret, _DERIVE_LABEL, hashlib.sha256).hexdigest().encode()


def _checked(token, where):
    if not token:
        raise TokenError(f"the token from {where} is empty")
    if len(token) < _MIN_TOKEN or len(token) > _MAX_TOKEN:
        raise TokenError(f"the token from {where} must be {_MIN_TOKEN} to {_MAX_TOKEN} "
                         f"characters, not {len(token)}")
    if not _TOKEN_CHARS.fullmatch(token):
        raise TokenError(f"the token from {where} must be printable ASCII without spaces")
    return token


def load_token(token_file=None, environ=None):
    """(token bytes, where it came from) or (None, None) when none is configured; TokenError when
    the first source found is unusable (a service must not start open because its token file
    was unreadable)."""
    env = os.environ if environ is None else environ
    if token_file:
        return _checked(_read(token_file, "token", _MAX_TOKEN), f"--token-file {token_file}"), \
            f"--token-file {token_file}"
    path = env.get("MC_REST_TOKEN_FILE")
    if path:
        return _checked(_read(path, "token", _MAX_TOKEN), f"MC_REST_TOKEN_FILE {path}"), \
            "MC_REST_TOKEN_FILE"
    raw = env.get("MC_REST_TOKEN")
    if raw:
        return _checked(_strip(raw.encode("utf-8", "surrogateescape")), "MC_REST_TOKEN"), \
            "MC_REST_TOKEN"
    secret = env.get("MC_CLUSTER_SECRET")
    where = "the cluster secret (MC_CLUSTER_SECRET)"
    if secret:
        secret = secret.encode("utf-8", "surrogateescape")
        if len(secret) > _MAX_SECRET:
            raise TokenError(f"MC_CLUSTER_SECRET is longer than {_MAX_SECRET} bytes")
    else:
        path = env.get("MC_CLUSTER_SECRET_FILE")
        if not path:
            return None, None
        secret = _read(path, "cluster secret", _MAX_SECRET)
        where = f"the cluster secret (MC_CLUSTER_SECRET_FILE {path})"
    if not secret:
        return None, None  # an empty secret is no secret, for the master and clients too
    return derive_token(secret), where


def check_bearer(header, token):
    """None when the Authorization header value proves token; else why not (for the 401)."""
    if header is None:
        return "Missing credentials: send 'Authorization: Bearer <token>'"
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return "Unsupported Authorization scheme: send 'Authorization: Bearer <token>'"
    # Header values arrive as latin-1 text; compare the bytes in constant time.
    if not hmac.compare_digest(given.strip().encode("latin-1", "replace"), token):
        return "Invalid bearer token"
    return None


def is_loopback(host):
    """True for an address only this host can reach: 127.0.0.0/8, ::1, "localhost"."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything, so it counts as exposed
