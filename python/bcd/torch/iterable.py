"""The iterable-style dataset: each epoch split over rank x DataLoader worker."""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

import bcd

from .._states import is_state, rank_state
from ..sampling import EpochSampler
from .announcement import Announcement as _Announcement
from .batch import AudioBatch, Batch, ImageBatch
from .map_dataset import MapDataset, ReadsDataset
from .mix import Mix, prefetch_order
from .sampler import _agreed_length, _categories, _defaults, _mix_epochs

# Records per read when an IterableDataset yields samples one by one.
_SAMPLE_READ = 64


class IterableDataset(torch.utils.data.IterableDataset, ReadsDataset):
    """The records of the dataset at ``path`` as an iterable-style torch
    dataset: each epoch (as :class:`Sampler` orders it; same settings) split over
    rank x DataLoader worker, every record exactly once per epoch over all ranks
    and workers. Samples are as :class:`MapDataset`'s (``fields``, ``transform``,
    ``output``, ``image=`` and ``audio=`` decoded in Rust a read at a time, with
    ``bad_images`` and ``bad_audio``). The random crops of ``image=`` and
    ``audio=`` come from ``(seed, epoch, record)`` with this dataset's seed and
    the epoch of each pass, as a :class:`Sampler`'s over a :class:`MapDataset`
    do, so the same records get the same crops from either.

    ``batch_size``: yield whole batches (use ``DataLoader(batch_size=None)``),
    each read with one parallel call (without a ``transform``, a :class:`Batch`
    in shared memory, which ``collate_fn=bcd.torch.collate`` keeps whole with
    ``output="tensor"`` and collates as torch's default collate otherwise).
    Workers take the rank's epoch by batches of ``batch_size`` (1 without it) in
    turn, so a loader that batches the same size yields the epoch in order.

    ``set_epoch(epoch)`` before each pass, as with a sampler. Persistent
    workers (``persistent_workers=True``) take the epoch, and with
    ``refresh=True`` the record count, that the main process's ``set_epoch``
    chose (through shared memory); without a ``set_epoch`` each advances its
    epoch by one per pass and keeps its record count (with ``refresh=True`` it
    warns: call ``set_epoch`` to pick up appended records).

    ``state_dict()`` / ``load_state_dict()``: in each worker (torchdata's
    ``StatefulDataLoader`` saves and restores them per worker: resume with the
    same number of workers), or in the main process with ``num_workers=0``. With
    torch's ``DataLoader`` and workers, pass what the loop took:
    ``dataset.state_dict(consumed=samples_taken)``, which needs the epoch to
    arrive in order (``batch_size`` equal to the loader's, or one worker); a
    state from ``consumed`` resumes with any number of workers. So does a
    StatefulDataLoader's whole state loaded into the dataset (not the loader):
    ``dataset.load_state_dict(loader.state_dict())`` joins its workers' states
    into the rank's position. The list of every rank's state (either kind)
    resumes the epoch on any number of ranks. ``consumed`` counts records: with
    ``bad_images`` or ``bad_audio="skip"`` a batch may hold fewer samples than
    records, so pass the batches taken times ``batch_size`` (each of this
    dataset's batches covers ``batch_size`` records, skipped ones included), or
    use the workers' states, which know.

    ``view="NAME"``: only the records of that view, as :class:`MapDataset`'s.

    ``path`` may be a :class:`Mix` instead: the epochs are then the mix's (its
    weights, ``num_samples``, ``seed``, ``shuffle`` and ``block_size``), and the
    samples ``(source, sample)`` as the mix gives them (``fields``,
    ``transform``, ``output``, ``refresh``, ``view`` and the cache belong to its
    sources).
    """

    def __init__(
        self,
        path: Union[str, os.PathLike, Mix],
        *,
        shuffle: Optional[bool] = None,
        seed: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        drop_last: bool = False,
        block_size: Optional[int] = None,
        balance_by: Any = None,
        weights: Union[None, str, Sequence[float]] = None,
        num_samples: Optional[int] = None,
        fields: Union[None, Sequence[str], Mapping[str, Sequence]] = None,
        transform: Optional[Callable[[Any], Any]] = None,
        output: str = "bytes",
        image: Optional["bcd.ImageOptions"] = None,
        bad_images: str = "raise",
        audio: Optional["bcd.AudioOptions"] = None,
        bad_audio: str = "raise",
        batch_size: Optional[int] = None,
        refresh: bool = False,
        cache_dir: Union[None, str, os.PathLike] = None,
        cache_limit: Union[None, int, str] = None,
        view: Optional[str] = None,
        prefetch: Optional[int] = None,
        positional: Optional[bool] = None,
    ):
        self.batch_size = None if batch_size is None else int(batch_size)
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be at least 1")
        self._balance_by = balance_by
        self._weights = weights
        rank, world_size = _defaults(rank, world_size)
        if isinstance(path, Mix):
            theirs = dict(fields=fields, transform=transform, cache_dir=cache_dir, cache_limit=cache_limit,
                          view=view, prefetch=prefetch, positional=positional, image=image, audio=audio)
            theirs.update(output=None if output == "bytes" else output, refresh=refresh or None,
                          bad_images=None if bad_images == "raise" else bad_images,
                          bad_audio=None if bad_audio == "raise" else bad_audio)
            given = sorted(name for name, value in theirs.items() if value is not None)
            if given:
                raise TypeError(f"{', '.join(f'{name}=' for name in given)} belong to the mix's sources, not to an IterableDataset over it")
            self._map = path
            self._epochs = _mix_epochs(
                path, rank, world_size, drop_last, shuffle=shuffle, seed=seed, block_size=block_size,
                balance_by=balance_by, weights=weights, num_samples=num_samples,
            )
        else:
            self._map = MapDataset(
                path,
                fields=fields,
                transform=transform,
                output=output,
                image=image,
                bad_images=bad_images,
                audio=audio,
                bad_audio=bad_audio,
                refresh=refresh,
                cache_dir=cache_dir,
                cache_limit=cache_limit,
                view=view,
                prefetch=prefetch,
                positional=positional,
            )
            self._epochs = self._plain_epochs(shuffle, seed, rank, world_size, drop_last, block_size, num_samples)
        self._init_state()

    def _plain_epochs(self, shuffle, seed, rank, world_size, drop_last, block_size, num_samples) -> EpochSampler:
        return EpochSampler(
            len(self._map),
            shuffle=True if shuffle is None else shuffle,
            seed=0 if seed is None else seed,
            rank=rank,
            world_size=world_size,
            drop_last=drop_last,
            block_size=block_size,
            categories=_categories(self._map, self._balance_by),
            weights=self._weights,
            num_samples=num_samples,
        )

    def _init_state(self) -> None:
        # The main process's set_epoch, for persistent workers; the number of the
        # announcement this copy follows.
        self._announcement = _Announcement()
        self._heard = 0
        self._warned = False
        # Where this object's split starts, and what it has yielded of it.
        self._origin = 0
        self._taken = 0
        self._split: tuple = (0, 1)
        self._pending = False
        self._iterated = False

    @property
    def dataset(self) -> "bcd.Dataset":
        if isinstance(self._map, Mix):
            raise TypeError("an IterableDataset over a Mix reads several datasets: see its mix's sources")
        return self._map.dataset

    @property
    def records(self):
        return self._map.records

    @property
    def epoch(self) -> int:
        return self._epochs.epoch

    @property
    def skipped(self) -> int:
        """Images or clips left out because they did not decode
        (``bad_images="skip"``, ``bad_audio="skip"``), over this process and its
        DataLoader workers."""
        if isinstance(self._map, Mix):
            raise TypeError("an IterableDataset over a Mix: see its sources' skipped")
        return self._map.skipped

    def __len__(self) -> int:
        """Samples (or with ``batch_size``, batches) of this rank per epoch."""
        samples = len(self._epochs)
        return samples if self.batch_size is None else -(-samples // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Makes the next pass epoch ``epoch`` (after a refresh, with
        ``refresh=True``); persistent workers follow it at their next pass."""
        if self._map.refresh_each_epoch and epoch != self._epochs.epoch:
            self._map.refresh()
            self._use_length(_agreed_length(len(self._map)))
        if torch.utils.data.get_worker_info() is None:
            self._heard = self._announcement.publish(epoch, self._epochs.length)
            if isinstance(self._map, Mix):
                self._map.use_crops(epoch)
        if self._pending and epoch == self._epochs.epoch:
            return
        self._pending = False
        self._epochs.set_epoch(epoch)
        self._origin = self._taken = 0
        self._iterated = False

    def _use_length(self, length: int) -> None:
        """Makes the epochs cover the first ``length`` records (refreshing this
        copy's dataset if it has fewer)."""
        if length > len(self._map):
            self._map.refresh()
        if length != self._epochs.length:
            categories = _categories(self._map, self._balance_by)
            weights = self._weights
            if categories is not None:
                categories = categories[:length]
            if weights is not None and not isinstance(weights, str):
                weights = np.asarray(weights)[:length]
            self._epochs.set_length(length, categories, weights)

    def _next_pass(self) -> None:
        """A persistent worker's next pass: the epoch (and record count) the
        main process announced since the last one, else the next epoch."""
        heard = self._announcement.read()
        if heard is not None and heard[0] != self._heard:
            self._heard, epoch, length = heard
            if self._map.refresh_each_epoch:
                self._use_length(length)
            self._epochs.set_epoch(epoch)
            return
        if self._map.refresh_each_epoch and not self._warned:
            self._warned = True
            warnings.warn(
                "bcd.torch.IterableDataset(refresh=True) in a persistent DataLoader worker: "
                "call dataset.set_epoch(epoch) in the main process before each epoch, "
                "or the workers never see the records appended since they started",
                RuntimeWarning,
                stacklevel=2,
            )
        self._epochs.set_epoch(self._epochs.epoch + 1)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        split = (info.id, info.num_workers) if info is not None else (0, 1)
        if self._pending:
            self._pending = False
            if self._split != split and self._taken:
                raise ValueError(
                    f"this state was saved by worker {self._split[0]} of {self._split[1]}; "
                    f"it resumes only in the same worker of as many workers"
                )
        else:
            if self._iterated and info is not None:
                # A persistent worker's next pass: set_epoch reaches it only
                # through the announcement.
                self._next_pass()
            self._origin = 0
            self._taken = 0
        self._iterated = True
        self._split = split
        return self._generate(split)

    def _generate(self, split):
        worker, workers = split
        block = self.batch_size or 1
        order = self._epochs.indices(self._origin)
        mine = order[EpochSampler.worker_positions(len(order), worker, workers, block)]
        mine = mine[self._taken:]
        # In object storage: this worker's shards, fetched in the order it needs them.
        prefetch_order(self._map, mine)
        # This pass's epoch is known here, in every worker (persistent ones
        # included): the crops are drawn from it, not from an announcement.
        if isinstance(self._map, Mix):
            self._map._use_crops_here(self._epochs.epoch)
        elif self._map.draws_crops:
            self._map._crops_here = (self._epochs.seed, self._epochs.epoch)
        if self.batch_size is not None:
            # self._taken counts whole batches' samples (the last may be short).
            for at in range(0, len(mine), self.batch_size):
                chunk = mine[at:at + self.batch_size].astype(np.int64)
                batch = self._map.__getitems__(chunk)
                self._taken += len(chunk)
                yield batch
            return
        for at in range(0, len(mine), _SAMPLE_READ):
            chunk = mine[at:at + _SAMPLE_READ].astype(np.int64)
            samples, kept = self._map._samples_kept(chunk)
            # Where in the chunk each sample's record is (records skipped
            # because they did not decode give none).
            positions = None if kept is None else np.flatnonzero(kept).tolist()
            if isinstance(samples, (Batch, ImageBatch, AudioBatch)):
                samples = list(samples)
            start = self._taken
            for k, sample in enumerate(samples):
                # The records taken: through this sample's, so that a state
                # saved now resumes after it, past the records skipped before it.
                self._taken = start + (k if positions is None else positions[k]) + 1
                yield sample
            self._taken = start + len(chunk)

    def state_dict(self, consumed: Optional[int] = None) -> dict:
        """The epoch and where this worker (or the main process's iteration)
        stands; with ``consumed`` (records the loop took this pass: samples,
        and the skipped images or clips among them), a state any
        number of workers resume from."""
        state = self._epochs.state_dict()
        state["batch_size"] = self.batch_size
        if consumed is not None:
            if consumed < 0 or self._origin + consumed > len(self._epochs):
                raise ValueError(f"consumed={consumed} is past the end of the epoch")
            state.update(position=self._origin + consumed, taken=0, worker=None)
        else:
            state.update(position=self._origin, taken=self._taken, worker=list(self._split))
        return state

    def load_state_dict(self, state) -> None:
        """Resumes from ``state`` at the next iteration (in this worker, or in the
        main process; ``set_epoch`` with the saved epoch keeps it). ``state`` is
        this dataset's state (a worker's, or one with ``consumed``), a
        StatefulDataLoader's whole state (its workers' states joined: resumes
        with any number of workers), or a list of every rank's (either kind: the
        epoch resumed on this dataset's ranks)."""
        if isinstance(state, dict) and is_state(state):
            # One worker's state (torchdata restores each worker so), or one with
            # `consumed`.
            ranks, taken, worker = [state], int(state.get("taken") or 0), state.get("worker")
        else:
            ranks = [rank_state(one) for one in (state if isinstance(state, (list, tuple)) else [state])]
            taken, worker = 0, None
        for one in ranks:
            if one.get("batch_size") != self.batch_size:
                raise ValueError(f"the state was saved with batch_size={one.get('batch_size')}, here {self.batch_size}")
        plain = [{key: value for key, value in one.items() if key not in ("batch_size", "taken", "worker")} for one in ranks]
        self._epochs.load_state_dict(plain if len(plain) > 1 or isinstance(state, (list, tuple)) else plain[0])
        self._origin = self._epochs.begin()
        self._taken = taken
        self._split = tuple(worker) if worker else (0, 1)
        self._pending = True
