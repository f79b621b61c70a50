"""The map-style dataset: ``dataset[i]`` is ``(value, *fields)``."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

import bcd

from .batch import Batch, _uint8_buffer

_OUTPUTS = ("bytes", "tensor")


class ReadsDataset:
    """What the torch datasets of this package share: ``dataset`` is the
    ``bcd.Dataset`` they read (a sampler takes a stored field from it), and
    ``records`` the dataset indices of their records in order (None: all of
    them), so a stored field gives one value per sample."""

    @property
    def dataset(self) -> "bcd.Dataset":
        raise NotImplementedError

    @property
    def records(self):
        return None


def _check_output(output: str) -> str:
    if output not in _OUTPUTS:
        raise ValueError(f'output={output!r}: expected "bytes" or "tensor"')
    return output


class MapDataset(torch.utils.data.Dataset, ReadsDataset):
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
    cache that ``cache_dir``, ``cache_limit`` and ``prefetch`` set up as for
    ``bcd.Dataset``: every worker on the machine shares it, and a
    :class:`Sampler` of this dataset has it fetch each epoch's shards in the
    order the epoch needs them.

    ``view="NAME"``: only the records of that view (``bcd view create``), in
    dataset order: ``dataset[i]`` is the view's ``i``-th record, ``len`` the
    view's, ``fields`` and a :class:`Sampler`'s ``balance_by`` the view's
    records' (given values: one per view record). With ``refresh=True`` the
    view is read again at every ``set_epoch`` (after a ``bcd view refresh``).
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
        view: Optional[str] = None,
        prefetch: Optional[int] = None,
    ):
        self.path = os.fspath(path)
        self.view = view
        opening = (("cache_dir", cache_dir), ("cache_limit", cache_limit), ("prefetch", prefetch))
        self._open = {name: value for name, value in opening if value is not None}
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
        self._open_source()
        self._columns: Optional[dict] = None
        for name, values in self._given.items():
            if len(values) < len(self._source):
                raise ValueError(f"fields={{{name!r}: ...}} has {len(values)} values for {len(self._source)} records")

    def _open_source(self) -> None:
        """Opens the dataset, and the view when there is one: what reads go to."""
        self._dataset = bcd.Dataset(self.path, **self._open)
        self._view = None if self.view is None else self._dataset.view(self.view)
        self._source = self._dataset if self._view is None else self._view

    # Pickling: the path and settings; the dataset and columns are reopened.
    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_dataset"] = state["_view"] = state["_source"] = None
        state["_columns"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._open_source()

    @property
    def dataset(self) -> "bcd.Dataset":
        """The underlying ``bcd.Dataset``."""
        return self._dataset

    @property
    def records(self):
        """The dataset indices of the samples (a view's records), or None for
        all of the dataset's."""
        return None if self._view is None else self._view.indices

    @property
    def field_names(self) -> list:
        """The fields each sample carries after its value."""
        return list(self._field_names)

    def __len__(self) -> int:
        return len(self._source)

    def refresh(self) -> int:
        """Picks up records committed since the open (with a view: the view as
        it is now, after a ``bcd view refresh``); returns how many samples were
        added."""
        before = len(self._source)
        added = self._dataset.refresh()
        if self._view is not None:
            self._view = self._source = self._dataset.view(self.view)
            added = len(self._view) - before
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
            table = stored_fields(self._source, stored)
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
        view = self._read(self._source.at, index)
        if not self._field_names:
            sample = self._value(view)
        else:
            sample = (self._value(view), *self._fields_at(index))
        return self.transform(sample) if self.transform is not None else sample

    def __getitems__(self, indices: Sequence[int]):
        if self.output == "tensor" and self.transform is None:
            return self._read(self.read_batch, indices)
        values = self._read(self._source.get_batch, indices)
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
        offsets = self._source.get_batch_into(index_array, allocate)
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
        view = "" if self.view is None else f", view={self.view!r}"
        return f"bcd.torch.MapDataset({self.path!r}{view}, fields={self._field_names}, output={self.output!r})"


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
