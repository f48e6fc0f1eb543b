"""The native (C) logs of the package in Python's ``logging``.

The engine, the store client and every C library of the package log through one C logger; by
default it writes text lines to stderr (``MC_LOG_LEVEL``, ``MC_LOG_FORMAT=text|json``). A Python
program that wants those lines where its own logs go calls::

    import logging
    import mooncake.log

    logging.basicConfig(level=logging.INFO)
    mooncake.log.install()      # C lines now arrive as records of the logger "mooncake.native"

Each record keeps the C line's time, level, source file and line, process id and thread id
(``record.created``, ``levelno``, ``filename``, ``lineno``, ``process``, ``thread``). The C
logger's level follows the Python logger's effective level at install (``set_level`` changes
it later): error -> ERROR, warn -> WARNING, info -> INFO, debug -> DEBUG, trace -> ``TRACE`` (5).

The lines travel through a pipe that a daemon thread reads; the C side never waits for it: when
the pipe is full a line is dropped and counted (``dropped()``). ``uninstall()`` sends the lines
back to stderr.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from datetime import datetime

from mooncake import _engine

__all__ = ["install", "uninstall", "set_level", "dropped", "TRACE"]

TRACE = 5
logging.addLevelName(TRACE, "TRACE")

_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO,
           "debug": logging.DEBUG, "trace": TRACE}

_lock = threading.Lock()
_installed: dict | None = None


def _c_level(pylevel: int) -> int:
    """The C logger's level (0 error .. 4 trace) that passes what pylevel passes."""
    if pylevel >= logging.ERROR:
        return 0
    if pylevel >= logging.WARNING:
        return 1
    if pylevel >= logging.INFO:
        return 2
    if pylevel >= logging.DEBUG:
        return 3
    return 4


def set_level(level: int) -> None:
    """Sets the C logger's level from a Python level (logging.INFO, ...)."""
    _engine._log_set_level(_c_level(level))


def dropped() -> int:
    """C lines lost because the pipe to Python was full (the reader fell behind)."""
    return _engine._log_dropped()


def _record(logger: logging.Logger, line: str) -> logging.LogRecord:
    try:
        d = json.loads(line)
        level = _LEVELS.get(d.get("level"), logging.WARNING)
        rec = logger.makeRecord(logger.name, level, d.get("file", "?"), int(d.get("line", 0)),
                                d.get("msg", ""), (), None)
        rec.filename = d.get("file", "?")
        rec.process = int(d.get("pid", rec.process or 0))
        rec.thread = int(d.get("tid", rec.thread or 0))
        rec.threadName = f"native-{rec.thread}"
        try:
            rec.created = datetime.fromisoformat(d["ts"]).timestamp()
            rec.msecs = (rec.created - int(rec.created)) * 1000
        except (KeyError, ValueError):
            pass
        return rec
    except (ValueError, TypeError, AttributeError):
        # not a line of the C logger (something else wrote to the pipe): passed on as it is
        return logger.makeRecord(logger.name, logging.WARNING, "?", 0, line, (), None)


def _pump(rfd: int, logger: logging.Logger) -> None:
    with os.fdopen(rfd, "r", encoding="utf-8", errors="replace") as pipe:
        for line in pipe:
            line = line.rstrip("\n")
            if line:
                rec = _record(logger, line)
                if logger.isEnabledFor(rec.levelno):
                    logger.handle(rec)


def install(logger: str | logging.Logger = "mooncake.native") -> logging.Logger:
    """Sends the C logs to ``logger`` (a name or a Logger) from now on; returns the logger.
    Installing again moves them to the new logger."""
    global _installed
    lg = logging.getLogger(logger) if isinstance(logger, str) else logger
    with _lock:
        _uninstall_locked()
        rfd, wfd = os.pipe()
        os.set_blocking(wfd, False)
        thread = threading.Thread(target=_pump, args=(rfd, lg), name="mooncake-log", daemon=True)
        thread.start()
        set_level(lg.getEffectiveLevel())
        _engine._log_redirect(wfd, True)
        _installed = {"wfd": wfd, "thread": thread, "logger": lg}
    return lg


def _uninstall_locked() -> None:
    global _installed
    if _installed is None:
        return
    _engine._log_redirect(-1, False)
    os.close(_installed["wfd"])  # the reader sees the end once the lines in flight are read
    _installed["thread"].join(timeout=5)
    _installed = None


def uninstall() -> None:
    """C logs go to stderr again (lines already in the pipe are delivered first)."""
    with _lock:
        _uninstall_locked()


atexit.register(uninstall)
