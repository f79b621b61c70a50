"""The sampler: this rank's indices of each epoch of a map-style dataset."""

from __future__ import annotations

import operator
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data


import bcd

from ..sampling import EpochSampler, category_codes, default_rank_and_world_size, field_codes
from .map_dataset import MapDataset, ReadsDataset
from .mix import Mix, prefetch_order


def _categories(source, balance_by):
    """The categories ``balance_by`` names: a stored field of ``source``'s
    dataset (its codes as ``bcd export --balance-by`` computes them, those of
    the source's records when it reads a view), a MapDataset's given field, or
    the values themselves."""
    if balance_by is None:
        return None
    if isinstance(balance_by, str):
        if isinstance(source, MapDataset) and balance_by in source._given:
            return category_codes(source._given[balance_by][: len(source)])
        dataset = source.dataset if isinstance(source, ReadsDataset) else source
        if not hasattr(dataset, "path"):
            raise TypeError(f"balance_by={balance_by!r} names a field, which needs a dataset, not a length")
        if isinstance(source, ReadsDataset) and source.records is not None:
            return field_codes(dataset, balance_by)[source.records]
        if isinstance(dataset, bcd.View):
            return field_codes(dataset.dataset, balance_by)[dataset.indices]
        return field_codes(dataset, balance_by)
    return category_codes(balance_by)


def _agreed_length(length: int) -> int:
    """The smallest of the ranks' lengths when a process group is initialised
    (ranks that refreshed at slightly different moments agree on one epoch), else
    ``length``."""
    distributed = torch.distributed
    if not (distributed.is_available() and distributed.is_initialized()):
        return length
    device = "cuda" if distributed.get_backend() == "nccl" else "cpu"
    value = torch.tensor([length], dtype=torch.int64, device=device)
    distributed.all_reduce(value, op=distributed.ReduceOp.MIN)
    return int(value.item())


def _defaults(rank, world_size):
    return default_rank_and_world_size(rank, world_size)


def _mix_epochs(mix: Mix, rank, world_size, drop_last, **theirs) -> EpochSampler:
    """The epochs of ``mix``, refusing the settings that are the mix's own."""
    given = sorted(name for name, value in theirs.items() if value is not None)
    if given:
        raise TypeError(
            f"{', '.join(f'{name}=' for name in given)} of a mixture's epochs are the mix's own: "
            "pass them to bcd.torch.Mix (weights are the sources' weights)"
        )
    return mix.epochs(rank=rank, world_size=world_size, drop_last=drop_last)


class Sampler(torch.utils.data.Sampler):
    """This rank's indices of each epoch, for a map-style dataset: the epochs of
    ``bcd.partition`` (see it for every setting), split exactly over ranks.

    ``dataset_or_len``: a :class:`MapDataset` (or anything with ``len``), or a
    record count. ``balance_by``: a field name (read from the dataset's stored
    fields, or a :class:`MapDataset`'s given ones) or the categories themselves,
    one per record. ``weights``: per-record weights or ``"inverse_frequency"``
    (1 / the size of the record's ``balance_by`` class), with ``num_samples``
    the total over all ranks.

    Call ``set_epoch(epoch)`` before each epoch: every epoch has its own order,
    the same in every process and on every machine for the same ``seed``. For a
    dataset in object storage, each iteration hands its order to
    ``Dataset.prefetch``: the shard cache fetches the shards in the order the
    epoch first needs them, ahead of the DataLoader's workers. Each
    rank gets the same number of indices; together they cover every record once
    per epoch (plus the padding, unless ``drop_last``).

    ``state_dict()`` / ``load_state_dict(state)`` resume mid-epoch without
    replaying anything: the resumed iteration yields exactly the rest of the
    interrupted one. torchdata's ``StatefulDataLoader`` saves the state as of the
    batches it handed out; with torch's ``DataLoader``, which prefetches, pass
    what the loop took: ``sampler.state_dict(consumed=batches_done * batch_size)``.
    ``load_state_dict`` of the list of every rank's state (or of every rank's
    StatefulDataLoader state) resumes the epoch on any number of ranks: the new
    ranks together yield exactly what the old ones had not consumed.

    Over a :class:`Mix`, the sampler draws the mix's epochs (its weights,
    ``num_samples``, ``seed``, ``shuffle`` and ``block_size``, which are then not
    the sampler's to set): each source its share, interleaved.
    """

    def __init__(
        self,
        dataset_or_len: Union[int, Any],
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
    ):
        if hasattr(dataset_or_len, "__len__"):
            self._source, length = dataset_or_len, len(dataset_or_len)
        else:
            self._source, length = None, operator.index(dataset_or_len)
        self._balance_by = balance_by
        self._weights = weights
        rank, world_size = _defaults(rank, world_size)
        if isinstance(dataset_or_len, Mix):
            self._epochs = _mix_epochs(
                dataset_or_len, rank, world_size, drop_last, shuffle=shuffle, seed=seed, block_size=block_size,
                balance_by=balance_by, weights=weights, num_samples=num_samples,
            )
            self._announce_crops()
            return
        self._epochs = EpochSampler(
            length,
            shuffle=True if shuffle is None else shuffle,
            seed=0 if seed is None else seed,
            rank=rank,
            world_size=world_size,
            drop_last=drop_last,
            block_size=block_size,
            categories=_categories(self._source, balance_by),
            weights=weights,
            num_samples=num_samples,
        )
        self._announce_crops()

    def _announce_crops(self) -> None:
        """Random crops of a MapDataset with ``image=`` or ``audio=`` follow
        this sampler's seed and epoch (a Mix's sources, the mix's seed and
        this epoch)."""
        source = self._source
        if isinstance(source, MapDataset) and source.draws_crops:
            source.use_crops(self._epochs.seed, self._epochs.epoch)
        elif isinstance(source, Mix):
            source.use_crops(self._epochs.epoch)

    @property
    def epoch(self) -> int:
        return self._epochs.epoch

    @property
    def rank(self) -> int:
        return self._epochs.rank

    @property
    def world_size(self) -> int:
        return self._epochs.world_size

    def __iter__(self) -> Iterator[int]:
        return self._epochs.iterate(before=self._prefetch)

    def _prefetch(self, order) -> None:
        """Hands the epoch's order to the dataset (each source of a mix):
        one in object storage fetches its shards in the order the epoch needs
        them (``Dataset.prefetch``); a local one has nothing to do."""
        prefetch_order(self._source, order)

    def __len__(self) -> int:
        return len(self._epochs)

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration epoch ``epoch``. If the dataset refreshes
        (``MapDataset(refresh=True)``), it is refreshed first and the epoch covers
        the records it then has (the smallest count of all ranks, when a process
        group is initialised)."""
        source = self._source
        if isinstance(source, MapDataset) and source.refresh_each_epoch and epoch != self._epochs.epoch:
            source.refresh()
            length = _agreed_length(len(source))
            if length != self._epochs.length:
                categories = _categories(source, self._balance_by)
                weights = self._weights
                if categories is not None:
                    categories = categories[:length]
                if weights is not None and not isinstance(weights, str):
                    weights = np.asarray(weights)[:length]
                self._epochs.set_length(length, categories, weights)
        self._epochs.set_epoch(epoch)
        self._announce_crops()

    def indices(self):
        """The current epoch's indices from the current position, as a NumPy array."""
        return self._epochs.indices()

    def state_dict(self, consumed: Optional[int] = None) -> dict:
        """See the class documentation."""
        return self._epochs.state_dict(consumed)

    def load_state_dict(self, state) -> None:
        """See the class documentation."""
        self._epochs.load_state_dict(state)
        self._announce_crops()
