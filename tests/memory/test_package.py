"""The memory package's public face is lazy (PEP 562) but whole: every listed name resolves."""

from __future__ import annotations

import pytest

import memory
from memory.manager import MemoryManager


def test_every_public_name_resolves_to_its_definition() -> None:
    assert [name for name in memory.__all__ if getattr(memory, name, None) is None] == []
    assert memory.MemoryManager is MemoryManager and set(memory.__all__) <= set(dir(memory))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'memory' has no attribute 'Nothing'"):
        memory.Nothing  # noqa: B018
