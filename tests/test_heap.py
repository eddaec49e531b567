"""HeapUpkeep: the daemons' model is frozen out of the cycle search, and handed back rarely."""

from __future__ import annotations

import gc

from xce.daemons.heap import HeapUpkeep


def test_freezes_on_its_period_and_thaws_on_the_longer_one() -> None:
    gc.unfreeze()
    try:
        h = HeapUpkeep(freeze_every=1.0, thaw_every=10.0)
        h.tick(100.0)
        assert gc.get_freeze_count() > 0           # the first tick freezes what exists
        kept = [[i] for i in range(1000)]          # new containers: in the collector's sight
        h.tick(100.5)
        before = gc.get_freeze_count()
        h.tick(101.0)
        assert gc.get_freeze_count() >= before + len(kept)
        h.tick(110.0)
        assert gc.get_freeze_count() == 0          # thawed: a cycle that became garbage is found
        h.tick(110.5)
        assert gc.get_freeze_count() == 0
        h.tick(111.0)
        assert gc.get_freeze_count() > 0           # and freezing resumes
    finally:
        gc.unfreeze()


def test_a_frozen_object_is_still_freed_by_reference_counting() -> None:
    import weakref

    class Thing:
        pass

    gc.unfreeze()
    try:
        t = Thing()
        ref = weakref.ref(t)
        HeapUpkeep().tick(0.0)
        del t
        assert ref() is None
    finally:
        gc.unfreeze()
