"""Fields beside the records (FORMAT.md section 9): record dicts in, pyarrow
tables, samples and statistics out; the reference still reads every value, and
shards it appends read as nulls."""

from __future__ import annotations

import os

import pytest

import bcd
from helpers import reference_class

pa = pytest.importorskip("pyarrow")


def labelled(start: int, count: int) -> list[dict]:
    return [
        {"key": f"k{i:04}".encode(), "value": bytes([i % 251]) * (i % 97), "label": i % 3,
         "caption": f"item {i}", "tags": [f"t{i % 2}"]}
        for i in range(start, start + count)
    ]


def test_record_dicts_store_fields_read_back_in_record_order(tmp_path):
    path = tmp_path / "ds"
    ds = bcd.Dataset.create(path, keyed=True, max_shard_size=4096)
    ds.extend(labelled(0, 300), metadata={"class_names": ["a", "b", "c"]})
    ds.extend([(b"plain", b"no fields")])
    assert ds.schema.names == ["label", "caption", "tags"]
    assert ds.schema.field("label").type == pa.int64()
    table = ds.fields()
    assert table.num_rows == len(ds) == 301
    assert table.column("label").to_pylist() == [i % 3 for i in range(300)] + [None]
    assert table.column("caption").to_pylist()[299] == "item 299"
    assert ds.fields(["tags"]).column_names == ["tags"]
    with pytest.raises(ValueError, match="no field \"nope\""):
        ds.fields(["nope"])
    sample = ds.sample(7)
    assert sample["key"] == b"k0007"
    assert bytes(sample["value"]) == bytes([7]) * 7
    assert (sample["label"], sample["caption"], sample["tags"]) == (1, "item 7", ["t1"])
    assert ds.sample(-1)["label"] is None
    assert ds.metadata == {"class_names": ["a", "b", "c"]}
    stats = ds.stats()
    assert stats["records"] == 301
    assert stats["fields"]["label"]["counts"] == [[0, 100], [1, 100], [2, 100]]
    assert stats["fields"]["label"]["nulls"] == 1
    assert stats["fields"]["caption"]["distinct"] == 300
    # A reopened handle reads the same.
    assert bcd.Dataset(path).fields().equals(table)


def test_a_conflicting_type_commits_nothing(tmp_path):
    path = tmp_path / "ds"
    ds = bcd.Dataset.create(path, keyed=True)
    ds.extend(labelled(0, 10))
    before = sorted(os.listdir(path))
    with pytest.raises(ValueError, match='field "label": type Utf8 conflicts with Int64'):
        ds.extend([{"key": b"x", "value": b"", "label": "cat"}])
    assert len(ds) == 10
    assert sorted(os.listdir(path)) == before
    # Widening is not a conflict: int32 columns from pyarrow-typed values stay int64.
    ds.extend([{"key": b"y", "value": b"", "label": 2**40}])
    assert ds.fields(["label"]).column("label").to_pylist()[-1] == 2**40


def test_the_reference_reads_every_value_and_its_appends_read_as_nulls(tmp_path):
    path = tmp_path / "ds"
    ds = bcd.Dataset.create(path, keyed=True, max_shard_size=2048)
    ds.extend(labelled(0, 50))
    reference = reference_class("0.3.0")
    theirs = reference(path)
    assert len(theirs) == 50
    assert [bytes(theirs[r["key"]]) for r in labelled(0, 50)] == [r["value"] for r in labelled(0, 50)]
    theirs.extend(iter([(b"ref-1", b"from the reference"), (b"ref-2", b"")]))
    ds = bcd.Dataset(path)
    ds.extend(labelled(50, 5))
    table = ds.fields(["label"])
    assert table.column("label").to_pylist() == [i % 3 for i in range(50)] + [None, None] + [i % 3 for i in range(50, 55)]
    stats = ds.stats()
    assert stats["records"] == 57
    assert stats["fields"]["label"]["nulls"] == 2
    assert len(reference(path)) == 57


def test_polars_and_duckdb_take_the_table(tmp_path):
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    ds = bcd.Dataset.create(tmp_path / "ds", keyed=True)
    ds.extend(labelled(0, 30))
    fields_table = ds.fields()
    assert polars.from_arrow(fields_table)["label"].sum() == sum(i % 3 for i in range(30))
    # DuckDB finds the table by its Python variable name (replacement scan).
    assert duckdb.sql("select count(*) from fields_table where label = 2").fetchall() == [(10,)]


def test_extend_renumbers_label_index_into_the_datasets_class_names(tmp_path):
    ds = bcd.Dataset.create(tmp_path / "ds", keyed=True)
    ds.extend([{"key": b"c0", "value": b"", "label_index": 0},
               {"key": b"d0", "value": b"", "label_index": 1}],
              metadata={"class_names": ["cat", "dog"], "description": "pets"})
    # A second extend numbering its classes otherwise: ant 0, cat 1.
    ds.extend([{"key": b"a1", "value": b"", "label_index": 0},
               {"key": b"c1", "value": b"", "label_index": 1}],
              metadata={"class_names": ["ant", "cat"]})
    names = ds.metadata["class_names"]
    assert names == ["cat", "dog", "ant"]
    indices = ds.fields(["label_index"]).column("label_index").to_pylist()
    assert [names[i] for i in indices] == ["cat", "dog", "ant", "cat"]
    # Other metadata is not replaced: a different value is refused.
    before = sorted(os.listdir(tmp_path / "ds"))
    with pytest.raises(ValueError, match='metadata "description": "birds" conflicts with "pets"'):
        ds.extend([(b"x", b"")], metadata={"description": "birds"})
    assert len(ds) == 4
    assert sorted(os.listdir(tmp_path / "ds")) == before


def test_metadata_json_cannot_keep_exactly_is_refused(tmp_path):
    ds = bcd.Dataset.create(tmp_path / "ds", keyed=True)
    with pytest.raises(ValueError, match=r"18446744073709551617 is outside -2\^63 \.\. 2\^64"):
        ds.extend([(b"a", b"x")], metadata={"id": 2**64 + 1})
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        ds.extend([(b"a", b"x")], metadata={"ratio": float("nan")})
    assert len(ds) == 0 and ds.metadata == {}
    ds.extend([(b"a", b"x")], metadata={"id": 2**64 - 1, "low": -(2**63)})
    assert ds.metadata == {"id": 2**64 - 1, "low": -(2**63)}
    assert bcd.Dataset(tmp_path / "ds").metadata["id"] == 2**64 - 1
