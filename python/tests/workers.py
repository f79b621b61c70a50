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



def _anon_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))


def open_and_measure(path: str, key: bytes) -> tuple[int, int]:
    """Opens the dataset at `path` in this worker; returns the private (anonymous)
    memory the open added, in KiB, and the length of `key`'s value."""
    import bcd

    before = _anon_kib()
    dataset = bcd.Dataset(path)
    added = _anon_kib() - before
    return added, len(dataset[key])
