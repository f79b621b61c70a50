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
