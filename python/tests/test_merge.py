"""bcd.merge, bcd.gc and Dataset.extend_arrow: parts made by different
processes (this package, the reference, `bcd ingest` through bcd.ingest) merged
into one dataset that the reference reads; Arrow data written without a
per-row Python loop."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bcd
from helpers import read_all, reference_class


def keyed_rows(tag: str, n: int, start: int = 0) -> list:
    return [(f"{tag}/{i:04d}".encode(), f"{tag} {i} ".encode() * (1 + i % 5)) for i in range(start, start + n)]


def test_parts_from_three_writers_merge_into_one_the_reference_reads(tmp_path):
    reference = reference_class("0.3.0")
    # Part 1: the reference.
    ref_rows = keyed_rows("ref", 40)
    reference.create(tmp_path / "by-reference", keyed=True, compression="lz4", max_shard_size=300)
    reference(tmp_path / "by-reference").extend(iter(ref_rows))
    # Part 2: another process, through this package's extend_arrow.
    arrow_rows = keyed_rows("arrow", 30)
    code = (
        "import sys, bcd, pyarrow as pa\n"
        "rows = [(f'arrow/{i:04d}'.encode(), f'arrow {i} '.encode() * (1 + i % 5)) for i in range(30)]\n"
        "ds = bcd.Dataset.create(sys.argv[1], keyed=True, max_shard_size=300)\n"
        "table = pa.table({'k': [k for k, _ in rows], 'v': [v for _, v in rows]})\n"
        "ds.extend_arrow(table, 'v', 'k')\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "by-arrow")], check=True)
    # Part 3: bcd.ingest of a Parquet file.
    ingest_rows = keyed_rows("pq", 20)
    pq.write_table(
        pa.table({"id": [k.decode() for k, _ in ingest_rows], "blob": [v for _, v in ingest_rows]}),
        tmp_path / "rows.parquet",
    )
    bcd.ingest([tmp_path / "rows.parquet"], tmp_path / "by-ingest", value_column="blob", key_column="id")

    target = tmp_path / "merged"
    summary = bcd.merge([tmp_path / "by-reference", tmp_path / "by-arrow", tmp_path / "by-ingest"], target)
    assert summary["records"] == 90 and summary["parts"] == 3 and summary["created"]
    assert summary["copied_files"] == 0 and summary["parts_not_removed"] == []
    expected = ref_rows + arrow_rows + ingest_rows
    assert read_all(bcd.Dataset(target)) == expected
    assert read_all(reference(target)) == expected
    assert not (tmp_path / "by-reference").exists()


def test_duplicates_fail_naming_both_copies_or_the_first_copy_wins(tmp_path):
    for name, rows in [("t", keyed_rows("a", 5)), ("p", keyed_rows("a", 5, start=3) + keyed_rows("b", 2))]:
        ds = bcd.Dataset.create(tmp_path / name, keyed=True)
        ds.extend(rows)
    with pytest.raises(ValueError, match=r'duplicate key "a/0003".*t/000000.bin.*p/000000.bin.*nothing was merged'):
        bcd.merge([tmp_path / "p"], tmp_path / "t")
    assert len(bcd.Dataset(tmp_path / "t")) == 5 and len(bcd.Dataset(tmp_path / "p")) == 7
    summary = bcd.merge([tmp_path / "p"], tmp_path / "t", on_duplicate="skip", copy=True)
    assert summary["skipped"] == 2 and summary["rewritten_shards"] == 1
    assert read_all(bcd.Dataset(tmp_path / "t")) == keyed_rows("a", 5) + keyed_rows("a", 3, start=5) + keyed_rows("b", 2)
    assert len(bcd.Dataset(tmp_path / "p")) == 7  # copied: left as it was
    with pytest.raises(ValueError, match="on_duplicate"):
        bcd.merge([tmp_path / "p"], tmp_path / "t", on_duplicate="first")
    with pytest.raises(TypeError, match="list of paths"):
        bcd.merge(str(tmp_path / "p"), tmp_path / "t")


def test_gc_lists_and_removes_abandoned_staging_and_refuses_while_locked(tmp_path):
    ds = bcd.Dataset.create(tmp_path / "d", keyed=False)
    ds.extend([b"x"])
    part = tmp_path / "d" / "_staging" / "job" / "000000-attempt"
    bcd.Dataset.create(part, keyed=False).extend([b"staged"])
    listed = bcd.gc(tmp_path / "d", dry_run=True)
    assert str(part / "000000.bin") in listed["files"] and listed["dry_run"]
    assert bcd.gc(tmp_path / "d", older_than="1h")["files"] == []
    assert bcd.gc(tmp_path / "d", older_than=3600.0)["files"] == []
    with pytest.raises(ValueError, match="older_than"):
        bcd.gc(tmp_path / "d", older_than="soon")
    removed = bcd.gc(tmp_path / "d")
    assert removed["files"] == listed["files"]
    assert not (tmp_path / "d" / "_staging").exists()
    assert len(bcd.Dataset(tmp_path / "d")) == 1


def test_extend_arrow_takes_tables_batches_and_readers_of_every_bytes_type(tmp_path):
    ds = bcd.Dataset.create(tmp_path / "d", keyed=True, compression=None)
    values = [b"a", b"bb", b"", b"\x00\xff"]
    columns = {
        "binary": pa.array(values, pa.binary()),
        "large": pa.array(values, pa.large_binary()),
        "view": pa.array(values, pa.binary_view()),
        "text": pa.array(["a", "bb", "", "z"], pa.string()),
        "dict": pa.array(values, pa.binary()).dictionary_encode(),
        "image": pa.StructArray.from_arrays([pa.array(values), pa.array(["p"] * 4)], ["bytes", "path"]),
    }
    expected = []
    for n, (name, column) in enumerate(columns.items()):
        keys = pa.array([n * 10 + i for i in range(4)], pa.int64())
        table = pa.table({"key": keys, name: column})
        data = [table, table.to_batches()[0], pa.RecordBatchReader.from_batches(table.schema, table.to_batches())][n % 3]
        added = ds.extend_arrow(data, name, "key")
        assert added["records"] == 4 and added["skipped"] == 0
        want = values if name != "text" else [b"a", b"bb", b"", b"z"]
        expected += [(str(n * 10 + i).encode(), v) for i, v in enumerate(want)]
    assert read_all(bcd.Dataset(tmp_path / "d")) == expected

    # Duplicates: an error (nothing committed), or skipped and counted.
    again = pa.table({"key": ["0", "new"], "value": [b"x", b"y"]})
    with pytest.raises(ValueError, match='duplicate key "0"'):
        ds.extend_arrow(again, key_column="key")
    assert ds.extend_arrow(again, key_column="key", on_duplicate="skip")["skipped"] == 1
    # Wrong columns, nulls, keyless, fields: clear errors, nothing committed.
    n = len(ds)
    with pytest.raises(ValueError, match='no column "nope"'):
        ds.extend_arrow(again, "nope", "key")
    with pytest.raises(ValueError, match="expected binary"):
        ds.extend_arrow(pa.table({"key": ["q"], "value": [1.5]}), "value", "key")
    with pytest.raises(ValueError, match='row 1: the value column "value" is null'):
        ds.extend_arrow(pa.table({"key": ["q", "r"], "value": [b"1", None]}), "value", "key")
    with pytest.raises(ValueError, match="needs key_column"):
        ds.extend_arrow(again)
    with pytest.raises(ValueError, match='no column "label"'):
        ds.extend_arrow(again, key_column="key", fields=["label"])
    with pytest.raises(ValueError, match="value or key column"):
        ds.extend_arrow(again, key_column="key", fields=["value"])
    with pytest.raises(TypeError, match="Arrow data"):
        ds.extend_arrow([b"not arrow"], key_column="key")
    assert len(bcd.Dataset(tmp_path / "d")) == n
    keyless = bcd.Dataset.create(tmp_path / "keyless")
    with pytest.raises(ValueError, match="keyless"):
        keyless.extend_arrow(again, key_column="key")
    assert keyless.extend_arrow(again)["records"] == 2


def test_extend_arrow_stores_the_other_columns_as_fields_with_their_arrow_types(tmp_path):
    ds = bcd.Dataset.create(tmp_path / "d", keyed=True, max_shard_size=200)
    meta = pa.StructArray.from_arrays([pa.array([0.5, 1.5, None]), pa.array(["x", "y", "z"])], ["score", "src"])
    first = pa.table({
        "key": ["a", "b", "c"],
        "value": [b"1" * 90, b"2" * 90, b"3" * 90],
        "label": pa.array([1, 2, 1], pa.int32()),
        "tags": pa.array([["t"], [], None], pa.list_(pa.string())),
        "meta": meta,
    })
    assert ds.extend_arrow(first, key_column="key")["records"] == 3
    # int64 widens int32; a new column is null for the earlier records; skipped
    # duplicates leave no row behind.
    second = pa.table({
        "key": ["a", "d"],
        "value": [b"dup", b"4"],
        "label": pa.array([9, 7], pa.int64()),
        "extra": ["?", "e"],
    })
    assert ds.extend_arrow(second, key_column="key", on_duplicate="skip")["skipped"] == 1
    reopened = bcd.Dataset(tmp_path / "d")
    assert reopened.schema.names == ["label", "tags", "meta", "extra"]
    assert str(reopened.schema.field("label").type) == "int64"
    table = reopened.fields()
    assert table.column("label").to_pylist() == [1, 2, 1, 7]
    assert table.column("tags").to_pylist() == [["t"], [], None, None]
    assert table.column("meta").to_pylist() == [
        {"score": 0.5, "src": "x"}, {"score": 1.5, "src": "y"}, {"score": None, "src": "z"}, None
    ]
    assert table.column("extra").to_pylist() == [None, None, None, "e"]
    assert reopened.sample(3) == {"key": b"d", "value": b"4", "label": 7, "tags": None, "meta": None, "extra": "e"}
    assert reopened.stats()["fields"]["label"]["counts"] == [[1, 2], [2, 1], [7, 1]]
    # Only the chosen columns, or none.
    chosen = bcd.Dataset.create(tmp_path / "chosen", keyed=True)
    chosen.extend_arrow(first, key_column="key", fields=["label"])
    assert chosen.schema.names == ["label"]
    bare = bcd.Dataset.create(tmp_path / "bare", keyed=True)
    bare.extend_arrow(first, key_column="key", fields="none")
    assert bare.schema.names == []
    # A type that conflicts names the field and both types; nothing is committed.
    n = len(reopened)
    with pytest.raises(ValueError, match=r'field "label".*Utf8.*Int64'):
        reopened.extend_arrow(pa.table({"key": ["z"], "value": [b"z"], "label": ["text"]}), key_column="key")
    assert len(bcd.Dataset(tmp_path / "d")) == n
    # The reference reads the records.
    assert read_all(reference_class("0.3.0")(tmp_path / "d")) == read_all(reopened)


def test_extend_arrow_reads_a_stream_lazily_and_an_error_midway_commits_nothing(tmp_path):
    ds = bcd.Dataset.create(tmp_path / "d")
    schema = pa.schema([("value", pa.binary())])

    def batches(fail: bool):
        for i in range(5):
            if fail and i == 3:
                raise RuntimeError("source broke")
            yield pa.record_batch([pa.array([b"v%d" % i] * 100)], schema=schema)

    with pytest.raises(Exception, match="source broke"):
        ds.extend_arrow(pa.RecordBatchReader.from_batches(schema, batches(True)))
    assert len(ds) == 0 and sorted(os.listdir(tmp_path / "d")) == [".bcd.lock", "manifest.json"]
    added = ds.extend_arrow(pa.RecordBatchReader.from_batches(schema, batches(False)))
    assert added["records"] == 500 and len(bcd.Dataset(tmp_path / "d")) == 500


def test_a_field_type_conflict_between_parts_is_a_value_error_and_commits_nothing(tmp_path):
    """Issue 20: bcd.merge raised RuntimeError("making .../commit.N.json: ..."),
    which reads like an I/O failure; the same conflict through extend_arrow is a
    ValueError."""
    for name, label in (("a", pa.array([1, 2])), ("b", pa.array(["cat", "dog"]))):
        part = bcd.Dataset.create(tmp_path / name, keyed=False)
        part.extend_arrow(pa.table({"v": [b"x", b"y"], "label": label}), "v")
    with pytest.raises(ValueError, match='field "label": type Utf8 conflicts with Int64'):
        bcd.merge([tmp_path / "a", tmp_path / "b"], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
    # The parts are as they were.
    assert bcd.Dataset(tmp_path / "a").fields().column("label").to_pylist() == [1, 2]
    assert bcd.Dataset(tmp_path / "b").fields().column("label").to_pylist() == ["cat", "dog"]
