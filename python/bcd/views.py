"""Views: a read-only dataset of some records of a :class:`bcd.Dataset`.

``ds.view("cats")`` opens a view made by ``bcd view create`` or
``ds.create_view``; ``ds.select(indices)`` or ``ds.select(where="...")`` makes
one that is not persisted. A view reads like a dataset of its records, in
dataset order: ``len``, ``at(i)`` (the view's ``i``-th record), ``key_at``,
``view[key]`` (a key of one of its records), ``key in view``, ``get_batch``,
``get_batch_into``, ``get_images_into``, ``sample``, ``fields()`` and
``stats()``. Its records are a NumPy array (``indices``) over the mapped view
file: 4 bytes per record, no copy. It pickles as the dataset and the view's
name (or its indices), so DataLoader workers reopen it.

NumPy is imported when a view is made, not when ``bcd`` is.
"""

from __future__ import annotations

import json
import operator
from typing import Any, Callable, Iterable, Optional, Sequence

__all__ = ["View"]

# A view holding fewer than one record in this many of its dataset's reads its
# batches with ``read_ahead=True``: its values are scattered sparsely over the
# files, where a page fault reads 128 KiB around each one, one at a time (a cold
# epoch over a 1% view of 2 KB values ran 10x faster with the read-ahead; over
# 12% or more of them, the fault's own read-around is as fast or faster).
SPARSE_VIEW = 16


class View:
    """The records of a view of ``dataset``, in dataset order (made by
    ``Dataset.view``, ``create_view``, ``refresh_view`` and ``select``)."""

    def __init__(
        self,
        dataset,
        indices,
        width: int = 8,
        name: Optional[str] = None,
        expression: Optional[str] = None,
        evaluated_over: Optional[int] = None,
    ):
        import numpy as np

        self._dataset = dataset
        if isinstance(indices, memoryview):
            indices = np.frombuffer(indices, dtype="<u4" if width == 4 else "<u8")
        else:
            indices = np.ascontiguousarray(indices, dtype=np.uint64)
            indices.flags.writeable = False
        self._indices = indices
        self._name = name
        self._expression = expression
        self._evaluated_over = len(dataset) if evaluated_over is None else int(evaluated_over)
        self._read_ahead = True if len(indices) * SPARSE_VIEW < len(dataset) else None

    @property
    def dataset(self):
        """The ``bcd.Dataset`` the records are read from."""
        return self._dataset

    @property
    def name(self) -> Optional[str]:
        """The view's name (None for one made by ``select``)."""
        return self._name

    @property
    def expression(self) -> Optional[str]:
        """The expression that chose the records (None for indices)."""
        return self._expression

    @property
    def evaluated_over(self) -> int:
        """Records of the dataset the view was evaluated over."""
        return self._evaluated_over

    @property
    def indices(self):
        """The records' indices in the dataset, increasing: a read-only NumPy
        array (uint32, or uint64 past 2**32 records)."""
        return self._indices

    @property
    def path(self):
        return self._dataset.path

    @property
    def keyed(self) -> bool:
        return self._dataset.keyed

    @property
    def compression(self):
        return self._dataset.compression

    def __len__(self) -> int:
        return len(self._indices)

    def _record(self, index) -> int:
        """The dataset index of the view's record ``index`` (negative counts
        from the end)."""
        index = operator.index(index)
        n = len(self._indices)
        at = index + n if index < 0 else index
        if not 0 <= at < n:
            raise IndexError(f"index {index} out of range for a view of {n} records")
        return int(self._indices[at])

    def _records(self, indices):
        import numpy as np

        positions = np.asarray(indices if not isinstance(indices, range) else list(indices))
        if positions.ndim != 1:
            raise ValueError(f"indices must be one-dimensional, not of shape {positions.shape}")
        if positions.size == 0:
            return np.zeros(0, dtype=np.int64)
        if positions.dtype.kind not in "iu":
            positions = np.array([operator.index(i) for i in positions.tolist()], dtype=np.int64)
        n = len(self._indices)
        low, high = int(positions.min()), int(positions.max())
        if low < -n or high >= n:
            bad = low if low < -n else high
            raise IndexError(f"index {bad} out of range for a view of {n} records")
        return self._indices[positions].astype(np.int64)

    def at(self, index):
        """The value of the view's record ``index``, as ``Dataset.at``."""
        return self._dataset.at(self._record(index))

    def key_at(self, index):
        """The key of the view's record ``index``, as ``Dataset.key_at``."""
        return self._dataset.key_at(self._record(index))

    def sample(self, index):
        """The view's record ``index`` as a dict, as ``Dataset.sample``."""
        return self._dataset.sample(self._record(index))

    def position(self, key) -> Optional[int]:
        """The view position of the record holding ``key``, or None."""
        import numpy as np

        index = self._dataset._position(key)
        if index is None:
            return None
        at = int(np.searchsorted(self._indices, index))
        if at < len(self._indices) and int(self._indices[at]) == index:
            return at
        return None

    def __getitem__(self, key):
        """The value of the record holding ``key``; KeyError unless it is one
        of the view's."""
        if self.position(key) is None:
            raise KeyError(bytes(key) if isinstance(key, (bytes, bytearray, memoryview)) else key)
        return self._dataset[key]

    def __contains__(self, key) -> bool:
        if not self._dataset.keyed or not isinstance(key, (bytes, bytearray, memoryview)):
            return False
        return self.position(key) is not None

    def get_batch(self, indices: Iterable[int], *, positional: bool = False):
        """The values of the view's records at ``indices``, as
        ``Dataset.get_batch`` reads them (in parallel), every value's pages asked
        for at once first when the view holds under 1/16 of the dataset's
        records (``read_ahead=True``); ``positional`` is as there."""
        return self._dataset.get_batch(self._records(indices), read_ahead=self._read_ahead, positional=positional)

    def get_batch_into(self, indices, allocate: Callable[[int], Any], *, positional: Optional[bool] = None):
        """As ``Dataset.get_batch_into``, for the view's records at ``indices``
        (read ahead as ``get_batch`` says).

        ``positional=None`` reads a sparse view's values with positional reads
        of the shard files, mapping nothing, however often they are read, and
        a dense view's through the mappings. Read again and again (a
        persistent DataLoader worker), a sparse view's batch through mappings
        already in place costs about 1 us a value less, but the pass that maps
        them costs about 3 us a value more (each fault maps the large folio
        around a value, for one value), and the pages count in the process's
        memory and are unmapped at its exit: BENCHMARKS.md, session 39."""
        if positional is None and self._read_ahead:
            positional = True
        return self._dataset.get_batch_into(self._records(indices), allocate, read_ahead=self._read_ahead, positional=positional)

    def get_images_into(self, indices, out, options, *, seed: int = 0, epoch: int = 0, positional: bool = False):
        """As ``Dataset.get_images_into``, for the view's records at
        ``indices``: each random crop is drawn for the dataset record (the key
        is ``(seed, epoch, dataset index)``), so a record gets the same crop
        through any view; failures are reported by position in ``indices``."""
        return self._dataset.get_images_into(self._records(indices), out, options, seed=seed, epoch=epoch, positional=positional)

    def get_audio_into(self, indices, out, options, *, seed: int = 0, epoch: int = 0, positional: bool = False):
        """As ``Dataset.get_audio_into``, for the view's records at
        ``indices``: each random crop is drawn for the dataset record, so a
        record gets the same crop through any view; failures are reported by
        position in ``indices``."""
        return self._dataset.get_audio_into(self._records(indices), out, options, seed=seed, epoch=epoch, positional=positional)

    def fields(self, columns: Optional[Sequence[str]] = None):
        """The fields of the view's records, in order, as a ``pyarrow.Table``."""
        import pyarrow as pa

        table = self._dataset.fields(columns)
        return table.take(pa.array(self._indices))

    def stats(self) -> dict:
        """Statistics of the view's records (sizes, and per field nulls, min/max,
        distinct values, label counts), computed from their sizes and fields:
        the report ``bcd stats --view`` prints."""
        return json.loads(self._dataset._records_stats(self._indices))

    def __iter__(self):
        for at in range(len(self._indices)):
            yield self._dataset.at(int(self._indices[at]))

    def __reduce__(self):
        if self._name is not None:
            return (_reopen, (self._dataset, self._name))
        return (View, (self._dataset, self._indices.astype("uint64"), 8, None, self._expression, self._evaluated_over))

    def __repr__(self) -> str:
        what = f"{self._name!r}" if self._name is not None else "unnamed"
        return f"bcd.View({what} of {self._dataset!r}, {len(self)} of {self._evaluated_over} records)"


def _reopen(dataset, name: str) -> View:
    """A named view, opened again (in a process it was pickled to)."""
    return dataset.view(name)
