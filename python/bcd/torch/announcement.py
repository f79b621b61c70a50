"""Numbers the main process shares with its DataLoader workers through shared
memory: announcements (a consistent pair, one writer) and counters."""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.context
from typing import Optional


def _spawning() -> bool:
    return multiprocessing.context.get_spawning_popen() is not None


class Announcement:
    """Two numbers the main process chose (the epoch and record count of
    ``IterableDataset.set_epoch``; the crop seed and epoch of a
    :class:`MapDataset` with ``image=``), in shared memory that DataLoader
    workers, forked or spawned, read: a persistent worker's copy of the dataset
    is reached no other way. One writer (the main process); a sequence number,
    odd while a write is under way, lets a reader take a consistent pair
    without a lock."""

    def __init__(self) -> None:
        # sequence, then the two numbers
        self._slots = multiprocessing.RawArray(ctypes.c_uint64, 3)

    def __getstate__(self) -> dict:
        # Shared memory travels to a process being started (spawn, forkserver);
        # pickled otherwise, the copy announces and hears nothing.
        return {"_slots": self._slots if _spawning() else None}

    def publish(self, epoch: int, length: int) -> int:
        """Announces the pair; returns the announcement's number."""
        slots = self._slots
        if slots is None:
            return 0
        slots[0] += 1
        slots[1], slots[2] = epoch, length
        slots[0] += 1
        return slots[0]

    def read(self) -> Optional[tuple]:
        """``(number, first, second)`` of the latest announcement (number 0:
        none yet), or None for a copy without the shared memory."""
        slots = self._slots
        if slots is None:
            return None
        while True:
            number = slots[0]
            if number % 2:
                continue
            epoch, length = slots[1], slots[2]
            if slots[0] == number:
                return number, epoch, length


class Counter:
    """A count that the main process and its DataLoader workers add to and the
    main process reads (images skipped by ``bad_images="skip"``): one slot per
    worker id plus one for the main process, each written by one process only,
    so no lock is needed."""

    _SLOTS = 65

    def __init__(self) -> None:
        self._slots = multiprocessing.RawArray(ctypes.c_uint64, self._SLOTS)

    def __getstate__(self) -> dict:
        return {"_slots": self._slots if _spawning() else None}

    def add(self, count: int, worker: Optional[int]) -> None:
        """Adds ``count`` in the slot of DataLoader worker ``worker`` (None: the
        main process)."""
        if self._slots is not None and count:
            slot = self._SLOTS - 1 if worker is None else worker % (self._SLOTS - 1)
            self._slots[slot] += count

    @property
    def value(self) -> int:
        return 0 if self._slots is None else sum(self._slots)
