//! Fields back out (issue 10): `bcd export --samples` writes WebDataset samples
//! that webdataset reads back as the samples ingested, member for member and
//! byte for byte; `bcd export --to OUT.parquet` writes one row per record that
//! pyarrow and Hugging Face `datasets` read back with equal columns, values and
//! features. The Python side (webdataset 1.0.2, datasets, pyarrow) runs from the
//! test virtualenv and writes its inputs at test time.

use std::path::Path;

use serde_json::Value;

mod common;
use common::*;

/// Members of a tar file as Python's tarfile lists them: (name, bytes as hex).
const MEMBERS: &str = r#"
import json, sys, tarfile
out = []
for path in sys.argv[1:]:
    with tarfile.open(path) as tar:
        out += [[m.name, tar.extractfile(m).read().hex()] for m in tar.getmembers() if m.isfile()]
print(json.dumps(out))
"#;

/// Samples as webdataset's own reader groups them: [key, {ext: hex}] in order.
const SAMPLES: &str = r#"
import json, sys, webdataset as wds
out = []
for sample in wds.WebDataset(sys.argv[1:], shardshuffle=False, empty_check=False):
    out.append([sample["__key__"], {k: v.hex() for k, v in sorted(sample.items()) if not k.startswith("__")}])
print(json.dumps(out))
"#;

/// A WebDataset shard written by webdataset's TarWriter: 40 samples of
/// jpg + cls + json + txt, one without txt, one with a seg.png.
const WRITE_SHARD: &str = r#"
import json, sys, webdataset as wds
with wds.TarWriter(sys.argv[1]) as sink:
    for i in range(40):
        sample = {"__key__": f"s/{i:05d}", "jpg": bytes([i % 256]) * (100 + 37 * i),
                  "cls": i % 4, "json": {"caption": f"item {i}", "score": i / 8}}
        if i != 7:
            sample["txt"] = f"a text for {i}"
        if i == 11:
            sample["seg.png"] = b"\x89PNG" + bytes(20)
        sink.write(sample)
"#;

fn python_json(code: &str, args: &[&str]) -> Value {
    serde_json::from_slice(&run_python(code, args)).unwrap()
}

#[test]
fn a_webdataset_shard_ingested_and_exported_as_samples_comes_back_member_for_member() {
    let tmp = tempfile::tempdir().unwrap();
    let shard = tmp.path().join("shard-000000.tar");
    run_python(WRITE_SHARD, &[s(&shard)]);
    let dataset = tmp.path().join("ds");
    for extra in [&[][..], &["--json-fields"][..]] {
        let _ = std::fs::remove_dir_all(&dataset);
        let mut args = vec![
            "ingest",
            s(&shard),
            "--into",
            s(&dataset),
            "--samples",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        args.extend(["--max-shard-size", "2K"]);
        ok(&args);
        let out = tmp.path().join("out.tar");
        ok(&["export", s(&dataset), "--to", s(&out), "--samples"]);
        assert_eq!(
            python_json(MEMBERS, &[s(&out)]),
            python_json(MEMBERS, &[s(&shard)]),
            "members and bytes, with {extra:?}"
        );
        assert_eq!(
            python_json(SAMPLES, &[s(&out)]),
            python_json(SAMPLES, &[s(&shard)])
        );
    }

    // Split: --split-count counts samples, and no sample spans two archives.
    let pattern = tmp.path().join("part-%03d.tar");
    ok(&[
        "export",
        s(&dataset),
        "--to",
        s(&pattern),
        "--samples",
        "--split-count",
        "16",
    ]);
    let parts: Vec<String> = (0..3)
        .map(|n| {
            tmp.path()
                .join(format!("part-{n:03}.tar"))
                .display()
                .to_string()
        })
        .collect();
    assert!(!tmp.path().join("part-003.tar").exists());
    let per_part: Vec<usize> = parts
        .iter()
        .map(|p| python_json(SAMPLES, &[p]).as_array().unwrap().len())
        .collect();
    assert_eq!(per_part, [16, 16, 8]);
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    assert_eq!(
        python_json(SAMPLES, &refs),
        python_json(SAMPLES, &[s(&shard)])
    );
}

#[test]
fn records_without_sample_fields_export_as_key_and_field_members() {
    // An ImageFolder tree with labels: cat/0.jpg becomes sample cat/0 with
    // members jpg, label and label_index.
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    for (class, n) in [("cat", 3), ("dog", 2)] {
        std::fs::create_dir_all(tree.join(class)).unwrap();
        for i in 0..n {
            std::fs::write(tree.join(format!("{class}/{i}.jpg")), format!("{class}{i}")).unwrap();
        }
    }
    let dataset = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&tree),
        "--into",
        s(&dataset),
        "--labels",
        "folder",
        "--quiet",
    ]);
    let out = tmp.path().join("out.tar");
    ok(&["export", s(&dataset), "--to", s(&out), "--samples"]);
    let members = python_json(MEMBERS, &[s(&out)]);
    let names: Vec<&str> = members
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m[0].as_str().unwrap())
        .collect();
    assert_eq!(
        &names[..3],
        ["cat/0.jpg", "cat/0.label", "cat/0.label_index"]
    );
    assert_eq!(names.len(), 15);
    let samples = python_json(SAMPLES, &[s(&out)]);
    let last = &samples[4];
    assert_eq!(last[0], "dog/1");
    assert_eq!(last[1]["label"], hex_of(b"dog"));
    assert_eq!(last[1]["label_index"], hex_of(b"1"));
    assert_eq!(last[1]["jpg"], hex_of(b"dog1"));
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A Hugging Face dataset (Image, ClassLabel, string), written by `datasets`.
const WRITE_HF: &str = r#"
import io, sys, datasets, PIL.Image
images = []
for i in range(30):
    out = io.BytesIO()
    PIL.Image.new("RGB", (4 + i % 5, 3), (i * 8, 0, 0)).save(out, format="PNG")
    images.append({"bytes": out.getvalue(), "path": f"img{i}.png"})
features = datasets.Features({"image": datasets.Image(),
                              "label": datasets.ClassLabel(names=["cat", "dog", "bird"]),
                              "caption": datasets.Value("string")})
ds = datasets.Dataset.from_dict({"image": images, "label": [i % 3 for i in range(30)],
                                 "caption": [f"caption {i}" for i in range(30)]}, features=features)
ds.to_parquet(sys.argv[1])
"#;

/// Two Parquet files as `datasets` reads them: equal features, and equal
/// rows (images compared as bytes).
const SAME_HF: &str = r#"
import json, sys, datasets, pyarrow.parquet as pq
a, b = (datasets.Dataset.from_parquet(p) for p in sys.argv[1:3])
ta, tb = (pq.read_table(p) for p in sys.argv[1:3])
print(json.dumps({
    "features": a.features == b.features,
    "b_features": str(b.features),
    "columns": sorted(ta.column_names) == sorted(tb.column_names),
    "values": all(ta.column(c).to_pylist() == tb.column(c).to_pylist() for c in ta.column_names),
    "rows": b.num_rows,
}))
"#;

#[test]
fn a_hugging_face_parquet_ingested_and_exported_comes_back_with_equal_columns_and_features() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("hf.parquet");
    run_python(WRITE_HF, &[s(&source)]);
    let dataset = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&source),
        "--into",
        s(&dataset),
        "--value-column",
        "image",
        "--max-shard-size",
        "1K",
        "--quiet",
    ]);
    let back = tmp.path().join("back.parquet");
    ok(&["export", s(&dataset), "--to", s(&back)]);
    let same = python_json(SAME_HF, &[s(&source), s(&back)]);
    assert_eq!(same["features"], true, "{same}");
    assert_eq!(same["columns"], true, "{same}");
    assert_eq!(same["values"], true, "{same}");
    assert_eq!(same["rows"], 30);
    // A subset in record order.
    let subset = tmp.path().join("subset.parquet");
    ok(&[
        "export",
        s(&dataset),
        "--to",
        s(&subset),
        "--sample",
        "10",
        "--seed",
        "3",
    ]);
    let rows = python_json(
        "import json,sys,pyarrow.parquet as pq; print(json.dumps(pq.read_table(sys.argv[1]).column('caption').to_pylist()))",
        &[s(&subset)],
    );
    let captions: Vec<u64> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap()[8..].parse().unwrap())
        .collect();
    assert_eq!(captions.len(), 10);
    assert!(captions.windows(2).all(|w| w[0] < w[1]), "{captions:?}");
}

/// What `datasets` makes of an exported ImageFolder dataset.
const READ_FEATURES: &str = r#"
import json, sys, datasets
ds = datasets.Dataset.from_parquet(sys.argv[1])
row = ds[0]
print(json.dumps({"features": {k: type(v).__name__ for k, v in ds.features.items()},
                  "names": ds.features["label_index"].names,
                  "key": row["key"], "label": row["label"], "label_index": row["label_index"],
                  "size": list(row["value"].size)}))
"#;

#[test]
fn an_image_folder_exports_to_parquet_with_image_and_class_label_features() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    run_python(
        "import sys, PIL.Image\nfrom pathlib import Path\nfor c in ['ant', 'bee']:\n    (Path(sys.argv[1]) / c).mkdir(parents=True)\n    for i in range(3):\n        PIL.Image.new('L', (5, 2 + i)).save(Path(sys.argv[1]) / c / f'{i}.png')\n",
        &[s(&tree)],
    );
    let dataset = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&tree),
        "--into",
        s(&dataset),
        "--labels",
        "folder",
        "--quiet",
    ]);
    let out = tmp.path().join("images.parquet");
    ok(&["export", s(&dataset), "--to", s(&out), "--hf-image"]);
    let read = python_json(READ_FEATURES, &[s(&out)]);
    assert_eq!(
        read["features"],
        serde_json::json!({"key": "Value", "value": "Image", "label": "Value", "label_index": "ClassLabel"}),
        "{read}"
    );
    assert_eq!(read["names"], serde_json::json!(["ant", "bee"]));
    assert_eq!(read["key"], "ant/0.png");
    assert_eq!(read["label"], "ant");
    assert_eq!(read["label_index"], 0);
    assert_eq!(read["size"], serde_json::json!([5, 2]));
}

#[test]
fn misplaced_field_export_options_are_usage_errors_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/reference/v0.3.0-keyed-lz4");
    let parquet = tmp.path().join("x.parquet");
    let tar = tmp.path().join("x.tar");
    for args in [
        vec!["export", s(&dataset), "--to", s(&parquet), "--samples"],
        vec![
            "export",
            s(&dataset),
            "--to",
            s(&parquet),
            "--split-count",
            "2",
        ],
        vec![
            "export",
            s(&dataset),
            "--to",
            s(&parquet),
            "--rename-unsafe",
        ],
        vec!["export", s(&dataset), "--to", s(&tar), "--hf-image"],
    ] {
        let message = usage_error(&args);
        assert!(message.contains("--"), "{message}");
    }
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    // The reference's datasets have no fields: a Parquet export is key and
    // value; this one has keys that are not UTF-8, so they stay binary.
    let reference = bcd::Dataset::open(&dataset).unwrap();
    assert!(
        (0..reference.len()).any(|i| std::str::from_utf8(reference.key_at(i).unwrap()).is_err())
    );
    ok(&["export", s(&dataset), "--to", s(&parquet)]);
    let columns = python_json(
        "import json,sys,pyarrow.parquet as pq; t=pq.read_table(sys.argv[1]); print(json.dumps([t.column_names, t.num_rows, str(t.schema.field('key').type)]))",
        &[s(&parquet)],
    );
    assert_eq!(columns[0], serde_json::json!(["key", "value"]));
    assert_eq!(columns[1], reference.len());
    assert_eq!(columns[2], "binary");
}

#[test]
fn a_parquet_batch_that_spans_more_than_ten_shards_with_fields_exports_every_row() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("s");
    for i in 0..12 {
        let class = ["cat", "dog"][i % 2];
        std::fs::create_dir_all(tree.join(class)).unwrap();
        std::fs::write(tree.join(format!("{class}/{i:02}.jpg")), format!("img {i}")).unwrap();
    }
    let dataset = tmp.path().join("ds");
    // One record per shard: twelve shards, all in one batch of the export.
    ok(&[
        "ingest",
        s(&tree),
        "--into",
        s(&dataset),
        "--labels",
        "folder",
        "--max-shard-size",
        "1",
        "--quiet",
    ]);
    assert_eq!(bcd::Dataset::open(&dataset).unwrap().shards(), 12);
    let parquet = tmp.path().join("x.parquet");
    ok(&["export", s(&dataset), "--to", s(&parquet)]);
    let table = python_json(
        "import json,sys,pyarrow.parquet as pq; t=pq.read_table(sys.argv[1]); print(json.dumps([t.column('key').to_pylist(), t.column('label').to_pylist()]))",
        &[s(&parquet)],
    );
    let keys: Vec<String> = (0..12)
        .map(|i| format!("{}/{i:02}.jpg", ["cat", "dog"][i % 2]))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    let labels: Vec<&str> = sorted.iter().map(|k| &k[..3]).collect();
    assert_eq!(table, serde_json::json!([sorted, labels]));
}

/// An img2dataset-shaped Parquet file: its own `key` column (the sample id),
/// plus columns named like the other names `ls --fields` prints.
const WRITE_IMG2DATASET: &str = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
n = 4
pq.write_table(pa.table({
    "url": [f"https://example.com/{i}.jpg" for i in range(n)],
    "jpg": [bytes([i]) * 3 for i in range(n)],
    "key": [f"{i:09d}" for i in range(n)],
    "index": [100 + i for i in range(n)],
    "key_hex": ["ff" for i in range(n)],
    "field.key": [f"f{i}" for i in range(n)],
    "caption": [f"caption {i}" for i in range(n)],
}), sys.argv[1])
"#;

/// Lines of JSON as objects.
fn json_lines(out: &[u8]) -> Vec<serde_json::Map<String, Value>> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(|line| match serde_json::from_str(line).unwrap() {
            Value::Object(object) => object,
            other => panic!("not an object: {other}"),
        })
        .collect()
}

#[test]
fn ls_and_get_fields_keep_the_record_key_and_index_beside_fields_of_those_names() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("img.parquet");
    run_python(WRITE_IMG2DATASET, &[s(&file)]);
    let expect = |i: usize| {
        serde_json::json!({
            "field.key": format!("{i:09}"),
            "field.index": 100 + i,
            "field.key_hex": "ff",
            "field.field.key": format!("f{i}"),
            "caption": format!("caption {i}"),
        })
    };
    let keyed = tmp.path().join("keyed");
    let keyless = tmp.path().join("keyless");
    for (dataset, key_column) in [(&keyed, Some("url")), (&keyless, None)] {
        let mut args = vec!["ingest", s(&file), "--into", s(dataset), "--quiet"];
        args.extend(["--value-column", "jpg"]);
        if let Some(column) = key_column {
            args.extend(["--key-column", column]);
        }
        ok(&args);
        let listed = json_lines(&ok(&["ls", s(dataset), "--fields"]));
        assert_eq!(listed.len(), 4);
        for (i, mut object) in listed.into_iter().enumerate() {
            let (name, own) = match key_column {
                Some(_) => ("key", Value::from(format!("https://example.com/{i}.jpg"))),
                None => ("index", Value::from(i)),
            };
            assert_eq!(object.remove(name), Some(own), "{dataset:?} record {i}");
            let mut want = expect(i);
            if key_column.is_none() {
                want["url"] = format!("https://example.com/{i}.jpg").into();
            }
            assert_eq!(Value::Object(object), want, "{dataset:?} record {i}");
        }
    }
    let got = json_lines(&ok(&[
        "get",
        s(&keyed),
        "https://example.com/2.jpg",
        "--fields",
    ]));
    let mut want = expect(2);
    want["key"] = "https://example.com/2.jpg".into();
    assert_eq!(Value::Object(got[0].clone()), want);
    let got = json_lines(&ok(&["get", s(&keyless), "--index", "3", "--fields"]));
    let mut want = expect(3);
    want["index"] = 3.into();
    want["url"] = "https://example.com/3.jpg".into();
    assert_eq!(Value::Object(got[0].clone()), want);
}

/// Records keyed without an extension (`s/000`), with WebDataset-typed fields.
const WRITE_UNNAMED: &str = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
n = 5
pq.write_table(pa.table({
    "id": [f"s/{i:03d}" for i in range(n)],
    "data": [bytes([i, 255]) * (i + 1) for i in range(n)],
    "cls": pa.array([i % 3 for i in range(n)], pa.int64()),
    "txt": [f"text {i}" for i in range(n)],
}), sys.argv[1])
"#;

#[test]
fn a_sample_export_of_keys_without_an_extension_ingests_back_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("unnamed.parquet");
    run_python(WRITE_UNNAMED, &[s(&file)]);
    let first = tmp.path().join("first");
    ok(&[
        "ingest",
        s(&file),
        "--into",
        s(&first),
        "--value-column",
        "data",
        "--key-column",
        "id",
        "--quiet",
    ]);
    let tar = tmp.path().join("samples.tar");
    ok(&["export", s(&first), "--to", s(&tar), "--samples"]);
    let members = python_json(MEMBERS, &[s(&tar)]);
    assert_eq!(members[0][0], "s/000.bin", "{members}");
    // Our own export ingests back without being told its value extension.
    let again = tmp.path().join("again");
    ok(&[
        "ingest",
        s(&tar),
        "--into",
        s(&again),
        "--samples",
        "--quiet",
    ]);
    let read = |path: &Path| bcd_test_support::read_all(&bcd::Dataset::open(path).unwrap());
    assert_eq!(read(&again), read(&first));
    assert_eq!(
        json_lines(&ok(&["ls", s(&again), "--fields"])),
        json_lines(&ok(&["ls", s(&first), "--fields"]))
    );
    // And exports again to the same members.
    let tar_again = tmp.path().join("again.tar");
    ok(&["export", s(&again), "--to", s(&tar_again), "--samples"]);
    assert_eq!(python_json(MEMBERS, &[s(&tar_again)]), members);
}

/// The fixture's expected fields with bytes as base64, as `ls --fields` prints
/// them.
const SEQUENCE_EXPECTED: &str = r#"
import base64, json, sys
expected = json.load(open(sys.argv[1]))
def b64(v):
    if isinstance(v, dict) and set(v) == {"hex"}:
        return base64.b64encode(bytes.fromhex(v["hex"])).decode()
    if isinstance(v, list):
        return [b64(x) for x in v]
    return v
print(json.dumps([{k: b64(v) for k, v in row.items()} for row in expected["rows"]]))
"#;

#[test]
fn sequence_example_feature_lists_are_ingested_and_listed_as_list_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let fixtures = bcd_test_support::repo_root().join("fixtures/tfrecord");
    let dataset = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&fixtures.join("sequence-examples.tfrecord")),
        "--into",
        s(&dataset),
        "--feature",
        "image/encoded",
        "--quiet",
    ]);
    let expected = python_json(
        SEQUENCE_EXPECTED,
        &[s(&fixtures.join("sequence-expected.json"))],
    );
    let listed: Vec<Value> = json_lines(&ok(&["ls", s(&dataset), "--fields"]))
        .into_iter()
        .map(|mut row| {
            row.remove("index");
            Value::Object(row)
        })
        .collect();
    assert_eq!(Value::Array(listed), expected);
}

/// A Parquet file of pyarrow's canonical extension types (issue 20, item 13).
const WRITE_EXTENSION_TYPES: &str = r#"
import sys, uuid, pyarrow as pa, pyarrow.parquet as pq
tensor = pa.fixed_shape_tensor(pa.int32(), (2, 2))
pq.write_table(pa.table({
    "v": [b"a", b"b", b"c"],
    "id": pa.array([uuid.UUID(int=i).bytes for i in range(3)], pa.uuid()),
    "doc": pa.array(['{"a": 1}', "[]", "null"], pa.json_()),
    "t": pa.ExtensionArray.from_storage(tensor, pa.array([[1, 2, 3, 4]] * 3, pa.list_(pa.int32(), 4))),
}), sys.argv[1])
# The same column names, without the extensions.
pq.write_table(pa.table({
    "v": [b"d"], "id": pa.array([b"\0" * 16], pa.binary(16)), "doc": ["{}"],
    "t": pa.array([[1, 2, 3, 4]], pa.list_(pa.int32(), 4)),
}), sys.argv[2])
"#;

/// The types of each column of `path` as pyarrow reads them, from the dataset's
/// shard files of fields (`fields`; the Rust tests run before the Python package
/// is built) or from a Parquet file.
const READ_TYPES: &str = r#"
import sys, json, glob, os, pyarrow as pa, pyarrow.ipc, pyarrow.parquet as pq
if sys.argv[1] == "fields":
    shards = sorted(glob.glob(os.path.join(sys.argv[2], "*.fields.arrow")))
    table = pa.concat_tables([pa.ipc.open_file(f).read_all() for f in shards])
else:
    table = pq.read_table(sys.argv[2])
print(json.dumps({f.name: [str(f.type), table.column(f.name).to_pylist()] for f in table.schema if f.name != "v"}, default=repr))
"#;

#[test]
fn extension_types_of_a_parquet_file_survive_ingest_and_export() {
    let tmp = tempfile::tempdir().unwrap();
    let typed = tmp.path().join("typed.parquet");
    let plain = tmp.path().join("plain.parquet");
    run_python(WRITE_EXTENSION_TYPES, &[s(&typed), s(&plain)]);
    let dataset = tmp.path().join("ds");
    ok(&[
        "ingest",
        s(&typed),
        "--into",
        s(&dataset),
        "--value-column",
        "v",
        "--keyless",
        "--quiet",
    ]);
    let written = python_json(READ_TYPES, &["parquet", s(&typed)]);
    assert_eq!(python_json(READ_TYPES, &["fields", s(&dataset)]), written);
    assert!(
        written["id"][0].as_str().unwrap().contains("uuid"),
        "{written}"
    );
    let exported = tmp.path().join("out.parquet");
    ok(&["export", s(&dataset), "--to", s(&exported)]);
    let mut back = python_json(READ_TYPES, &["parquet", s(&exported)]);
    back.as_object_mut().unwrap().remove("index");
    assert_eq!(back, written);
    // The same bytes without the extension are another type: refused, naming
    // the file, and the dataset is as it was.
    let before = bcd_test_support::snapshot(&dataset);
    let message = fails(&[
        "ingest",
        s(&plain),
        "--into",
        s(&dataset),
        "--value-column",
        "v",
        "--keyless",
    ]);
    assert!(message.contains("extension"), "{message}");
    assert_eq!(bcd_test_support::snapshot(&dataset), before);
    // Two files of the run that disagree are refused naming the later one.
    let both = tmp.path().join("both");
    let message = fails(&[
        "ingest",
        s(&typed),
        s(&plain),
        "--into",
        s(&both),
        "--value-column",
        "v",
        "--keyless",
    ]);
    assert!(
        message.contains("plain.parquet") && message.contains("extension type arrow.uuid"),
        "{message}"
    );
}
