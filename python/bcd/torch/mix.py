"""The mixture: several map-style datasets drawn in fixed proportions."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.utils.data

import bcd

from .._bcd import _mix_source_seed
from ..mixture import MixEpochSampler, mix_offsets, split_indices
from .batch import AudioBatch, Batch, ImageBatch, _leased_view, _uint8_buffer
from .map_dataset import ReadsDataset


def _read(source, records: list) -> tuple:
    """The samples of ``records`` of one source and which records they are (a
    boolean array; None: all of them): a :class:`MapDataset`'s whole
    :class:`Batch` or :class:`ImageBatch` when it makes one, else one
    ``__getitems__`` call when the source has it, else one read per record."""
    whole = getattr(source, "_whole_batch", None)
    if whole is not None:
        got = whole(records)
        if got is not None:
            return got
    samples_kept = getattr(source, "_samples_kept", None)
    if samples_kept is not None:
        return samples_kept(records)
    getitems = getattr(source, "__getitems__", None)
    if getitems is not None:
        return getitems(records), None
    return [source[i] for i in records], None


def prefetch_order(source, order) -> None:
    """Hands an epoch's ``order`` (indices of ``source``: a :class:`MapDataset`,
    a ``bcd.Dataset`` or a :class:`Mix`, whose sources each get their records
    of it, in the same order) to the datasets in object storage behind it,
    whose shard caches then fetch the shards in the order the epoch first needs
    them (``bcd.Dataset.prefetch``). Anything else has nothing to fetch."""
    if isinstance(source, Mix):
        order = np.asarray(order, dtype=np.int64).reshape(-1)
        sources, records = split_indices(source.lengths, order)
        for number, inner in enumerate(source.sources):
            prefetch_order(inner, records[sources == number])
        return
    dataset = source
    if isinstance(source, ReadsDataset):
        dataset = source.dataset
        records = source.records  # a view's records: the order is over them
        if records is not None:
            order = np.asarray(records)[np.asarray(order, dtype=np.int64).reshape(-1)]
    if isinstance(dataset, bcd.Dataset):
        dataset.prefetch(order)


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
      call; when every source is a :class:`MapDataset` without a
      ``transform``, with the same fields and ``output`` (or the same image
      shape), the mix gives one :class:`Batch` (or :class:`ImageBatch`) of
      them with ``sources`` set, in shared memory inside a DataLoader worker:
      torch's default collate makes ``[sources, samples]`` of it from its
      tensors (see :func:`bcd.torch.batch.collate_mixed`), and
      ``collate_fn=bcd.torch.collate`` keeps it whole.
    - Sources with ``image=`` crop their images from the epoch of the
      :class:`Sampler` (or :class:`IterableDataset`) over the mix: source
      ``k`` draws them as a :class:`MapDataset` would with the seed
      ``stream_key(seed, 0, MixSource, k)`` (``bcd-sampling``'s key of source
      ``k``'s first pass), so sources do not share crops and runs are
      reproducible and resumable.

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
        self.use_crops(0)

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

    def use_crops(self, epoch: int) -> None:
        """Makes the random crops of the sources with ``image=`` or ``audio=`` those of epoch
        ``epoch`` (:class:`Sampler` and :class:`IterableDataset` over the mix
        call it from their ``set_epoch``), in their DataLoader workers too."""
        for k, source in enumerate(self.sources):
            if getattr(source, "draws_crops", False) and hasattr(source, "use_crops"):
                source.use_crops(_mix_source_seed(self.seed, k), epoch)

    def _use_crops_here(self, epoch: int) -> None:
        """The crops of epoch ``epoch`` for this process's reads only, over any
        announcement (an :class:`IterableDataset`'s worker knows its pass's
        epoch): the crops :meth:`use_crops` makes."""
        for k, source in enumerate(self.sources):
            if getattr(source, "draws_crops", False) and hasattr(source, "_crops_here"):
                source._crops_here = (_mix_source_seed(self.seed, k), int(epoch))

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
        return self._samples_kept(indices)[0]

    def _samples_kept(self, indices: Sequence[int]) -> tuple:
        """The samples ``__getitems__`` gives for ``indices`` (in their order),
        and which of the indices they are (a boolean array; None: all of
        them): a source's image or clip that did not decode, skipped, gives
        none."""
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
            got, kept = _read(self.sources[source], records[positions].tolist())
            # The positions of the samples the source gave (an image that did
            # not decode, skipped, gives none).
            reads.append((source, positions if kept is None else positions[kept], got))
        present = np.zeros(len(indices), dtype=bool)
        for _, positions, _ in reads:
            present[positions] = True
        kept = None if present.all() else present
        batches = [got for _, _, got in reads]
        kinds = {_joinable(got) for got in batches}
        if len(kinds) == 1 and None not in kinds:
            if isinstance(batches[0], ImageBatch):
                return _joined_images(reads), kept
            if isinstance(batches[0], AudioBatch):
                return _joined_audio(reads), kept
            return _joined(reads), kept
        out: list = [None] * len(indices)
        for source, positions, got in reads:
            for position, sample in zip(positions.tolist(), got):
                out[position] = (source, sample)
        return [pair for pair in out if pair is not None], kept

    def __repr__(self) -> str:
        return f"bcd.torch.Mix({len(self.sources)} sources of {self.lengths} records, weights {self.weights})"


def _joinable(got):
    """What sources' batches must share to make one batch: the kind, the
    fields' names and the output (or the image shape); None for samples."""
    if isinstance(got, Batch):
        return (Batch, tuple(got.fields), got.output)
    if isinstance(got, ImageBatch):
        return (ImageBatch, tuple(got.fields), tuple(got.images.shape[1:]))
    if isinstance(got, AudioBatch):
        return (AudioBatch, tuple(got.fields), tuple(got.audio.shape[1:]))
    return None


def _places(reads: list) -> tuple:
    """Where each source's samples go in the joined batch (the samples kept,
    in the order of the indices asked for), and how many there are."""
    order = np.concatenate([positions for _, positions, _ in reads])
    rank = np.empty(len(order), dtype=np.int64)
    rank[np.argsort(order, kind="stable")] = np.arange(len(order))
    places, at = [], 0
    for _, positions, _ in reads:
        places.append(rank[at:at + len(positions)])
        at += len(positions)
    return places, len(order)


def _joined_columns(reads: list, places: list, count: int) -> tuple:
    """The joined batch's fields, record indices and sources."""
    fields = {}
    for name in reads[0][2].fields:
        columns = [batch.fields[name] for _, _, batch in reads]
        if all(isinstance(c, torch.Tensor) for c in columns) and len({c.dtype for c in columns}) == 1:
            column = torch.empty(count, dtype=columns[0].dtype)
            for place, theirs in zip(places, columns):
                column[torch.from_numpy(place)] = theirs
        else:
            column = [None] * count
            for place, theirs in zip(places, columns):
                for at, value in zip(place.tolist(), list(theirs)):
                    column[at] = value
        fields[name] = column
    records = np.zeros(count, dtype=np.int64)
    sources = np.zeros(count, dtype=np.int64)
    for place, (source, _, batch) in zip(places, reads):
        records[place] = batch.indices.numpy()
        sources[place] = source
    return fields, torch.from_numpy(records), torch.from_numpy(sources)


def _joined(reads: list) -> Batch:
    """One Batch of the sources' Batches, in the order of the indices asked for:
    ``reads`` holds each source, the positions its samples take, and its Batch.
    The values are copied once, into the new batch (in shared memory inside a
    DataLoader worker): one slice copy per value. (``torch.cat`` of the values'
    views, which needs no Python loop, copies uint8 parts about 100 times
    slower in torch 2.6: 500 ms against 1.2 ms for 64 values of 100 KB.)"""
    places, count = _places(reads)
    sizes = np.zeros(count, dtype=np.int64)
    for place, (_, _, batch) in zip(places, reads):
        theirs = batch.offsets.numpy()
        sizes[place] = theirs[1:] - theirs[:-1]
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    values = _uint8_buffer(int(offsets[-1]), torch.utils.data.get_worker_info() is not None)
    out = values.numpy()
    for place, (_, _, batch) in zip(places, reads):
        source, starts = batch.values.numpy(), batch.offsets.numpy().tolist()
        for at, start, end in zip(place.tolist(), starts, starts[1:]):
            out[offsets[at] : offsets[at + 1]] = source[start:end]
    fields, records, sources = _joined_columns(reads, places, count)
    return Batch(values, torch.from_numpy(offsets), fields, records, reads[0][2].output, sources)


def _joined_images(reads: list) -> ImageBatch:
    """One ImageBatch of the sources' ImageBatches, in the order of the
    indices asked for (one copy of the images, by index, into shared memory
    inside a DataLoader worker)."""
    places, count = _places(reads)
    images = _joined_rows([batch.images for _, _, batch in reads], places, count)
    fields, records, sources = _joined_columns(reads, places, count)
    skipped = torch.cat([batch.skipped for _, _, batch in reads])
    return ImageBatch(images, fields, records, skipped, sources)


def _joined_audio(reads: list) -> AudioBatch:
    """One AudioBatch of the sources' AudioBatches, in the order of the
    indices asked for (one copy of the clips, by index, into shared memory
    inside a DataLoader worker)."""
    places, count = _places(reads)
    audio = _joined_rows([batch.audio for _, _, batch in reads], places, count)
    lengths = np.zeros(count, dtype=np.int64)
    for place, (_, _, batch) in zip(places, reads):
        lengths[place] = batch.lengths.numpy()
    fields, records, sources = _joined_columns(reads, places, count)
    skipped = torch.cat([batch.skipped for _, _, batch in reads])
    return AudioBatch(audio, torch.from_numpy(lengths), fields, records, skipped, sources)


def _joined_rows(tensors: list, places: list, count: int) -> torch.Tensor:
    """The sources' tensors of one row a sample (images, clips; one tensor a
    source, all of one shape and dtype) as one tensor of ``count`` rows, each
    source's rows at its places: one copy, by index, into shared memory inside
    a DataLoader worker."""
    first = tensors[0]
    shape = tuple(first.shape[1:])
    size = int(np.prod(shape)) * first.element_size()
    memory = _uint8_buffer(count * size, torch.utils.data.get_worker_info() is not None)
    joined = _leased_view(memory, count, *shape, dtype=None if first.dtype == torch.uint8 else first.dtype)
    out = joined.numpy()
    for place, tensor in zip(places, tensors):
        if len(place):
            out[place] = tensor.numpy()  # NumPy's: torch's index_put is ~6x slower on uint8
    return joined
