"""Typing names the reshard modules share (Python 3.10+ has them all in typing)."""

from typing import TypeAlias

__all__ = ["TypeAlias"]
