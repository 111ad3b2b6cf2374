"""After a rebuild the service freezes the heap for a large core only: the collection
before the freeze walks the whole process, which a small core does not repay, and what a
large core froze is thawed when a later rebuild's core is small (else never collected)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from labq.service.loop import SETTLE_AT, settle_heap


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_small_core_leaves_the_heap_alone() -> None:
    kept = [object() for _ in range(1000)]
    assert settle_heap(SETTLE_AT - 1, frozen=False) is False
    assert gc.get_freeze_count() == 0
    assert kept


def test_a_large_core_is_frozen_and_thawed_when_the_next_core_is_small() -> None:
    assert settle_heap(SETTLE_AT, frozen=False) is True
    assert gc.get_freeze_count() > 0
    assert settle_heap(10, frozen=True) is False
    assert gc.get_freeze_count() == 0
