"""Batches that travel from DataLoader workers as shared-memory tensors."""

from __future__ import annotations

from typing import Iterator, Optional

import torch
import torch.utils.data


class Batch:
    """A batch of records as one contiguous uint8 tensor (``values``) and the
    offsets of each value in it (``offsets``, int64, ``len + 1``), with the
    requested fields (``fields``: name -> tensor, or list for values a tensor
    cannot hold) and the record indices (``indices``).

    ``batch[i]`` (and iterating) gives sample ``i`` as :class:`MapDataset` does:
    ``(value, *fields)``, the value a uint8 tensor viewing the batch's memory (no
    copy); :meth:`value_bytes` gives it as a memoryview (``PIL.Image.open(
    io.BytesIO(batch.value_bytes(i)))``). Built in a DataLoader worker, the
    tensors live in shared memory, so the batch reaches the main process without
    its values being pickled.

    A batch of a :class:`Mix` also says where each sample came from:
    ``sources`` (int64, the source of each sample; ``indices`` are then the
    records within their sources), and ``batch[i]`` is ``(source, (value,
    *fields))``, as the mix's ``mix[index]`` is ``(source, sample)``. Without a
    mix, ``sources`` is None.
    """

    __slots__ = ("values", "offsets", "fields", "indices", "sources")

    def __init__(
        self,
        values: torch.Tensor,
        offsets: torch.Tensor,
        fields: dict,
        indices: torch.Tensor,
        sources: Optional[torch.Tensor] = None,
    ):
        self.values = values
        self.offsets = offsets
        self.fields = fields
        self.indices = indices
        self.sources = sources

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def value(self, i: int) -> torch.Tensor:
        """Value ``i`` as a uint8 tensor sharing the batch's memory."""
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.values[start:end]

    def value_bytes(self, i: int) -> memoryview:
        """Value ``i`` as a read-only memoryview of the batch's memory."""
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        return memoryview(self.values.numpy()).toreadonly()[start:end]

    def __getitem__(self, i: int) -> tuple:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"sample {i} of a batch of {len(self)}")
        sample = (self.value(i), *(_item(column, i) for column in self.fields.values()))
        if self.sources is None:
            return sample
        return (int(self.sources[i]), sample)

    def __iter__(self) -> Iterator[tuple]:
        for i in range(len(self)):
            yield self[i]

    def pin_memory(self) -> "Batch":
        """Called by a DataLoader with ``pin_memory=True``."""
        return Batch(
            self.values.pin_memory(),
            self.offsets.pin_memory(),
            {name: column.pin_memory() if isinstance(column, torch.Tensor) else column for name, column in self.fields.items()},
            self.indices.pin_memory(),
            None if self.sources is None else self.sources.pin_memory(),
        )

    def __repr__(self) -> str:
        mixed = "" if self.sources is None else ", from a mix"
        return f"bcd.torch.Batch({len(self)} records, {int(self.offsets[-1])} bytes, fields {list(self.fields)}{mixed})"


def _item(column, i: int):
    value = column[i]
    return value.item() if isinstance(value, torch.Tensor) and value.dim() == 0 else value


def collate(batch):
    """A ``collate_fn`` that keeps a :class:`Batch` as it is and collates
    anything else (lists of samples) with torch's ``default_collate``."""
    if isinstance(batch, Batch):
        return batch
    return torch.utils.data.default_collate(batch)


def _uint8_buffer(size: int, shared: bool) -> torch.Tensor:
    """An uninitialised uint8 tensor of ``size`` bytes, in shared memory when
    ``shared`` (a DataLoader worker: the tensor then crosses to the main process
    as a handle, not as bytes)."""
    if shared:
        storage = torch.UntypedStorage._new_shared(size)
        return torch.empty(0, dtype=torch.uint8).set_(storage)
    return torch.empty(size, dtype=torch.uint8)
