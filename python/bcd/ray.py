"""Ray Data and bcd: ``write`` a Ray Dataset into a bcd dataset, ``read`` one as a
Ray Dataset. Importing this module imports Ray; ``import bcd`` does not.

``write`` is built on Ray's ``Datasink``: each write task writes its blocks as a
part dataset under ``PATH/_staging/<job>/`` with the Rust core (Arrow batches go
to Rust through the Arrow C stream interface, no per-row Python), and returns a
small description; ``on_write_complete`` merges the parts of the successful
tasks, in task order, into ``PATH`` in one commit (``bcd.merge``); a failed job
commits nothing (FORMAT.md, "Staging"). Both shapes of the ``Datasink`` API are
supported: ``on_write_complete(write_result)`` since Ray 2.41, and the list of
task results before.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Optional

import pyarrow as pa
import ray
import ray.data
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.datasource import Datasink, Datasource, ReadTask

from . import _staging
from ._bcd import DEFAULT_MAX_SHARD_SIZE, Dataset

__all__ = ["write", "read", "BcdDatasink", "BcdDatasource"]


class BcdDatasink(Datasink):
    """Writes a Ray Dataset into a bcd dataset (see ``write``)."""

    def __init__(self, settings: _staging.WriteSettings) -> None:
        self._settings = settings
        self._job: Optional[_staging.Job] = None
        self.summary: Optional[Dict[str, Any]] = None

    def __getstate__(self) -> Dict[str, Any]:
        # Tasks get the settings; the job (its lock) stays on the driver.
        return {"_settings": self._settings, "_job": None, "summary": None}

    def on_write_start(self, schema: Any = None) -> None:
        self._job = _staging.Job(self._settings)
        self._job.start()

    def write(self, blocks: Iterable[Any], ctx: Any) -> Dict[str, Any]:
        batches = (
            batch
            for block in blocks
            for batch in BlockAccessor.for_block(block).to_arrow().to_batches()
        )
        return self._settings.write_runs(ctx.task_idx, batches)

    def on_write_complete(self, write_result: Any) -> None:
        # Ray >= 2.41 passes a WriteResult; earlier releases the list of returns.
        returns = getattr(write_result, "write_returns", write_result)
        descriptions = [r for r in returns if isinstance(r, dict) and "task" in r]
        assert self._job is not None, "on_write_start was not called"
        self.summary = self._job.commit(descriptions)

    def on_write_failed(self, error: Exception) -> None:
        if self._job is not None:
            self._job.abort()

    def get_name(self) -> str:
        return "bcd"


def write(
    ds: "ray.data.Dataset",
    path: Any,
    *,
    value_column: str = "value",
    key_column: Optional[str] = None,
    fields: Any = None,
    compression: Optional[str] = "lz4",
    max_shard_size: int = DEFAULT_MAX_SHARD_SIZE,
    on_duplicate: str = "error",
    dedup: Optional[str] = None,
    memory_limit: Any = None,
    ray_remote_args: Optional[Dict[str, Any]] = None,
    concurrency: Optional[int] = None,
) -> Dict[str, Any]:
    """Writes the rows of ``ds`` into the bcd dataset ``path`` in one commit:
    values from ``value_column``, keys from ``key_column`` (a keyless dataset
    without it). A missing dataset is created with ``compression`` and
    ``max_shard_size``; an existing one keeps its settings and is appended to.

    Records are in task order, and within a task in block order: the result is
    deterministic for a given partitioning. A task retried after a failure
    contributes its last attempt only; a job that fails commits nothing.
    ``on_duplicate`` applies within a task and across tasks and the existing
    records: ``"error"`` fails the job naming the key, ``"skip"`` keeps the first.
    With ``dedup="content"`` a row whose value repeats an earlier record's
    (within its task, then, in the commit's merge, across tasks and the
    existing records, which need content hashes: ``bcd dedup-index``) is left
    out and listed in the summary's ``content_duplicates``. ``memory_limit``
    (bytes, or a size such as ``"4G"``) bounds the memory of the duplicate
    checks in each task and in the merge.

    The other columns become fields beside the records (``fields``:
    ``"all"``, the default when None, ``"none"``, or a list of names), with
    their Arrow types; the merge unifies the parts' schemas.

    Returns the summary of the commit (``bcd.merge``'s).
    """
    settings = _staging.settings_for(
        path,
        value_column=value_column,
        key_column=key_column,
        fields=fields,
        compression=compression,
        max_shard_size=max_shard_size,
        on_duplicate=on_duplicate,
        dedup=dedup,
        memory_limit=memory_limit,
    )
    sink = BcdDatasink(settings)
    ds.write_datasink(sink, ray_remote_args=ray_remote_args or {}, concurrency=concurrency)
    assert sink.summary is not None
    return sink.summary


class BcdDatasource(Datasource):
    """A bcd dataset as a Ray ``Datasource``: one read task per group of
    shards, each yielding Arrow tables with ``key`` (keyed datasets) and
    ``value`` binary columns."""

    def __init__(self, path: Any, shards_per_task: int = 1, fields: Any = None) -> None:
        if shards_per_task < 1:
            raise ValueError(f"shards_per_task: {shards_per_task}: expected at least 1")
        dataset = Dataset(path)
        self._path = str(dataset.path)
        self._fields = _staging.field_names(dataset, fields)
        self._shards_per_task = shards_per_task
        self._ranges = _shard_ranges(dataset)
        self._bytes = sum(size for _, _, size in self._ranges)

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return self._bytes

    def get_read_tasks(self, parallelism: int, *args: Any, **kwargs: Any) -> List[ReadTask]:
        tasks = []
        groups = [
            self._ranges[i : i + self._shards_per_task]
            for i in range(0, len(self._ranges), self._shards_per_task)
        ]
        for group in groups:
            start, stop = group[0][0], group[-1][1]
            size = sum(s for _, _, s in group)
            metadata = _block_metadata(num_rows=stop - start, size_bytes=size)
            path, fields = self._path, self._fields
            tasks.append(ReadTask(lambda p=path, f=fields, a=start, b=stop: [_read(p, f, a, b)], metadata))
        return tasks

    def get_name(self) -> str:
        return "bcd"


def _shard_ranges(dataset: Dataset) -> List[tuple]:
    """(first record, end record, stored bytes) of each shard with records."""
    return [(a, b, s) for a, b, s in dataset.shard_ranges() if b > a]


def _block_metadata(num_rows: int, size_bytes: int) -> BlockMetadata:
    """A BlockMetadata for any supported Ray release (its fields changed)."""
    fields = {f.name for f in dataclasses.fields(BlockMetadata)}
    values = {"num_rows": num_rows, "size_bytes": size_bytes, "schema": None, "input_files": None, "exec_stats": None}
    return BlockMetadata(**{k: v for k, v in values.items() if k in fields})


def _read(path: str, fields: List[str], start: int, stop: int) -> pa.Table:
    return _staging.read_table(Dataset(path), start, stop, fields)


def read(path: Any, *, fields: Any = None, shards_per_task: int = 1) -> "ray.data.Dataset":
    """A Ray Dataset of the bcd dataset ``path``: columns ``key`` (keyed datasets),
    ``value`` (binary) and the fields stored beside the records (``fields``: all
    of them when None or ``"all"``, ``"none"``, or a list of names), in record
    order, one read task per ``shards_per_task`` shards."""
    return ray.data.read_datasource(BcdDatasource(path, shards_per_task, fields))
