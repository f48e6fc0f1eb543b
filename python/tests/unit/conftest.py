"""Fixtures of the unit tests."""

import pytest

from mooncake.engine import TransferEngine


@pytest.fixture
def engine():
    """An initialized engine on loopback (P2P handshake, tcp), closed after the test."""
    e = TransferEngine()
    assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    yield e
    e.close()
