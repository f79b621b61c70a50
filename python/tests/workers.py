"""Functions that run in worker processes (a module of its own, so that 'spawn'
workers can import them by name)."""

from __future__ import annotations

_dataset = None


def init(dataset) -> None:
    """Pool initializer: receives the dataset pickled (as its path)."""
    global _dataset
    _dataset = dataset


def read(index: int) -> tuple[bytes, bytes | None]:
    value = bytes(_dataset.at(index))
    key = bytes(_dataset.key_at(index)) if _dataset.keyed else None
    return value, key


def read_batch(indices: list[int]) -> list[bytes]:
    return [bytes(value) for value in _dataset.get_batch(indices)]


def read_pickled_batch(dataset, indices: list[int]) -> list[bytes]:
    """A task that carries the dataset itself, as a DataLoader's does."""
    return [bytes(value) for value in dataset.get_batch(indices)]



def _allocated_kib() -> int:
    """The heap memory this process has allocated and not freed, in KiB
    (glibc's ``mallinfo2``: in-use chunks plus mmap'd ones). Not the resident
    size: a worker forked from the test process inherits its heap, free chunks
    already resident included, and an allocation that reuses them adds nothing
    to RssAnon (which made an RSS measure here depend on what ran before)."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
        ]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return (info.uordblks + info.hblkhd) // 1024


def open_and_measure(path: str, key: bytes) -> tuple[int, int]:
    """Opens the dataset at `path` in this worker; returns the heap memory the
    open allocated (and holds), in KiB, and the length of `key`'s value."""
    import bcd

    before = _allocated_kib()
    dataset = bcd.Dataset(path)
    added = _allocated_kib() - before
    return added, len(dataset[key])
