"""The store's REST front end, ``mooncake.mooncake_store_service`` (console script
``mc_store_rest_server``), as the reference ships it.

One process sets up a :class:`mooncake.store.MooncakeDistributedStore` (retrying for
``--max-wait-time`` seconds while the master is not up) and serves it over HTTP:

=======  ============================  =====================================================
PUT      /api/put                      ``{"key": str, "value": str}``: stores the value's UTF-8
GET      /api/get/{key}                the value's bytes (application/octet-stream); 404 if absent
GET      /api/exist/{key}              ``{"exists": bool}``
DELETE   /api/remove/{key}             removes the key; 404 if absent
DELETE   /api/remove_all               ``{"status": "success removed N keys"}``
POST     /api/mount                    ``{"size": int, "protocol"?, "location"?}``: allocates and
                                       mounts a segment; ``segment_ids``, ``allocated_size``
POST     /api/unmount                  ``{"segment_ids": [..] | str, "grace_period_seconds"?}``
POST     /api/mount_shm                ``{"name", "size", "offset"?, "protocol"?, "location"?}``:
                                       mounts ``/dev/shm/<name>``
POST     /api/unmount_shm              ``{"segment_ids", "grace_period_seconds"?}``
POST     /api/unmount_local_disk       ``{"grace_period_seconds"?}``: the disk tier's preStop hook
POST     /api/reconfigure              ``{"mode": "decode", "path", "size", ...}`` or
                                       ``{"mode": "prefill"}``: the prefill/decode switch
GET      /api/health                   (this implementation's) ``{"status": "ok", "mode": ...}``
=======  ============================  =====================================================

It listens on 127.0.0.1 unless ``--host`` says otherwise, and refuses to listen on any other
address without a token unless ``--insecure`` is given. With a token (``--token-file``,
``MC_REST_TOKEN_FILE``, ``MC_REST_TOKEN``, or derived from the cluster secret), every route but
``/api/health`` needs ``Authorization: Bearer <token>``: 401 otherwise. The only files a request
can have mounted are existing ``/dev/shm/<name>`` files (``mount_shm``, or a decode ``path`` of that
form) and new files the service creates in its own 0700 directory (a decode ``path`` that is a
plain name); never a file elsewhere.

Every answer but a value is JSON; an error is ``{"error": message}`` with a 4xx status for a bad
request (malformed JSON, a missing or mistyped field, a body over ``--max-body-size``) and 5xx
when the store refused or failed. The HTTP stack (Starlette on uvicorn) is the ``service`` extra:
``pip install 'mooncake-c[service]'``; importing this module without it raises ImportError naming
the extra. docs/rest-service.md has the details and examples.
"""

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time

from mooncake._service import require as _require_extra

_require_extra("mooncake.mooncake_store_service")

from mooncake._service import segments as _segments  # noqa: E402
from mooncake._service.auth import TokenError, is_loopback, load_token  # noqa: E402
from mooncake._service.http import HttpServer, Reply, build_app, json_reply  # noqa: E402
from mooncake.mooncake_config import (  # noqa: E402
    MooncakeConfig, _parse_bool, _parse_port, _parse_segment_size)
from mooncake.store import MooncakeDistributedStore  # noqa: E402

__all__ = ["MooncakeStoreService", "Reply", "main", "parse_arguments", "sync_main",
           "DEFAULT_MAX_BODY_SIZE", "DEFAULT_HOST"]

# Loopback unless told otherwise: the API can mount memory and remove every key.
DEFAULT_HOST = "127.0.0.1"
# The routes that answer without the token: a health probe learns only "ok" and the mode.
_OPEN_PATHS = ("/api/health",)

# A caller's grace period is capped so that a value in the wrong unit (milliseconds) holds a
# preStop hook for an hour at most, as in the reference.
_MAX_GRACE_PERIOD_SECONDS = 3600
# The reference's request body limit (100 MiB).
DEFAULT_MAX_BODY_SIZE = 100 << 20
# MC_STORE_MAX_KEY_LEN (mooncake/store.h): longer keys are refused here with a 400.
_MAX_KEY_BYTES = 4096
# The store's codes (mooncake/error.h): OBJECT_NOT_FOUND, and those that are the request's fault
# (4xx) rather than the store's, with the status and reason each is answered with.
_OBJECT_NOT_FOUND = -704
_CLIENT_CODES = {
    -101: (404, "segment not found"),
    -400: (400, "invalid key"),
    -600: (400, "invalid parameters"),
    -703: (409, "the object's replica is not ready yet"),
    -704: (404, "Key not found"),
    -705: (409, "the object already exists"),
    -706: (409, "the object has a lease (it was read recently); try again later"),
    -708: (409, "the object has a replication task in progress"),
    -1100: (400, "file not found"),
}

logger = logging.getLogger("mooncake.mooncake_store_service")


def _error(status, message, **extra):
    return json_reply(status, {"error": message, **extra})


def _store_error(what, ret):
    """The reply for a store call that returned the negative code ret: 4xx when the code says the
    request was at fault, 500 otherwise; the code is in the body either way."""
    status, reason = _CLIENT_CODES.get(ret, (500, None))
    msg = f"{what}, ret={ret}" + (f": {reason}" if reason else "")
    if ret == _OBJECT_NOT_FOUND:
        msg = "Key not found"
    return _error(status, msg, ret=ret)


def _ok(**fields):
    return json_reply(200, {"status": "success", **fields})


def _shm_name_to_path(name):
    """``/dev/shm/<name>`` for a bare shared-memory name ("seg" or "/seg"); None for anything
    that is not one (empty, not a string, ".", "..", or holding a "/")."""
    if not isinstance(name, str):
        return None
    bare = name[1:] if name.startswith("/") else name
    if bare in ("", ".", "..") or "/" in bare or "\0" in bare:
        return None
    return "/dev/shm/" + bare


def _shm_path(path):
    """The path itself when it is ``/dev/shm/<name>`` with name one plain component (what
    ``/api/mount_shm`` takes as a name); None otherwise."""
    if not isinstance(path, str) or not path.startswith("/dev/shm/"):
        return None
    return _shm_name_to_path(path[len("/dev/shm/"):])


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _grace_period(data):
    """(seconds, None) or (None, a 400 reply) for the body's optional grace_period_seconds."""
    g = data.get("grace_period_seconds", 0)
    if not _is_int(g) or not 0 <= g <= _MAX_GRACE_PERIOD_SECONDS:
        return None, _error(400, "Invalid grace_period_seconds, must be a non-negative integer "
                                 f"no greater than {_MAX_GRACE_PERIOD_SECONDS}")
    return g, None


def _segment_ids(data):
    """(list of ids, None) or (None, a 400 reply); a single id string is a list of one."""
    ids = data.get("segment_ids", [])
    if isinstance(ids, str):
        ids = [ids]
    if not ids:
        return None, _error(400, "Missing segment_ids")
    if not isinstance(ids, list) or not all(isinstance(s, str) and s for s in ids):
        return None, _error(400, "Invalid segment_ids, must be a non-empty string or a list of "
                                 "them")
    return ids, None


async def _unmount_args(request):
    """(segment ids, grace seconds, None) or (None, None, a 400 reply): the body of both unmount
    endpoints."""
    data, bad = await _body_object(request)
    if bad:
        return None, None, bad
    ids, bad = _segment_ids(data)
    if bad:
        return None, None, bad
    grace, bad = _grace_period(data)
    return ids, grace, bad


def _optional_str(data, name, default):
    v = data.get(name, default)
    return v if isinstance(v, str) else None


async def _body_object(request):
    """(the JSON object of the body, None) or (None, a 400 reply)."""
    try:
        data = await request.json()
    except (ValueError, UnicodeDecodeError):
        return None, _error(400, "Malformed JSON body")
    except RecursionError:
        return None, _error(400, "Malformed JSON body: nested too deeply")
    if not isinstance(data, dict):
        return None, _error(400, "Request body must be a JSON object")
    return data, None


def _guarded(name, path_key=False):
    """A handler's wrapper: its time logged at debug, anything it raises a 500 with the text.
    With path_key, the {key} of the path is checked (a bad one answers 400) and passed on as the
    handler's third argument."""

    def wrap(handler):
        async def run(self, request):
            start = time.perf_counter()
            try:
                if not path_key:
                    return await handler(self, request)
                key = request.match_info["key"]
                return self._key_error(key) or await handler(self, request, key)
            except Exception as exc:
                logger.error("%s error: %s", name, exc)
                return _error(500, str(exc))
            finally:
                logger.debug("%s took %.2f ms", name, (time.perf_counter() - start) * 1e3)

        run.__name__ = handler.__name__
        run.__doc__ = handler.__doc__
        return run

    return wrap


async def _call(fn, *args):
    """fn(*args) on a worker thread: the store's calls block, the event loop must not."""
    return await asyncio.to_thread(fn, *args)


def _unblock_shutdown_signals():
    """Lets SIGINT and SIGTERM reach this thread (a parent may have started us with them
    blocked)."""
    with contextlib.suppress(AttributeError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _install_shutdown_signal_handlers(loop, shutdown_event):
    """SIGINT and SIGTERM set shutdown_event (from the loop's thread)."""

    def on_signal(signum):
        logger.info("Received signal %s, shutting down", signum)
        shutdown_event.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
        except (NotImplementedError, RuntimeError):
            signal.signal(sig, lambda signum, _frame: loop.call_soon_threadsafe(on_signal, signum))


# -D overrides arrive as text: each field's own parser makes them the type MooncakeConfig wants.
_FIELD_PARSERS = {
    "global_segment_size": _parse_segment_size,
    "local_buffer_size": _parse_segment_size,
    "enable_ssd_offload": _parse_bool,
    "enable_client_http_server": _parse_bool,
    "client_http_port": _parse_port,
}


def _load_config(config_path, cli_config):
    cli_config = dict(cli_config or {})
    if config_path:
        cfg = MooncakeConfig.from_file(config_path)
    elif (not os.getenv("MOONCAKE_CONFIG_PATH") and not os.getenv("MOONCAKE_MASTER")
          and cli_config.get("master_server_address")):
        # Everything from the command line: the environment gives the rest of the defaults.
        os.environ["MOONCAKE_MASTER"] = str(cli_config["master_server_address"])
        try:
            cfg = MooncakeConfig.load_from_env()
        finally:
            del os.environ["MOONCAKE_MASTER"]
    else:
        cfg = MooncakeConfig.load_from_env()
    fields = dict(vars(cfg))
    for key, value in cli_config.items():
        if key not in fields:
            logger.warning("Ignoring unknown config override %r", key)
            continue
        parse = _FIELD_PARSERS.get(key)
        fields[key] = parse(value) if parse and isinstance(value, str) else value
    return MooncakeConfig(**fields)  # checks every field again


class MooncakeStoreService:
    """A store client and the REST API over it.

    ``config_path`` is a JSON file as :meth:`MooncakeConfig.from_file` reads (without one, the
    ``MOONCAKE_*`` environment); ``cli_config`` overrides single fields (``-D key=value``).
    The service keeps the prefill/decode state of ``/api/reconfigure``: ``current_mode``, the
    ``mounted_segment_ids`` of the last decode mount and ``last_mount_info``.
    """

    # Class defaults too, for an instance a test builds with __new__.
    _http = None
    max_body_size = DEFAULT_MAX_BODY_SIZE
    token = None
    _segment_dir = None

    def __init__(self, config_path=None, cli_config=None, max_body_size=DEFAULT_MAX_BODY_SIZE,
                 token=None, segment_dir=None):
        """token: the bearer token (bytes) every route but /api/health then needs; None: none.
        segment_dir: the parent of the directory the service makes for its decode segment files
        (default /dev/shm, else the temp directory)."""
        self.store = None
        self.token = token
        self._segment_dir = _segments.SegmentDir(segment_dir)
        self.current_mode = "prefill"
        self.mounted_segment_ids = []
        self.last_mount_info = {}
        self._state_lock = asyncio.Lock()
        self.max_body_size = max_body_size
        self._http = None
        try:
            self.config = _load_config(config_path, cli_config)
        except Exception as exc:
            logger.error("Configuration load failed: %s", exc)
            raise
        logger.info("Mooncake configuration loaded")

    def _setup_config(self):
        """The setup(dict) argument. The optional fields default as MooncakeConfig's, for a
        config object from elsewhere that lacks the newer ones."""
        c = self.config

        def opt(name, default):
            return getattr(c, name, default)

        return {
            "local_hostname": c.local_hostname,
            "metadata_server": c.metadata_server,
            "global_segment_size": c.global_segment_size,
            "local_buffer_size": c.local_buffer_size,
            "protocol": c.protocol,
            "rdma_devices": c.device_name,
            "master_server_addr": c.master_server_address,
            "enable_ssd_offload": opt("enable_ssd_offload", False),
            "ssd_offload_path": opt("ssd_offload_path", ""),
            "tenant_id": opt("tenant_id", "default"),
            "enable_client_http_server": opt("enable_client_http_server", False),
            "client_http_port": opt("client_http_port", 9300),
        }

    async def start_store_service(self, max_wait_time=60, shutdown_event=None):
        """Sets the store up, trying again each second for max_wait_time seconds in all.

        True once it is up; False when time ran out or shutdown_event was set first (a store
        that came up just as shutdown was asked for is closed again)."""
        start = time.perf_counter()
        attempt = 0
        await asyncio.sleep(0)  # a signal that came just before this call is seen now

        def stopping():
            return shutdown_event is not None and shutdown_event.is_set()

        while True:
            if stopping():
                logger.info("Store startup cancelled by shutdown request")
                return False
            elapsed = time.perf_counter() - start
            if elapsed >= max_wait_time:
                logger.error("Store startup failed: no success in %s s (%d attempts)",
                             max_wait_time, attempt)
                return False
            attempt += 1
            logger.info("Starting the store (attempt %d, %.1f of %s s)", attempt, elapsed,
                        max_wait_time)
            try:
                self.store = MooncakeDistributedStore()
                # On the loop's thread: nothing else is served yet, and a signal that comes
                # meanwhile is seen by the check below.
                ret = self.store.setup(self._setup_config())
                await asyncio.sleep(0)
                if stopping():
                    logger.info("Store startup cancelled by shutdown request")
                    await self.stop()
                    return False
                if ret != 0:
                    raise RuntimeError(f"store setup returned {ret}")
                logger.info("Store service started on %s", self.config.local_hostname)
                return True
            except Exception as exc:
                self.store = None
                left = max_wait_time - (time.perf_counter() - start)
                pause = max(0.0, min(1.0, left))
                logger.warning("Store startup failed (attempt %d): %s; retrying in %.1f s",
                               attempt, exc, pause)
                if pause <= 0:
                    continue
                if shutdown_event is None:
                    await asyncio.sleep(pause)
                    continue
                try:
                    await asyncio.wait_for(shutdown_event.wait(), timeout=pause)
                except asyncio.TimeoutError:
                    continue
                logger.info("Store startup cancelled by shutdown request")
                return False

    def routes(self):
        """(path, method, handler, reads_body) of every route."""
        return [
            ("/api/put", "PUT", self.handle_put, True),
            ("/api/get/{key}", "GET", self.handle_get, False),
            ("/api/exist/{key}", "GET", self.handle_exist, False),
            ("/api/remove/{key}", "DELETE", self.handle_remove, False),
            ("/api/remove_all", "DELETE", self.handle_remove_all, False),
            ("/api/mount", "POST", self.handle_mount, True),
            ("/api/unmount", "POST", self.handle_unmount, True),
            ("/api/mount_shm", "POST", self.handle_mount_shm, True),
            ("/api/unmount_shm", "POST", self.handle_unmount_shm, True),
            ("/api/unmount_local_disk", "POST", self.handle_unmount_local_disk, True),
            ("/api/reconfigure", "POST", self.handle_reconfigure, True),
            ("/api/health", "GET", self.handle_health, False),
        ]

    async def start_http_service(self, port=8080, host=DEFAULT_HOST):
        """Serves the REST API on host:port (port 0: one the kernel picks; the log line
        "REST API started on HOST:PORT" says which). True once it accepts connections.
        The command line refuses a non-loopback host without a token; here it is a warning."""
        if self.token is None and not is_loopback(host):
            logger.warning("the REST API listens on %s WITHOUT authentication: anyone who can "
                           "reach it can read, remove and overwrite objects and mount memory",
                           host)
        self._http = HttpServer(build_app(self.routes(), self.max_body_size, self.token,
                                          _OPEN_PATHS), host, port)
        bound = await self._http.start()
        logger.info("REST API started on %s:%d (%s)", host, bound,
                    "bearer token required" if self.token is not None else "no authentication")
        return True

    def _segments(self):
        if self._segment_dir is None:  # an instance built with __new__
            self._segment_dir = _segments.SegmentDir()
        return self._segment_dir

    def prepare_segment_dir(self):
        """Makes the directory for decode segment files now (else on the first decode) and
        returns its path; OSError when its parent will not do."""
        return self._segments().ensure()

    @property
    def http_task(self):
        return self._http.task if self._http else None

    async def stop(self):
        """Stops serving HTTP, then closes the store (both may be absent)."""
        if self._http is not None:
            http, self._http = self._http, None
            await http.stop()
        if self.store is not None:
            store, self.store = self.store, None
            ret = store.close()
            if ret != 0:
                logger.warning("Mooncake service close returned %s", ret)
            else:
                logger.info("Mooncake service stopped")
        if self._segment_dir is not None:
            self._segment_dir.close()

    # ---- objects -------------------------------------------------------------------------------

    @staticmethod
    def _key_error(key):
        if not isinstance(key, str):
            return _error(400, f"Invalid key, must be a string, not {type(key).__name__}")
        try:
            n = len(key.encode("utf-8"))
        except UnicodeEncodeError:
            return _error(400, "Invalid key, not encodable as UTF-8 (a lone surrogate)")
        if n > _MAX_KEY_BYTES:
            return _error(400, f"Invalid key, longer than {_MAX_KEY_BYTES} bytes")
        return None

    async def _absent(self, key):
        """The reply when key is not there (404) or is_exist fails (500); None when it is there."""
        exists = await _call(self.store.is_exist, key)
        if exists == 0:
            return _error(404, "Key not found")
        if exists < 0:
            return _error(500, "Exist check failed")
        return None

    @_guarded("PUT")
    async def handle_put(self, request):
        """PUT /api/put {"key", "value"}: the value's UTF-8 bytes under key."""
        data, bad = await _body_object(request)
        if bad:
            return bad
        key, value = data.get("key"), data.get("value")
        if not key or value is None:
            return _error(400, "Missing key or value")
        bad = self._key_error(key)
        if bad:
            return bad
        if not isinstance(value, str):
            return _error(400, f"Invalid value, must be a string, not {type(value).__name__}")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            return _error(400, "Invalid value, not encodable as UTF-8 (a lone surrogate)")
        ret = await _call(self.store.put, key, data)
        if ret != 0:
            return _store_error("PUT operation failed", ret)
        return _ok()

    @_guarded("GET", path_key=True)
    async def handle_get(self, request, key):
        """GET /api/get/{key}: the value's bytes."""
        bad = await self._absent(key)
        if bad:
            return bad
        value = await _call(self.store.get, key)
        if value is None:
            return _error(500, "GET operation failed")
        if value == b"":
            # get answers b"" both for an empty value and for a key removed since is_exist.
            bad = await self._absent(key)
            if bad:
                return bad
        return Reply(200, bytes(value), "application/octet-stream")

    @_guarded("EXIST", path_key=True)
    async def handle_exist(self, request, key):
        """GET /api/exist/{key}: {"exists": bool}."""
        exists = await _call(self.store.is_exist, key)
        if exists < 0:
            return _error(500, "Exist check failed")
        return json_reply(200, {"exists": exists > 0})

    @_guarded("REMOVE", path_key=True)
    async def handle_remove(self, request, key):
        """DELETE /api/remove/{key}."""
        ret = await _call(self.store.remove, key)
        if ret != 0:
            return _store_error("Remove operation failed", ret)
        return _ok()

    @_guarded("REMOVE_ALL")
    async def handle_remove_all(self, request):
        """DELETE /api/remove_all: how many keys went."""
        ret = await _call(self.store.remove_all)
        if ret < 0:
            return _error(500, f"RemoveAll operation failed, ret={ret}", ret=ret)
        return json_reply(200, {"status": f"success removed {ret} keys"})

    @_guarded("HEALTH")
    async def handle_health(self, request):
        """GET /api/health: 200 while the store is set up (503 otherwise), and the mode."""
        if self.store is None:
            return _error(503, "Store is not set up")
        return json_reply(200, {"status": "ok", "mode": self.current_mode})

    # ---- segments ------------------------------------------------------------------------------

    def _mount_args(self, data):
        """(protocol, location, None) or (None, None, a 400 reply)."""
        protocol = _optional_str(data, "protocol", self.config.protocol)
        location = _optional_str(data, "location", "")
        if protocol is None or location is None:
            return None, None, _error(400, "Invalid protocol or location, must be strings")
        return protocol, location, None

    @_guarded("MOUNT")
    async def handle_mount(self, request):
        """POST /api/mount {"size", "protocol"?, "location"?}: a new segment of memory the store
        allocates."""
        data, bad = await _body_object(request)
        if bad:
            return bad
        size = data.get("size")
        if not _is_int(size) or size <= 0:
            return _error(400, "Invalid size, must be a positive integer")
        protocol, location, bad = self._mount_args(data)
        if bad:
            return bad
        result = await _call(self.store.allocate_and_mount_segment, size, protocol, location)
        if result["ret"] != 0:
            return _store_error("Allocate and mount failed", result["ret"])
        return _ok(segment_ids=list(result["segment_ids"]),
                   allocated_size=result["allocated_size"])

    @_guarded("UNMOUNT")
    async def handle_unmount(self, request):
        """POST /api/unmount {"segment_ids", "grace_period_seconds"?}: unmounts and frees
        segments /api/mount made."""
        ids, grace, bad = await _unmount_args(request)
        if bad:
            return bad
        ret = await _call(self.store.unmount_and_free_segment, ids, grace)
        if ret != 0:
            return _store_error("Unmount and free failed", ret)
        return _ok()

    @_guarded("MOUNT_SHM")
    async def handle_mount_shm(self, request):
        """POST /api/mount_shm {"name", "size", "offset"?, ...}: mounts /dev/shm/<name>."""
        data, bad = await _body_object(request)
        if bad:
            return bad
        path = _shm_name_to_path(data.get("name"))
        size = data.get("size")
        offset = data.get("offset", 0)
        if not path or not _is_int(size) or size <= 0:
            return _error(400, "Missing or invalid name or size")
        if not _is_int(offset) or offset < 0:
            return _error(400, "Invalid offset, must be a non-negative integer")
        protocol, location, bad = self._mount_args(data)
        if bad:
            return bad
        # The store opens the file itself and does not follow a symbolic link planted in a
        # directory anyone may write, such as /dev/shm (mc_store_mount_segment).
        result = await _call(self.store.mount_segment, path, size, offset, protocol, location)
        if result["ret"] != 0:
            return _store_error("Mount failed", result["ret"])
        return _ok(segment_ids=list(result["segment_ids"]))

    @_guarded("UNMOUNT_SHM")
    async def handle_unmount_shm(self, request):
        """POST /api/unmount_shm {"segment_ids", "grace_period_seconds"?}: one unmount per id, so
        that a failure names exactly the ids still mounted."""
        ids, grace, bad = await _unmount_args(request)
        if bad:
            return bad
        failed = []
        async with self._state_lock:
            for sid in ids:
                if await _call(self.store.unmount_segment, [sid], grace) != 0:
                    failed.append(sid)
                elif sid in self.mounted_segment_ids:
                    self.mounted_segment_ids.remove(sid)
            if not self.mounted_segment_ids:
                self.current_mode = "prefill"
        if failed:
            return _error(500, "Unmount failed for one or more segments",
                          failed_segment_ids=failed)
        return _ok()

    @_guarded("UNMOUNT_LOCAL_DISK")
    async def handle_unmount_local_disk(self, request):
        """POST /api/unmount_local_disk {"grace_period_seconds"?}: takes this store's disk tier
        off the master (readers are no longer sent to its copies) and holds for the grace period
        so reads in flight finish (mc_store_unmount_local_disk_segment); 200 also when the store
        has no disk tier, as the reference answers."""
        data, bad = await _body_object(request)
        if bad:
            return bad
        grace, bad = _grace_period(data)
        if bad:
            return bad
        ret = await _call(self.store.unmount_local_disk_segment, grace)
        if ret != 0:
            return _store_error("Unmount local disk failed", ret)
        return _ok()

    @_guarded("RECONFIGURE")
    async def handle_reconfigure(self, request):
        """POST /api/reconfigure: "decode" mounts the given segment (before retiring the ones
        the last decode mount left, so a failed remount keeps serving from them); "prefill"
        unmounts them."""
        data, bad = await _body_object(request)
        if bad:
            return bad
        mode = data.get("mode", "")
        mode = mode.lower() if isinstance(mode, str) else ""
        if mode == "decode":
            return await self._reconfigure_decode(data)
        if mode == "prefill":
            return await self._reconfigure_prefill()
        return _error(400, "Invalid mode. Use 'decode' or 'prefill'")

    async def _reconfigure_decode(self, data):
        """path is ``/dev/shm/<name>``, an existing shared-memory file mounted as
        /api/mount_shm mounts it (the reference's form), or a plain name: a NEW file in the
        service's own segment directory, which the service creates, reserves [offset, offset +
        size) in, mounts and unlinks (segments.py says how). No other file can be mounted: a
        mounted file takes every client's puts."""
        path, size = data.get("path"), data.get("size")
        offset = data.get("offset", 0)
        if not path or size is None:
            return _error(400, "Missing path or size for decode mode")
        if not isinstance(path, str) or not _is_int(size) or size <= 0:
            return _error(400, "Invalid path or size: path must be a string, size a positive "
                               "integer")
        if size > _segments.MAX_SEGMENT_BYTES:
            return _error(400, f"Invalid size, must be at most {_segments.MAX_SEGMENT_BYTES}")
        if not _is_int(offset) or offset < 0 or offset > _segments.MAX_SEGMENT_BYTES:
            return _error(400, "Invalid offset, must be a non-negative integer")
        if not _segments.page_aligned(offset):
            return _error(400, "Invalid offset, must be a multiple of the page size")
        shm_path = _shm_path(path)
        if shm_path is None and not _segments.valid_name(path):
            return _error(400, "Invalid path: it must be /dev/shm/<name> (an existing shared "
                               "memory file, as /api/mount_shm mounts it) or a plain file name "
                               "(letters, digits, '.', '_', '-'), the name of a new file the "
                               "service creates in its own directory; no other file is mounted")
        protocol, location, bad = self._mount_args(data)
        if bad:
            return bad
        async with self._state_lock:
            previous = list(self.mounted_segment_ids)
            if shm_path is not None:
                result = await _call(self.store.mount_segment, shm_path, size, offset, protocol,
                                     location)
            else:
                result = await self._mount_new_file(path, offset, size, protocol, location)
            if result["ret"] != 0:
                ret = result["ret"]
                status, why = result.get("error") or (_CLIENT_CODES.get(ret, (500,))[0],
                                                      f"Mount failed, ret={ret}")
                if previous:
                    logger.warning("decode remount of %s failed (%s): keeping the previous "
                                   "segments", path, why)
                    return _error(status, f"{why}; keeping previous decode segments",
                                  mode=self.current_mode)
                self.current_mode = "prefill"
                self.mounted_segment_ids.clear()
                self.last_mount_info.clear()
                return _error(status, f"{why}; rolled back to prefill", mode=self.current_mode)
            # The new segment serves: retire the old ones one by one, keeping any that would not
            # go so that a later unmount can try them again.
            stuck = [sid for sid in previous
                     if await _call(self.store.unmount_segment, [sid], 0) != 0]
            if stuck:
                logger.warning("decode remount: previous segments %s did not unmount; kept",
                               stuck)
            self.mounted_segment_ids = list(result["segment_ids"]) + stuck
            self.current_mode = "decode"
            self.last_mount_info = {"path": path, "offset": offset, "size": size,
                                    "protocol": protocol, "location": location}
            return _ok(mode=self.current_mode, segment_ids=list(self.mounted_segment_ids))

    async def _mount_new_file(self, name, offset, size, protocol, location):
        """mount_segment's result for a file made for it; {"ret": code, "error": (status,
        message)} when the file could not be made."""
        seg = self._segments()
        try:
            fd = await _call(seg.create, name, offset, size)
        except _segments.SegmentFileError as exc:
            return {"ret": -1, "error": (exc.status, str(exc))}
        try:
            return await _call(self.store.mount_segment, _segments.proc_path(fd), size, offset,
                               protocol, location)
        finally:
            seg.release(name, fd)

    async def _reconfigure_prefill(self):
        async with self._state_lock:
            if self.mounted_segment_ids:
                ret = await _call(self.store.unmount_segment, list(self.mounted_segment_ids))
                if ret != 0:
                    return _error(500, f"Unmount failed, ret={ret}")
                self.mounted_segment_ids.clear()
            self.current_mode = "prefill"
            self.last_mount_info.clear()
        return _ok(mode=self.current_mode)


def _size_arg(text):
    try:
        n = _parse_segment_size(text)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text!r}")
    return n


def _port_arg(text):
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range 0..65535: {n}")
    return n


def _build_parser():
    from mooncake import __version__

    p = argparse.ArgumentParser(
        prog="mc_store_rest_server",
        description="Mooncake store service: a store client with a REST API over it.")
    p.add_argument("--config", type=str, help="Mooncake config file (JSON); without it the "
                   "MOONCAKE_* environment")
    p.add_argument("-D", "--define", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config field, e.g. -Dlocal_hostname=example.com "
                        "(repeatable)")
    p.add_argument("--port", type=_port_arg, default=8080,
                   help="HTTP API port (default: 8080; 0: any free port, logged)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address the HTTP API listens on (default: {DEFAULT_HOST}); any other "
                        "than a loopback one needs a token, or --insecure")
    p.add_argument("--token-file", metavar="PATH",
                   help="file holding the bearer token every route but /api/health then needs "
                        "(default: MC_REST_TOKEN_FILE, MC_REST_TOKEN, else derived from the "
                        "cluster secret MC_CLUSTER_SECRET(_FILE), else none)")
    p.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback --host without a token (anyone who reaches it can "
                        "use every route)")
    p.add_argument("--segment-dir", metavar="DIR",
                   help="where the service makes its own 0700 directory for decode segment "
                        "files (default: /dev/shm, else the temp directory)")
    p.add_argument("--print-token", action="store_true",
                   help="print the token the service would require, from the same sources, "
                        "and exit (1 when none is configured)")
    p.add_argument("--max-wait-time", type=float, default=60,
                   help="seconds to keep trying to set the store up (default: 60)")
    p.add_argument("--max-body-size", type=_size_arg, default=DEFAULT_MAX_BODY_SIZE,
                   help="largest request body accepted, bytes or e.g. '16mb' (default: 100mb)")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"], help="default: info")
    p.add_argument("--version", action="version", version=f"mc_store_rest_server {__version__}")
    return p


def parse_arguments(argv=None):
    return _build_parser().parse_args(argv)


def _defines(items):
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            logger.warning("Ignoring invalid -D override %r (want KEY=VALUE)", item)
            continue
        out[key.strip()] = value
    return out


def _exposure(args):
    """The token (or None), after checking that the address and the token go together: a
    non-loopback address without a token is refused unless --insecure says so. RuntimeError
    with the reason otherwise (exit 1)."""
    host = getattr(args, "host", DEFAULT_HOST)
    try:
        token, source = load_token(getattr(args, "token_file", None))
    except TokenError as exc:
        raise RuntimeError(f"cannot use the REST token: {exc}") from None
    if token is not None:
        logger.info("REST API requires a bearer token (from %s) on every route but %s", source,
                    ", ".join(_OPEN_PATHS))
        return token
    if is_loopback(host):
        logger.info("REST API without authentication, on loopback %s only (any local process "
                    "can use it; set --token-file to require a token)", host)
        return None
    if not getattr(args, "insecure", False):
        raise RuntimeError(
            f"refusing to listen on {host} without a token: anyone who reaches it could remove "
            "and overwrite objects and mount memory. Give a token (--token-file, "
            "MC_REST_TOKEN_FILE, MC_REST_TOKEN or a cluster secret), listen on 127.0.0.1, or "
            "pass --insecure to accept that")
    logger.warning("--insecure: the REST API listens on %s WITHOUT authentication", host)
    return None


async def main():
    """The service until SIGINT or SIGTERM: store first, then HTTP; closes both on the way out."""
    args = parse_arguments()
    logging.basicConfig(level=getattr(logging, str(getattr(args, "log_level", "info")).upper(),
                                      logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if getattr(args, "print_token", False):
        try:
            token, _ = load_token(getattr(args, "token_file", None))
        except TokenError as exc:
            raise RuntimeError(f"cannot use the REST token: {exc}") from None
        if token is None:
            raise RuntimeError("no REST token is configured")
        print(token.decode())
        return
    token = _exposure(args)  # before the store: a refused start costs nothing
    service = MooncakeStoreService(args.config, _defines(args.define),
                                   max_body_size=getattr(args, "max_body_size",
                                                         DEFAULT_MAX_BODY_SIZE),
                                   token=token, segment_dir=getattr(args, "segment_dir", None))
    try:
        logger.info("decode segment files go in %s", service.prepare_segment_dir())
    except OSError as exc:
        raise RuntimeError(f"cannot make the segment directory: {exc}") from None
    shutdown_event = asyncio.Event()
    _install_shutdown_signal_handlers(asyncio.get_running_loop(), shutdown_event)
    _unblock_shutdown_signals()
    try:
        if not await service.start_store_service(max_wait_time=args.max_wait_time,
                                                 shutdown_event=shutdown_event):
            if shutdown_event.is_set():
                return
            raise RuntimeError("Failed to start store service")
        await asyncio.sleep(0)
        if shutdown_event.is_set():
            return
        if not await service.start_http_service(args.port, getattr(args, "host", DEFAULT_HOST)):
            raise RuntimeError("Failed to start HTTP service")
        logger.info("Mooncake Store Service is running")
        waiter = asyncio.ensure_future(shutdown_event.wait())
        served = service.http_task
        await asyncio.wait([waiter] + ([served] if served else []),
                           return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    finally:
        await service.stop()


def sync_main():
    """The ``mc_store_rest_server`` console script."""
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    except (OSError, RuntimeError, ValueError, TypeError) as exc:
        print(f"mc_store_rest_server: {exc}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    sync_main()
