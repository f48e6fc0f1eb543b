"""The C logs in Python's logging (mooncake.log), and the C logger's formats on stderr."""

import json
import logging
import os
import re
import subprocess
import sys

import mooncake.log


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=1)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_engine_error_arrives_as_a_logging_record():
    from mooncake.engine import TransferEngine

    logger = logging.getLogger("mooncake.test_bridge")
    logger.setLevel(logging.INFO)
    h = Collect()
    logger.addHandler(h)
    try:
        mooncake.log.install(logger)
        # 192.0.2.1 (TEST-NET-1) is no address of this host: the engine logs why it cannot listen
        assert TransferEngine().initialize("192.0.2.1", "P2PHANDSHAKE", "tcp", "") != 0
        mooncake.log.uninstall()  # delivers the lines in flight
    finally:
        mooncake.log.uninstall()
        logger.removeHandler(h)
    recs = [r for r in h.records if "cannot listen on 192.0.2.1" in r.getMessage()]
    assert recs, [r.getMessage() for r in h.records]
    r = recs[0]
    assert r.levelno == logging.ERROR and r.name == "mooncake.test_bridge"
    assert r.filename == "engine.c" and r.lineno > 0
    assert r.process == os.getpid()


def test_levels_follow_the_python_logger():
    assert mooncake.log._c_level(logging.ERROR) == 0
    assert mooncake.log._c_level(logging.WARNING) == 1
    assert mooncake.log._c_level(logging.INFO) == 2
    assert mooncake.log._c_level(logging.DEBUG) == 3
    assert mooncake.log._c_level(mooncake.log.TRACE) == 4
    rec = mooncake.log._record(logging.getLogger("x"), "not json at all")
    assert rec.levelno == logging.WARNING and rec.getMessage() == "not json at all"


def _stderr_of_failed_engine(fmt):
    code = ("from mooncake.engine import TransferEngine;"
            "TransferEngine().initialize('192.0.2.1', 'P2PHANDSHAKE', 'tcp', '')")
    env = dict(os.environ, MC_LOG_FORMAT=fmt)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    return [line for line in res.stderr.splitlines() if "192.0.2.1" in line], res.returncode


def test_text_and_json_formats_on_stderr():
    lines, _ = _stderr_of_failed_engine("text")
    assert lines and re.match(r"^E20\d{6} \d\d:\d\d:\d\d\.\d{6} \d+ \d+ engine\.c:\d+\] ", lines[0]), lines
    lines, _ = _stderr_of_failed_engine("json")
    d = json.loads(lines[0])
    assert d["level"] == "error" and d["file"] == "engine.c" and d["pid"] > 0 and d["tid"] > 0
    assert re.match(r"^20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d$", d["ts"])
