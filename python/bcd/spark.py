"""Spark and bcd: a Python data source (Spark 4's ``pyspark.sql.datasource``)
named ``bcd``, registered by ``register(spark)``::

    bcd.spark.register(spark)
    df.write.format("bcd").option("value_column", "image").option("key_column", "id") \\
        .mode("append").save("train.bcd")
    spark.read.format("bcd").load("train.bcd")   # columns key (keyed), value

Importing this module imports PySpark; ``import bcd`` does not.

Writing follows the part/commit protocol of ``bcd.ray`` (FORMAT.md, "Staging"):
each task attempt writes its Arrow batches as a part under
``PATH/_staging/<job>/`` with the Rust core, the driver's ``commit`` merges the
parts Spark reports as committed, in partition order, in one commit, and
``abort`` removes them. Spark runs a data source's driver-side methods in
short-lived Python workers, so no process holds a Spark job's staging lock:
run ``bcd gc --older-than`` with a duration longer than your jobs.

Options: ``value_column`` (default ``value``), ``key_column`` (none: keyless),
``compression`` (``lz4`` or ``none``), ``max_shard_size`` (bytes),
``on_duplicate`` (``error`` or ``skip``), ``dedup`` (``content``: repeated values
left out, within each task's part and across parts in the commit's merge),
``memory_limit`` (the duplicate checks' memory: bytes or a size such as ``4G``),
and for reading ``shards_per_partition`` (default 1). Only ``append`` (and ``errorifexists`` / ``ignore`` on a new path)
is supported: a bcd dataset cannot be overwritten in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StructField, StructType

from . import _staging
from ._bcd import DEFAULT_MAX_SHARD_SIZE, Dataset

__all__ = ["register", "BcdDataSource"]


def register(spark: Any) -> None:
    """Registers the ``bcd`` format with the SparkSession ``spark``."""
    spark.dataSource.register(BcdDataSource)


@dataclass
class PartMessage(WriterCommitMessage):
    """What a task attempt reports: its part's description."""

    description: Dict[str, Any]


class BcdDataSource(DataSource):
    """The ``bcd`` format."""

    @classmethod
    def name(cls) -> str:
        return "bcd"

    def _path(self) -> str:
        path = self.options.get("path")
        if not path:
            raise ValueError("the bcd format needs a path: .save(path) or .load(path)")
        return path

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        dataset = Dataset(self._path())
        fields = [StructField("value", BinaryType())]
        if dataset.keyed:
            fields.insert(0, StructField("key", BinaryType()))
        names = _staging.field_names(dataset, self.options.get("fields"))
        if names:
            arrow = dataset.fields(names).schema
            fields.extend(from_arrow_schema(pa.schema([_in_utc(f) for f in arrow])).fields)
        return StructType(fields)

    def reader(self, schema: StructType) -> "DataSourceReader":
        return BcdReader(
            self._path(),
            int(self.options.get("shards_per_partition", "1")),
            self.options.get("fields"),
        )

    def writer(self, schema: StructType, overwrite: bool) -> "BcdWriter":
        if overwrite:
            raise ValueError(
                "the bcd format appends only (mode 'append'): a dataset is never "
                "overwritten in place; write a new path instead"
            )
        max_shard_size = self.options.get("max_shard_size")
        settings = _staging.settings_for(
            self._path(),
            value_column=self.options.get("value_column", "value"),
            key_column=self.options.get("key_column"),
            fields=self.options.get("fields"),
            compression=self.options.get("compression", "lz4"),
            max_shard_size=int(max_shard_size) if max_shard_size else DEFAULT_MAX_SHARD_SIZE,
            on_duplicate=self.options.get("on_duplicate", "error"),
            dedup=self.options.get("dedup"),
            memory_limit=self.options.get("memory_limit"),
        )
        _staging.Job(settings).start(lock=False)
        return BcdWriter(settings)


class BcdWriter(DataSourceArrowWriter):
    """Each task attempt writes one part; the driver merges them."""

    def __init__(self, settings: _staging.WriteSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PartMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        first = next(iterator, None)
        if first is None:
            reader = pa.RecordBatchReader.from_batches(pa.schema([]), [])
        else:

            def batches() -> Iterator[pa.RecordBatch]:
                yield first
                yield from iterator

            reader = pa.RecordBatchReader.from_batches(first.schema, batches())
        return PartMessage(self.settings.write_part(task, reader))

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        descriptions = [m.description for m in messages if isinstance(m, PartMessage)]
        _staging.Job(self.settings).commit(descriptions)

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        _staging.Job(self.settings).abort()


class BcdReader(DataSourceReader):
    """One partition per ``shards_per_partition`` shards, read as Arrow batches."""

    def __init__(self, path: str, shards_per_partition: int, fields: Any = None) -> None:
        if shards_per_partition < 1:
            raise ValueError(
                f"shards_per_partition: {shards_per_partition}: expected at least 1"
            )
        self.path = path
        self.shards_per_partition = shards_per_partition
        self.fields = _staging.field_names(Dataset(path), fields)

    def partitions(self) -> Sequence[InputPartition]:
        ranges = [(a, b) for a, b, _ in Dataset(self.path).shard_ranges() if b > a]
        step = self.shards_per_partition
        groups = [ranges[i : i + step] for i in range(0, len(ranges), step)]
        return [InputPartition((g[0][0], g[-1][1])) for g in groups] or [InputPartition((0, 0))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        start, stop = partition.value
        dataset = Dataset(self.path)
        for chunk in range(start, stop, 4096):
            table = _staging.read_table(dataset, chunk, min(stop, chunk + 4096), self.fields)
            schema = pa.schema([_in_utc(f) for f in table.schema], metadata=table.schema.metadata)
            yield from table.cast(schema).to_batches()


def _in_utc(field: pa.Field) -> pa.Field:
    """``field`` with every zoned timestamp in it (nested too) labelled UTC: Spark
    writes timestamps in the session's time zone and reads a data source's only
    as UTC. The instants stay the same; only the label changes."""
    return field.with_type(_type_in_utc(field.type))


def _type_in_utc(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t):
        return pa.timestamp(t.unit, "UTC") if t.tz is not None else t
    if pa.types.is_struct(t):
        return pa.struct([_in_utc(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_large_list(t):
        return pa.large_list(_in_utc(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_in_utc(t.value_field), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(_in_utc(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(_in_utc(t.key_field), _in_utc(t.item_field), t.keys_sorted)
    return t
