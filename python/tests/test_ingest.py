"""bcd.ingest: `bcd ingest` as a function, on the repository's source fixtures
(checked against the expected.json their generators wrote)."""

from __future__ import annotations

import _thread
import json
import signal
import threading

import numpy as np
import pytest

import bcd
from helpers import FIXTURES, read_all, snapshot

SUMMARY_FIELDS = {
    "dataset", "created", "records", "skipped", "skipped_members", "bytes_in",
    "bytes_stored", "compression_ratio", "shards", "seconds", "mb_per_s",
    "skipped_values", "content_duplicates",
}


def expected(kind: str) -> dict:
    return json.loads((FIXTURES / kind / "expected.json").read_text())


def as_records(case: dict) -> list:
    if case.get("keyed", True):
        return [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in case["records"]]
    return [bytes.fromhex(v) for v in case["records"]]


def options_from_flags(flags: list[str]) -> dict:
    """`bcd ingest` flags as ingest() keyword arguments: --value-column X ->
    value_column="X", --skip-nulls -> skip_nulls=True."""
    options, i = {}, 0
    while i < len(flags):
        name = flags[i].removeprefix("--").replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            options[name] = flags[i + 1]
            i += 2
        else:
            options[name] = True
            i += 1
    return options


def test_an_imagefolder_tree_becomes_a_keyed_dataset_of_its_files(tmp_path):
    root = FIXTURES / "imagefolder"
    files = {
        str(path.relative_to(root)).encode(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
    summary = bcd.ingest([root], tmp_path / "images")
    assert set(summary) == SUMMARY_FIELDS
    # Without dedup="content" no record is left out for its value.
    assert (summary["skipped_values"], summary["content_duplicates"]) == (0, [])
    assert summary["created"] is True
    assert summary["records"] == len(files) == 19
    assert summary["bytes_in"] == sum(map(len, files.values()))
    assert summary["dataset"] == str(tmp_path / "images")

    dataset = bcd.Dataset(tmp_path / "images")
    assert (dataset.keyed, dataset.compression) == (True, "lz4")
    assert dict(read_all(dataset)) == files
    # Depth first, each directory's entries sorted by name.
    assert [key for key, _ in read_all(dataset)][:3] == [b"labels.txt", b"train/bird/000.jpg", b"train/bird/001.jpg"]


def test_dir_options_select_files_and_keyless_drops_keys(tmp_path):
    root = FIXTURES / "imagefolder"
    summary = bcd.ingest(str(root), tmp_path / "d", include="*.jpg", exclude=["val/**"], keyless=True, compression=None, max_shard_size=4096, jobs=1)
    expected_values = [path.read_bytes() for path in sorted((root / "train").rglob("*.jpg"))]
    dataset = bcd.Dataset(tmp_path / "d")
    assert summary["records"] == 12 and summary["shards"] == len(list((tmp_path / "d").glob("*.bin")))
    assert (dataset.keyed, dataset.compression, dataset.max_shard_size) == (False, None, 4096)
    assert read_all(dataset) == expected_values


@pytest.mark.parametrize("archive", ["gnu.tar", "pax.tgz", "webdataset.tar"])
def test_a_tar_archive_becomes_a_dataset_of_its_regular_files(tmp_path, archive):
    members = expected("tar")[archive]
    files = [(m["name"].encode(), bytes.fromhex(m["hex"])) for m in members if m["type"] == "file"]
    summary = bcd.ingest([FIXTURES / "tar" / archive], tmp_path / "d", level="reference")
    assert read_all(bcd.Dataset(tmp_path / "d")) == files
    assert summary["records"] == len(files)
    links = sum(m["type"] in ("symlink", "hardlink") for m in members)
    assert sum(summary["skipped_members"].values()) >= links


@pytest.mark.parametrize("name", ["uint16", "int32"])
def test_a_megatron_dataset_becomes_one_record_per_sequence(tmp_path, name):
    want = expected("megatron")[name]
    bcd.ingest([FIXTURES / "megatron" / name], tmp_path / "d")
    dataset = bcd.Dataset(tmp_path / "d")
    tokens = [np.array(s["tokens"], dtype=want["dtype"]).tobytes() for s in want["sequences"]]
    assert read_all(dataset) == tokens
    fields = dataset.fields().to_pydict()
    assert fields["document"] == [s["document"] for s in want["sequences"]]
    assert fields["length"] == [s["length"] for s in want["sequences"]]
    assert dataset.metadata["megatron"]["dtype"] == want["dtype"]


def lmdb_entries(path, db=None) -> list:
    """Every entry of an LMDB environment as py-lmdb reads it, in key order."""
    import lmdb

    env = lmdb.open(str(path), subdir=path.is_dir(), readonly=True, lock=False, max_dbs=4)
    with env.begin(db=env.open_db(db.encode()) if db else None) as txn:
        entries = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    env.close()
    return entries


def test_an_lmdb_environment_becomes_its_entries_in_key_order(tmp_path):
    bcd.ingest([FIXTURES / "lmdb" / "raw"], tmp_path / "raw")
    assert read_all(bcd.Dataset(tmp_path / "raw")) == lmdb_entries(FIXTURES / "lmdb" / "raw")
    # A named database with lmdb_db=.
    env = FIXTURES / "lmdb" / "named"
    bcd.ingest([env], tmp_path / "val", lmdb_db="val")
    assert read_all(bcd.Dataset(tmp_path / "val")) == lmdb_entries(env, "val")


def test_lmdb_pickles_and_caffe_datums_become_values_and_fields(tmp_path):
    import pickle

    env = FIXTURES / "lmdb" / "pickle-dict"
    bcd.ingest([env], tmp_path / "dict", lmdb_value="pickle", value_column="image")
    dataset = bcd.Dataset(tmp_path / "dict")
    samples = [(k, pickle.loads(v)) for k, v in lmdb_entries(env)]
    assert read_all(dataset) == [(k, s["image"]) for k, s in samples]
    fields = dataset.fields().to_pydict()
    assert fields["label"] == [s["label"] for _, s in samples]
    assert fields["note"] == [s["note"] for _, s in samples]
    env = FIXTURES / "lmdb" / "pickle-tuple.lmdb"
    summary = bcd.ingest([env], tmp_path / "tuple", format="lmdb", lmdb_value="pickle")
    assert summary["skipped_members"] == {"folder2lmdb index key": 2}
    labels = [pickle.loads(v)[1] for k, v in lmdb_entries(env) if not k.startswith(b"__")]
    assert bcd.Dataset(tmp_path / "tuple").fields().to_pydict()["label"] == labels
    want = {e["key"]: e for e in expected("lmdb")["caffe-datum"]}
    bcd.ingest([FIXTURES / "lmdb" / "caffe-datum"], tmp_path / "caffe", lmdb_value="caffe-datum")
    fields = bcd.Dataset(tmp_path / "caffe").fields().to_pylist()
    assert [{k: f[k] for k in ("label", "channels", "height", "width", "encoded")} for f in fields] == [
        e["fields"] for e in want.values()
    ]


def test_lmdb_keywords_are_checked(tmp_path):
    with pytest.raises(ValueError, match=r'lmdb_value: "json": expected raw, pickle or caffe-datum'):
        bcd.ingest([FIXTURES / "lmdb" / "raw"], tmp_path / "d", lmdb_value="json")
    with pytest.raises(ValueError, match="value_column= applies to lmdb sources read with lmdb_value= pickle only"):
        bcd.ingest([FIXTURES / "lmdb" / "raw"], tmp_path / "d", value_column="image")
    with pytest.raises(Exception, match=r"holds named databases .* lmdb_db= NAME"):
        bcd.ingest([FIXTURES / "lmdb" / "named"], tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_an_mds_directory_becomes_one_record_per_sample_with_typed_fields(tmp_path):
    import pyarrow as pa

    want = expected("mds")["every-encoding"]
    bcd.ingest([FIXTURES / "mds" / "every-encoding"], tmp_path / "d", format="mds",
               value_column="blob", key_column="id")
    dataset = bcd.Dataset(tmp_path / "d")
    samples = want["samples"]
    assert read_all(dataset) == [
        (x["id"]["read"].encode(), bytes.fromhex(x["blob"]["stored"])) for x in samples]
    fields = dataset.fields()
    assert fields.schema.field("u64").type == pa.uint64()
    assert fields.schema.field("f16").type == pa.float16()
    table = fields.to_pydict()
    for column in ("i8", "u64", "text", "si", "sd"):
        assert table[column] == [x[column]["read"] for x in samples], column
    assert table["arr.dtype"] == [x["arr"]["read"]["dtype"] for x in samples]
    assert table["jpg"] == [bytes.fromhex(x["jpg"]["stored"]) for x in samples]
    assert dataset.metadata["mds"]["columns"]["arr"] == "ndarray"


def test_a_litdata_directory_becomes_one_record_per_item_named_by_its_pytree(tmp_path):
    want = expected("litdata")["dict"]
    bcd.ingest([FIXTURES / "litdata" / "dict"], tmp_path / "d", value_column="image",
               key_column="meta.id", fields=["label", "caption", "vec"])
    dataset = bcd.Dataset(tmp_path / "d")
    items = want["items"]
    assert read_all(dataset) == [
        (x["meta.id"]["read"].encode(), bytes.fromhex(x["image"]["stored"])) for x in items]
    table = dataset.fields().to_pydict()
    assert table["label"] == [x["label"]["read"] for x in items]
    assert table["caption"] == [x["caption"]["read"] for x in items]
    assert table["vec.shape"] == [x["vec"]["read"]["shape"] for x in items]
    assert sorted(table) == ["caption", "label", "vec", "vec.dtype", "vec.shape"]


def test_a_litdata_text_corpus_kept_as_an_arrow_footer_reads_as_streaming_dataset_does(tmp_path):
    rows = expected("litdata")["text-zstd"]["rows"]
    bcd.ingest([FIXTURES / "litdata" / "text-zstd"], tmp_path / "d", value_column="text",
               key_column="id", fields=["meta.page", "toks", "extra"])
    dataset = bcd.Dataset(tmp_path / "d")
    assert read_all(dataset) == [(x["id"].encode(), x["text"].encode()) for x in rows]
    table = dataset.fields().to_pydict()
    assert table["meta.page"] == [x["meta"]["page"] for x in rows]
    assert table["toks"] == [x["toks"] for x in rows]
    assert table["extra"] == [x.get("extra") for x in rows]
    assert dataset.metadata["litdata"]["rows"] == "arrow_footer"


def test_pickled_mds_columns_are_refused_unless_left_out(tmp_path):
    with pytest.raises(ValueError, match=r'column "obj" is pickled.*leave it out with fields='):
        bcd.ingest([FIXTURES / "mds" / "pickled"], tmp_path / "d")
    assert not (tmp_path / "d").exists()
    bcd.ingest([FIXTURES / "mds" / "pickled"], tmp_path / "d", fields="none")
    assert read_all(bcd.Dataset(tmp_path / "d")) == [b"b0", b"b1", b"b2"]


def test_brace_patterns_read_several_shards_in_order(tmp_path):
    tar = expected("tar")
    files = [
        (m["name"].encode(), bytes.fromhex(m["hex"]))
        for shard in ("shards-000000.tar", "shards-000001.tar", "shards-000002.tar")
        for m in tar[shard]
        if m["type"] == "file"
    ]
    bcd.ingest(str(FIXTURES / "tar" / "shards-{000000..000002}.tar"), tmp_path / "d")
    assert read_all(bcd.Dataset(tmp_path / "d")) == files
    # A single path-like is one source, as a single str is.
    bcd.ingest(FIXTURES / "tar" / "shards-000000.tar", tmp_path / "one")
    assert len(bcd.Dataset(tmp_path / "one")) == len(tar["shards-000000.tar"])


PARQUET_CASES = [
    case for case in expected("parquet")["cases"]
    if "records" in case and (case["files"][0].startswith(("codec-", "nulls", "hf-")) or "image" in case["args"])
]


@pytest.mark.parametrize("case", PARQUET_CASES, ids=lambda case: " ".join(case["files"] + case["args"]))
def test_a_parquet_column_becomes_the_values(tmp_path, case):
    options = options_from_flags(case["args"])
    summary = bcd.ingest([FIXTURES / "parquet" / name for name in case["files"]], tmp_path / "d", **options)
    dataset = bcd.Dataset(tmp_path / "d")
    assert dataset.keyed == case["keyed"]
    assert read_all(dataset) == as_records(case)
    assert summary["records"] == len(case["records"])


def test_a_null_value_fails_naming_file_and_row(tmp_path):
    case = next(c for c in expected("parquet")["cases"] if "error" in c)
    error = case["error"]
    with pytest.raises(ValueError, match=rf"{error['file']}.*row {error['row']}"):
        bcd.ingest([FIXTURES / "parquet" / case["files"][0]], tmp_path / "d", **options_from_flags(case["args"]))
    assert not (tmp_path / "d").exists()  # the dataset the run created is removed again


@pytest.mark.parametrize("case", [c for c in expected("csv")["cases"] if "records" in c], ids=lambda c: " ".join([c["csv"], *c["args"]]))
def test_a_csv_of_paths_becomes_the_files(tmp_path, case):
    options = options_from_flags(case["args"])
    if case["root"] is not None:
        options["root"] = FIXTURES / "csv" / case["root"]
    bcd.ingest([FIXTURES / "csv" / case["csv"]], tmp_path / "d", **options)
    assert read_all(bcd.Dataset(tmp_path / "d")) == as_records(case)


def test_a_csv_naming_a_missing_file_fails_naming_the_line(tmp_path):
    case = next(c for c in expected("csv")["cases"] if "error" in c)
    # The CSV's content is what is wrong (a row names a file that is not there).
    with pytest.raises(ValueError, match=r"missing\.csv: line 5") as raised:
        bcd.ingest([FIXTURES / "csv" / case["csv"]], tmp_path / "d")
    assert case["error"]["path"] in str(raised.value)


def test_ingesting_again_skips_or_refuses_duplicates(tmp_path):
    source = [FIXTURES / "tar" / "webdataset.tar"]
    first = bcd.ingest(source, tmp_path / "d")
    before = snapshot(tmp_path / "d")
    with pytest.raises(ValueError, match="duplicate key"):
        bcd.ingest(source, tmp_path / "d")
    assert snapshot(tmp_path / "d") == before
    again = bcd.ingest(source, tmp_path / "d", on_duplicate="skip")
    assert (again["created"], again["records"], again["skipped"]) == (False, 0, first["records"])


# Errors


def test_a_missing_source_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-dir"):
        bcd.ingest([tmp_path / "no-such-dir"], tmp_path / "d")
    with pytest.raises(FileNotFoundError, match="missing.tar"):
        bcd.ingest([tmp_path / "missing.tar"], tmp_path / "d")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    "sources, options, message",
    [
        (["tar/gnu.tar"], {"delimiter": ";"}, "delimiter= applies to csv sources only, not tar"),
        (["tar/gnu.tar"], {"value_column": "x", "format": "tar"}, "value_column= applies to parquet, hf-disk, lmdb, mds and litdata sources only, not tar"),
        (["parquet/codec-none.parquet"], {}, "parquet sources need value_column="),
        (["tar/gnu.tar"], {"key_column": "k"}, "key_column= applies to parquet, hf-disk, csv, mds and litdata sources only, not tar"),
        (["imagefolder/labels.txt"], {},
         r'labels\.txt: cannot tell its format from the name or the first bytes; '
         r'pass format="dir"\|"tar"\|"parquet"\|"hf-disk"\|"csv"\|"tfrecord"\|"jsonl"\|"megatron"\|"lmdb"\|"mds"\|"litdata"'),
        (["tar/gnu.tar"], {"format": "zip"}, "unknown source format"),
        (["tar/gnu.tar", "imagefolder"], {}, "different formats"),
        (["csv/list.csv"], {"delimiter": ";;"}, 'delimiter: ";;": the delimiter must be one ASCII character'),
        (["tar/gnu.tar"], {"on_duplicate": "overwrite"}, 'on_duplicate: "overwrite": expected error or skip'),
        (["tar/gnu.tar"], {"level": 13}, r'level: "13": expected 1\.\.12, fast or reference'),
        (["tar/gnu.tar"], {"level": "best"}, r'level: "best": expected 1\.\.12, fast or reference'),
        (["tar/gnu.tar"], {"compression": "zstd"}, "unsupported compression"),
        (["tar/gnu.tar"], {"max_shard_size": 0}, "max_shard_size"),
        (["tar/gnu.tar"], {"max_shard_size": "3 parsecs"}, 'max_shard_size: "3 parsecs": unknown unit'),
        (["tar/gnu.tar"], {"jobs": 0}, "jobs"),
        ([], {}, "no sources"),
        (["tar/gnu.tar"], {"fields": "none"}, "fields= applies to parquet, hf-disk, csv, tfrecord, mds and litdata sources only, not tar"),
        (["tar/gnu.tar"], {"field_type": {"a": "int64"}}, "field_type= applies to csv sources only, not tar"),
        (["csv/list.csv"], {"fields": "a,,b"}, 'fields: "a,,b": expected all, none, or field names'),
        (["csv/list.csv"], {"fields": ["a", "a"]}, 'fields: "a" is named twice'),
        (["csv/list.csv"], {"field_type": {"label": "int32"}}, 'field_type: "label": unknown field type "int32"'),
        (["csv/list.csv"], {"field_type": ["label"]}, 'field_type: "label": expected NAME=TYPE'),
        (["csv/list.csv"], {"fields": ["label"], "field_type": {"id": "string"}},
         'field_type= declares column "id", which is not a field \\(see fields=\\)'),
        (["parquet/codec-none.parquet"], {"value_column": "value", "fields": "value"},
         'fields= names "value", which is the value column'),
        (["csv/list.csv"], {"fields": ["nope"]}, r'list\.csv: line 1 \(header\): no column "nope" \(asked for by fields=\)'),
    ],
)
def test_wrong_options_are_value_errors_that_say_why(tmp_path, sources, options, message):
    with pytest.raises(ValueError, match=message):
        bcd.ingest([FIXTURES / name for name in sources], tmp_path / "d", **options)
    assert not (tmp_path / "d").exists()


def test_field_options_are_accepted_in_every_spelling(tmp_path):
    # The store side of fields is not written yet: the records are ingested as
    # before, whatever the fields (checked through the values).
    for i, options in enumerate([
        {"fields": "label"},
        {"fields": ["label", "id"]},
        {"fields": "none"},
        {"field_type": {"label": "string"}},
        {"field_type": ["label=string"]},
        {"field_type": "label=string"},
    ]):
        summary = bcd.ingest([FIXTURES / "csv" / "list.csv"], tmp_path / f"d{i}", **options)
        assert summary["records"] == 8, options


def test_the_wrong_format_for_a_file_fails_with_the_readers_message(tmp_path):
    with pytest.raises(ValueError, match=r"gnu\.tar"):
        bcd.ingest([FIXTURES / "tar" / "gnu.tar"], tmp_path / "d", format="parquet", value_column="v")
    assert not (tmp_path / "d").exists()


def test_options_that_contradict_the_dataset_are_value_errors(tmp_path):
    bcd.Dataset.create(tmp_path / "d", keyed=True, compression=None)
    before = snapshot(tmp_path / "d")
    for options, message in [({"compression": "lz4"}, "compression"), ({"max_shard_size": 5}, "max_shard_size"), ({"keyless": True}, "keyless")]:
        with pytest.raises(ValueError, match=message):
            bcd.ingest([FIXTURES / "tar" / "gnu.tar"], tmp_path / "d", **options)
    assert snapshot(tmp_path / "d") == before
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_option'"):
        bcd.ingest([FIXTURES / "tar" / "gnu.tar"], tmp_path / "d", no_such_option=1)
    with pytest.raises(TypeError, match="follow_links must be a bool"):
        bcd.ingest([FIXTURES / "tar" / "gnu.tar"], tmp_path / "d", follow_links="yes")
    assert snapshot(tmp_path / "d") == before


def test_a_source_keyword_given_as_none_is_not_given(tmp_path):
    # None is every source keyword's default: passing it to a format that does
    # not take the option is the same as leaving it out.
    summary = bcd.ingest([FIXTURES / "tar" / "gnu.tar"], tmp_path / "d", value_column=None, split=None)
    assert summary["records"] > 0
    with pytest.raises(ValueError, match="value_column= applies to"):
        bcd.ingest([FIXTURES / "tar" / "gnu.tar"], tmp_path / "e", value_column="v")
    assert not (tmp_path / "e").exists()


def test_ctrl_c_stops_the_ingest_and_commits_nothing(tmp_path):
    # A source that takes seconds to compress (2 bits of entropy a byte: many
    # short matches for the high-compression search, on one thread), in many
    # batches: the pipeline checks for the interrupt between batches. The
    # interrupt comes once the ingest is seen writing (its directory exists),
    # not after a delay raced against the machine's speed.
    source = tmp_path / "big"
    source.mkdir()
    rng = np.random.default_rng(0)
    for i in range(4000):
        (source / f"{i:04d}.bin").write_bytes(rng.integers(0, 4, 8 << 10, dtype=np.uint8).tobytes())
    target = tmp_path / "d"
    stop = threading.Event()

    def interrupt_once_writing():
        while not stop.is_set():
            if target.exists():
                _thread.interrupt_main()
                return
            stop.wait(0.001)

    # Python's own handler, whatever a library imported earlier in the session
    # installed: interrupt_main does nothing when SIGINT is not handled by Python.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher = threading.Thread(target=interrupt_once_writing)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bcd.ingest([source], target, level="reference", jobs=1)
    finally:
        stop.set()
        watcher.join()
        signal.signal(signal.SIGINT, previous)
    assert not target.exists()


def test_a_save_to_disk_directory_is_ingested_by_split_with_its_class_names(tmp_path):
    import datasets

    saved = FIXTURES / "hf_disk" / "splits"
    summary = bcd.ingest([str(saved)], tmp_path / "ds", value_column="text", key_column="id", split="train")
    assert summary["records"] == 3
    ds = bcd.Dataset(tmp_path / "ds")
    expected = datasets.load_from_disk(str(saved))["train"]
    assert [bytes(ds[str(row["id"]).encode()]) for row in expected] == [row["text"].encode() for row in expected]
    assert ds.metadata["class_names"] == expected.features["label"].names
    with pytest.raises(ValueError, match=r"no split 'dev'|no split \"dev\"; the splits are"):
        bcd.ingest([str(saved)], tmp_path / "other", value_column="text", split="dev")
    assert not (tmp_path / "other").exists()
