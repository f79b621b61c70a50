"""bcd.spark on Spark `local[2]` (task failures retried up to 3 times), one
session for the module: round trips keyed and keyless, the reference reading
the result, equality with `bcd ingest` of the same rows, a task that fails on its
first attempt, a job that fails, and two jobs one after the other.

Spark needs Java 17 or newer: JAVA_HOME as set, else the first JDK 17+ under
/usr/lib/jvm. The Python workers run this interpreter (PYSPARK_PYTHON)."""

from __future__ import annotations

import glob
import os
import sys

import pytest


def _java_home() -> str:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    for pattern in ("/usr/lib/jvm/java-17-openjdk*", "/usr/lib/jvm/java-21-openjdk*", "/usr/lib/jvm/*"):
        for home in sorted(glob.glob(pattern)):
            if os.path.exists(os.path.join(home, "bin", "java")):
                return home
    raise RuntimeError("Spark needs Java 17+: install a JDK or set JAVA_HOME")


os.environ["JAVA_HOME"] = _java_home()
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

import bcd  # noqa: E402
import bcd.spark  # noqa: E402
from helpers import read_all, reference_class  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    session = (
        SparkSession.builder.master("local[2,3]")
        .appName("bcd-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    bcd.spark.register(session)
    yield session
    session.stop()


def rows(n: int, tag: str = "img") -> list:
    return [(f"{tag}/{i:05d}.jpg", f"{tag}{i}".encode() * (1 + i % 7)) for i in range(n)]


def frame(spark, items, partitions=3):
    return spark.createDataFrame(items, "id string, image binary").repartition(partitions).sortWithinPartitions("id")


def expected_order(df) -> list:
    """The rows in partition order, as the writer merges them."""
    parts = df.rdd.glom().collect()
    return [(r["id"].encode(), bytes(r["image"])) for part in parts for r in part]


def test_keyed_round_trip_equals_bcd_ingest_and_the_reference_reads_it(spark, tmp_path):
    df = frame(spark, rows(300))
    path = str(tmp_path / "out")
    df.write.format("bcd").option("value_column", "image").option("key_column", "id").option(
        "max_shard_size", "2000"
    ).mode("append").save(path)
    got = read_all(bcd.Dataset(path))
    assert sorted(got) == sorted((k.encode(), v) for k, v in rows(300))
    assert got == expected_order(df)
    assert read_all(reference_class("0.3.0")(path)) == got
    assert not (tmp_path / "out" / "_staging").exists()
    # The same rows through `bcd ingest` of a Parquet file, in the same order.
    pq.write_table(pa.table({"id": [k.decode() for k, _ in got], "image": [v for _, v in got]}), tmp_path / "r.parquet")
    bcd.ingest([tmp_path / "r.parquet"], tmp_path / "ingested", value_column="image", key_column="id")
    assert read_all(bcd.Dataset(tmp_path / "ingested")) == got
    # Read back through Spark.
    back = spark.read.format("bcd").option("shards_per_partition", "4").load(path).collect()
    assert [(bytes(r["key"]), bytes(r["value"])) for r in back] == got


def test_fields_travel_through_spark_and_back(spark, tmp_path):
    items = [(f"img/{i:05d}.jpg", f"img{i}".encode() * (1 + i % 7), i % 3, f"caption {i}") for i in range(200)]
    df = (
        spark.createDataFrame(items, "id string, image binary, label bigint, caption string")
        .repartition(3)
        .sortWithinPartitions("id")
    )
    path = str(tmp_path / "out")
    df.write.format("bcd").option("value_column", "image").option("key_column", "id").mode("append").save(path)
    dataset = bcd.Dataset(path)
    assert dataset.schema.names == ["label", "caption"]
    order = [r for part in df.rdd.glom().collect() for r in part]
    assert read_all(dataset) == [(r["id"].encode(), bytes(r["image"])) for r in order]
    table = dataset.fields()
    assert table.column("label").to_pylist() == [r["label"] for r in order]
    assert table.column("caption").to_pylist() == [r["caption"] for r in order]
    assert dataset.stats()["fields"]["label"]["counts"] == [[0, 67], [1, 67], [2, 66]]
    # Read back with the fields, or only the chosen ones.
    back = spark.read.format("bcd").load(path).collect()
    assert [(r["key"].decode(), r["label"], r["caption"]) for r in back] == [
        (r["id"], r["label"], r["caption"]) for r in order
    ]
    chosen = spark.read.format("bcd").option("fields", "label").load(path)
    assert chosen.columns == ["key", "value", "label"]
    # Only the chosen ones are written.
    df.write.format("bcd").option("value_column", "image").option("key_column", "id").option(
        "fields", "caption"
    ).mode("append").save(str(tmp_path / "captions"))
    assert bcd.Dataset(tmp_path / "captions").schema.names == ["caption"]


def test_keyless_and_two_jobs_append_one_after_the_other(spark, tmp_path):
    path = str(tmp_path / "out")
    first = spark.createDataFrame([(b"a%d" % i,) for i in range(60)], "value binary").coalesce(2)
    second = spark.createDataFrame([(b"b%d" % i,) for i in range(30)], "value binary").coalesce(1)
    first.write.format("bcd").option("compression", "none").mode("append").save(path)
    second.write.format("bcd").mode("append").save(path)
    dataset = bcd.Dataset(path)
    assert not dataset.keyed and dataset.compression is None
    got = read_all(dataset)
    assert got[:60] == [bytes(r["value"]) for part in first.rdd.glom().collect() for r in part]
    assert got[60:] == [b"b%d" % i for i in range(30)]
    assert read_all(reference_class("0.3.0")(path)) == got
    assert [bytes(r["value"]) for r in spark.read.format("bcd").load(path).collect()] == got
    with pytest.raises(Exception, match="appends only"):
        second.write.format("bcd").mode("overwrite").save(path)


def test_a_task_failing_on_its_first_attempt_is_retried_and_each_row_lands_once(spark, tmp_path):
    marker = str(tmp_path / "failed-once")

    def fail_once(batches):
        for batch in batches:
            ids = batch.column("id").to_pylist()
            if "img/00150.jpg" in ids and not os.path.exists(marker):
                open(marker, "w").close()
                raise RuntimeError("first attempt fails")
            yield batch

    df = frame(spark, rows(300)).mapInArrow(fail_once, "id string, image binary")
    path = str(tmp_path / "out")
    df.write.format("bcd").option("value_column", "image").option("key_column", "id").mode("append").save(path)
    assert os.path.exists(marker)
    got = read_all(bcd.Dataset(path))
    assert sorted(got) == sorted((k.encode(), v) for k, v in rows(300))
    assert len(got) == 300
    assert not (tmp_path / "out" / "_staging").exists()
    assert bcd.gc(path, dry_run=True)["files"] == []


def test_a_failing_job_commits_nothing(spark, tmp_path):
    path = str(tmp_path / "out")
    frame(spark, rows(20)).write.format("bcd").option("value_column", "image").option("key_column", "id").mode(
        "append"
    ).save(path)
    before = read_all(bcd.Dataset(path))

    def always_fail(batches):
        for batch in batches:
            if "more/00010.jpg" in batch.column("id").to_pylist():
                raise RuntimeError("bad row")
            yield batch

    bad = frame(spark, rows(40, "more")).mapInArrow(always_fail, "id string, image binary")
    with pytest.raises(Exception, match="bad row"):
        bad.write.format("bcd").option("value_column", "image").option("key_column", "id").mode("append").save(path)
    assert read_all(bcd.Dataset(path)) == before
    assert not (tmp_path / "out" / "_staging").exists()
    # A duplicate key across the job and the target: fails naming it.
    with pytest.raises(Exception, match="duplicate key"):
        frame(spark, rows(25)).write.format("bcd").option("value_column", "image").option("key_column", "id").mode(
            "append"
        ).save(path)
    assert read_all(bcd.Dataset(path)) == before


def test_timestamps_written_in_the_session_time_zone_read_back_through_spark(spark, tmp_path):
    """Issue 20, item 14: Spark writes timestamps labelled with the session time
    zone and refused to read them back (DATA_SOURCE_RETURN_SCHEMA_MISMATCH)."""
    import datetime

    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        when = [datetime.datetime(2026, 1, 1, 12, 0, i) for i in range(5)]
        df = spark.createDataFrame(
            [(f"k{i}", b"v%d" % i, t, [t]) for i, t in enumerate(when)],
            "id string, value binary, taken timestamp, history array<timestamp>",
        ).coalesce(1)
        path = str(tmp_path / "times")
        df.write.format("bcd").option("key_column", "id").mode("append").save(path)
        back = spark.read.format("bcd").load(path).orderBy("key").collect()
        # As Spark shows the rows it wrote (the same instants, in the same zone).
        written = df.orderBy("id").collect()
        assert [r["taken"] for r in back] == [r["taken"] for r in written]
        assert [r["history"] for r in back] == [r["history"] for r in written]
        assert len(back) == 5
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def test_dedup_content_leaves_out_repeated_values_across_partitions(spark, tmp_path):
    items = [(f"img/{i:05d}.jpg", f"pixels {i % 25} ".encode() * 3) for i in range(100)]
    df = frame(spark, items)
    path = str(tmp_path / "out")
    df.write.format("bcd").option("value_column", "image").option("key_column", "id").option(
        "dedup", "content"
    ).option("memory_limit", "1M").mode("append").save(path)
    got = read_all(bcd.Dataset(path))
    # The first occurrence of each value, in partition order.
    seen, expected = set(), []
    for key, value in expected_order(df):
        if value not in seen:
            seen.add(value)
            expected.append((key, value))
    assert got == expected and len(got) == 25
    assert not (tmp_path / "out" / "_staging").exists()
