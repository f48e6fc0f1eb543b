"""The HTTP side of the store's REST service: a Starlette application served by uvicorn.

The service's handlers know nothing of either: each takes a request with ``await request.json()``
and ``request.match_info`` (the path's parameters) and returns a :class:`Reply`. This module reads
the body (refusing one over the size limit before it is all received), calls the handler and
turns its reply into a response. Every error this layer answers itself (an unknown path, a method
the path does not take, a body too large, a handler that raised, missing or wrong credentials)
is JSON ``{"error": message}``, like the handlers' own.

With a token, every route but the open ones (``/api/health``) needs ``Authorization: Bearer
<token>``; without it, or with a wrong one, the answer is 401 before the body is read or the
handler runs, so a refused request changes nothing (see auth.py for where the token comes from).
"""

import asyncio
import json
import logging
import socket
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Route
import uvicorn

from mooncake._service.auth import check_bearer

__all__ = ["Reply", "Request", "HttpServer", "json_reply"]

logger = logging.getLogger("mooncake.mooncake_store_service")


class Reply:
    """A handler's answer: HTTP status, body bytes and content type.

    ``text`` is the body decoded as UTF-8 (the JSON replies' text); ``headers`` extra response
    headers (a dict) or None."""

    __slots__ = ("status", "body", "content_type", "headers")

    def __init__(self, status, body=b"", content_type="application/json", headers=None):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        return f"Reply({self.status}, {self.body[:80]!r})"


def json_reply(status, obj):
    return Reply(status, json.dumps(obj).encode())


class Request:
    """What a handler sees of a request: its path parameters and its body, read in full."""

    __slots__ = ("match_info", "body")

    def __init__(self, body, match_info):
        self.body = body
        self.match_info = match_info

    async def json(self):
        """The body as JSON; ValueError (json.JSONDecodeError, UnicodeDecodeError) if it is not."""
        return json.loads(self.body)


class _TooLarge(Exception):
    pass


async def _read_body(request, limit):
    """The whole body, or _TooLarge as soon as the declared length or the bytes received pass
    limit (the rest is never read, so an oversized body costs no memory)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            n = int(declared)
        except ValueError:
            n = -1
        if n < 0:
            raise HTTPException(400, f"Invalid Content-Length: {declared!r}")
        if n > limit:
            raise _TooLarge(n)
    chunks = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise _TooLarge(total)
        chunks.append(chunk)
    return b"".join(chunks)


_refusals = {"last": None, "quiet": 0}


def _log_refusal(request, why):
    """One warning a second at most (a stranger's flood must not flood the log), with how many
    refusals went unlogged since the last one."""
    now = time.monotonic()
    last = _refusals["last"]
    if last is not None and now - last < 1.0:
        _refusals["quiet"] += 1
        return
    quiet, _refusals["quiet"], _refusals["last"] = _refusals["quiet"], 0, now
    logger.warning("refused %s %s from %s: %s%s", request.method, request.url.path,
                   request.client.host if request.client else "?", why,
                   f" (and {quiet} more refused since the last such line)" if quiet else "")


_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="mc_store_rest_server"'}


def _endpoint(handler, limit, reads_body, token):
    async def endpoint(request):
        if token is not None:
            why = check_bearer(request.headers.get("authorization"), token)
            if why is not None:
                _log_refusal(request, why)
                return _response(Reply(401, json.dumps({"error": why}).encode(),
                                       headers=_CHALLENGE))
        body = b""
        if reads_body:
            try:
                body = await _read_body(request, limit)
            except _TooLarge:
                return _response(json_reply(413, {
                    "error": f"Request body too large: the limit is {limit} bytes "
                             f"(mc_store_rest_server --max-body-size)"}))
        reply = await handler(Request(body, dict(request.path_params)))
        return _response(reply)

    return endpoint


def _response(reply):
    return Response(reply.body, status_code=reply.status, media_type=reply.content_type,
                    headers=getattr(reply, "headers", None))


async def _http_error(request, exc):
    msg = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404:
        msg = f"No such route: {request.url.path}"
    elif exc.status_code == 405:
        msg = f"Method {request.method} not allowed on {request.url.path}"
    return _response(json_reply(exc.status_code, {"error": msg}))


async def _internal_error(request, exc):
    logger.error("%s %s failed: %r", request.method, request.url.path, exc)
    return _response(json_reply(500, {"error": f"Internal error: {exc}"}))


def build_app(routes, max_body_size, token=None, open_paths=()):
    """A Starlette app of routes: (path, method, handler, reads_body) each. With token (bytes),
    every path but those in open_paths answers only requests that carry it."""
    return Starlette(
        routes=[Route(path, _endpoint(handler, max_body_size, reads_body,
                                      None if path in open_paths else token), methods=[method])
                for path, method, handler, reads_body in routes],
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )


class HttpServer:
    """uvicorn serving the app on a socket this class binds, so that a port in use is an OSError
    for the caller (uvicorn would exit the process) and port 0 gives the port the kernel chose."""

    def __init__(self, app, host, port):
        self.app = app
        self.host = host
        self.port = port
        self._server = None
        self._task = None

    async def start(self):
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(1024)
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._task = asyncio.ensure_future(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # its exception, if any
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(0.01)
        return self.port

    @property
    def task(self):
        """The serving task: done when the server has stopped (a signal, or stop())."""
        return self._task

    async def stop(self):
        if self._server is None:
            return
        self._server.should_exit = True
        try:
            await self._task
        except (Exception, SystemExit) as exc:  # uvicorn exits the process on some errors
            logger.warning("HTTP server stopped with %r", exc)
        self._server = None
