"""The mixture: several map-style datasets drawn in fixed proportions."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.utils.data

from ..mixture import MixEpochSampler, mix_offsets, split_indices
from .batch import Batch, _uint8_buffer


def _read(source, records: list):
    """The samples of ``records`` of one source: one ``__getitems__`` call when
    the source has it (a :class:`MapDataset` reads them in one parallel read)."""
    getitems = getattr(source, "__getitems__", None)
    if getitems is not None:
        return getitems(records)
    return [source[i] for i in records]


class Mix(torch.utils.data.Dataset):
    """Map-style datasets (``sources``: :class:`MapDataset` objects, or any
    dataset with ``len`` and indexing) drawn in the proportions ``weights``
    (normalised), without copying a byte: :class:`Sampler` over a mix draws each
    epoch as :func:`bcd.partition_mix` lays it out.

    - An epoch has ``num_samples`` samples (default: the sources' records
      together); source ``k`` gives its share of them. A source smaller than
      its share is repeated, each pass a new permutation; a larger one is
      sampled without replacement (``shuffle=False``: record order;
      ``block_size``: block shuffles, as :class:`Sampler`'s). Every prefix of
      every rank's epoch holds each source within one sample of its share.
    - ``seed`` with the epoch determines every draw (the Sampler over a mix
      takes the mix's seed).
    - Indices are those of the sources back to back: ``len(mix)`` is the
      records of all sources, and ``mix[i]`` is ``(source, sample)``, the
      source's number and what ``sources[source][record]`` gives. A batch read
      by a DataLoader (``__getitems__``) reads each source's samples with one
      call; when every source gives a :class:`Batch` (``output="tensor"``, the
      same fields), the mix gives one Batch of them with ``sources`` set.

    The sources' lengths are taken when the mix is made: it covers the records
    they had then (make a new mix to take in records appended since). A mix
    pickles as its sources and settings, so DataLoader workers reopen the
    sources as they do on their own.
    """

    # What bcd.torch.IterableDataset asks of what it reads.
    refresh_each_epoch = False

    def __init__(
        self,
        sources: Sequence[Any],
        weights: Sequence[float],
        *,
        num_samples: Optional[int] = None,
        seed: int = 0,
        shuffle: bool = True,
        block_size: Optional[int] = None,
    ):
        self.sources = list(sources)
        self.lengths = [len(source) for source in self.sources]
        # Every setting checked once, in Rust, as the sampler will check it.
        checked = MixEpochSampler(self.lengths, weights, num_samples=num_samples, seed=seed, shuffle=shuffle,
                                  block_size=block_size, rank=0, world_size=1)
        self.weights = [float(w) for w in checked.source_weights]
        self.num_samples = checked.num_samples
        self.seed = checked.seed
        self.shuffle = checked.shuffle
        self.block_size = checked.block_size
        self._offsets = mix_offsets(self.lengths)

    def epochs(self, *, rank: Optional[int] = None, world_size: Optional[int] = None,
               drop_last: bool = False) -> MixEpochSampler:
        """The epochs of this mix on rank ``rank`` of ``world_size`` (the
        state behind :class:`Sampler` and :class:`IterableDataset` over it)."""
        return MixEpochSampler(
            self.lengths, self.weights, num_samples=self.num_samples, seed=self.seed, shuffle=self.shuffle,
            block_size=self.block_size, rank=rank, world_size=world_size, drop_last=drop_last,
        )

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def locate(self, index: int) -> tuple:
        """``(source, record)`` of the mix's index ``index`` (negative counts
        from the end)."""
        length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError(f"index {index} is out of range for a mix of {length} records")
        source = int(np.searchsorted(self._offsets, index, side="right") - 1)
        return source, index - int(self._offsets[source])

    def __getitem__(self, index: int):
        source, record = self.locate(int(index))
        return (source, self.sources[source][record])

    def __getitems__(self, indices: Sequence[int]):
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        length = len(self)
        indices = np.where(indices < 0, indices + length, indices)
        bad = (indices < 0) | (indices >= length)
        if bad.any():
            raise IndexError(f"index {int(indices[bad][0])} is out of range for a mix of {length} records")
        sources, records = split_indices(self.lengths, indices)
        reads = []
        for source in np.unique(sources).tolist():
            positions = np.flatnonzero(sources == source)
            reads.append((source, positions, _read(self.sources[source], records[positions].tolist())))
        batches = [got for _, _, got in reads]
        if reads and all(isinstance(got, Batch) for got in batches) and len({tuple(b.fields) for b in batches}) == 1:
            return _joined(reads, len(indices))
        out: list = [None] * len(indices)
        for source, positions, got in reads:
            for position, sample in zip(positions.tolist(), got):
                out[position] = (source, sample)
        return out

    def __repr__(self) -> str:
        return f"bcd.torch.Mix({len(self.sources)} sources of {self.lengths} records, weights {self.weights})"


def _joined(reads: list, count: int) -> Batch:
    """One Batch of the sources' Batches, in the order of the indices asked for:
    ``reads`` holds each source, the positions its samples take, and its Batch."""
    shared = torch.utils.data.get_worker_info() is not None
    sizes = np.zeros(count, dtype=np.int64)
    sources = np.zeros(count, dtype=np.int64)
    records = np.zeros(count, dtype=np.int64)
    for source, positions, batch in reads:
        offsets = batch.offsets.numpy()
        sizes[positions] = offsets[1:] - offsets[:-1]
        sources[positions] = source
        records[positions] = batch.indices.numpy()
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = _uint8_buffer(int(offsets[-1]), shared)
    out = values.numpy()
    for _, positions, batch in reads:
        theirs = batch.values.numpy()
        starts = batch.offsets.numpy()
        for j, position in enumerate(positions.tolist()):
            out[offsets[position]:offsets[position + 1]] = theirs[starts[j]:starts[j + 1]]
    # The samples in source order, and where each goes.
    order = np.concatenate([positions for _, positions, _ in reads])
    back = np.argsort(order, kind="stable")
    fields = {}
    for name in reads[0][2].fields:
        columns = [batch.fields[name] for _, _, batch in reads]
        if all(isinstance(c, torch.Tensor) for c in columns) and len({c.dtype for c in columns}) == 1:
            fields[name] = torch.cat(columns)[torch.from_numpy(back)]
        else:
            flat = [value for column in columns for value in list(column)]
            fields[name] = [flat[i] for i in back.tolist()]
    return Batch(values, torch.from_numpy(offsets), fields, torch.from_numpy(records), torch.from_numpy(sources))
