//! Byte-for-byte interoperability with the Python reference implementation,
//! bitcask-dataset 0.2.0 and 0.3.0, in both directions.
//!
//! The reference runs through `tests/python/reference.py` in the virtualenv made by
//! `bash tests/python/setup-env.sh` (`<repo>/.venv`, or `$BCD_TEST_VENV`). Without it
//! these tests fail: they never skip. Each Python process costs ~0.3 s, so every test
//! batches its work into one process per reference version and step.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bcd::lz4_block::{self, Lz4Mode};
use bcd::{Compression, CreateOptions, Dataset, Error, ManifestVersion};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

/// A record as `(key, value)`; the key is empty for keyless datasets.
type Record = (Vec<u8>, Vec<u8>);

const V2: &str = "0.2.0";
const V3: &str = "0.3.0";

/// Small enough that the main corpus spans many shards, and that its largest
/// values (over 64 KiB) each get a shard of their own.
const SMALL_SHARDS: u64 = 64 * 1024;

/// The reference's default `max_shard_size` (1 GiB), written into manifests by 0.3.0.
const DEFAULT_SHARDS: u64 = 1 << 30;

/// The lock file this project's writers take; the reference neither makes nor knows it.
const LOCK_NAME: &str = ".bcd.lock";

/// Settings of a dataset under test.
#[derive(Clone, Copy, Debug)]
struct Spec {
    keyed: bool,
    compression: Compression,
}

const KEYED_LZ4: Spec = Spec {
    keyed: true,
    compression: Compression::Lz4,
};
const KEYED_UNCOMPRESSED: Spec = Spec {
    keyed: true,
    compression: Compression::None,
};
const KEYLESS_LZ4: Spec = Spec {
    keyed: false,
    compression: Compression::Lz4,
};
const KEYLESS_UNCOMPRESSED: Spec = Spec {
    keyed: false,
    compression: Compression::None,
};
const ALL_SPECS: [Spec; 4] = [
    KEYED_LZ4,
    KEYED_UNCOMPRESSED,
    KEYLESS_LZ4,
    KEYLESS_UNCOMPRESSED,
];

impl Spec {
    fn name(self) -> String {
        let keyed = if self.keyed { "keyed" } else { "keyless" };
        let compression = match self.compression {
            Compression::Lz4 => "lz4",
            Compression::None => "uncompressed",
        };
        format!("{keyed}-{compression}")
    }

    fn options(self, max_shard_size: u64) -> CreateOptions {
        CreateOptions {
            keyed: self.keyed,
            compression: self.compression,
            max_shard_size,
        }
    }
}

// --- The Python reference -------------------------------------------------

/// The virtualenv's interpreter; fails the test (never skips) when it is missing.
fn venv_python() -> PathBuf {
    let venv = match std::env::var_os("BCD_TEST_VENV") {
        Some(venv) => PathBuf::from(venv),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"),
    };
    let python = venv.join("bin").join("python");
    assert!(
        python.is_file(),
        "the Python reference environment is missing ({} does not exist): \
         run `bash tests/python/setup-env.sh` (or set BCD_TEST_VENV to a virtualenv it made)",
        python.display()
    );
    python
}

/// Runs `steps` (see `reference.py batch`) in one process of reference `version`
/// and returns one result per step.
fn reference(version: &str, steps: &[Value]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/reference.py");
    let mut child = Command::new(venv_python())
        .arg(&script)
        .args([version, "batch"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the Python reference: {e}"));
    let input = serde_json::to_vec(steps).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written from a thread: the reference may print much before it reads all.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().unwrap();
    let written = writer.join().unwrap();
    assert!(
        output.status.success(),
        "reference {version} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    written.expect("writing the reference's input");
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "reference {version} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    assert_eq!(results.len(), steps.len(), "one result per step");
    results
}

fn path_text(dir: &Path) -> &str {
    dir.to_str().expect("temporary paths are UTF-8")
}

fn compression_text(compression: Compression) -> &'static str {
    compression.as_manifest_str().unwrap_or("none")
}

/// A `create` step; `max_shard_size` `None` leaves the reference's default (and is
/// the only choice for 0.2.0, whose `create` does not take it).
fn create_step(dir: &Path, spec: Spec, max_shard_size: Option<u64>) -> Value {
    json!({
        "command": "create",
        "path": path_text(dir),
        "keyed": spec.keyed,
        "compression": compression_text(spec.compression),
        "max_shard_size": max_shard_size,
    })
}

/// An `extend` step; `max_shard_size` is only for 0.2.0, which takes it per extend.
fn extend_step(dir: &Path, keyed: bool, records: &[Record], max_shard_size: Option<u64>) -> Value {
    let input: Vec<Value> = records
        .iter()
        .map(|(key, value)| {
            if keyed {
                json!([hex(key), hex(value)])
            } else {
                assert!(key.is_empty(), "keyless records have no key");
                json!(hex(value))
            }
        })
        .collect();
    json!({
        "command": "extend",
        "path": path_text(dir),
        "max_shard_size": max_shard_size,
        "input": input,
    })
}

fn dump_step(dir: &Path) -> Value {
    json!({"command": "dump", "path": path_text(dir)})
}

fn compress_step(value: &[u8]) -> Value {
    json!({"command": "compress", "path": hex(value)})
}

/// What the reference read from a dataset.
#[derive(Debug)]
struct Dump {
    keyed: bool,
    compression: Compression,
    shards: u64,
    records: Vec<Record>,
}

fn parse_dump(result: &Value) -> Dump {
    let keyed = result["keyed"].as_bool().expect("keyed");
    let compression = match &result["compression"] {
        Value::Null => Compression::None,
        Value::String(s) if s == "lz4" => Compression::Lz4,
        other => panic!("unexpected compression {other}"),
    };
    let records = result["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|record| match record {
            Value::Array(pair) if keyed => (unhex(&pair[0]), unhex(&pair[1])),
            value if !keyed => (Vec::new(), unhex(value)),
            other => panic!("unexpected record {other}"),
        })
        .collect();
    Dump {
        keyed,
        compression,
        shards: result["shards"].as_u64().expect("shards"),
        records,
    }
}

/// Checks that the reference read exactly `expected` from a dataset of `spec`
/// that Rust sees with `shards` shards.
fn assert_dump(result: &Value, spec: Spec, shards: u64, expected: &[Record], context: &str) {
    let dump = parse_dump(result);
    assert_eq!(
        (dump.keyed, dump.compression),
        (spec.keyed, spec.compression),
        "{context}: settings"
    );
    assert_records_eq(&dump.records, expected, context);
    assert_eq!(dump.shards, shards, "{context}: shard count");
}

// --- Bytes ------------------------------------------------------------------

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.extend_from_slice(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]);
    }
    String::from_utf8(text).unwrap()
}

fn unhex(value: &Value) -> Vec<u8> {
    fn nibble(digit: u8) -> u8 {
        match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            _ => panic!("{:?} is not a lowercase hex digit", digit as char),
        }
    }
    let text = value.as_str().expect("a hex string").as_bytes();
    assert!(text.len().is_multiple_of(2), "odd-length hex");
    text.chunks_exact(2)
        .map(|pair| (nibble(pair[0]) << 4) | nibble(pair[1]))
        .collect()
}

/// A deterministic generator (splitmix64), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn new(tag: &str) -> Rng {
        let mut rng = Rng(0x5eed);
        for b in tag.bytes() {
            rng.0 ^= u64::from(b);
            rng.next();
        }
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// Text-like bytes that LZ4 compresses well.
    fn text(&mut self, len: usize) -> Vec<u8> {
        const WORDS: [&str; 12] = [
            "bitcask", "dataset", "shard", "manifest", "record", "value", "key", "lz4", "block",
            "the", "of", "and",
        ];
        let mut out = Vec::with_capacity(len + 16);
        while out.len() < len {
            out.extend_from_slice(WORDS[self.below(WORDS.len())].as_bytes());
            out.push(if self.below(9) == 0 { b'\n' } else { b' ' });
        }
        out.truncate(len);
        out
    }
}

/// Value sizes around LZ4's edges (minimum match, last literals, 64 KiB window).
const VALUE_SIZES: [usize; 24] = [
    0, 1, 2, 3, 4, 5, 7, 12, 13, 15, 16, 17, 31, 64, 100, 255, 256, 257, 1000, 4096, 65_535,
    65_536, 65_537, 300_000,
];

/// Keys that stress binary handling: all 256 one-byte keys (so NUL and 0xFF), the
/// empty key, invalid UTF-8, all byte values in one key, a long key.
fn binary_keys(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    keys.extend([
        Vec::new(),
        b"\0\0".to_vec(),
        b"a\0b".to_vec(),
        b"\xff\xfe\xfd\xfc".to_vec(),
        b"\xc3\x28".to_vec(),     // invalid UTF-8: bad continuation byte
        b"\xed\xa0\x80".to_vec(), // a UTF-16 surrogate, invalid in UTF-8
        b"\xc0\xaf".to_vec(),     // an overlong encoding
        b"\x80\x80\x80".to_vec(), // lone continuation bytes
        "café/😀.jpg".as_bytes().to_vec(), // valid UTF-8, for contrast
        b"name with \"quotes\" and \\".to_vec(),
        (0..=255u8).collect(),
        (0..=255u8).rev().collect(),
        rng.bytes(5000),
    ]);
    keys
}

/// A corpus of records: binary keys prefixed with `tag` (so corpora with different
/// tags share no key), values of every size in [`VALUE_SIZES`], both compressible
/// and random, then many small values. Keys are empty when `!keyed`.
fn corpus(keyed: bool, tag: &str) -> Vec<Record> {
    let mut rng = Rng::new(tag);
    let mut values = Vec::new();
    for size in VALUE_SIZES {
        values.push(rng.text(size));
        values.push(rng.bytes(size));
    }
    values.push(vec![0; 70_000]);
    values.push(b"\x10\0\0\0not an lz4 block, but it starts like one".to_vec());
    let keys = binary_keys(&mut rng);
    assert!(keys.len() > values.len());
    let records: Vec<Record> = keys
        .into_iter()
        .enumerate()
        .map(|(i, key)| {
            let value = match values.get(i) {
                Some(value) => value.clone(),
                None if i % 5 == 0 => Vec::new(),
                None if i % 2 == 0 => rng.bytes(i % 40),
                None => rng.text(i % 300),
            };
            let key = if keyed {
                [tag.as_bytes(), &key].concat()
            } else {
                Vec::new()
            };
            (key, value)
        })
        .collect();
    assert_unique_keys(keyed, &records);
    records
}

/// A smaller corpus for steps that run many times: 40 records up to 20 KB.
fn small_corpus(keyed: bool, tag: &str) -> Vec<Record> {
    let mut rng = Rng::new(tag);
    let sizes = [0, 1, 13, 100, 3000, 9000, 20_000];
    let records: Vec<Record> = (0..40)
        .map(|i| {
            let size = sizes[i % sizes.len()];
            let value = if i % 2 == 0 {
                rng.text(size)
            } else {
                rng.bytes(size)
            };
            let key = if keyed {
                [tag.as_bytes(), &[i as u8, 0, 0xff, 0x80], &rng.bytes(i % 5)].concat()
            } else {
                Vec::new()
            };
            (key, value)
        })
        .collect();
    assert_unique_keys(keyed, &records);
    records
}

fn assert_unique_keys(keyed: bool, records: &[Record]) {
    if keyed {
        let keys: HashSet<&[u8]> = records.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys.len(), records.len(), "test corpus keys must be unique");
    }
}

fn describe(record: &Record) -> String {
    let (key, value) = record;
    format!(
        "key \"{}\" ({} bytes), value of {} bytes starting {}",
        key[..key.len().min(40)].escape_ascii(),
        key.len(),
        value.len(),
        hex(&value[..value.len().min(16)])
    )
}

/// Compares full record lists, reporting the first difference rather than
/// printing megabytes.
fn assert_records_eq(actual: &[Record], expected: &[Record], context: &str) {
    if actual == expected {
        return;
    }
    match actual.iter().zip(expected).position(|(a, e)| a != e) {
        Some(i) => panic!(
            "{context}: record {i} differs:\n  got      {}\n  expected {}\n({} records, expected {})",
            describe(&actual[i]),
            describe(&expected[i]),
            actual.len(),
            expected.len()
        ),
        None => panic!(
            "{context}: {} records, expected {} (the common prefix agrees)",
            actual.len(),
            expected.len()
        ),
    }
}

// --- The Rust side ----------------------------------------------------------

fn rust_extend(dataset: &mut Dataset, records: &[Record]) {
    let summary = if dataset.keyed() {
        dataset.extend(records.iter().map(|(k, v)| (k, v)))
    } else {
        dataset.extend_values(records.iter().map(|(_, v)| v))
    }
    .unwrap();
    assert_eq!(summary.records, records.len() as u64);
}

/// Reads `dataset` back through every read path and checks it holds exactly
/// `expected`, in order.
fn assert_rust_reads(dataset: &Dataset, spec: Spec, expected: &[Record], context: &str) {
    assert_eq!(
        (dataset.keyed(), dataset.compression()),
        (spec.keyed, spec.compression),
        "{context}: settings"
    );
    assert_eq!(dataset.len(), expected.len(), "{context}: len");
    assert_eq!(
        dataset.is_empty(),
        expected.is_empty(),
        "{context}: is_empty"
    );
    let mut buffer = Vec::new();
    let mut actual = Vec::with_capacity(dataset.len());
    for index in 0..dataset.len() {
        let value = dataset.at(index).unwrap().into_owned();
        assert_eq!(
            dataset.at_with_buffer(index, &mut buffer).unwrap(),
            &value[..],
            "{context}: at_with_buffer({index})"
        );
        let key = if spec.keyed {
            dataset.key_at(index).unwrap().to_vec()
        } else {
            Vec::new()
        };
        actual.push((key, value));
    }
    assert_records_eq(&actual, expected, context);
    assert!(
        matches!(
            dataset.at(expected.len()),
            Err(Error::IndexOutOfRange { .. })
        ),
        "{context}: at(len) must be out of range"
    );
    assert!(dataset.verify().is_empty(), "{context}: verify");

    if spec.keyed {
        for (index, (key, value)) in expected.iter().enumerate() {
            assert!(dataset.contains(key), "{context}: contains record {index}");
            assert_eq!(
                dataset.position(key).unwrap(),
                Some(index),
                "{context}: position"
            );
            assert_eq!(
                dataset.get(key).unwrap().as_deref(),
                Some(&value[..]),
                "{context}: get record {index}"
            );
            assert_eq!(
                dataset.get_with_buffer(key, &mut buffer).unwrap(),
                Some(&value[..]),
                "{context}: get_with_buffer record {index}"
            );
        }
        let present: HashSet<&[u8]> = expected.iter().map(|(k, _)| k.as_slice()).collect();
        let mut absent: Vec<Vec<u8>> = vec![b"absent".to_vec(), Vec::new(), vec![0], vec![0xff]];
        absent.extend(
            expected
                .iter()
                .take(3)
                .map(|(k, _)| [k.as_slice(), b"\0"].concat()),
        );
        for key in absent.iter().filter(|k| !present.contains(k.as_slice())) {
            assert!(!dataset.contains(key), "{context}: contains absent key");
            assert_eq!(dataset.get(key).unwrap(), None, "{context}: get absent key");
        }
    } else {
        assert!(
            !dataset.contains(b""),
            "{context}: keyless contains nothing"
        );
        assert!(matches!(dataset.get(b""), Err(Error::WrongKeying(_))));
        assert!(matches!(dataset.key_at(0), Err(Error::WrongKeying(_))));
    }
}

// --- Directories ------------------------------------------------------------

/// Every file of a dataset directory, by name.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            assert!(entry.file_type().unwrap().is_file(), "unexpected {entry:?}");
            let name = entry.file_name().into_string().unwrap();
            (name, fs::read(entry.path()).unwrap())
        })
        .collect()
}

/// A snapshot of a directory Rust wrote to, without the (empty) lock file that is
/// Rust's only addition to the format.
fn snapshot_without_lock(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = snapshot(dir);
    if let Some(lock) = files.remove(LOCK_NAME) {
        assert!(lock.is_empty(), "{LOCK_NAME} holds data");
    }
    files
}

fn shard_file_count(files: &BTreeMap<String, Vec<u8>>) -> usize {
    files.keys().filter(|name| name.ends_with(".bin")).count()
}

/// Asserts that two directories hold the same files byte for byte, explaining the
/// first difference in terms of records.
fn assert_same_files(rust_dir: &Path, reference_dir: &Path, context: &str) {
    let rust = snapshot_without_lock(rust_dir);
    let reference = snapshot(reference_dir);
    let names = |files: &BTreeMap<String, Vec<u8>>| files.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&rust), names(&reference), "{context}: file names");
    for (name, bytes) in &rust {
        let theirs = &reference[name];
        if bytes == theirs {
            continue;
        }
        let at = bytes.iter().zip(theirs).position(|(a, b)| a != b);
        panic!(
            "{context}: {name} differs: Rust wrote {} bytes, the reference {}, first difference at \
             byte {at:?}; {}",
            bytes.len(),
            theirs.len(),
            first_stored_difference(rust_dir, reference_dir)
        );
    }
}

/// Which record's stored bytes differ first between two datasets, for failure messages.
fn first_stored_difference(rust_dir: &Path, reference_dir: &Path) -> String {
    let (Ok(rust), Ok(reference)) = (Dataset::open(rust_dir), Dataset::open(reference_dir)) else {
        return "(the datasets cannot both be opened to compare records)".into();
    };
    for index in 0..rust.len().min(reference.len()) {
        let (ours, theirs) = (
            rust.stored_at(index).unwrap(),
            reference.stored_at(index).unwrap(),
        );
        if ours != theirs {
            let value_len = reference.at(index).map(|v| v.len());
            let at = ours.iter().zip(theirs).position(|(a, b)| a != b);
            return format!(
                "record {index} (value of {value_len:?} bytes) is stored as {} bytes by Rust and \
                 {} bytes by the reference, first differing at byte {at:?}",
                ours.len(),
                theirs.len()
            );
        }
    }
    format!(
        "every common stored value agrees ({} vs {} records)",
        rust.len(),
        reference.len()
    )
}

// ---------------------------------------------------------------------------
// Rust writes, the reference reads
// ---------------------------------------------------------------------------

/// Rust writes a dataset in three extends (plus one that adds nothing), and an
/// empty one; both reference releases read back exactly the records, in order,
/// from the same number of shards. The extends of LZ4 datasets use each
/// compression mode: the default (what the reference writes), the adaptive one
/// (incompressible values as literal-only blocks) and the fast one.
fn reference_reads_what_rust_writes(spec: Spec) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rust");
    let empty_dir = tmp.path().join("rust-empty");
    let first = corpus(spec.keyed, "");
    let second = corpus(spec.keyed, "second/");
    let third = small_corpus(spec.keyed, "third/");

    let mut dataset = Dataset::create(&dir, spec.options(SMALL_SHARDS)).unwrap();
    rust_extend(&mut dataset, &first);
    rust_extend(&mut dataset, &[]);
    dataset.set_lz4_mode(Lz4Mode::Adaptive(9));
    rust_extend(&mut dataset, &second);
    dataset.set_lz4_mode(Lz4Mode::Fast(1));
    rust_extend(&mut dataset, &third);
    let expected = [first.as_slice(), &second, &third].concat();
    let shards = dataset.shards();
    assert!(
        shards > 10,
        "the corpus should span many shards, not {shards}"
    );
    if spec.compression == Compression::Lz4 {
        // The adaptive extend did store some values as literal-only blocks.
        let mut literal = Vec::new();
        let literal_blocks = (first.len()..first.len() + second.len())
            .filter(|&i| {
                lz4_block::literal_block_into(&expected[i].1, &mut literal);
                !expected[i].1.is_empty() && dataset.stored_at(i).unwrap() == literal
            })
            .count();
        assert!(literal_blocks >= 4, "{literal_blocks} literal-only blocks");
    }
    drop(dataset);
    Dataset::create(&empty_dir, spec.options(SMALL_SHARDS)).unwrap();

    for version in [V3, V2] {
        let results = reference(version, &[dump_step(&dir), dump_step(&empty_dir)]);
        let context = format!("reference {version} reading Rust's {}", spec.name());
        assert_dump(&results[0], spec, shards, &expected, &context);
        assert_dump(&results[1], spec, 0, &[], &format!("{context} (empty)"));
    }
}

#[test]
fn reference_reads_what_rust_writes_keyed_lz4() {
    reference_reads_what_rust_writes(KEYED_LZ4);
}

#[test]
fn reference_reads_what_rust_writes_keyed_uncompressed() {
    reference_reads_what_rust_writes(KEYED_UNCOMPRESSED);
}

#[test]
fn reference_reads_what_rust_writes_keyless_lz4() {
    reference_reads_what_rust_writes(KEYLESS_LZ4);
}

#[test]
fn reference_reads_what_rust_writes_keyless_uncompressed() {
    reference_reads_what_rust_writes(KEYLESS_UNCOMPRESSED);
}

// ---------------------------------------------------------------------------
// The reference writes, Rust reads
// ---------------------------------------------------------------------------

/// Each reference release writes a dataset in two extends, and an empty one; Rust
/// reads back exactly the records through every read path, from the same number
/// of shards the reference itself maps.
fn rust_reads_what_reference_writes(spec: Spec) {
    let tmp = tempfile::tempdir().unwrap();
    let first = corpus(spec.keyed, "");
    let second = corpus(spec.keyed, "second/");
    let expected = [first.clone(), second.clone()].concat();

    for version in [V3, V2] {
        let dir = tmp.path().join(version);
        let empty_dir = tmp.path().join(format!("{version}-empty"));
        // 0.3.0 keeps max_shard_size in the manifest; 0.2.0 takes it per extend.
        let (at_create, per_extend) = match version {
            V3 => (Some(SMALL_SHARDS), None),
            _ => (None, Some(SMALL_SHARDS)),
        };
        let results = reference(
            version,
            &[
                create_step(&dir, spec, at_create),
                extend_step(&dir, spec.keyed, &first, per_extend),
                extend_step(&dir, spec.keyed, &second, per_extend),
                dump_step(&dir),
                create_step(&empty_dir, spec, at_create),
            ],
        );
        let context = format!("Rust reading reference {version}'s {}", spec.name());

        let dataset = Dataset::open(&dir).unwrap();
        assert_rust_reads(&dataset, spec, &expected, &context);
        // The reference reads its own writing back the same, from as many shards.
        assert_dump(&results[3], spec, dataset.shards(), &expected, &context);
        assert!(
            dataset.shards() > 10,
            "{context}: {} shards",
            dataset.shards()
        );
        let manifest = dataset.manifest();
        match version {
            V3 => assert_eq!(
                (manifest.version, manifest.max_shard_size),
                (ManifestVersion::V0_3, SMALL_SHARDS)
            ),
            _ => assert_eq!(
                (manifest.version, manifest.max_shard_size),
                (ManifestVersion::V0_2, DEFAULT_SHARDS)
            ),
        }

        let empty = Dataset::open(&empty_dir).unwrap();
        assert_rust_reads(&empty, spec, &[], &format!("{context} (empty)"));
        assert_eq!(empty.shards(), 0);
    }
}

#[test]
fn rust_reads_what_reference_writes_keyed_lz4() {
    rust_reads_what_reference_writes(KEYED_LZ4);
}

#[test]
fn rust_reads_what_reference_writes_keyed_uncompressed() {
    rust_reads_what_reference_writes(KEYED_UNCOMPRESSED);
}

#[test]
fn rust_reads_what_reference_writes_keyless_lz4() {
    rust_reads_what_reference_writes(KEYLESS_LZ4);
}

#[test]
fn rust_reads_what_reference_writes_keyless_uncompressed() {
    rust_reads_what_reference_writes(KEYLESS_UNCOMPRESSED);
}

// ---------------------------------------------------------------------------
// Byte identity
// ---------------------------------------------------------------------------

/// The same records written by Rust with its default settings and by reference
/// 0.3.0 give identical directories: manifest.json and every .bin and .idx, byte
/// for byte (Rust adds only its empty lock file). Covers the default options, all
/// four settings with many shards, and an empty dataset.
#[test]
fn rust_and_reference_0_3_0_write_identical_files() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cases: Vec<(String, Spec, Option<u64>)> = vec![
        ("defaults".into(), KEYLESS_LZ4, None),
        ("keyed-defaults".into(), KEYED_LZ4, None),
    ];
    for spec in ALL_SPECS {
        cases.push((
            format!("{}-small-shards", spec.name()),
            spec,
            Some(SMALL_SHARDS),
        ));
    }

    let mut steps = Vec::new();
    for (name, spec, max_shard_size) in &cases {
        let (rust_dir, reference_dir) = (
            tmp.path().join(format!("rust-{name}")),
            tmp.path().join(format!("ref-{name}")),
        );
        let options = match max_shard_size {
            None => CreateOptions {
                keyed: spec.keyed,
                ..CreateOptions::default()
            },
            Some(size) => spec.options(*size),
        };
        let mut dataset = Dataset::create(&rust_dir, options).unwrap();
        steps.push(create_step(&reference_dir, *spec, *max_shard_size));
        for tag in ["", "second/"] {
            let records = corpus(spec.keyed, tag);
            rust_extend(&mut dataset, &records);
            steps.push(extend_step(&reference_dir, spec.keyed, &records, None));
        }
    }
    let empty = (tmp.path().join("rust-empty"), tmp.path().join("ref-empty"));
    Dataset::create(&empty.0, CreateOptions::default()).unwrap();
    steps.push(create_step(&empty.1, KEYLESS_LZ4, None));
    reference(V3, &steps);

    for (name, _, max_shard_size) in &cases {
        let rust_dir = tmp.path().join(format!("rust-{name}"));
        let reference_dir = tmp.path().join(format!("ref-{name}"));
        assert_same_files(&rust_dir, &reference_dir, name);
        let shards = shard_file_count(&snapshot(&reference_dir));
        match max_shard_size {
            None => assert_eq!(shards, 2, "{name}: one shard per extend"),
            Some(_) => assert!(shards > 10, "{name}: only {shards} shards"),
        }
    }
    assert_same_files(&empty.0, &empty.1, "empty");
    assert_eq!(
        fs::read_to_string(empty.1.join("manifest.json")).unwrap(),
        r#"{"keyed": false, "compression": "lz4", "max_shard_size": 1073741824, "shards": 0}"#
    );
}

/// Reference 0.2.0 writes the same shard files as Rust (given the same
/// max_shard_size per extend); only its manifest lacks max_shard_size.
#[test]
fn rust_and_reference_0_2_0_write_identical_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let mut steps = Vec::new();
    for spec in ALL_SPECS {
        let rust_dir = tmp.path().join(format!("rust-{}", spec.name()));
        let reference_dir = tmp.path().join(format!("ref-{}", spec.name()));
        let mut dataset = Dataset::create(&rust_dir, spec.options(SMALL_SHARDS)).unwrap();
        steps.push(create_step(&reference_dir, spec, None));
        for tag in ["", "second/"] {
            let records = corpus(spec.keyed, tag);
            rust_extend(&mut dataset, &records);
            steps.push(extend_step(
                &reference_dir,
                spec.keyed,
                &records,
                Some(SMALL_SHARDS),
            ));
        }
    }
    reference(V2, &steps);

    for spec in ALL_SPECS {
        let rust_dir = tmp.path().join(format!("rust-{}", spec.name()));
        let reference_dir = tmp.path().join(format!("ref-{}", spec.name()));
        let mut rust = snapshot_without_lock(&rust_dir);
        let mut reference = snapshot(&reference_dir);
        let rust_manifest = String::from_utf8(rust.remove("manifest.json").unwrap()).unwrap();
        let reference_manifest =
            String::from_utf8(reference.remove("manifest.json").unwrap()).unwrap();
        let shards = shard_file_count(&reference);
        assert!(shards > 10, "{}: only {shards} shards", spec.name());
        let compression = match spec.compression {
            Compression::Lz4 => "\"lz4\"",
            Compression::None => "null",
        };
        let fields = format!("\"keyed\": {}, \"compression\": {compression}", spec.keyed);
        assert_eq!(
            reference_manifest,
            format!("{{{fields}, \"shards\": {shards}}}")
        );
        assert_eq!(
            rust_manifest,
            format!("{{{fields}, \"max_shard_size\": {SMALL_SHARDS}, \"shards\": {shards}}}")
        );
        if rust != reference {
            // Same names and bytes apart from the manifests: reuse the explanation.
            assert_same_files(&rust_dir, &reference_dir, &spec.name());
        }
    }
}

/// `lz4_block::compress_into` in the default mode produces exactly the stored
/// bytes of the reference's `_compress` (0.3.0 and 0.2.0) for a spread of inputs.
#[test]
fn lz4_compression_matches_reference() {
    let mut rng = Rng::new("lz4");
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for len in 0..=40 {
        inputs.push(rng.text(len));
        inputs.push(vec![b'a'; len]);
    }
    for len in [1, 5, 12, 13, 17, 64, 1000, 65_535, 65_536, 65_537, 300_000] {
        inputs.push(rng.bytes(len));
    }
    for len in [4096, 65_536, 300_000] {
        inputs.push(rng.text(len));
    }
    inputs.push(vec![0; 1 << 20]);
    // Repeats beyond the 64 KiB window, and random data with zero runs.
    let block = rng.bytes(70_000);
    inputs.push([block.as_slice(), &block, &block[..1000]].concat());
    let mut patchy = rng.bytes(200_000);
    for start in (0..patchy.len()).step_by(5000) {
        patchy[start..start + 2000].fill(0);
    }
    inputs.push(patchy);
    inputs.push((0..=255u8).cycle().take(100_000).collect());
    // Short periods, which liblz4's HC match finder treats as repeating patterns.
    for period in [&b"ab"[..], b"abc", b"\0\0\0\x01", b"0123456789abcdef0123"] {
        inputs.push(period.iter().copied().cycle().take(50_000).collect());
        let mut mixed = rng.text(20_000);
        mixed.extend(period.iter().copied().cycle().take(10_000));
        mixed.extend(rng.bytes(5_000));
        inputs.push(mixed);
    }

    let steps: Vec<Value> = inputs.iter().map(|input| compress_step(input)).collect();
    for version in [V3, V2] {
        let results = reference(version, &steps);
        let mut ours = Vec::new();
        for (input, result) in inputs.iter().zip(&results) {
            lz4_block::compress_into(input, Lz4Mode::default(), &mut ours).unwrap();
            let theirs = unhex(result);
            if ours != theirs {
                let at = ours.iter().zip(&theirs).position(|(a, b)| a != b);
                panic!(
                    "reference {version}: compressing {} bytes starting {}: Rust made {} bytes, \
                     the reference {}, first differing at byte {at:?}",
                    input.len(),
                    hex(&input[..input.len().min(16)]),
                    ours.len(),
                    theirs.len()
                );
            }
            assert_eq!(lz4_block::decompress(&theirs).unwrap(), *input);
        }
    }
}

// ---------------------------------------------------------------------------
// Alternating writers
// ---------------------------------------------------------------------------

/// Shard size limit of the alternating tests: each turn's records span several shards.
const TURN_SHARDS: u64 = 8 * 1024;

/// The records each side adds on `turn`, per dataset of [`ALL_SPECS`].
fn turn_records(turn: usize) -> Vec<Vec<Record>> {
    ALL_SPECS
        .iter()
        .map(|spec| small_corpus(spec.keyed, &format!("turn {turn}/")))
        .collect()
}

/// Checks, once the turns are over, that the reference's `dumps` and Rust (through
/// `handles` if given, and a freshly opened handle) all see exactly `expected`.
fn assert_union_seen(
    dirs: &[PathBuf],
    dumps: &[Value],
    handles: Option<&mut [Dataset]>,
    expected: &[Vec<Record>],
    version: &str,
) {
    let mut handles = handles.map(|h| h.iter_mut());
    for (i, spec) in ALL_SPECS.iter().enumerate() {
        let context = format!("{} after extends alternating with {version}", spec.name());
        let dataset = Dataset::open(&dirs[i]).unwrap();
        assert_rust_reads(&dataset, *spec, &expected[i], &context);
        assert_dump(&dumps[i], *spec, dataset.shards(), &expected[i], &context);
        assert!(
            dataset.shards() > 8,
            "{context}: {} shards",
            dataset.shards()
        );
        if let Some(handle) = handles.as_mut().and_then(Iterator::next) {
            handle.refresh().unwrap();
            assert_rust_reads(handle, *spec, &expected[i], &context);
            assert_eq!(handle.shards(), dataset.shards(), "{context}");
        }
    }
}

/// Rust and reference 0.3.0 take turns extending the same datasets (Rust, Python,
/// Rust, Python); both see the union, in order. One Rust handle per dataset lives
/// through all turns, so its extends must pick up the reference's shards first.
#[test]
fn extends_alternating_with_reference_0_3_0_see_the_union_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = ALL_SPECS
        .iter()
        .map(|spec| tmp.path().join(spec.name()))
        .collect();
    let mut handles: Vec<Dataset> = ALL_SPECS
        .iter()
        .zip(&dirs)
        .map(|(spec, dir)| Dataset::create(dir, spec.options(TURN_SHARDS)).unwrap())
        .collect();
    let mut expected: Vec<Vec<Record>> = vec![Vec::new(); ALL_SPECS.len()];
    let mut dumps = Vec::new();

    for turn in 0..4 {
        let records = turn_records(turn);
        if turn % 2 == 0 {
            for (i, records) in records.iter().enumerate() {
                let committed = Dataset::open(&dirs[i]).unwrap().shards();
                rust_extend(&mut handles[i], records);
                assert!(
                    handles[i].shards() >= committed + 2,
                    "several shards per turn"
                );
                assert_eq!(handles[i].len(), expected[i].len() + records.len());
            }
        } else {
            let mut steps: Vec<Value> = (0..ALL_SPECS.len())
                .map(|i| extend_step(&dirs[i], ALL_SPECS[i].keyed, &records[i], None))
                .collect();
            let last = turn == 3;
            if last {
                steps.extend(dirs.iter().map(|dir| dump_step(dir)));
            }
            let results = reference(V3, &steps);
            if last {
                dumps = results[ALL_SPECS.len()..].to_vec();
            }
        }
        for (expected, records) in expected.iter_mut().zip(records) {
            expected.extend(records);
        }
    }
    assert_union_seen(&dirs, &dumps, Some(&mut handles), &expected, V3);
}

/// The same with reference 0.2.0, which creates the datasets and takes its
/// max_shard_size per extend (Python, Rust, Python, Rust, Python). Rust extends a
/// 0.2.0 manifest with the default shard size and rewrites it in the 0.3.0 layout,
/// which 0.2.0 reads and extends in turn.
#[test]
fn extends_alternating_with_reference_0_2_0_see_the_union_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = ALL_SPECS
        .iter()
        .map(|spec| tmp.path().join(spec.name()))
        .collect();
    let mut expected: Vec<Vec<Record>> = vec![Vec::new(); ALL_SPECS.len()];
    let mut dumps = Vec::new();

    for turn in 0..5 {
        let records = turn_records(turn);
        if turn % 2 == 1 {
            for (i, records) in records.iter().enumerate() {
                let mut dataset = Dataset::open(&dirs[i]).unwrap();
                assert_eq!(dataset.manifest().version, ManifestVersion::V0_2);
                assert_rust_reads(&dataset, ALL_SPECS[i], &expected[i], "before Rust's turn");
                let shards = dataset.shards();
                rust_extend(&mut dataset, records);
                // 0.2.0 manifests carry no max_shard_size: Rust uses the default.
                assert_eq!(dataset.shards(), shards + 1);
                let manifest = fs::read_to_string(dirs[i].join("manifest.json")).unwrap();
                assert!(
                    manifest.contains("\"max_shard_size\": 1073741824"),
                    "{manifest}"
                );
            }
        } else {
            let mut steps = Vec::new();
            for (i, spec) in ALL_SPECS.iter().enumerate() {
                if turn == 0 {
                    steps.push(create_step(&dirs[i], *spec, None));
                }
                steps.push(extend_step(
                    &dirs[i],
                    spec.keyed,
                    &records[i],
                    Some(TURN_SHARDS),
                ));
            }
            let last = turn == 4;
            if last {
                steps.extend(dirs.iter().map(|dir| dump_step(dir)));
            }
            let results = reference(V2, &steps);
            if last {
                dumps = results[ALL_SPECS.len()..].to_vec();
            }
        }
        for (expected, records) in expected.iter_mut().zip(records) {
            expected.extend(records);
        }
    }
    assert_union_seen(&dirs, &dumps, None, &expected, V2);
}

// ---------------------------------------------------------------------------
// Duplicate keys
// ---------------------------------------------------------------------------

/// A Rust extend of a reference-written dataset that repeats a key the reference
/// wrote (or repeats a key within itself) fails with `DuplicateKey`, even after
/// new shard files were written, and leaves every file byte-identical; Rust adds
/// only its empty lock file.
#[test]
fn rust_extend_repeating_a_reference_key_fails_and_changes_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let records = corpus(true, "");
    let mut rng = Rng::new("fresh");
    // New records: enough data for several new shards, and more records than one
    // of `Dataset::extend`'s compression batches (1024), so that shard files are
    // written before the duplicate arrives.
    let mut fresh: Vec<Record> = (0..4)
        .map(|i| (format!("fresh {i}").into_bytes(), rng.bytes(100_000)))
        .collect();
    fresh.extend((0..1100).map(|i| (format!("small {i}").into_bytes(), rng.text(i % 200))));

    for version in [V3, V2] {
        let dir = tmp.path().join(version);
        let (at_create, per_extend) = match version {
            V3 => (Some(SMALL_SHARDS), None),
            _ => (None, Some(SMALL_SHARDS)),
        };
        reference(
            version,
            &[
                create_step(&dir, KEYED_LZ4, at_create),
                extend_step(&dir, true, &records, per_extend),
            ],
        );
        let before = snapshot(&dir);
        assert!(!before.contains_key(LOCK_NAME));
        let mut dataset = Dataset::open(&dir).unwrap();
        let shards = dataset.shards();
        let next_shard = format!("{shards:06}.bin");

        let repeated_keys: [&[u8]; 5] =
            [b"", b"\0", b"\xff", b"\xc3\x28", &records.last().unwrap().0];
        for duplicate in repeated_keys {
            let context = format!(
                "reference {version}, duplicate key \"{}\" ({} bytes)",
                duplicate[..duplicate.len().min(40)].escape_ascii(),
                duplicate.len()
            );
            // Through a transaction: new shard files exist when the duplicate is refused.
            let mut extend = dataset.begin_extend().unwrap();
            for (key, value) in &fresh {
                extend.push(key, value).unwrap();
            }
            assert!(
                dir.join(&next_shard).exists(),
                "{context}: nothing was written yet"
            );
            match extend.push(duplicate, b"another value") {
                Err(Error::DuplicateKey { key }) => assert_eq!(key.0, duplicate, "{context}"),
                other => panic!("{context}: expected DuplicateKey, got {other:?}"),
            }
            drop(extend);
            assert_eq!(
                snapshot_without_lock(&dir),
                before,
                "{context}: files changed"
            );

            // Through `extend`, all or nothing.
            let batch = fresh
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .chain([(duplicate, b"another value".as_slice())]);
            match dataset.extend(batch) {
                Err(Error::DuplicateKey { key }) => assert_eq!(key.0, duplicate, "{context}"),
                other => panic!("{context}: expected DuplicateKey, got {other:?}"),
            }
            assert_eq!(
                snapshot_without_lock(&dir),
                before,
                "{context}: files changed"
            );
            assert_eq!((dataset.len(), dataset.shards()), (records.len(), shards));
        }

        // A key repeated within the extend itself, in a later batch.
        let batch = [&fresh[..], &fresh[..1]].concat();
        match dataset.extend(batch.iter().map(|(k, v)| (k, v))) {
            Err(Error::DuplicateKey { key }) => assert_eq!(key.0, fresh[0].0),
            other => panic!("reference {version}: expected DuplicateKey, got {other:?}"),
        }
        assert_eq!(
            snapshot_without_lock(&dir),
            before,
            "reference {version}: files changed"
        );

        let context = format!("reference {version}'s dataset after refused extends");
        assert_rust_reads(&dataset, KEYED_LZ4, &records, &context);
        assert_rust_reads(&Dataset::open(&dir).unwrap(), KEYED_LZ4, &records, &context);
    }
}

/// The reference extends a dataset that carries this project's persisted index
/// (`.bcd-index`), which it neither reads nor updates: the next open here finds the
/// file stale for the new shards, indexes them from the shards, sees every record,
/// and rewrites the file to cover them. The reference, for its part, reads the
/// dataset with the file in it.
#[test]
fn reference_extending_past_the_persisted_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let first = corpus(true, "");
    let second = corpus(true, "second/");
    let expected = [first.clone(), second.clone()].concat();
    let always = bcd::OpenOptions {
        index_file_min_records: Some(0),
        index_file_min_bytes: None,
        index_file_min_tail: 0,
    };
    let storage = std::sync::Arc::new(bcd::storage::FileSystem);

    let options = CreateOptions {
        keyed: true,
        compression: Compression::Lz4,
        max_shard_size: SMALL_SHARDS,
    };
    drop(Dataset::create(&dir, options).unwrap());
    let mut dataset = Dataset::open_with(&dir, always, storage.clone()).unwrap();
    rust_extend(&mut dataset, &first);
    assert!(dataset.uses_index_file());
    let covered = dataset.shards();
    let stale = fs::read(dir.join(".bcd-index")).unwrap();
    drop(dataset);

    let results = reference(
        V3,
        &[extend_step(&dir, true, &second, None), dump_step(&dir)],
    );
    assert_eq!(fs::read(dir.join(".bcd-index")).unwrap(), stale);

    let dataset = Dataset::open_with(&dir, always, storage).unwrap();
    assert!(dataset.shards() > covered);
    let context = "reference with .bcd-index";
    assert_dump(&results[1], KEYED_LZ4, dataset.shards(), &expected, context);
    assert!(dataset.uses_index_file());
    assert_rust_reads(
        &dataset,
        KEYED_LZ4,
        &expected,
        "Rust after the reference extended",
    );
    assert_ne!(
        fs::read(dir.join(".bcd-index")).unwrap(),
        stale,
        "rewritten"
    );
    let reopened =
        Dataset::open_with(&dir, always, std::sync::Arc::new(bcd::storage::FileSystem)).unwrap();
    assert_rust_reads(
        &reopened,
        KEYED_LZ4,
        &expected,
        "Rust through the rewritten file",
    );
}
