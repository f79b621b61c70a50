//! LMDB environments written by py-lmdb (`fixtures/lmdb/`), against what
//! py-lmdb reads of them at test time (with Python's `pickle.loads` and
//! protobuf's parser for the decoded layouts) and against the keys recorded in
//! `expected.json`; and environments that are truncated, corrupt, claim more
//! than they hold, or are not files.

mod fields_common;

use std::fs;
use std::path::{Path, PathBuf};

use bcd_converters::lmdb_source::{LmdbOptions, LmdbSource, LmdbValue};
use bcd_converters::{Record, Source, SourceError};
use fields_common::{fields_json, python, PRELUDE};
use serde_json::{json, Value};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/lmdb")
        .join(name)
}

fn options(value: LmdbValue, db: Option<&str>, value_column: Option<&str>) -> LmdbOptions {
    LmdbOptions {
        value,
        db: db.map(Into::into),
        value_column: value_column.map(Into::into),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The records as py-lmdb's script prints them: key and value in hex, fields.
fn rows(records: &[Record]) -> Value {
    Value::Array(
        records
            .iter()
            .map(|r| json!({"key": hex(&r.key), "value": hex(&r.value), "fields": fields_json(&r.fields).1}))
            .collect(),
    )
}

/// What py-lmdb reads of an environment, decoded as `mode` says.
const READ: &str = r#"
import importlib.util, pickle
import lmdb
path, mode, db = Path(sys.argv[2]), sys.argv[3], sys.argv[4]
spec = importlib.util.spec_from_file_location("make", sys.argv[5])
make = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make)
env = lmdb.open(str(path), subdir=path.is_dir(), readonly=True, lock=False, max_dbs=4)
handle = env.open_db(db.encode()) if db else None
def typed(v):
    # A list mixing ints and floats is typed as floats (as pyarrow types it).
    if isinstance(v, list) and any(isinstance(x, float) for x in v):
        return [float(x) for x in v]
    if isinstance(v, dict):
        return {k: typed(x) for k, x in v.items()}
    return v
rows = []
with env.begin(db=handle) as txn:
    for k, v in txn.cursor():
        k, v = bytes(k), bytes(v)
        if mode == "raw":
            rows.append({"key": k.hex(), "value": v.hex(), "fields": {}})
        elif mode == "pickle":
            obj = pickle.loads(v)
            if k in (b"__keys__", b"__len__"):
                continue
            if isinstance(obj, tuple):
                rows.append({"key": k.hex(), "value": obj[0].hex(), "fields": {"label": hexed(obj[1])}})
            else:
                value = obj.pop("image")
                rows.append({"key": k.hex(), "value": value.hex(), "fields": typed(hexed(obj))})
        else:
            d = make.datum_class().FromString(v)
            rows.append({"key": k.hex(), "value": d.data.hex(), "fields": {
                "label": d.label, "channels": d.channels, "height": d.height,
                "width": d.width, "encoded": d.encoded}})
print(json.dumps(rows))
"#;

fn py_lmdb(path: &Path, mode: &str, db: Option<&str>) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let script = format!(
        "import sys\nsys.argv += [{:?}, {mode:?}, {:?}, {:?}]\n{PRELUDE}{READ}",
        path.display().to_string(),
        db.unwrap_or(""),
        fixture("make_lmdb_fixtures.py").display().to_string(),
    );
    python(tmp.path(), &script)
}

fn read(path: &Path, options: LmdbOptions) -> Result<Vec<Record>, SourceError> {
    LmdbSource::new(&[path.to_path_buf()], options).collect()
}

fn expected_keys(name: &str) -> Vec<String> {
    let expected: Value =
        serde_json::from_str(&fs::read_to_string(fixture("expected.json")).unwrap()).unwrap();
    expected[name]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("skipped").is_none())
        .map(|e| e["key"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_entry_is_read_in_key_order_as_py_lmdb_reads_it() {
    let records = read(&fixture("raw"), LmdbOptions::default()).unwrap();
    assert_eq!(rows(&records), py_lmdb(&fixture("raw"), "raw", None));
    let keys: Vec<String> = records.iter().map(|r| hex(&r.key)).collect();
    assert_eq!(keys, expected_keys("raw"));
    // The empty value, the binary key and values over several pages are there.
    assert!(records
        .iter()
        .any(|r| r.key == b"empty" && r.value.is_empty()));
    assert!(records.iter().any(|r| r.value.len() == 70_000));
    // The data file itself names the environment too.
    let by_file = read(&fixture("raw/data.mdb"), LmdbOptions::default()).unwrap();
    assert_eq!(rows(&by_file), rows(&records));
}

#[test]
fn pickled_tuples_give_the_bytes_and_the_label_at_every_protocol() {
    let path = fixture("pickle-tuple.lmdb");
    let mut source = LmdbSource::new(
        std::slice::from_ref(&path),
        options(LmdbValue::Pickle, None, None),
    );
    let records: Vec<Record> = source.by_ref().map(Result::unwrap).collect();
    assert_eq!(rows(&records), py_lmdb(&path, "pickle", None));
    let keys: Vec<String> = records.iter().map(|r| hex(&r.key)).collect();
    assert_eq!(keys, expected_keys("pickle-tuple.lmdb"));
    // The scripts' __keys__ and __len__ entries are skipped and counted.
    assert_eq!(source.skipped().0.get("folder2lmdb index key"), Some(&2));
}

#[test]
fn pickled_dicts_give_the_value_column_and_typed_fields() {
    let path = fixture("pickle-dict");
    let expected = py_lmdb(&path, "pickle", None);
    // The only bytes entry is the value by default; naming it changes nothing.
    for column in [None, Some("image")] {
        let records = read(&path, options(LmdbValue::Pickle, None, column)).unwrap();
        assert_eq!(rows(&records), expected);
    }
    let error = read(&path, options(LmdbValue::Pickle, None, Some("label"))).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("\"label\" (`value_column`) is a int, not bytes"),
        "{error}"
    );
    let error = read(&path, options(LmdbValue::Pickle, None, Some("nope"))).unwrap_err();
    assert!(error.to_string().contains("no entry \"nope\""), "{error}");
}

#[test]
fn caffe_datums_give_the_image_and_its_fields() {
    let path = fixture("caffe-datum");
    let records = read(&path, options(LmdbValue::CaffeDatum, None, None)).unwrap();
    assert_eq!(rows(&records), py_lmdb(&path, "caffe", None));
    // A value that is not a Datum is an error naming the entry.
    let error = read(&fixture("raw"), options(LmdbValue::CaffeDatum, None, None)).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("raw/data.mdb") && message.contains("key \""),
        "{message}"
    );
}

#[test]
fn a_named_database_is_read_when_named_and_the_environment_refused_otherwise() {
    let path = fixture("named");
    for db in ["train", "val"] {
        let records = read(&path, options(LmdbValue::Raw, Some(db), None)).unwrap();
        assert_eq!(rows(&records), py_lmdb(&path, "raw", Some(db)));
    }
    let message = read(&path, LmdbOptions::default()).unwrap_err().to_string();
    assert!(
        message.contains("named databases") && message.contains("`lmdb_db`"),
        "{message}"
    );
    let message = read(&path, options(LmdbValue::Raw, Some("test"), None))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("no database named \"test\"") && message.contains("\"train\", \"val\""),
        "{message}"
    );
}

#[test]
fn pickles_of_every_protocol_are_read_as_pickle_loads_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let script = format!(
        "{PRELUDE}
import lmdb, pickle
env = lmdb.open(str(out / 'env'), map_size=1 << 22)
sample = {{'image': bytes(range(256)) * 3, 'label': -7, 'big': 2**62, 'name': 'caf' + chr(233) + chr(0x1f600) + ' a\\u0020b',
          'score': -0.1, 'ok': False, 'none': None, 'boxes': [[1.5, 2.0], [3.0, 4.25]],
          'meta': {{'w': 3, 'h': 4}}, 'raw': b'\\x00\\xff'}}
with env.begin(write=True) as txn:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        txn.put(b'p%d' % protocol, pickle.dumps(sample, protocol=protocol))
    txn.put(b'shared', pickle.dumps({{'image': b'x', 'pair': [sample['boxes']] * 2}}))
print('{{}}')
"
    );
    python(tmp.path(), &script);
    let env = tmp.path().join("env");
    let records = read(&env, options(LmdbValue::Pickle, None, Some("image"))).unwrap();
    assert_eq!(records.len(), 7);
    assert_eq!(rows(&records), py_lmdb(&env, "pickle", None));
}

#[test]
fn pickles_that_would_run_code_are_refused_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let script = format!(
        "{PRELUDE}
import lmdb, pickle, collections
env = lmdb.open(str(out / 'env'), map_size=1 << 20)
with env.begin(write=True) as txn:
    txn.put(b'a', pickle.dumps((b'x', 1)))
    txn.put(b'b', pickle.dumps(collections.OrderedDict(image=b'y')))
print('{{}}')
"
    );
    python(tmp.path(), &script);
    let mut source = LmdbSource::new(
        &[tmp.path().join("env")],
        options(LmdbValue::Pickle, None, None),
    );
    assert_eq!(source.next().unwrap().unwrap().key, b"a");
    let message = source.next().unwrap().unwrap_err().to_string();
    assert!(
        message.contains("key \"b\"") && message.contains("collections.OrderedDict"),
        "{message}"
    );
    assert!(source.next().is_none());
}

/// A copy of the raw fixture's directory, to damage.
fn damaged(change: impl FnOnce(&Path)) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::copy(fixture("raw/data.mdb"), tmp.path().join("data.mdb")).unwrap();
    change(&tmp.path().join("data.mdb"));
    tmp
}

/// Writes `bytes` at `at` (in place: the file may be a sparse terabyte).
fn patch(path: &Path, at: usize, bytes: &[u8]) {
    let file = fs::OpenOptions::new().write(true).open(path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, bytes, at as u64).unwrap();
}

/// The error of reading `dir` whole; it names the data file.
#[track_caller]
fn error_of(dir: &Path) -> String {
    let message = match read(dir, LmdbOptions::default()) {
        Ok(records) => panic!("read {} records of a damaged environment", records.len()),
        Err(error) => error.to_string(),
    };
    assert!(message.contains("data.mdb"), "{message}");
    message
}

#[test]
fn a_truncated_data_file_is_refused_naming_it() {
    let len = fs::metadata(fixture("raw/data.mdb")).unwrap().len();
    for keep in [0, 100, 4096, 4096 + 100, 8192, len / 2, len - 4096, len - 1] {
        let dir = damaged(|path| {
            fs::OpenOptions::new()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(keep)
                .unwrap()
        });
        let message = error_of(dir.path());
        assert!(
            message.contains("meta page") || message.contains("past the end"),
            "{keep}: {message}"
        );
    }
}

#[test]
fn meta_pages_that_are_not_lmdb_or_point_past_the_file_are_refused() {
    // Both meta pages' magic flipped: not an LMDB file.
    let dir = damaged(|path| {
        patch(path, 16, &[0]);
        patch(path, 4096 + 16, &[0]);
    });
    assert!(error_of(dir.path()).contains("not LMDB's"));
    // The meta page in use (the larger transaction id) given a last page or a
    // root page past the end of the file, or a page size that is not one.
    let meta = |path: &Path| -> usize {
        let data = fs::read(path).unwrap();
        // The meta page liblmdb uses: the larger transaction id.
        let txn = |at: usize| u64::from_le_bytes(data[at + 144..at + 152].try_into().unwrap());
        if txn(0) < txn(4096) {
            4096
        } else {
            0
        }
    };
    for (offset, bytes, says) in [
        (136, 1u64 << 40, "last page"),
        (128, 1u64 << 40, "root page"),
        (128, 1, "root page 1"),
    ] {
        let dir = damaged(|path| {
            let at = meta(path);
            patch(path, at + offset, &bytes.to_le_bytes());
        });
        let message = error_of(dir.path());
        assert!(message.contains(says), "{says}: {message}");
    }
    let dir = damaged(|path| patch(path, 40, &3000u32.to_le_bytes()));
    assert!(error_of(dir.path()).contains("page size 3000"));
}

#[test]
fn damaged_tree_pages_are_refused_before_liblmdb_walks_them() {
    // The root page of the main database (the meta page in use says which).
    let root = |path: &Path| -> usize {
        let data = fs::read(path).unwrap();
        let at = |o: usize| u64::from_le_bytes(data[o..o + 8].try_into().unwrap());
        let meta = if at(144) < at(4096 + 144) { 4096 } else { 0 };
        at(meta + 128) as usize * 4096
    };
    for (what, offset, bytes, says) in [
        (
            "page number",
            0,
            7u64.to_le_bytes().to_vec(),
            "its header says page 7",
        ),
        ("flags", 10, vec![0x40, 0], "not a branch or leaf page"),
        ("bounds", 12, vec![0xff, 0xff], "do not fit a page"),
        (
            "node offset",
            16,
            vec![0xfe, 0x0f],
            "lies outside the page's nodes",
        ),
    ] {
        let dir = damaged(|path| {
            let at = root(path);
            patch(path, at + offset, &bytes);
        });
        let message = error_of(dir.path());
        assert!(message.contains(says), "{what}: {message}");
    }
}

#[test]
fn a_sparse_file_claiming_a_terabyte_is_read_for_what_it_holds_or_refused() {
    // The file grown to a terabyte of holes: the pages in use are still read.
    let dir = damaged(|path| {
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(1 << 40)
            .unwrap()
    });
    let records = read(dir.path(), LmdbOptions::default()).unwrap();
    assert_eq!(rows(&records), py_lmdb(&fixture("raw"), "raw", None));
    // Its meta page then claiming every page, with the root in the holes
    // (zeros): refused by liblmdb's page checks, naming the file.
    let dir = damaged(|path| {
        let file = fs::OpenOptions::new().write(true).open(path).unwrap();
        file.set_len(1 << 40).unwrap();
        for at in [0usize, 4096] {
            patch(path, at + 136, &((1u64 << 28) - 1).to_le_bytes());
            patch(path, at + 128, &((1u64 << 28) - 2).to_le_bytes());
        }
    });
    let message = error_of(dir.path());
    assert!(message.contains("corrupt"), "{message}");
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("data.mdb");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let message = error_of(tmp.path());
    assert!(message.contains("a FIFO"), "{message}");
    let message = match read(&fifo, LmdbOptions::default()) {
        Ok(_) => panic!("read a FIFO"),
        Err(error) => error.to_string(),
    };
    assert!(message.contains("a FIFO"), "{message}");
}

#[test]
fn a_writer_that_commits_twice_during_the_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("env");
    fs::create_dir(&copy).unwrap();
    fs::copy(fixture("raw/data.mdb"), copy.join("data.mdb")).unwrap();
    let mut source = LmdbSource::new(std::slice::from_ref(&copy), LmdbOptions::default());
    assert!(source.next().unwrap().is_ok());
    // Two commits by another process while the source is between entries.
    let script = format!(
        "{PRELUDE}
import lmdb
env = lmdb.open(str(out / 'env'), map_size=1 << 24)
for i in range(2):
    with env.begin(write=True) as txn:
        txn.put(b'zz-new-%d' % i, b'x')
print('{{}}')
"
    );
    python(tmp.path(), &script);
    let message = loop {
        match source.next() {
            Some(Ok(_)) => continue,
            Some(Err(error)) => break error.to_string(),
            None => panic!("the read ended without noticing the writer"),
        }
    };
    assert!(
        message.contains("a writer committed 2 transactions"),
        "{message}"
    );
}
