"""bcd.ray on a local Ray (2 CPUs, no dashboard, no usage stats), one session for
the module: round trips keyed and keyless, the reference reading the result,
equality with `bcd ingest` of the same rows, a task that dies on its first
attempt, a job that fails, two jobs one after the other, and a driver killed
before its commit (its staging removed by bcd.gc)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import ray  # noqa: E402

import bcd  # noqa: E402
import bcd._staging  # noqa: E402
import bcd.ray  # noqa: E402
from helpers import read_all, reference_class  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def rows(n: int, tag: str = "img") -> list:
    return [{"id": f"{tag}/{i:05d}.jpg", "image": (f"{tag}{i}".encode() * (1 + i % 7))} for i in range(n)]


def as_records(items: list) -> list:
    return [(r["id"].encode(), r["image"]) for r in items]


def test_keyed_round_trip_equals_bcd_ingest_and_the_reference_reads_it(tmp_path):
    items = rows(400)
    ds = ray.data.from_items(items, override_num_blocks=4)
    summary = bcd.ray.write(ds, tmp_path / "out", value_column="image", key_column="id", max_shard_size=2000)
    assert summary["parts"] == 4 and summary["records"] == 400
    got = read_all(bcd.Dataset(tmp_path / "out"))
    # Records in task order: the blocks' order here.
    assert got == as_records(items)
    # The same rows through `bcd ingest` (Parquet), and through the reference.
    pq.write_table(pa.Table.from_pylist(items), tmp_path / "rows.parquet")
    bcd.ingest([tmp_path / "rows.parquet"], tmp_path / "ingested", value_column="image", key_column="id")
    assert read_all(bcd.Dataset(tmp_path / "ingested")) == got
    assert read_all(reference_class("0.3.0")(tmp_path / "out")) == got
    assert not (tmp_path / "out" / "_staging").exists()
    # And back as a Ray Dataset.
    back = bcd.ray.read(tmp_path / "out", shards_per_task=3).take_all()
    assert [(r["key"], r["value"]) for r in back] == got


def test_keyless_round_trip_and_two_jobs_append_one_after_the_other(tmp_path):
    first = [{"value": b"a%d" % i * 3} for i in range(100)]
    second = [{"value": b"b%d" % i} for i in range(50)]
    bcd.ray.write(ray.data.from_items(first, override_num_blocks=3), tmp_path / "out", compression=None)
    bcd.ray.write(ray.data.from_items(second, override_num_blocks=2), tmp_path / "out")
    dataset = bcd.Dataset(tmp_path / "out")
    assert not dataset.keyed and dataset.compression is None
    expected = [r["value"] for r in first + second]
    assert read_all(dataset) == expected
    assert read_all(reference_class("0.3.0")(tmp_path / "out")) == expected
    assert [r["value"] for r in bcd.ray.read(tmp_path / "out").take_all()] == expected
    with pytest.raises(ValueError, match="keyless"):
        bcd.ray.write(ray.data.from_items(rows(3)), tmp_path / "out", value_column="image", key_column="id")
    with pytest.raises(ValueError, match="label"):
        bcd.ray.write(ray.data.from_items(first), tmp_path / "out", fields=["label"])


def labelled(n: int, tag: str = "img", start: int = 0) -> list:
    return [
        {
            "id": f"{tag}/{i:05d}.jpg",
            "image": f"{tag}{i}".encode() * (1 + i % 7),
            "label": i % 3,
            "caption": f"a picture of {tag} {i}",
        }
        for i in range(start, start + n)
    ]


def test_fields_travel_through_ray_as_bcd_ingest_stores_them(tmp_path):
    items = labelled(300)
    ds = ray.data.from_items(items, override_num_blocks=3)
    bcd.ray.write(ds, tmp_path / "out", value_column="image", key_column="id", max_shard_size=2000)
    dataset = bcd.Dataset(tmp_path / "out")
    assert dataset.schema.names == ["label", "caption"]
    table = dataset.fields()
    assert table.column("label").to_pylist() == [r["label"] for r in items]
    assert table.column("caption").to_pylist() == [r["caption"] for r in items]
    # The same rows through `bcd ingest`: the same fields and statistics.
    pq.write_table(pa.Table.from_pylist(items), tmp_path / "rows.parquet")
    bcd.ingest([tmp_path / "rows.parquet"], tmp_path / "ingested", value_column="image", key_column="id")
    ingested = bcd.Dataset(tmp_path / "ingested")
    assert ingested.fields().to_pylist() == table.to_pylist()
    ours, theirs = dataset.stats(), ingested.stats()
    assert ours["records"] == theirs["records"] == 300
    assert ours["fields"]["label"]["counts"] == theirs["fields"]["label"]["counts"] == [[0, 100], [1, 100], [2, 100]]
    # The reference reads the records; Ray reads records and fields back.
    assert read_all(reference_class("0.3.0")(tmp_path / "out")) == as_records(items)
    back = bcd.ray.read(tmp_path / "out", shards_per_task=2).take_all()
    assert [(r["key"], r["value"], r["label"], r["caption"]) for r in back] == [
        (r["id"].encode(), r["image"], r["label"], r["caption"]) for r in items
    ]
    only = bcd.ray.read(tmp_path / "out", fields=["caption"]).take_all()
    assert sorted(only[0]) == ["caption", "key", "value"]
    assert sorted(bcd.ray.read(tmp_path / "out", fields="none").take_all()[0]) == ["key", "value"]
    with pytest.raises(ValueError, match="nope"):
        bcd.ray.read(tmp_path / "out", fields=["nope"])


def test_chosen_fields_and_duplicates_skipped_across_tasks_keep_the_right_rows(tmp_path):
    first = labelled(120)
    bcd.ray.write(ray.data.from_items(first, override_num_blocks=2), tmp_path / "out",
                  value_column="image", key_column="id", fields=["label"], max_shard_size=1500)
    # Half of these are already there; the rest are new: the shards holding the
    # duplicates are rewritten, their fields filtered with them.
    second = labelled(120, start=60)
    summary = bcd.ray.write(ray.data.from_items(second, override_num_blocks=3), tmp_path / "out",
                            value_column="image", key_column="id", fields=["label"], on_duplicate="skip")
    assert summary["skipped"] == 60 and summary["rewritten_shards"] > 0
    dataset = bcd.Dataset(tmp_path / "out")
    expected = first + second[60:]
    assert read_all(dataset) == as_records(expected)
    assert dataset.schema.names == ["label"]
    assert dataset.fields().column("label").to_pylist() == [r["label"] for r in expected]
    stats = dataset.stats()
    assert stats["records"] == 180
    assert sum(count for _, count in stats["fields"]["label"]["counts"]) == 180
    assert stats["fields"]["label"]["counts"] == [[0, 60], [1, 60], [2, 60]]


def test_a_task_that_dies_on_its_first_attempt_is_retried_and_each_row_lands_once(tmp_path):
    marker = tmp_path / "died-once"

    def die_once(batch):
        # The worker dies (a system failure, which Ray retries) the first time it
        # meets row 250, after earlier batches of its task were written.
        if "img/00250.jpg" in list(batch["id"]) and not marker.exists():
            marker.write_text("died")
            os._exit(1)
        return batch

    items = rows(400)
    ds = ray.data.from_items(items, override_num_blocks=4).map_batches(die_once, batch_size=10)
    bcd.ray.write(ds, tmp_path / "out", value_column="image", key_column="id")
    assert marker.exists()
    assert read_all(bcd.Dataset(tmp_path / "out")) == as_records(items)
    # The dead attempt's part was never merged and is gone with the job's staging.
    assert not (tmp_path / "out" / "_staging").exists()
    assert bcd.gc(tmp_path / "out", dry_run=True)["files"] == []


def test_a_failing_job_commits_nothing_and_leaves_the_target_as_it_was(tmp_path):
    bcd.ray.write(ray.data.from_items(rows(20)), tmp_path / "out", value_column="image", key_column="id")
    before = read_all(bcd.Dataset(tmp_path / "out"))

    def fail(batch):
        if "more/00030.jpg" in list(batch["id"]):
            raise ValueError("bad row")
        return batch

    ds = ray.data.from_items(rows(60, "more"), override_num_blocks=3).map_batches(fail, batch_size=5)
    with pytest.raises(Exception, match="bad row"):
        bcd.ray.write(ds, tmp_path / "out", value_column="image", key_column="id")
    assert read_all(bcd.Dataset(tmp_path / "out")) == before
    assert not (tmp_path / "out" / "_staging").exists()
    # A key already there: the job fails naming it, nothing committed; with skip
    # the existing copy wins.
    again = ray.data.from_items(rows(25), override_num_blocks=2)
    with pytest.raises(Exception, match='duplicate key "img/00000.jpg"'):
        bcd.ray.write(again, tmp_path / "out", value_column="image", key_column="id")
    assert read_all(bcd.Dataset(tmp_path / "out")) == before
    bcd.ray.write(again, tmp_path / "out", value_column="image", key_column="id", on_duplicate="skip")
    assert read_all(bcd.Dataset(tmp_path / "out")) == as_records(rows(25))
    # A job that fails on a new path leaves no directory behind.
    with pytest.raises(Exception, match="bad row"):
        bcd.ray.write(ds, tmp_path / "new", value_column="image", key_column="id")
    assert not (tmp_path / "new").exists()


KILLED_DRIVER = """
import os, sys
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
import ray, bcd, bcd.ray
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
ray.data.DataContext.get_current().enable_progress_bars = False
def killed(self, result):  # the driver dies between the tasks and the commit
    os._exit(0)
bcd.ray.BcdDatasink.on_write_complete = killed
items = [{"id": f"k{i}", "image": b"v" * i} for i in range(40)]
bcd.ray.write(ray.data.from_items(items, override_num_blocks=2), sys.argv[2], value_column="image", key_column="id")
"""


def test_a_driver_killed_before_its_commit_leaves_staging_that_gc_removes(tmp_path):
    bcd.ray.write(ray.data.from_items(rows(5)), tmp_path / "out", value_column="image", key_column="id")
    before = read_all(bcd.Dataset(tmp_path / "out"))
    address = ray.get_runtime_context().gcs_address
    subprocess.run([sys.executable, "-c", KILLED_DRIVER, address, str(tmp_path / "out")], check=True, timeout=300)
    staging = tmp_path / "out" / "_staging"
    parts = [p for job in staging.iterdir() for p in job.iterdir() if p.is_dir()]
    assert len(parts) == 2 and all((p / "manifest.json").exists() for p in parts)
    assert read_all(bcd.Dataset(tmp_path / "out")) == before
    listed = bcd.gc(tmp_path / "out", dry_run=True)
    assert all(str(p / "manifest.json") in listed["files"] for p in parts)
    bcd.gc(tmp_path / "out")
    assert not staging.exists()
    assert read_all(bcd.Dataset(tmp_path / "out")) == before


def test_importing_bcd_imports_no_engine():
    code = "import sys, bcd; assert not {'ray', 'pyspark', 'torch'} & set(sys.modules), sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert Path(bcd.ray.__file__).name == "ray.py"


def test_both_shapes_of_on_write_complete_commit_the_parts_in_task_order(tmp_path):
    """Ray before 2.41 calls on_write_complete with the list of the tasks'
    returns, later releases with a WriteResult: both commit the same way (the
    tasks' returns arrive in any order; the parts are merged in task order)."""
    from ray.data.datasource.datasink import WriteResult

    import pyarrow as pa

    for shape in ("list", "write_result"):
        path = tmp_path / shape
        settings = bcd._staging.settings_for(
            path, value_column="value", key_column=None, fields=None,
            compression="lz4", max_shard_size=1 << 20, on_duplicate="error",
        )
        sink = bcd.ray.BcdDatasink(settings)
        sink.on_write_start()
        returns = [settings.write_part(task, pa.table({"value": [b"task %d" % task]})) for task in (2, 0, 1)]
        if shape == "list":
            sink.on_write_complete(returns)
        else:
            sink.on_write_complete(WriteResult(num_rows=3, size_bytes=0, write_returns=returns))
        assert read_all(bcd.Dataset(path)) == [b"task 0", b"task 1", b"task 2"]
        assert not (path / "_staging").exists()


def test_a_task_given_blocks_with_different_columns_keeps_every_column(tmp_path):
    """Issue 20, item 8: a column the task's first block lacked was dropped for
    the whole task (record "c" committed without its label), and the other order
    failed the job with a pyarrow error."""
    import types

    plain = pa.table({"value": [b"a", b"b"]})
    labelled = pa.table({"value": [b"c"], "label": pa.array([7], pa.int64())})
    cases = {
        "lacking_first": ([plain, labelled], [b"a", b"b", b"c"], [None, None, 7]),
        "lacking_last": ([labelled, plain], [b"c", b"a", b"b"], [7, None, None]),
    }
    for name, (blocks, values, labels) in cases.items():
        path = tmp_path / name
        settings = bcd._staging.settings_for(
            path, value_column="value", key_column=None, fields=None,
            compression="lz4", max_shard_size=1 << 20, on_duplicate="error",
        )
        sink = bcd.ray.BcdDatasink(settings)
        sink.on_write_start()
        sink.on_write_complete([sink.write(blocks, types.SimpleNamespace(task_idx=0))])
        dataset = bcd.Dataset(path)
        assert read_all(dataset) == values, name
        assert dataset.fields(["label"]).column("label").to_pylist() == labels, name
        assert not (path / "_staging").exists()
    # Through Ray itself, however it gives the blocks to tasks.
    summary = bcd.ray.write(ray.data.from_arrow([plain, labelled]), tmp_path / "ray", concurrency=1)
    dataset = bcd.Dataset(tmp_path / "ray")
    assert summary["records"] == 3
    assert dict(zip(read_all(dataset), dataset.fields(["label"]).column("label").to_pylist())) == {
        b"a": None, b"b": None, b"c": 7,
    }


def test_dedup_content_leaves_out_repeated_values_within_and_across_tasks(tmp_path):
    items = [{"id": f"img/{i:05d}.jpg", "image": f"pixels {i % 30} ".encode() * 3} for i in range(120)]
    summary = bcd.ray.write(
        ray.data.from_items(items, override_num_blocks=4),
        tmp_path / "out",
        value_column="image",
        key_column="id",
        dedup="content",
        memory_limit="1M",
    )
    dataset = bcd.Dataset(tmp_path / "out")
    # The first occurrence of each value, in task order.
    assert read_all(dataset) == as_records(items[:30])
    assert summary["skipped_values"] == 90 == len(summary["content_duplicates"])
    keys = {d["key"] for d in summary["content_duplicates"]}
    assert keys == {r["id"] for r in items[30:]}
    for duplicate in summary["content_duplicates"]:
        kept = duplicate["duplicate_of"]["key"]
        assert items[int(kept[4:9])]["image"] == items[int(duplicate["key"][4:9])]["image"]
    assert not (tmp_path / "out" / "_staging").exists()
