"""Fields from every source through `bcd.ingest`, end to end: each source is
written at test time by an independent tool (the file system, Python's tarfile and
webdataset, pyarrow and Hugging Face `datasets`, the csv module, the tfrecord
package, json), ingested with the keyword arguments that mirror `bcd ingest`'s
flags, and the stored fields are compared with what the tool wrote. The reference
package still reads every value."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

import bcd
from helpers import read_all, reference_class

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def reference_values(path) -> list[bytes]:
    """Every value as the reference reads it (keyed or not)."""
    dataset = reference_class("0.3.0")(str(path))
    return [entry[1] if dataset.keyed else entry for entry in read_all(dataset)]


def test_a_directory_tree_keeps_its_class_folders(tmp_path):
    root = tmp_path / "tree"
    classes = ["zebra", "ant", "cat"]
    expected = {}
    for n, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(3):
            (root / name / f"{i}.jpg").write_bytes(f"{name}{i}".encode() * (i + 1))
            expected[f"{name}/{i}.jpg".encode()] = name
    (root / "top.txt").write_bytes(b"no class")
    summary = bcd.ingest(root, tmp_path / "ds", labels="folder")
    # As torchvision's ImageFolder, a file outside every class folder is passed over.
    assert summary["records"] == 9
    assert summary["skipped_members"] == {"not in a class folder": 1}
    ds = bcd.Dataset(tmp_path / "ds")
    table = ds.fields()
    assert ds.schema.names == ["label", "label_index"]
    # torchvision's ImageFolder: sorted folder names, numbered in that order.
    class_to_idx = {name: i for i, name in enumerate(sorted(classes))}
    assert ds.metadata["class_names"] == sorted(classes)
    for index in range(len(ds)):
        key = bytes(ds.key_at(index))
        label = table.column("label")[index].as_py()
        assert label == expected[key]
        assert table.column("label_index")[index].as_py() == class_to_idx[label]
    assert sorted(reference_values(tmp_path / "ds")) == sorted(
        (root / bytes(ds.key_at(i)).decode()).read_bytes() for i in range(len(ds))
    )


def test_webdataset_samples_become_records_with_fields(tmp_path):
    wds = pytest.importorskip("webdataset")
    archive = tmp_path / "shard-000000.tar"
    samples = []
    with wds.TarWriter(str(archive)) as sink:
        for i in range(12):
            sample = {"__key__": f"s{i:04}", "jpg": bytes([i]) * (50 + i), "cls": i % 4,
                      "json": {"w": 10 * i, "name": f"n{i}"}}
            if i % 5 == 0:
                sample["txt"] = f"caption {i}"
            sink.write(sample)
            samples.append(sample)
    bcd.ingest(archive, tmp_path / "ds", samples=True, json_fields=True)
    ds = bcd.Dataset(tmp_path / "ds")
    assert len(ds) == 12
    table = ds.fields()
    for i, sample in enumerate(samples):
        got = ds.sample(i)
        assert got["key"] == sample["__key__"].encode()
        assert got["value"] == sample["jpg"]
        assert got["cls"] == sample["cls"]
        assert json.loads(got["json"]) == sample["json"]
        assert got["json.w"] == sample["json"]["w"] and got["json.name"] == sample["json"]["name"]
        assert got["txt"] == sample.get("txt")
        assert got["bcd.value_ext"] == "jpg"
    assert table.schema.field("cls").type == pa.int64()
    assert table.schema.field("txt").type == pa.string()
    assert ds.metadata["derived_fields"] == ["json.w", "json.name"]
    assert reference_values(tmp_path / "ds") == [s["jpg"] for s in samples]


def test_a_sample_without_a_value_fails_naming_it_unless_skipped(tmp_path):
    archive = tmp_path / "bad.tar"
    with tarfile.open(archive, "w") as tar:
        for name, data in [("a.jpg", b"A"), ("a.cls", b"1"), ("b.cls", b"2"), ("c.png", b"C")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ValueError, match=r"bad\.tar.*sample \"b\".*no value member"):
        bcd.ingest(archive, tmp_path / "ds", samples=True)
    assert not (tmp_path / "ds").exists()
    summary = bcd.ingest(archive, tmp_path / "ds", samples=True, skip_bad_samples=True, value_ext="png,jpg")
    assert summary["records"] == 2 and summary["skipped_members"] == {"bad sample": 1}
    ds = bcd.Dataset(tmp_path / "ds")
    assert [ds.sample(i)["bcd.value_ext"] for i in range(2)] == ["jpg", "png"]


def test_hugging_face_parquet_keeps_columns_class_labels_and_paths(tmp_path):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({
        "image": datasets.Image(),
        "label": datasets.ClassLabel(names=["cat", "dog", "eel"]),
        "caption": datasets.Value("string"),
    })
    rows = {
        "image": [{"bytes": bytes([i]) * (10 + i), "path": f"img{i}.png"} for i in range(9)],
        "label": [i % 3 for i in range(9)],
        "caption": [f"a picture {i}" if i != 4 else None for i in range(9)],
    }
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(tmp_path / "hf.parquet"))
    bcd.ingest(tmp_path / "hf.parquet", tmp_path / "ds", value_column="image")
    ds = bcd.Dataset(tmp_path / "ds")
    table = ds.fields()
    assert table.column("label").to_pylist() == rows["label"]
    assert table.column("caption").to_pylist() == rows["caption"]
    assert table.column("image.path").to_pylist() == [r["path"] for r in rows["image"]]
    assert ds.metadata["class_labels"] == {"label": ["cat", "dog", "eel"]}
    assert ds.metadata["class_names"] == ["cat", "dog", "eel"]
    assert reference_values(tmp_path / "ds") == [r["bytes"] for r in rows["image"]]
    # --fields chooses; a name the file lacks is refused, naming what it has.
    bcd.ingest(tmp_path / "hf.parquet", tmp_path / "only", value_column="image", fields=["caption"])
    assert bcd.Dataset(tmp_path / "only").schema.names == ["caption"]
    with pytest.raises(ValueError, match="nope"):
        bcd.ingest(tmp_path / "hf.parquet", tmp_path / "x", value_column="image", fields="nope")


def test_csv_columns_are_typed_by_inference_or_declaration(tmp_path):
    for i in range(4):
        (tmp_path / f"f{i}.bin").write_bytes(b"x" * (i + 1))
    (tmp_path / "list.csv").write_text(
        "path,label,score,ok,note\n"
        + "".join(f"f{i}.bin,{i},{i / 2},{'true' if i % 2 else 'false'},n{i}\n" for i in range(4))
    )
    bcd.ingest(tmp_path / "list.csv", tmp_path / "ds")
    table = bcd.Dataset(tmp_path / "ds").fields()
    assert table.schema.field("label").type == pa.int64()
    assert table.schema.field("score").type == pa.float64()
    assert table.schema.field("ok").type == pa.bool_()
    assert table.column("note").to_pylist() == [f"n{i}" for i in range(4)]
    bcd.ingest(tmp_path / "list.csv", tmp_path / "typed", field_type={"label": "string"})
    assert bcd.Dataset(tmp_path / "typed").fields().column("label").to_pylist() == ["0", "1", "2", "3"]
    (tmp_path / "bad.csv").write_text("path,label\nf0.bin,1\nf1.bin,seven\n")
    with pytest.raises(ValueError, match=r"bad\.csv.*line 3.*label"):
        bcd.ingest(tmp_path / "bad.csv", tmp_path / "bad", field_type={"label": "int64"})
    assert not (tmp_path / "bad").exists()


def test_tfrecord_features_become_fields(tmp_path):
    tfrecord = pytest.importorskip("tfrecord")
    path = tmp_path / "data.tfrecord"
    writer = tfrecord.TFRecordWriter(str(path))
    for i in range(6):
        writer.write({
            "image/encoded": (bytes([i]) * (5 + i), "byte"),
            "label": (i % 2, "int"),
            "box": ([0.5 * i, 1.0, 2.0][: 1 + i % 3], "float"),
            "name": (f"n{i}".encode(), "byte"),
        })
    writer.close()
    bcd.ingest(path, tmp_path / "ds", feature="image/encoded")
    ds = bcd.Dataset(tmp_path / "ds")
    table = ds.fields()
    assert table.column("label").to_pylist() == [i % 2 for i in range(6)]
    assert table.schema.field("label").type == pa.int64()
    assert table.schema.field("box").type == pa.list_(pa.float32())
    assert table.column("box").to_pylist()[2] == [1.0, 1.0, 2.0]
    assert table.column("name").to_pylist() == [f"n{i}" for i in range(6)]
    assert reference_values(tmp_path / "ds") == [bytes([i]) * (5 + i) for i in range(6)]


def test_json_lines_with_a_schema_given_as_a_list(tmp_path):
    lines = [{"id": f"d{i}", "text": f"document {i}", "lang": "en" if i % 2 else "de", "n": i}
             for i in range(5)]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    bcd.ingest(tmp_path / "docs.jsonl", tmp_path / "ds", key_field="id",
               schema=[{"name": "lang", "type": "string"}, {"name": "n", "type": "int64"}])
    ds = bcd.Dataset(tmp_path / "ds")
    assert ds.schema.names == ["lang", "n"]
    assert [ds.sample(i) for i in range(5)] == [
        {"key": line["id"].encode(), "value": line["text"].encode(), "lang": line["lang"], "n": line["n"]}
        for line in lines
    ]
    with pytest.raises(ValueError, match="schema"):
        bcd.ingest(tmp_path / "docs.jsonl", tmp_path / "x", schema=[{"name": "n", "type": "int"}])


def test_options_of_another_format_are_refused(tmp_path):
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a").write_bytes(b"a")
    with pytest.raises(ValueError, match="samples"):
        bcd.ingest(tmp_path / "tree", tmp_path / "ds", samples=True)
    with pytest.raises(ValueError, match="labels"):
        bcd.ingest(tmp_path / "tree", tmp_path / "ds", labels="parent")


def shard_fields(path):
    """The fields of every shard, as pyarrow reads the shards' files, in order."""
    files = sorted(path.glob("*.fields.arrow"))
    return pa.concat_tables([pa.ipc.open_file(f).read_all() for f in files]), len(files)


def kept(keys, values):
    """The positions a run keeps with on_duplicate="skip" and dedup="content":
    the first of each key and of each value."""
    seen_keys, seen_values, out = set(), set(), []
    for i, (key, value) in enumerate(zip(keys, values)):
        if key not in seen_keys and value not in seen_values:
            out.append(i)
        seen_keys.add(key)
        seen_values.add(value)
    return out


def test_json_lines_fields_across_shards_duplicates_nulls_and_absent_fields(tmp_path):
    # 3000 lines: three source batches of 1024 lines, shards of about 200
    # records (their ends fall inside the batches), a repeated key and a
    # repeated value in the middle of a batch, nulls and a field absent from
    # every fifth line.
    lines = []
    for i in range(3000):
        line = {"id": f"k{i}", "text": f"document {i} " * 3, "n": None if i % 7 == 3 else i * 3,
                "x": i / 4}
        if i % 5:
            line["tag"] = f"t{i % 11}"
        lines.append(line)
    lines[1500]["id"] = "k10"
    lines[2600]["id"] = "k2000"
    lines[1700]["text"] = lines[20]["text"]
    lines[1701]["text"] = lines[1699]["text"]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    summary = bcd.ingest(tmp_path / "docs.jsonl", tmp_path / "ds", key_field="id", value_field="text",
                         on_duplicate="skip", dedup="content", max_shard_size=6_000)
    keep = kept([line["id"] for line in lines], [line["text"] for line in lines])
    assert len(keep) == 2996 and summary["records"] == len(keep)
    table, shards = shard_fields(tmp_path / "ds")
    assert shards > 10
    assert table.schema.names == ["n", "x", "tag"]
    for name in ["n", "x", "tag"]:
        assert table.column(name).to_pylist() == [lines[i].get(name) for i in keep], name
    assert bcd.Dataset(tmp_path / "ds").fields().equals(table)


def test_parquet_fields_across_shards_with_dictionaries_lists_and_duplicates(tmp_path):
    rows = 5000
    keys = [f"k{i}" for i in range(rows)]
    keys[2100] = "k5"
    keys[4444] = "k4000"
    values = [f"value {i} ".encode() * 4 for i in range(rows)]
    values[3000] = values[7]
    species = [None if i % 9 == 4 else ["cat", "dog", "owl", "eel"][i % 4] for i in range(rows)]
    tags = [None if i % 13 == 1 else list(range(i % 4)) for i in range(rows)]
    score = [None if i % 6 == 5 else i * 0.5 for i in range(rows)]
    table = pa.table({
        "key": keys,
        "value": pa.array(values, pa.binary()),
        "species": pa.array(species).dictionary_encode(),
        "tags": pa.array(tags, pa.list_(pa.int64())),
        "score": pa.array(score, pa.float64()),
    })
    # Row groups of 700 rows: the source's batches, whose ends fall inside shards.
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=700)
    summary = bcd.ingest(tmp_path / "t.parquet", tmp_path / "ds", key_column="key", value_column="value",
                         on_duplicate="skip", dedup="content", max_shard_size=8_000)
    keep = kept(keys, values)
    assert len(keep) == rows - 3 and summary["records"] == len(keep)
    back, shards = shard_fields(tmp_path / "ds")
    assert shards > 10
    assert back.schema.names == ["species", "tags", "score"]
    assert pa.types.is_dictionary(back.schema.field("species").type)
    for name, column in [("species", species), ("tags", tags), ("score", score)]:
        assert back.column(name).to_pylist() == [column[i] for i in keep], name
    assert bcd.Dataset(tmp_path / "ds").fields().equals(back)
