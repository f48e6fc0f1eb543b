"""Client of ``mooncake_conductor``, the KV-event indexer (docs/kv-events.md).

``ConductorClient`` speaks its HTTP API with msgpack bodies, as the reference's conductor does:
register and unregister event sources (vLLM / SGLang engines, Mooncake masters), query which
instance holds the longest prefix of a request's block hashes, list services, read health and
metrics. Errors come back as ``ConductorError`` with the server's status, ``reason`` and
``field``. Needs the ``msgpack`` package.
"""

import http.client
import json
from urllib.parse import urlsplit

__all__ = ["ConductorClient", "ConductorError"]


class ConductorError(RuntimeError):
    """A request the conductor refused: ``status`` (HTTP), ``reason``, ``field``."""

    def __init__(self, status, reason, message, field=None):
        super().__init__(f"{status} {reason}: {message}" + (f" ({field})" if field else ""))
        self.status = status
        self.reason = reason
        self.field = field


class ConductorClient:
    """``ConductorClient("http://127.0.0.1:13333")``; every call has a timeout (seconds)."""

    def __init__(self, url="http://127.0.0.1:13333", timeout=10.0):
        parts = urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"conductor URL must be http://host:port, not {url!r}")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._timeout = timeout

    def setup(self, url=None, timeout=None):
        """Points the client elsewhere (the reference's name for configuring it)."""
        if url is not None:
            self.__init__(url, self._timeout if timeout is None else timeout)
        return self

    def _request(self, method, path, body=None):
        import msgpack

        conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        try:
            data = msgpack.packb(body, use_bin_type=True) if body is not None else None
            headers = {"Content-Type": "application/msgpack"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            raw = r.read()
            ctype = r.getheader("Content-Type", "")
        finally:
            conn.close()
        value = msgpack.unpackb(raw, raw=False) if "msgpack" in ctype else raw.decode()
        if r.status != 200:
            if isinstance(value, dict):
                raise ConductorError(r.status, value.get("reason", ""), value.get("error", ""),
                                     value.get("field"))
            raise ConductorError(r.status, "http_error", str(value))
        return value

    def health(self):
        """True when the service answers."""
        return self._request("GET", "/health") == "OK"

    def register(self, endpoint, type, modelname, instance_id, block_size, dp_rank=0,
                 replay_endpoint=None, lora_name=None, tenant_id=None, **extra):
        body = {"endpoint": endpoint, "type": type, "modelname": modelname,
                "instance_id": instance_id, "block_size": block_size, "dp_rank": dp_rank}
        for k, v in (("replay_endpoint", replay_endpoint), ("lora_name", lora_name),
                     ("tenant_id", tenant_id)):
            if v is not None:
                body[k] = v
        body.update(extra)
        return self._request("POST", "/register", body)

    def unregister(self, instance_id, dp_rank=0, tenant_id=None):
        body = {"instance_id": instance_id, "dp_rank": dp_rank}
        if tenant_id is not None:
            body["tenant_id"] = tenant_id
        return self._request("POST", "/unregister", body)

    def query_by_hash(self, model, block_size, block_hashes, tenant_id=None, lora_name=None,
                      cache_salt=None):
        body = {"model": model, "block_size": block_size, "block_hashes": list(block_hashes)}
        for k, v in (("tenant_id", tenant_id), ("lora_name", lora_name),
                     ("cache_salt", cache_salt)):
            if v is not None:
                body[k] = v
        return self._request("POST", "/query_by_hash", body)

    def list_services(self):
        return self._request("GET", "/services")

    def metrics(self):
        """The Prometheus text of /metrics, as {name: value}."""
        out = {}
        for line in self._request("GET", "/metrics").splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = json.loads(value)
        return out
