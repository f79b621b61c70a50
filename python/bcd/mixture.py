"""Epochs drawn from several sources in fixed proportions, for any framework.

:func:`partition_mix` gives one rank's part of one epoch of a mixture as NumPy
arrays (each sample's source and its record in that source), computed in Rust
(``bcd-sampling``'s ``Mixture``). :class:`MixEpochSampler` is the state behind
``bcd.torch.Sampler`` and ``bcd.torch.IterableDataset`` over a
``bcd.torch.Mix``, usable without torch.

A mixture numbers its samples in one index space, the sources back to back:
record ``i`` of source ``k`` is ``lengths[0] + ... + lengths[k-1] + i``
(:func:`mix_offsets`); :class:`MixEpochSampler` yields those numbers, and
:func:`partition_mix` gives them split (or, with ``pairs=False``, as they are).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ._bcd import _mix_rank_len, _partition_mix
from ._states import checked_resumed_from
from .sampling import EpochSampler, _check_int, _part_settings

__all__ = ["MixEpochSampler", "mix_offsets", "partition_mix", "split_indices"]


def _np():
    import numpy

    return numpy


def _lengths(lengths) -> list:
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise TypeError("lengths must be a sequence of record counts, one per source")
    return [_check_int("lengths", n) for n in lengths]


def _source_weights(weights):
    np = _np()
    array = np.ascontiguousarray(np.asarray(weights, dtype=np.float64))
    if array.ndim != 1:
        raise ValueError(f"weights must be one-dimensional, not of shape {array.shape}")
    return array


def mix_offsets(lengths: Sequence[int]):
    """Where each source starts in a mixture's index space, and the total at
    the end (``len(lengths) + 1`` entries, ``int64``)."""
    np = _np()
    return np.concatenate([[0], np.cumsum(np.asarray(_lengths(lengths), dtype=np.int64))]).astype(np.int64)


def partition_mix(
    lengths: Sequence[int],
    weights: Sequence[float],
    *,
    seed: int,
    epoch: int,
    rank: int,
    world_size: int,
    num_samples: Optional[int] = None,
    shuffle: bool = True,
    block_size: Optional[int] = None,
    drop_last: bool = False,
    start: int = 0,
    resumed_from: Optional[Sequence[Sequence[int]]] = None,
    dtype: str = "int64",
    pairs: bool = True,
):
    """Rank ``rank``'s part of epoch ``epoch`` of a mixture of sources of
    ``lengths[k]`` records in proportions ``weights`` (normalised): the tuple
    ``(sources, records)`` of NumPy arrays, each sample's source (``uint8``,
    ``uint16`` or ``uint32``, the narrowest that holds the sources) and its record
    in that source (``dtype``: ``int64``, ``uint64`` or ``uint32``). With
    ``pairs=False``, one array of indices in the mixture's index space.

    - An epoch has ``num_samples`` samples (default: the sum of ``lengths``),
      rounded up to a multiple of ``world_size`` (down with ``drop_last``) by
      drawing as many more in the same proportions. Source ``k`` gives its share
      of them, within one of ``total * weights[k] / sum(weights)``.
    - A source with at most its share of records is sampled without
      replacement; a smaller one is repeated, each pass a new permutation
      (``shuffle=False``: record order; ``block_size``: a block shuffle, as for
      :func:`bcd.partition`).
    - Every prefix of every rank's part holds each source within one sample of
      its share of the epoch (the category-aware interleave, with the sources
      as classes). Each rank gets the same count; together the ranks take every
      draw once.
    - ``start`` resumes from that position of the rank's part;
      ``resumed_from`` continues an epoch begun on other ranks, as for
      :func:`bcd.partition` (the rest dealt by source).

    The orders depend only on the settings and ``(seed, epoch)``, as
    :func:`bcd.partition`'s do. Raises ValueError naming the setting that cannot
    work.
    """
    lengths = _lengths(lengths)
    seed, epoch, rank, world_size, start, block_size, num_samples = _part_settings(
        seed, epoch, rank, world_size, start, block_size, num_samples
    )
    return _partition_mix(
        lengths, _source_weights(weights), num_samples, seed, epoch, rank, world_size, bool(shuffle),
        block_size, bool(drop_last), checked_resumed_from(resumed_from), start, dtype, bool(pairs),
    )


class MixEpochSampler(EpochSampler):
    """One rank's epochs of a mixture (:func:`partition_mix`): iterating yields
    indices of the mixture's index space; positions, ``state_dict`` /
    ``load_state_dict`` (elastic resumes included) and the split over DataLoader
    workers are :class:`bcd.sampling.EpochSampler`'s."""

    def __init__(
        self,
        lengths: Sequence[int],
        weights: Sequence[float],
        *,
        num_samples: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        drop_last: bool = False,
        block_size: Optional[int] = None,
    ):
        self._common(seed, rank, world_size, shuffle, drop_last, block_size, num_samples)
        self.lengths = _lengths(lengths)
        self.source_weights = _source_weights(weights)
        # The index space.
        self.length = sum(self.lengths)
        self._len = self._count()

    def _count(self) -> int:
        return _mix_rank_len(
            self.lengths, self.source_weights, self.num_samples, self.world_size, self.drop_last,
            self.shuffle, self.block_size, self._resumed_from or None, self.rank,
        )

    def _order(self, start: int):
        return partition_mix(self.lengths, self.source_weights, pairs=False, **self._part_arguments(start))

    def set_length(self, length, categories=None, weights=None) -> None:
        raise TypeError("a mixture's sources are fixed when it is made: make a new one to take in appended records")

    def _end_resumed_epoch(self) -> None:
        if self._resumed_from:
            self._resumed_from = []
            self._len = self._count()

    def _settings(self) -> dict:
        return {
            "mixture": {"lengths": list(self.lengths), "weights": [float(w) for w in self.source_weights]},
            **self._common_settings(),
        }

    def _load_length(self, state: dict, differ: list) -> None:
        if differ:
            raise ValueError("the state was saved with other settings: " + "; ".join(differ))


def split_indices(lengths: Sequence[int], indices) -> Tuple["object", "object"]:
    """Indices of a mixture's index space as ``(sources, records)`` NumPy arrays."""
    np = _np()
    offsets = mix_offsets(lengths)
    indices = np.asarray(indices, dtype=np.int64)
    sources = np.searchsorted(offsets, indices, side="right") - 1
    return sources, indices - offsets[sources]
