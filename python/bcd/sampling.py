"""Epoch orders for training on one or many ranks, for any framework.

:func:`partition` gives one rank's part of one epoch as a NumPy array, computed
in Rust (``bcd-sampling``) in one pass without per-index Python objects: a
shuffle, a block shuffle, a category-balanced interleave or a weighted sample,
split exactly over ranks. Orders are a pure function of the settings and
``(seed, epoch)``, identical in every process, on every machine and in every
version, so ranks agree without talking and a run resumes mid-epoch by
computing its part again from a position (``start``), never by reading what it
skips.

:class:`EpochSampler` is the state behind ``bcd.torch.Sampler`` and
``bcd.torch.IterableDataset`` (epochs, positions, ``state_dict``), usable
without torch.

NumPy is imported when one of these is called, not when ``bcd`` is imported.

The settings are checked in Rust, once (``bcd-sampling``'s ``PlanError``, and
the bindings in ``python/src/sampling.rs``): a setting that cannot work is a
``ValueError`` in the library's words. This module checks only what Rust cannot
see: that an argument is an int (in the range of a 64-bit unsigned integer) and
that an array has one dimension.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator, Optional, Sequence, Union

# From the extension module itself, not through the package (``bcd/__init__``
# imports this module while it is being initialised).
from ._bcd import _category_codes, _field_categories, _partition, _rank_len
from ._states import STATE_FORMAT, checked_resumed_from, resume_point

__all__ = [
    "EpochSampler",
    "arrow_codes",
    "category_codes",
    "default_rank_and_world_size",
    "field_codes",
    "partition",
    "rank_len",
]

# Entries turned into Python ints at a time when iterating.
_CHUNK = 1 << 14


def _np():
    import numpy

    return numpy


def category_codes(categories: Any):
    """Each record's category as a dense ``uint32`` code (a NumPy array).

    Accepts a ``pyarrow`` Array or ChunkedArray, numbered as a stored field is
    for ``balance_by`` and ``bcd export --balance-by`` (in Rust: values in order
    of first appearance, a dictionary-encoded column in its dictionary's order,
    nulls one more category after them; a float or nested column is refused), a
    NumPy array or any sequence. Non-negative integers below 2**32 are kept as
    they are (classes are ordered by value); anything else (strings, negative
    numbers, objects) is numbered in sorted order of the distinct values.
    """
    np = _np()
    if hasattr(categories, "dictionary_encode") or type(categories).__module__.startswith("pyarrow"):
        return arrow_codes(categories)
    array = np.asarray(categories)
    if array.ndim != 1:
        raise ValueError(f"categories must be one-dimensional, not of shape {array.shape}")
    if array.dtype.kind in "iu" and array.size:
        low, high = array.min(), array.max()
        if low >= 0 and high <= 0xFFFFFFFF:
            return np.ascontiguousarray(array, dtype=np.uint32)
    elif array.dtype.kind in "iu":
        return np.zeros(0, dtype=np.uint32)
    if array.dtype.kind == "b":
        return np.ascontiguousarray(array, dtype=np.uint32)
    _, inverse = np.unique(array, return_inverse=True)
    return np.ascontiguousarray(inverse.reshape(-1), dtype=np.uint32)


def arrow_codes(column, what: str = "categories="):
    """The category codes of a pyarrow Array or ChunkedArray, computed in Rust
    (``bcd_fields::CategoryCodes``) chunk by chunk, without a copy of the column."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        chunks = column.chunks or [pa.array([], type=column.type)]
    else:
        chunks = [column]
    return _category_codes(chunks, what)


def field_codes(dataset, field: str):
    """The category codes of the stored field ``field`` of ``dataset`` (a
    :class:`bcd.Dataset`), as ``bcd export --balance-by FIELD`` computes them:
    a ``uint32`` NumPy array, one per record. ValueError for a field the
    dataset lacks (naming those it has) or one without classes (a float or
    nested field)."""
    return _field_categories(dataset, field)


def _weights(weights, n):
    if weights is None:
        return None
    if isinstance(weights, str):
        return weights
    np = _np()
    array = np.ascontiguousarray(np.asarray(weights, dtype=np.float64))
    if array.ndim != 1:
        raise ValueError(f"weights must be one-dimensional, not of shape {array.shape}")
    return array


def _check_int(name: str, value) -> int:
    """``value`` as an int of the range the Rust side takes (u64): what pyo3's
    extraction would refuse with a TypeError or OverflowError, as a TypeError or
    ValueError naming the argument. What the value must be beyond that (a
    world size of at least 1, a rank below it) is Rust's to say."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    value = value.__index__()
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{name}={value} is out of range (0 to {(1 << 64) - 1})")
    return value


def rank_len(
    n: int,
    *,
    world_size: int = 1,
    drop_last: bool = False,
    weights: Union[None, str, Sequence[float]] = None,
    num_samples: Optional[int] = None,
) -> int:
    """The entries each rank gets per epoch, as :func:`partition` counts them."""
    n = _check_int("n", n)
    world_size = _check_int("world_size", world_size)
    if num_samples is not None:
        num_samples = _check_int("num_samples", num_samples)
    weights = _weights(weights, n)
    if isinstance(weights, str) and weights == "inverse_frequency":
        # Positive for every record: the count is that of unweighted sampling
        # (the categories it needs are checked where they are given).
        weights = None
    return _rank_len(n, world_size, bool(drop_last), True, None, None, weights, num_samples, None, None)


def partition(
    n: int,
    *,
    seed: int,
    epoch: int,
    rank: int,
    world_size: int,
    shuffle: bool = True,
    drop_last: bool = False,
    block_size: Optional[int] = None,
    categories: Any = None,
    weights: Union[None, str, Sequence[float]] = None,
    num_samples: Optional[int] = None,
    start: int = 0,
    resumed_from: Optional[Sequence[Sequence[int]]] = None,
    dtype: str = "int64",
):
    """Rank ``rank``'s part of epoch ``epoch`` of ``n`` records: a NumPy array of
    record indices (``int64``; ``dtype="uint32"`` halves the memory).

    - The ranks' parts together hold every record exactly once per epoch, padded
      by repeating the first ones (as ``DistributedSampler``) so every rank gets
      ``ceil(n / world_size)``, or with ``drop_last`` the last ``n % world_size``
      left out so every rank gets ``n // world_size``. Rank ``r`` takes positions
      ``r*m .. (r+1)*m`` of the epoch's order.
    - ``shuffle``: a uniform random order, different for every ``(seed, epoch)``;
      without it, record order. ``block_size``: blocks of that many consecutive
      records in random order, shuffled within, so reads stay in one region of
      the dataset (one shard) for a while.
    - ``categories`` (one per record: ints, strings, a pyarrow column): the
      category-aware shuffle. Each class keeps its own random order, the entries
      are dealt to ranks class by class, and each rank interleaves its classes so
      that every prefix of ``t`` entries holds each class ``c`` within one of
      ``t * N_c / T`` (its share of the epoch).
    - ``weights`` (one per record, finite and >= 0, or ``"inverse_frequency"``:
      1 / the size of the record's class in ``categories``) with ``num_samples``
      (the total over all ranks; default: every record of positive weight):
      weighted sampling without replacement, in weighted random order. With
      ``num_samples`` alone, a uniform sample: the first ``num_samples`` of the
      order.
    - ``start``: resume from that position of the rank's part (the result is
      ``partition(..., start=0)[start:]``, computed without the records before).
    - ``resumed_from``: the epoch was begun on other ranks (an elastic resume).
      A list of the earlier runs of this epoch, the first run's first, each the
      position every rank of that run had reached (``[[c_0, ..., c_{W-1}]]``
      after one run of ``W`` ranks); ``rank`` and ``world_size`` are the current
      run's. The current run's ranks together take exactly the entries the
      earlier ranks had not consumed, each once (plus the usual padding of fewer
      than ``world_size``, or less with ``drop_last``), laid out as an epoch is:
      ``categories`` stay balanced on every prefix. The same ranks all at one
      position continue their own parts.

    The arrays passed in must not change during the call (it runs without the
    GIL). Raises ValueError naming the setting that cannot work.
    """
    n = _check_int("n", n)
    seed, epoch, rank, world_size, start, block_size, num_samples = _part_settings(
        seed, epoch, rank, world_size, start, block_size, num_samples
    )
    codes = None if categories is None else category_codes(categories)
    return _partition(
        n, seed, epoch, rank, world_size, bool(shuffle), block_size, bool(drop_last),
        codes, _weights(weights, n), num_samples, checked_resumed_from(resumed_from), start, dtype,
    )


def _part_settings(seed, epoch, rank, world_size, start, block_size, num_samples) -> tuple:
    """The integer settings of one rank's part of an epoch (:func:`partition`'s
    and :func:`bcd.partition_mix`'s), checked, in this order; ``block_size`` and
    ``num_samples`` may be None."""
    return (
        _check_int("seed", seed),
        _check_int("epoch", epoch),
        _check_int("rank", rank),
        _check_int("world_size", world_size),
        _check_int("start", start),
        None if block_size is None else _check_int("block_size", block_size),
        None if num_samples is None else _check_int("num_samples", num_samples),
    )


def default_rank_and_world_size(rank: Optional[int] = None, world_size: Optional[int] = None):
    """``(rank, world_size)``: the given ones, else ``torch.distributed``'s when
    torch is already imported and a process group is initialised, else the
    ``RANK`` and ``WORLD_SIZE`` environment variables, else 0 and 1. Never imports
    torch."""
    if rank is not None and world_size is not None:
        return int(rank), int(world_size)
    found_rank, found_world = 0, 1
    torch = sys.modules.get("torch")
    distributed = getattr(torch, "distributed", None) if torch is not None else None
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        found_rank, found_world = distributed.get_rank(), distributed.get_world_size()
    elif "WORLD_SIZE" in os.environ or "RANK" in os.environ:
        found_rank = int(os.environ.get("RANK", "0"))
        found_world = int(os.environ.get("WORLD_SIZE", "1"))
    return (found_rank if rank is None else int(rank)), (found_world if world_size is None else int(world_size))


class EpochSampler:
    """One rank's epochs over ``length`` records: the order of each epoch
    (:func:`partition`), where the current one stands, and its state for resuming.

    Iterating yields the indices of the current epoch from the current position
    on, advancing it; :meth:`set_epoch` starts another epoch. ``state_dict()``
    holds the settings, the epoch and the position; ``load_state_dict`` makes the
    next iteration continue from there, yielding exactly what the interrupted one
    would have yielded, or, given the states of every rank of a run, the rest of
    the run's epoch on this sampler's ranks (an elastic resume). Settings are as
    :func:`partition`'s (``categories`` instead of a field name).
    """

    def __init__(
        self,
        length: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        drop_last: bool = False,
        block_size: Optional[int] = None,
        categories: Any = None,
        weights: Union[None, str, Sequence[float]] = None,
        num_samples: Optional[int] = None,
    ):
        self._common(seed, rank, world_size, shuffle, drop_last, block_size, num_samples)
        # The records, categories and weights the sampler had before a state
        # saved with fewer records was loaded: the resumed epoch covers the saved
        # records, every later one all of them again.
        self._grown: Optional[tuple] = None
        self._set_data(_check_int("length", length), categories, weights)

    def _common(self, seed, rank, world_size, shuffle, drop_last, block_size, num_samples) -> None:
        """The settings every sampler of epochs has, and where it stands."""
        rank, world_size = default_rank_and_world_size(rank, world_size)
        self.seed = _check_int("seed", seed)
        self.world_size = _check_int("world_size", world_size)
        self.rank = _check_int("rank", rank)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.block_size = None if block_size is None else _check_int("block_size", block_size)
        self.num_samples = None if num_samples is None else _check_int("num_samples", num_samples)
        self.epoch = 0
        # Entries of the current epoch already yielded.
        self.position = 0
        # Where the current (or next) iteration starts.
        self._start = 0
        self._resume: Optional[int] = None
        # The earlier runs of the current epoch, when a state saved on other
        # ranks was loaded (partition's resumed_from): this epoch is the rest of
        # theirs; every later one is laid out on this sampler's ranks.
        self._resumed_from: list = []

    def _set_data(self, length: int, categories, weights) -> None:
        self.length = length
        self.categories = None if categories is None else category_codes(categories)
        self.weights = _weights(weights, length)
        # Every setting checked as partition checks it, so what cannot work is
        # refused here rather than at the first iteration.
        self._len = self._count()

    def _count(self) -> int:
        """The entries of this rank in the current epoch (checking every setting)."""
        return _rank_len(
            self.length, self.world_size, self.drop_last, self.shuffle, self.block_size,
            self.categories, self.weights, self.num_samples, self.rank, self._resumed_from or None,
        )

    def _order(self, start: int):
        """The current epoch's indices from ``start`` on."""
        return partition(self.length, categories=self.categories, weights=self.weights, **self._part_arguments(start))

    def _part_arguments(self, start: int) -> dict:
        """The settings of this rank's part of the current epoch from ``start``
        on that every sampler of epochs has (:func:`partition`'s and
        :func:`bcd.partition_mix`'s)."""
        return {
            **self._common_settings(),
            "epoch": self.epoch,
            "resumed_from": self._resumed_from or None,
            "start": start,
            "dtype": "uint32" if self.length <= 1 << 32 else "int64",
        }

    def set_length(self, length: int, categories: Any = None, weights: Any = None) -> None:
        """Use ``length`` records from the next epoch on (after a refresh picked
        up new ones), with their categories and weights if the sampler uses them."""
        self._grown = None
        self._set_data(
            _check_int("length", length),
            categories if categories is not None else self.categories,
            weights if weights is not None else self.weights,
        )

    def __len__(self) -> int:
        """The entries of one epoch on this rank (all ranks get the same)."""
        return self._len

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration the start of epoch ``epoch`` (unless a state
        just loaded is for that same epoch: then it resumes there)."""
        epoch = _check_int("epoch", epoch)
        if self._resume is not None and epoch == self.epoch:
            return
        self._resume = None
        self._end_resumed_epoch()
        self.epoch = epoch
        self.position = 0

    def _end_resumed_epoch(self) -> None:
        """After the epoch a loaded state resumed: an epoch begun on other ranks
        ends, and the records appended since a state was saved are sampled again."""
        if self._resumed_from:
            self._resumed_from = []
            self._len = self._count()
        if self._grown is not None:
            grown, self._grown = self._grown, None
            self._set_data(*grown)

    def indices(self, start: Optional[int] = None):
        """The current epoch's indices from ``start`` (default: the current
        position) on, as a NumPy array (``uint32`` below 2**32 records)."""
        start = self.position if start is None else _check_int("start", start)
        return self._order(start)

    def begin(self) -> int:
        """Starts an iteration: from a loaded state's position, else from the
        epoch's start. Returns the position it starts at."""
        if self._resume is not None:
            self.position, self._resume = self._resume, None
        else:
            self._end_resumed_epoch()
            self.position = 0
        self._start = self.position
        return self.position

    def __iter__(self) -> Iterator[int]:
        """Yields this rank's indices of the current epoch, from where a loaded
        state left off (else from the start), counting them in ``position``."""
        return self.iterate()

    def iterate(self, before: Optional[Any] = None) -> Iterator[int]:
        """``iter(self)``, calling ``before(order)`` with the indices the
        iteration yields (a NumPy array) before the first one:
        ``bcd.torch.Sampler`` hands them to a dataset in object storage, whose
        cache then fetches the shards in the order the epoch needs them."""
        start = self.begin()
        order = self.indices(start)
        if before is not None:
            before(order)
        for at in range(0, len(order), _CHUNK):
            for index in order[at:at + _CHUNK].tolist():
                self.position += 1
                yield index

    def _settings(self) -> dict:
        return {
            "length": self.length,
            **self._common_settings(),
            "balanced": self.categories is not None,
            "weights": None if self.weights is None else ("inverse_frequency" if isinstance(self.weights, str) else "per_record"),
        }

    def _common_settings(self) -> dict:
        """The settings a state saves that every sampler of epochs has."""
        return {
            "seed": self.seed,
            "rank": self.rank,
            "world_size": self.world_size,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
            "block_size": self.block_size,
            "num_samples": self.num_samples,
        }

    def state_dict(self, consumed: Optional[int] = None) -> dict:
        """The settings, the epoch and the position (and, in an epoch resumed on
        other ranks, the earlier runs' positions). ``consumed``: the entries the
        training loop has taken since this iteration began, when that is fewer than
        were yielded (a plain DataLoader runs ahead of the loop by its prefetched
        batches: pass ``batches_done * batch_size``). torchdata's
        StatefulDataLoader needs no ``consumed``: it saves the state as of the
        batches it handed out."""
        position = self.position if self._resume is None else self._resume
        if consumed is not None:
            consumed = _check_int("consumed", consumed)
            if self._start + consumed > len(self):
                raise ValueError(f"consumed={consumed} is past the end of the epoch ({len(self) - self._start} entries from {self._start})")
            position = self._start + consumed
        return {
            "format": STATE_FORMAT,
            "epoch": self.epoch,
            "position": position,
            "resumed_from": [list(run) for run in self._resumed_from],
            **self._settings(),
        }

    def load_state_dict(self, state) -> None:
        """Continues from ``state``: the next iteration (``set_epoch`` with the
        same epoch keeps it) yields the rest of that epoch.

        ``state`` is this rank's state (``state_dict()`` of a run on as many
        ranks), or a list of the states of every rank of a run on any number of
        ranks (an elastic resume): this rank then yields its share of what all
        those ranks had not consumed. A state may be given inside what holds it
        (a torchdata StatefulDataLoader's ``state_dict()``). Raises ValueError if
        the state was saved with other settings."""
        reference, runs, position, elastic = resume_point(state, self.world_size, self.rank)
        mine = self._settings()
        ignore = ("seed", "length") + (("rank", "world_size") if elastic else ())
        differ = [
            f"{name}: saved {reference.get(name)!r}, here {value!r}"
            for name, value in mine.items()
            if reference.get(name) != value and name not in ignore
        ]
        self._resumed_from = []
        self._load_length(reference, differ)
        self._resumed_from = runs
        self._len = self._count()
        position = _check_int("position", position)
        if position > len(self):
            raise ValueError(f"position {position} is past the end of the epoch ({len(self)} entries)")
        self.seed = _check_int("seed", reference["seed"])
        self.epoch = _check_int("epoch", reference["epoch"])
        self._resume = position
        self.position = position

    def _load_length(self, state: dict, differ: list) -> None:
        """Takes the record count of a state being loaded (refusing it, with
        ``differ``, if the state was saved with other settings)."""
        saved_length = _check_int("length", state.get("length"))
        if saved_length > self.length:
            differ.append(f"length: saved {saved_length}, here only {self.length} records")
        if differ:
            raise ValueError("the state was saved with other settings: " + "; ".join(differ))
        if saved_length < self.length:
            # Records appended since (datasets only grow): the saved epoch covers
            # the first `saved_length`, as it did when it was saved.
            weights = self.weights if self.weights is None or isinstance(self.weights, str) else self.weights[:saved_length]
            categories = None if self.categories is None else self.categories[:saved_length]
            if self._grown is None:
                self._grown = (self.length, self.categories, self.weights)
            self._set_data(saved_length, categories, weights)

    # The split of a rank's epoch over DataLoader workers (bcd.torch.IterableDataset).

    @staticmethod
    def worker_positions(remaining: int, worker: int, num_workers: int, batch_size: int):
        """Positions (0-based, within the ``remaining`` entries an iteration
        covers) that worker ``worker`` of ``num_workers`` takes: batches of
        ``batch_size`` consecutive entries, batch ``j`` to worker ``j %
        num_workers``, so a loader that takes one batch from each worker in turn
        yields them in order."""
        np = _np()
        batches = -(-remaining // batch_size)
        starts = np.arange(worker, batches, num_workers, dtype=np.int64) * batch_size
        positions = (starts[:, None] + np.arange(batch_size, dtype=np.int64)).ravel()
        return positions[positions < remaining]
