"""PyTorch datasets and sampler over bcd datasets: exact, resumable, reproducible
epochs on 1 to N ranks. Importing this module imports torch (the rest of
``bcd`` never does).

Replacing a dataset class and ``DistributedSampler`` takes two lines::

    dataset = bcd.torch.MapDataset("train.bcd", fields=["label"])
    sampler = bcd.torch.Sampler(dataset, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=8)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for values, labels in loader:   # values: the records' bytes; labels: a tensor
            ...

- :class:`MapDataset`: map-style; ``dataset[i]`` is ``(value, *fields)``; a
  DataLoader fetches each batch with one parallel read (``__getitems__``). With
  ``output="tensor"`` and ``collate_fn=bcd.torch.collate`` a batch travels from
  the worker as one uint8 tensor in shared memory plus offsets (a
  :class:`Batch`), not as pickled values.
- :class:`Sampler`: the epochs of ``bcd.partition`` (shuffle, ``block_size``,
  ``balance_by``, ``weights``/``num_samples``) split exactly over ranks, with
  ``set_epoch`` and ``state_dict``/``load_state_dict`` (torchdata's
  ``StatefulDataLoader`` saves and restores it as of the batches it handed out).
- :class:`IterableDataset`: the same epochs split over rank x DataLoader worker.

Rank and world size default to ``torch.distributed`` when a process group is
initialised, else the ``RANK``/``WORLD_SIZE`` environment variables, else 0/1.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.context
import operator
import os
import warnings
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

import bcd

from .sampling import EpochSampler, category_codes, default_rank_and_world_size, field_codes

__all__ = ["Batch", "IterableDataset", "MapDataset", "Sampler", "collate"]

_OUTPUTS = ("bytes", "tensor")
# Records per read when an IterableDataset yields samples one by one.
_SAMPLE_READ = 64


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
    """

    __slots__ = ("values", "offsets", "fields", "indices")

    def __init__(self, values: torch.Tensor, offsets: torch.Tensor, fields: dict, indices: torch.Tensor):
        self.values = values
        self.offsets = offsets
        self.fields = fields
        self.indices = indices

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
        return (self.value(i), *(_item(column, i) for column in self.fields.values()))

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
        )

    def __repr__(self) -> str:
        return f"bcd.torch.Batch({len(self)} records, {int(self.offsets[-1])} bytes, fields {list(self.fields)})"


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


def _check_output(output: str) -> str:
    if output not in _OUTPUTS:
        raise ValueError(f'output={output!r}: expected "bytes" or "tensor"')
    return output


class MapDataset(torch.utils.data.Dataset):
    """The records of the dataset at ``path`` as a map-style torch dataset.

    ``dataset[i]`` (negative counts from the end) is ``(value, *fields)`` for the
    requested ``fields`` (just ``value`` without fields): the value as ``bytes``,
    or with ``output="tensor"`` as a uint8 tensor; then ``transform(sample)`` if
    given. ``fields`` names fields stored in the dataset (read once per process
    through ``Dataset.fields``), or maps names to per-record sequences for
    values kept elsewhere (``{"label": labels}``).

    A DataLoader fetches a batch with ``__getitems__``: one ``get_batch`` call,
    decoded on all cores without the GIL. With ``output="tensor"`` and no
    ``transform`` it returns a :class:`Batch` (values back to back in one
    uint8 tensor, in shared memory inside a worker): pass
    ``collate_fn=bcd.torch.collate`` to keep it so.

    Pickles as its path and settings: fork and spawn workers reopen the dataset
    through its persisted index. ``refresh=True`` picks up records committed
    since the open at every ``set_epoch`` (and in a worker, when asked for an
    index past the end it knows). ``path`` may be a dataset in object storage
    (``s3://``, ``gs://``, ``az://``), read through the shared local shard
    cache that ``cache_dir`` and ``cache_limit`` set up as for ``bcd.Dataset``:
    every worker on the machine shares it.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike],
        *,
        fields: Union[None, Sequence[str], Mapping[str, Sequence]] = None,
        transform: Optional[Callable[[Any], Any]] = None,
        output: str = "bytes",
        refresh: bool = False,
        cache_dir: Union[None, str, os.PathLike] = None,
        cache_limit: Union[None, int, str] = None,
    ):
        self.path = os.fspath(path)
        self._open = {name: value for name, value in (("cache_dir", cache_dir), ("cache_limit", cache_limit)) if value is not None}
        self.transform = transform
        self.output = _check_output(output)
        self.refresh_each_epoch = bool(refresh)
        if fields is None:
            self._field_names: list[str] = []
            self._given: dict[str, Any] = {}
        elif isinstance(fields, Mapping):
            self._field_names = list(fields)
            self._given = {name: np.asarray(values) for name, values in fields.items()}
        elif isinstance(fields, str):
            raise TypeError("fields= takes a list of names (fields=['label']) or a mapping of names to values")
        else:
            self._field_names = list(fields)
            self._given = {}
        self._dataset = bcd.Dataset(self.path, **self._open)
        self._columns: Optional[dict] = None
        for name, values in self._given.items():
            if len(values) < len(self._dataset):
                raise ValueError(f"fields={{{name!r}: ...}} has {len(values)} values for {len(self._dataset)} records")

    # Pickling: the path and settings; the dataset and columns are reopened.
    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_dataset"] = None
        state["_columns"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._dataset = bcd.Dataset(self.path, **self._open)

    @property
    def dataset(self) -> "bcd.Dataset":
        """The underlying ``bcd.Dataset``."""
        return self._dataset

    @property
    def field_names(self) -> list:
        """The fields each sample carries after its value."""
        return list(self._field_names)

    def __len__(self) -> int:
        return len(self._dataset)

    def refresh(self) -> int:
        """Picks up records committed since the open; returns how many."""
        added = self._dataset.refresh()
        if added:
            self._columns = None
        return added

    def set_epoch(self, epoch: int) -> None:
        """Refreshes, if the dataset was made with ``refresh=True``."""
        if self.refresh_each_epoch:
            self.refresh()

    def column(self, name: str):
        """Field ``name`` for every record: a NumPy array, or a list for values
        NumPy cannot hold as numbers."""
        if self._columns is None:
            self._columns = self._read_columns()
        return self._columns[name]

    def _read_columns(self) -> dict:
        columns = {name: self._given[name] for name in self._field_names if name in self._given}
        stored = [name for name in self._field_names if name not in self._given]
        if stored:
            table = stored_fields(self._dataset, stored)
            for name in stored:
                column = table.column(name)
                try:
                    columns[name] = column.to_numpy()
                except Exception:  # nested or nullable values: Python objects
                    columns[name] = column.to_pylist()
        return columns

    def _fields_at(self, index: int) -> tuple:
        out = []
        for name in self._field_names:
            value = self.column(name)[index]
            out.append(value.item() if isinstance(value, np.generic) else value)
        return tuple(out)

    def _value(self, view) -> Any:
        if self.output == "bytes":
            return bytes(view)
        tensor = torch.empty(len(view), dtype=torch.uint8)
        tensor.numpy()[:] = np.frombuffer(view, dtype=np.uint8)
        return tensor

    def _read(self, read: Callable, *args):
        """Calls ``read``; with ``refresh=True``, an index past the end refreshes
        and tries again (a persistent worker after an append)."""
        try:
            return read(*args)
        except IndexError:
            if not self.refresh_each_epoch or not self.refresh():
                raise
            return read(*args)

    def __getitem__(self, index: int):
        view = self._read(self._dataset.at, index)
        if not self._field_names:
            sample = self._value(view)
        else:
            sample = (self._value(view), *self._fields_at(index))
        return self.transform(sample) if self.transform is not None else sample

    def __getitems__(self, indices: Sequence[int]):
        if self.output == "tensor" and self.transform is None:
            return self._read(self.read_batch, indices)
        values = self._read(self._dataset.get_batch, indices)
        if self._field_names:
            samples = [(self._value(v), *self._fields_at(i)) for v, i in zip(values, indices)]
        else:
            samples = [self._value(v) for v in values]
        if self.transform is not None:
            samples = [self.transform(s) for s in samples]
        return samples

    def read_batch(self, indices: Sequence[int]) -> Batch:
        """The records at ``indices`` as a :class:`Batch` (one parallel read;
        in a DataLoader worker, in shared memory)."""
        shared = torch.utils.data.get_worker_info() is not None
        holder: list = []

        def allocate(size: int):
            tensor = _uint8_buffer(size, shared)
            holder.append(tensor)
            return tensor.numpy()

        index_array = np.asarray(indices, dtype=np.int64)
        offsets = self._dataset.get_batch_into(index_array, allocate)
        values = holder[0]
        fields = {}
        for name in self._field_names:
            column = self.column(name)
            if isinstance(column, np.ndarray) and column.dtype.kind in "biuf":
                fields[name] = torch.from_numpy(np.ascontiguousarray(column[index_array]))
            else:
                fields[name] = [column[i] for i in index_array]
        return Batch(values, torch.from_numpy(offsets), fields, torch.from_numpy(index_array))

    def __repr__(self) -> str:
        return f"bcd.torch.MapDataset({self.path!r}, fields={self._field_names}, output={self.output!r})"


def stored_fields(dataset: "bcd.Dataset", names: Sequence[str]):
    """The stored fields ``names`` of ``dataset`` as a pyarrow Table, one row per
    record; a clear error where this build stores no fields."""
    reader = getattr(dataset, "fields", None)
    if reader is None:
        raise TypeError(
            f"this version of bcd stores no fields, so {list(names)} cannot be read from {dataset.path}; "
            "pass the values instead: fields={'label': labels} or balance_by=labels"
        )
    return reader(list(names))


def _categories(source, balance_by):
    """The categories ``balance_by`` names: a stored field of ``source``'s
    dataset (its codes as ``bcd export --balance-by`` computes them), a
    MapDataset's given field, or the values themselves."""
    if balance_by is None:
        return None
    if isinstance(balance_by, str):
        if isinstance(source, MapDataset) and balance_by in source._given:
            return category_codes(source._given[balance_by][: len(source)])
        dataset = source.dataset if isinstance(source, (MapDataset, IterableDataset)) else source
        if not hasattr(dataset, "path"):
            raise TypeError(f"balance_by={balance_by!r} names a field, which needs a dataset, not a length")
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
    the same in every process and on every machine for the same ``seed``. Each
    rank gets the same number of indices; together they cover every record once
    per epoch (plus the padding, unless ``drop_last``).

    ``state_dict()`` / ``load_state_dict(state)`` resume mid-epoch without
    replaying anything: the resumed iteration yields exactly the rest of the
    interrupted one. torchdata's ``StatefulDataLoader`` saves the state as of the
    batches it handed out; with torch's ``DataLoader``, which prefetches, pass
    what the loop took: ``sampler.state_dict(consumed=batches_done * batch_size)``.
    """

    def __init__(
        self,
        dataset_or_len: Union[int, Any],
        *,
        shuffle: bool = True,
        seed: int = 0,
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
        self._epochs = EpochSampler(
            length,
            shuffle=shuffle,
            seed=seed,
            rank=rank,
            world_size=world_size,
            drop_last=drop_last,
            block_size=block_size,
            categories=_categories(self._source, balance_by),
            weights=weights,
            num_samples=num_samples,
        )

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
        return iter(self._epochs)

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

    def indices(self):
        """The current epoch's indices from the current position, as a NumPy array."""
        return self._epochs.indices()

    def state_dict(self, consumed: Optional[int] = None) -> dict:
        """See the class documentation."""
        return self._epochs.state_dict(consumed)

    def load_state_dict(self, state: dict) -> None:
        """See the class documentation."""
        self._epochs.load_state_dict(state)


class _Announcement:
    """The epoch and record count the main process's ``set_epoch`` chose, in
    shared memory that DataLoader workers, forked or spawned, read at the start
    of each pass: a persistent worker's copy of the dataset is reached no other
    way. One writer (the main process); a sequence number, odd while a write is
    under way, lets a reader take a consistent pair without a lock."""

    def __init__(self) -> None:
        # sequence, epoch, record count
        self._slots = multiprocessing.RawArray(ctypes.c_uint64, 3)

    def __getstate__(self) -> dict:
        # Shared memory travels to a process being started (spawn, forkserver);
        # pickled otherwise, the copy announces and hears nothing.
        spawning = multiprocessing.context.get_spawning_popen() is not None
        return {"_slots": self._slots if spawning else None}

    def publish(self, epoch: int, length: int) -> int:
        """Announces ``(epoch, length)``; returns the announcement's number."""
        slots = self._slots
        if slots is None:
            return 0
        slots[0] += 1
        slots[1], slots[2] = epoch, length
        slots[0] += 1
        return slots[0]

    def read(self) -> Optional[tuple]:
        """``(number, epoch, length)`` of the latest announcement (number 0:
        none yet), or None for a copy without the shared memory."""
        slots = self._slots
        if slots is None:
            return None
        while True:
            number = slots[0]
            if number % 2:
                continue
            epoch, length = slots[1], slots[2]
            if slots[0] == number:
                return number, epoch, length


class IterableDataset(torch.utils.data.IterableDataset):
    """The records of the dataset at ``path`` as an iterable-style torch
    dataset: each epoch (as :class:`Sampler` orders it; same settings) split over
    rank x DataLoader worker, every record exactly once per epoch over all ranks
    and workers. Samples are as :class:`MapDataset`'s (``fields``, ``transform``,
    ``output``).

    ``batch_size``: yield whole batches (use ``DataLoader(batch_size=None)``),
    each read with one parallel call (a :class:`Batch` with ``output="tensor"``
    and no ``transform``; keep it with ``collate_fn=bcd.torch.collate``).
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
    state from ``consumed`` resumes with any number of workers.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike],
        *,
        shuffle: bool = True,
        seed: int = 0,
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
        batch_size: Optional[int] = None,
        refresh: bool = False,
        cache_dir: Union[None, str, os.PathLike] = None,
        cache_limit: Union[None, int, str] = None,
    ):
        self._map = MapDataset(
            path,
            fields=fields,
            transform=transform,
            output=output,
            refresh=refresh,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
        )
        self.batch_size = None if batch_size is None else int(batch_size)
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be at least 1")
        self._balance_by = balance_by
        self._weights = weights
        rank, world_size = _defaults(rank, world_size)
        self._epochs = EpochSampler(
            len(self._map),
            shuffle=shuffle,
            seed=seed,
            rank=rank,
            world_size=world_size,
            drop_last=drop_last,
            block_size=block_size,
            categories=_categories(self._map, balance_by),
            weights=weights,
            num_samples=num_samples,
        )
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
        return self._map.dataset

    @property
    def epoch(self) -> int:
        return self._epochs.epoch

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
            samples = self._map.__getitems__(chunk)
            if isinstance(samples, Batch):
                samples = list(samples)
            for sample in samples:
                self._taken += 1
                yield sample

    def state_dict(self, consumed: Optional[int] = None) -> dict:
        """The epoch and where this worker (or the main process's iteration)
        stands; with ``consumed`` (samples the loop took this pass), a state any
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

    def load_state_dict(self, state: dict) -> None:
        """Resumes from ``state`` at the next iteration (in this worker, or in the
        main process; ``set_epoch`` with the saved epoch keeps it)."""
        if state.get("batch_size") != self.batch_size:
            raise ValueError(f"the state was saved with batch_size={state.get('batch_size')}, here {self.batch_size}")
        self._epochs.load_state_dict({key: value for key, value in state.items() if key not in ("batch_size", "taken", "worker")})
        self._origin = self._epochs.begin()
        self._taken = int(state.get("taken") or 0)
        worker = state.get("worker")
        self._split = tuple(worker) if worker else (0, 1)
        self._pending = True
