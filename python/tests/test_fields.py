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


def test_extend_errors_name_the_entry_counted_from_the_start_of_the_iterable(tmp_path):
    # More entries than one compression round takes on any machine (256 per
    # core): the entry named is counted from the first, not from its round's.
    ds = bcd.Dataset.create(tmp_path / "ds", keyed=True)
    entries = [{"key": f"k{i}".encode(), "value": b"v", "label": 1} for i in range(20_000)]
    with pytest.raises(ValueError, match='field "label" of entry 20000: type Utf8 conflicts'):
        ds.extend(entries + [{"key": b"odd", "value": b"v", "label": "cat"}])
    with pytest.raises(ValueError, match='entry 20000: duplicate key "k5": already in the dataset'):
        ds.extend(entries + [{"key": b"k5", "value": b"v", "label": 2}])
    assert len(ds) == 0
    ds.extend(entries)
    assert len(ds) == 20_000


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


def test_a_union_column_is_refused_before_anything_is_committed(tmp_path):
    """Issue 20, item 9: extend_arrow committed a union column, after which the
    schema, fields(), sample(), stats() and every later extend failed."""
    path = tmp_path / "ds"
    ds = bcd.Dataset.create(path, keyed=False)
    ds.extend_arrow(pa.table({"v": [b"a"], "n": [1]}), "v")
    before = sorted(os.listdir(path))
    union = pa.UnionArray.from_sparse(pa.array([0, 1], pa.int8()), [pa.array([1, 2]), pa.array(["x", "y"])])
    with pytest.raises(ValueError, match='field "u": .*union'):
        ds.extend_arrow(pa.table({"v": [b"b", b"c"], "u": union}), "v")
    assert len(ds) == 1
    assert sorted(os.listdir(path)) == before
    reopened = bcd.Dataset(path)
    assert reopened.schema.names == ["n"]
    assert reopened.fields().column("n").to_pylist() == [1]
    reopened.stats()
    reopened.extend_arrow(pa.table({"v": [b"d"], "n": [2]}), "v")
    assert reopened.fields().column("n").to_pylist() == [1, 2]


def test_extension_types_come_back_as_they_were_stored(tmp_path):
    """Issue 20, item 13: arrow.uuid came back as fixed_size_binary[16],
    arrow.json as string, a fixed_shape_tensor as a flat list, bool8 as int8."""
    import uuid

    ids = pa.array([uuid.UUID(int=i).bytes for i in range(3)], pa.uuid())
    docs = pa.array(['{"a": 1}', "[]", "null"], pa.json_())
    tensor_type = pa.fixed_shape_tensor(pa.int32(), (2, 2))
    tensors = pa.ExtensionArray.from_storage(tensor_type, pa.array([[1, 2, 3, 4]] * 3, pa.list_(pa.int32(), 4)))
    flags = pa.ExtensionArray.from_storage(pa.bool8(), pa.array([1, 0, 1], pa.int8()))
    table = pa.table({"v": [b"a", b"b", b"c"], "id": ids, "doc": docs, "t": tensors, "flag": flags})
    ds = bcd.Dataset.create(tmp_path / "ds", keyed=False)
    ds.extend_arrow(table, "v")
    for reopened in (ds, bcd.Dataset(tmp_path / "ds")):
        got = reopened.fields()
        for name in ("id", "doc", "t", "flag"):
            assert got.schema.field(name).type == table.schema.field(name).type, name
            assert got.column(name).to_pylist() == table.column(name).to_pylist(), name
    # The same bytes under another extension (or none) mean something else.
    plain = pa.table({"v": [b"d"], "id": pa.array([b"\0" * 16], pa.binary(16))})
    with pytest.raises(ValueError, match='field "id".*extension arrow.uuid'):
        ds.extend_arrow(plain, "v")
    assert len(bcd.Dataset(tmp_path / "ds")) == 3


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


def test_shards_written_in_several_batches_read_back_as_written(tmp_path):
    """A shard of more records than a batch holds (65,536) is written as
    several record batches (issue 27): fields(), pyarrow's IPC reader and the
    statistics read it all, as extend_arrow and extend gave it."""
    import pyarrow.compute as pc

    n = 150_000
    table = pa.table({
        "value": pa.array([b"v%d" % (i % 10) for i in range(n)]),
        "id": pa.array([f"id{i:012d}" for i in range(n)]),
        "n": pa.array(range(n), pa.int64()),
        # A column whose type widens in later batches: int32 here, int64 below.
        "score": pa.array([i % 1000 for i in range(n)], pa.int32()),
    })
    ds = bcd.Dataset.create(tmp_path / "ds", keyed=False, compression=None)
    ds.extend_arrow(table, "value")
    more = [{"value": b"x", "id": f"more{i}", "n": -i, "score": 2**40 + i} for i in range(70_000)]
    ds.extend(more)
    assert len(ds.shard_ranges()) == 2

    fields = ds.fields()
    assert fields.num_rows == n + len(more)
    assert fields.column("id").to_pylist() == table.column("id").to_pylist() + [r["id"] for r in more]
    assert fields.column("n").to_pylist() == table.column("n").to_pylist() + [r["n"] for r in more]
    assert fields.schema.field("score").type == pa.int64()
    assert fields.column("score").to_pylist() == table.column("score").to_pylist() + [r["score"] for r in more]

    # The files themselves, as pyarrow reads them: batches of at most 65,536
    # rows, the fingerprint in the schema's metadata.
    for shard, rows in [(0, n), (1, len(more))]:
        with pa.ipc.open_file(tmp_path / "ds" / f"{shard:06d}.fields.arrow") as reader:
            assert reader.num_record_batches == -(-rows // 65_536)
            assert b"bcd.shard" in reader.schema.metadata
            read = reader.read_all()
        assert read.num_rows == rows
        assert all(b.num_rows <= 65_536 for b in read.to_batches())
    with pa.ipc.open_file(tmp_path / "ds" / "000000.fields.arrow") as reader:
        assert reader.read_all().column("id").to_pylist() == table.column("id").to_pylist()

    stats = ds.stats()["fields"]
    assert stats["n"]["min"] == -(len(more) - 1) and stats["n"]["max"] == n - 1
    assert stats["score"]["max"] == 2**40 + len(more) - 1
    assert stats["id"]["count"] == n + len(more)
    assert stats["score"]["distinct"] >= 1000
    assert pc.max(fields.column("n")).as_py() == n - 1


def test_a_dictionary_column_of_several_dictionaries_is_written_in_several_batches(tmp_path):
    """Arrow data whose dictionary column has a dictionary per chunk (as
    Parquet row groups or pandas categoricals give) is written as batches of
    at most 65,536 rows sharing one dictionary (issue 27), which pyarrow reads
    back as given."""
    n = 150_000
    names = [["cat", "dog", "owl"], ["ant", "owl", "eel", "yak"]]
    half = n // 2
    chunks = [
        pa.DictionaryArray.from_arrays(
            pa.array([None if i % 7 == 0 else i % len(names[c]) for i in range(half)], pa.int32()),
            pa.array(names[c]),
        )
        for c in (0, 1)
    ]
    table = pa.table({"value": pa.array([b"v"] * n), "species": pa.chunked_array(chunks)})
    expected = table.column("species").to_pylist()
    ds = bcd.Dataset.create(tmp_path / "ds", keyed=False, compression=None)
    ds.extend_arrow(table, "value")
    assert len(ds.shard_ranges()) == 1

    assert ds.fields().column("species").to_pylist() == expected
    with pa.ipc.open_file(tmp_path / "ds" / "000000.fields.arrow") as reader:
        assert reader.num_record_batches == 3
        assert pa.types.is_dictionary(reader.schema.field("species").type)
        read = reader.read_all()
    assert read.column("species").to_pylist() == expected
    # One dictionary for the file, each value in it once.
    for chunk in read.column("species").chunks:
        assert sorted(chunk.dictionary.to_pylist()) == ["ant", "cat", "dog", "eel", "owl", "yak"]
