//! Bad input never panics, and round trips hold.
//!
//! * `manifest_*`: `Manifest::parse` on arbitrary bytes, on structurally plausible
//!   manifests and on mutated valid ones never panics, and every error names the file.
//! * `mutated_dataset_*`: small valid datasets (keyed/keyless, lz4/none, several shards,
//!   a 0.2.0 manifest, an empty dataset) get arbitrary mutations (bit flips, overwritten
//!   bytes and index sizes, truncation, appended bytes, whole files replaced, files
//!   deleted, the manifest rewritten). An independent model of the format, reading the
//!   files itself, decides whether `Dataset::open` must succeed and, if not, which file
//!   it must name; if it opens, every read API is exercised and checked against the
//!   model, and every `CorruptValue` must name the shard file and record.
//! * `refresh_*`: the same for `Dataset::refresh` picking up shards another writer
//!   committed (some of them damaged); a failed refresh leaves the handle unchanged.
//! * `lz4_*`: `declared_len`/`decompress`/`decompress_into` never panic on arbitrary or
//!   mutated input, never declare more than `255 * (len - 4) + 64` bytes, and
//!   compress -> decompress round trips in every mode.
//! * `round_trip_*`: random records in one or several extends with a small
//!   `max_shard_size` read back identically, and land in exactly the shards an
//!   independent model of the sharding rule predicts, byte for byte.

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::OnceLock;

use bcd::lz4_block::{self, Lz4Mode};
use bcd::{Compression, CreateOptions, Dataset, Error, Manifest};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

const MANIFEST: &str = bcd::format::MANIFEST_NAME;
const MAX_MANIFEST_BYTES: usize = bcd::format::MAX_MANIFEST_BYTES as usize;

fn shard_name(id: u64, ext: &str) -> String {
    format!("{id:06}.{ext}")
}

/// `cases` for a test, unless `PROPTEST_CASES` asks for more or fewer (for a deeper
/// one-off run: `PROPTEST_CASES=5000 cargo test --release --test corrupt_input`).
fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        // Shrinking file-system cases is slow; keep it bounded.
        max_shrink_iters: 2048,
        ..Config::default()
    }
}

/// An edit of a byte string.
#[derive(Clone, Debug)]
enum ByteOp {
    Flip(Index, u8),
    Set(Index, u8),
    /// Overwrites 4 bytes at a 4-aligned offset: in an .idx file, one size.
    SetU32(Index, u32),
    Insert(Index, Vec<u8>),
    Remove(Index, usize),
    Truncate(Index),
    Append(Vec<u8>),
    Replace(Vec<u8>),
}

fn interesting_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1u32),
        Just(u32::MAX),
        Just(u32::MAX - 1),
        Just(i32::MAX as u32),
        Just(0x7E00_0000u32),
        0u32..80,
        any::<u32>(),
    ]
}

fn byte_op() -> impl Strategy<Value = ByteOp> {
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(i, bit)| ByteOp::Flip(i, bit)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| ByteOp::Set(i, b)),
        3 => (any::<Index>(), interesting_u32()).prop_map(|(i, v)| ByteOp::SetU32(i, v)),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| ByteOp::Insert(i, b)),
        1 => (any::<Index>(), 1usize..9).prop_map(|(i, n)| ByteOp::Remove(i, n)),
        2 => any::<Index>().prop_map(ByteOp::Truncate),
        1 => prop::collection::vec(any::<u8>(), 1..12).prop_map(ByteOp::Append),
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(ByteOp::Replace),
    ]
}

fn apply_byte_op(bytes: &mut Vec<u8>, op: &ByteOp) {
    let len = bytes.len();
    match op {
        ByteOp::Flip(i, bit) if len > 0 => bytes[i.index(len)] ^= 1 << bit,
        ByteOp::Set(i, b) if len > 0 => bytes[i.index(len)] = *b,
        ByteOp::SetU32(i, v) if len >= 4 => {
            let at = i.index(len / 4) * 4;
            bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        ByteOp::SetU32(_, v) => bytes.extend_from_slice(&v.to_le_bytes()),
        ByteOp::Insert(i, b) => {
            let at = i.index(len + 1);
            bytes.splice(at..at, b.iter().copied());
        }
        ByteOp::Remove(i, n) if len > 0 => {
            let at = i.index(len);
            let end = (at + n).min(len);
            bytes.drain(at..end);
        }
        ByteOp::Truncate(i) => bytes.truncate(i.index(len + 1)),
        ByteOp::Append(b) => bytes.extend_from_slice(b),
        ByteOp::Replace(b) => *bytes = b.clone(),
        // Edits of a byte that does not exist.
        ByteOp::Flip(..) | ByteOp::Set(..) | ByteOp::Remove(..) => {}
    }
}

/// Manifests that get past the JSON parser: every field of either reference layout,
/// with plausible and implausible values, missing, extra or duplicated fields, in
/// any order.
fn manifest_text() -> impl Strategy<Value = String> {
    fn one_of(options: &[&'static str]) -> impl Strategy<Value = String> {
        prop::sample::select(options.to_vec()).prop_map(str::to_owned)
    }
    let keyed = prop_oneof![
        6 => one_of(&["true", "false"]),
        1 => one_of(&["null", "1", "0", "\"true\"", "[]"]),
    ];
    let compression = prop_oneof![
        6 => one_of(&["null", "\"lz4\""]),
        1 => one_of(&["\"LZ4\"", "\"zstd\"", "\"\"", "0", "{}", "false"]),
    ];
    let number = prop_oneof![
        4 => (0u64..6).prop_map(|n| n.to_string()),
        2 => (1u64..200).prop_map(|n| n.to_string()),
        1 => one_of(&[
            "1073741824",
            "18446744073709551615",
            "18446744073709551616",
            "-1",
            "-0",
            "0.0",
            "1.0",
            "2e0",
            "1e400",
            "true",
            "null",
            "\"1\"",
        ]),
    ];
    let max_shard_size = prop::option::weighted(0.8, number.clone());
    let extra = prop::option::weighted(
        0.15,
        (
            one_of(&["keyed", "shards", "max_shard_size", "x", ""]),
            number.clone(),
        ),
    );
    (
        keyed,
        compression,
        max_shard_size,
        number,
        extra,
        any::<bool>(),
    )
        .prop_flat_map(|(keyed, compression, max, shards, extra, compact)| {
            let mut fields = vec![
                ("keyed".to_owned(), keyed),
                ("compression".to_owned(), compression),
                ("shards".to_owned(), shards),
            ];
            if let Some(max) = max {
                fields.push(("max_shard_size".to_owned(), max));
            }
            if let Some(extra) = extra {
                fields.push(extra);
            }
            Just(fields).prop_shuffle().prop_map(move |fields| {
                let sep = if compact { "," } else { ", " };
                let colon = if compact { ":" } else { ": " };
                let body: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("\"{k}\"{colon}{v}"))
                    .collect();
                format!("{{{}}}", body.join(sep))
            })
        })
}

// ---------------------------------------------------------------------------
// (a) Manifest::parse
// ---------------------------------------------------------------------------

fn check_manifest_parse(bytes: &[u8]) {
    let path = Path::new("/some/dataset/manifest.json");
    match Manifest::parse(bytes, path) {
        Ok(m) => {
            assert!(m.max_shard_size > 0, "{m:?}");
            // What it parsed, it writes back in a form it parses to the same state.
            let again = Manifest::parse(&m.to_bytes(), path).expect("to_bytes output parses");
            assert_eq!(
                (again.keyed, again.compression, again.max_shard_size),
                (m.keyed, m.compression, m.max_shard_size)
            );
            assert_eq!(again.shards, m.shards);
        }
        Err(e) => {
            let message = e.to_string();
            assert!(
                matches!(&e, Error::InvalidManifest { path: p, .. } if p == path),
                "{e:?}"
            );
            assert!(
                message.starts_with("/some/dataset/manifest.json: invalid manifest: "),
                "{message}"
            );
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn manifest_parse_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..160)) {
        check_manifest_parse(&bytes);
    }

    #[test]
    fn manifest_parse_structured(text in manifest_text()) {
        check_manifest_parse(text.as_bytes());
    }

    #[test]
    fn manifest_parse_mutated(
        text in manifest_text(),
        ops in prop::collection::vec(byte_op(), 1..4),
    ) {
        let mut bytes = text.into_bytes();
        for op in &ops {
            apply_byte_op(&mut bytes, op);
        }
        check_manifest_parse(&bytes);
    }
}

#[test]
fn manifest_parse_deep_nesting_and_odd_json() {
    let deep = "[".repeat(100_000);
    check_manifest_parse(deep.as_bytes());
    let deep_object = format!(
        "{{\"keyed\": {}, \"compression\": null, \"shards\": 0}}",
        "[".repeat(10_000)
    );
    check_manifest_parse(deep_object.as_bytes());
    for odd in [
        "\u{feff}{\"keyed\": true, \"compression\": null, \"shards\": 0}",
        "{\"keyed\": true, \"compression\": null, \"shards\": 0} trailing",
        "{\"keyed\": true, \"compression\": null, \"shards\": 0}\n",
        "{\"keyed\": true, \"keyed\": false, \"compression\": null, \"shards\": 0}",
        "{\"keyed\": true, \"compression\": \"lz\\u0034\", \"shards\": 0}",
        "{\"keyed\": true, \"compression\": null, \"shards\": 1e2}",
        "{\"keyed\": true, \"compression\": null, \"shards\": 100000000000000000000000000000}",
        "\"\\ud800\"",
        "nul",
    ] {
        check_manifest_parse(odd.as_bytes());
    }
}

#[test]
fn manifest_read_rejects_oversized_file_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"{\"keyed\": true, \"compression\": null, \"shards\": 0}".to_vec();
    text.resize(MAX_MANIFEST_BYTES + 1, b' ');
    fs::write(dir.path().join(MANIFEST), &text).unwrap();
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::InvalidManifest { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(&dir.path().join(MANIFEST).display().to_string()),
        "{err}"
    );
    // Exactly at the limit it is read (whitespace is valid JSON padding).
    text.truncate(MAX_MANIFEST_BYTES);
    fs::write(dir.path().join(MANIFEST), &text).unwrap();
    Dataset::open(dir.path()).unwrap();
}

// ---------------------------------------------------------------------------
// (b) Mutated datasets: an independent model of the format
// ---------------------------------------------------------------------------

/// One committed record, as the model reads it from the files.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ModelRecord {
    shard: u64,
    /// Record number within its shard.
    record: u64,
    key: Vec<u8>,
    stored: Vec<u8>,
}

/// A dataset as the model reads it.
#[derive(Debug)]
struct ModelDataset {
    manifest: Manifest,
    records: Vec<ModelRecord>,
}

/// Why the model says open must fail.
#[derive(Debug, PartialEq, Eq)]
enum Fault {
    NoManifest,
    BadManifest,
    /// The file that is missing.
    Missing(String),
    /// The .idx length is not whole entries.
    IndexLength(u64),
    /// The .idx sizes do not add up to the .bin length.
    SizeMismatch(u64),
    Duplicate {
        shard: u64,
        record: u64,
    },
    /// refresh: the manifest's keying or compression changed, or it counts fewer
    /// shards than the handle loaded.
    Changed,
}

/// Where the model reads a file: `None` when it does not exist.
type ReadFile<'a> = dyn Fn(&str) -> Option<Vec<u8>> + 'a;

fn read_from_disk(dir: &Path) -> impl Fn(&str) -> Option<Vec<u8>> + '_ {
    move |name: &str| match fs::read(dir.join(name)) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => panic!("model cannot read {name}: {e}"),
    }
}

fn model_manifest(read: &ReadFile) -> Result<Manifest, Fault> {
    let bytes = read(MANIFEST).ok_or(Fault::NoManifest)?;
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(Fault::BadManifest);
    }
    Manifest::parse(&bytes, Path::new(MANIFEST)).map_err(|_| Fault::BadManifest)
}

/// Reads shards `from..manifest.shards` the way the format defines them, the first
/// `records` already loaded (their keys in `seen`).
fn model_shards(
    read: &ReadFile,
    manifest: &Manifest,
    from: u64,
    records: &mut Vec<ModelRecord>,
    seen: &mut HashSet<Vec<u8>>,
) -> Result<(), Fault> {
    let fields = if manifest.keyed { 2 } else { 1 };
    for id in from..manifest.shards {
        let idx_name = shard_name(id, "idx");
        let bin_name = shard_name(id, "bin");
        let idx = read(&idx_name).ok_or(Fault::Missing(idx_name))?;
        if idx.len() % (4 * fields) != 0 {
            return Err(Fault::IndexLength(id));
        }
        let bin = read(&bin_name).ok_or(Fault::Missing(bin_name))?;
        let sizes: Vec<u64> = idx
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as u64)
            .collect();
        if sizes.iter().sum::<u64>() != bin.len() as u64 {
            return Err(Fault::SizeMismatch(id));
        }
        let mut offset = 0usize;
        for (record, entry) in sizes.chunks_exact(fields).enumerate() {
            let key_size = if manifest.keyed { entry[0] as usize } else { 0 };
            let value_size = entry[fields - 1] as usize;
            let key = bin[offset..offset + key_size].to_vec();
            let stored = bin[offset + key_size..offset + key_size + value_size].to_vec();
            offset += key_size + value_size;
            if manifest.keyed && !seen.insert(key.clone()) {
                return Err(Fault::Duplicate {
                    shard: id,
                    record: record as u64,
                });
            }
            records.push(ModelRecord {
                shard: id,
                record: record as u64,
                key,
                stored,
            });
        }
    }
    Ok(())
}

fn model_open(read: &ReadFile) -> Result<ModelDataset, Fault> {
    let manifest = model_manifest(read)?;
    let mut records = Vec::new();
    model_shards(read, &manifest, 0, &mut records, &mut HashSet::new())?;
    Ok(ModelDataset { manifest, records })
}

/// Checks that `err` is the failure the model predicts, naming the right file.
fn check_open_error(dir: &Path, fault: &Fault, err: &Error) {
    let message = err.to_string();
    let names = |name: &str| message.contains(&dir.join(name).display().to_string());
    let ok = match (fault, err) {
        (Fault::NoManifest, Error::NotADataset { path }) => {
            path == dir
                && message.starts_with(&format!("{}: ", dir.display()))
                && message.contains(MANIFEST)
        }
        (Fault::BadManifest, Error::InvalidManifest { path, .. }) => {
            path == &dir.join(MANIFEST) && names(MANIFEST)
        }
        (Fault::Missing(name), Error::MissingShard { path, .. }) => {
            path == &dir.join(name) && names(name)
        }
        (Fault::IndexLength(id), Error::CorruptShard { path, .. }) => {
            let idx = shard_name(*id, "idx");
            path == &dir.join(&idx) && names(&idx)
        }
        (Fault::SizeMismatch(id), Error::CorruptShard { path, .. }) => {
            let (idx, bin) = (shard_name(*id, "idx"), shard_name(*id, "bin"));
            (path == &dir.join(&idx) || path == &dir.join(&bin)) && names(&idx) && names(&bin)
        }
        (
            Fault::Duplicate { shard, record },
            Error::DuplicateKeyInDataset {
                path, record: r, ..
            },
        ) => {
            let bin = shard_name(*shard, "bin");
            path == &dir.join(&bin)
                && r == record
                && names(&bin)
                && message.contains(&format!("record {record}"))
        }
        (Fault::Changed, Error::ChangedOnDisk { path, .. }) => {
            path == &dir.join(MANIFEST) && names(MANIFEST)
        }
        _ => false,
    };
    assert!(
        ok,
        "model expects {fault:?}, open failed with {err:?} ({message})"
    );
}

/// Checks a `CorruptValue` from reading record `index` names its shard file and record.
fn check_corrupt_value(dir: &Path, index: usize, expected: &ModelRecord, err: &Error) {
    let bin = dir.join(shard_name(expected.shard, "bin"));
    let message = err.to_string();
    match err {
        Error::CorruptValue {
            path,
            record,
            index: i,
            ..
        } => {
            assert_eq!(path, &bin, "{message}");
            assert_eq!(*record, expected.record, "{message}");
            assert_eq!(*i, index as u64, "{message}");
        }
        other => panic!("reading record {index}: expected CorruptValue, got {other:?}"),
    }
    assert!(
        message.starts_with(&format!(
            "{}: record {} (dataset index {index}, byte offset ",
            bin.display(),
            expected.record
        )),
        "{message}"
    );
}

/// Exercises every read API of an open dataset against the model's view of it.
/// `extra_keys` are looked up too (present or not).
fn check_reads(ds: &Dataset, model: &ModelDataset, extra_keys: &[Vec<u8>]) {
    let dir = ds.path().to_owned();
    let m = &model.manifest;
    assert_eq!(ds.keyed(), m.keyed);
    assert_eq!(ds.compression(), m.compression);
    assert_eq!(ds.shards(), m.shards);
    assert_eq!(ds.manifest().max_shard_size, m.max_shard_size);
    let len = model.records.len();
    assert_eq!(ds.len(), len);
    assert_eq!(ds.is_empty(), len == 0);

    let mut buffer = Vec::new();
    let mut read_errors = Vec::new();
    for (i, expected) in model.records.iter().enumerate() {
        assert_eq!(ds.stored_at(i).unwrap(), &expected.stored[..], "record {i}");
        let value = ds.at(i);
        match m.compression {
            Compression::None => {
                assert_eq!(value.as_deref().unwrap(), &expected.stored[..]);
            }
            Compression::Lz4 => match &value {
                Ok(v) if expected.stored.is_empty() => assert!(v.is_empty()),
                Ok(v) => {
                    let prefix = u32::from_le_bytes(expected.stored[..4].try_into().unwrap());
                    assert_eq!(v.len(), prefix as usize, "record {i}");
                }
                Err(e) => {
                    check_corrupt_value(&dir, i, expected, e);
                    read_errors.push(e.to_string());
                }
            },
        }
        // at_with_buffer agrees with at, with a reused (never shrunk) buffer.
        let before = buffer.len();
        match (&value, ds.at_with_buffer(i, &mut buffer)) {
            (Ok(a), Ok(b)) => assert_eq!(&a[..], b),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("record {i}: at gave {a:?}, at_with_buffer gave {b:?}"),
        }
        assert!(buffer.len() >= before);

        if m.keyed {
            assert_eq!(ds.key_at(i).unwrap(), &expected.key[..]);
            let key = &expected.key;
            assert!(ds.contains(key));
            assert_eq!(ds.position(key).unwrap(), Some(i));
            match (&value, ds.get(key)) {
                (Ok(a), Ok(Some(b))) => assert_eq!(a, &b),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("key {key:?}: at gave {a:?}, get gave {b:?}"),
            }
            match (&value, ds.get_with_buffer(key, &mut buffer)) {
                (Ok(a), Ok(Some(b))) => assert_eq!(&a[..], b),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("key {key:?}: at gave {a:?}, get_with_buffer gave {b:?}"),
            }
        } else {
            assert!(matches!(ds.key_at(i), Err(Error::WrongKeying(_))));
        }
    }

    let present: HashSet<&[u8]> = model.records.iter().map(|r| &r.key[..]).collect();
    for key in extra_keys
        .iter()
        .map(Vec::as_slice)
        .chain([&b""[..], b"\xff\x00", b"not a key"])
    {
        if m.keyed {
            let position = ds.position(key).unwrap();
            assert_eq!(position.is_some(), present.contains(key), "key {key:?}");
            assert_eq!(ds.contains(key), present.contains(key));
            match position {
                Some(i) => assert_eq!(model.records[i].key, key),
                None => assert!(ds.get(key).unwrap().is_none()),
            }
        } else {
            assert!(!ds.contains(key));
            assert!(matches!(ds.get(key), Err(Error::WrongKeying(_))));
            assert!(matches!(ds.position(key), Err(Error::WrongKeying(_))));
            assert!(matches!(
                ds.get_with_buffer(key, &mut buffer),
                Err(Error::WrongKeying(_))
            ));
        }
    }

    // Out of range, from both ends and at the extremes of the types.
    for bad in [len, len + 1, usize::MAX / 2, usize::MAX] {
        assert!(matches!(ds.at(bad), Err(Error::IndexOutOfRange { .. })));
        assert!(matches!(
            ds.at_with_buffer(bad, &mut buffer),
            Err(Error::IndexOutOfRange { .. })
        ));
        assert!(matches!(
            ds.stored_at(bad),
            Err(Error::IndexOutOfRange { .. })
        ));
        let key = ds.key_at(bad);
        if m.keyed {
            assert!(matches!(key, Err(Error::IndexOutOfRange { .. })));
        } else {
            assert!(matches!(key, Err(Error::WrongKeying(_))));
        }
    }
    let n = len as i64;
    for index in [
        i64::MIN,
        i64::MIN + 1,
        -n - 1,
        -n,
        -1,
        0,
        n - 1,
        n,
        n + 1,
        i64::MAX - 1,
        i64::MAX,
    ] {
        let expected = if (0..n).contains(&index) {
            Some(index as usize)
        } else if (-n..0).contains(&index) {
            Some((index + n) as usize)
        } else {
            None
        };
        match (ds.resolve_index(index), expected) {
            (Ok(got), Some(want)) => assert_eq!(got, want),
            (Err(Error::IndexOutOfRange { index: i, len: l }), None) => {
                assert_eq!((i, l), (index, len as u64));
            }
            (got, want) => panic!("resolve_index({index}) of {len}: {got:?}, want {want:?}"),
        }
    }

    // verify reports exactly the values that do not decode, in order.
    let problems: Vec<String> = ds.verify().iter().map(Error::to_string).collect();
    assert_eq!(problems, read_errors);
}

/// The files of one small valid dataset, and the keys written to it.
struct Base {
    files: Vec<(String, Vec<u8>)>,
    keys: Vec<Vec<u8>>,
}

fn base_records() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (b"".to_vec(), b"".to_vec()),
        (b"a".to_vec(), b"hello hello hello hello hello".to_vec()),
        (vec![0, 255, 10], Vec::new()),
        (b"key\x00with\xffbinary".to_vec(), vec![7; 40]),
        (b"d".to_vec(), b"x".to_vec()),
        (b"e".to_vec(), (0u8..=60).collect()),
        (b"f".to_vec(), b"abcabcabcabcabcabcabcabcabcabc".to_vec()),
        (b"g".to_vec(), Vec::new()),
    ]
}

fn read_dir_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        // The writer's lock file is no part of the format.
        .filter(|name| !name.starts_with('.'))
        .map(|name| {
            let bytes = fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Builds a dataset with `Dataset::create` and two extends (the first `split` records,
/// then the rest), and returns its files.
fn build_base(keyed: bool, compression: Compression, max_shard_size: u64, split: usize) -> Base {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ds");
    let mut ds = Dataset::create(
        &path,
        CreateOptions {
            keyed,
            compression,
            max_shard_size,
        },
    )
    .unwrap();
    let records = base_records();
    for part in [&records[..split], &records[split..]] {
        if keyed {
            ds.extend(part.iter().map(|(k, v)| (k, v))).unwrap();
        } else {
            ds.extend_values(part.iter().map(|(_, v)| v)).unwrap();
        }
    }
    Base {
        files: read_dir_files(&path),
        keys: records.into_iter().map(|(k, _)| k).collect(),
    }
}

fn bases() -> &'static [Base] {
    static BASES: OnceLock<Vec<Base>> = OnceLock::new();
    BASES.get_or_init(|| {
        let mut bases = Vec::new();
        for keyed in [true, false] {
            for compression in [Compression::Lz4, Compression::None] {
                bases.push(build_base(keyed, compression, 48, 3));
            }
        }
        // One shard holding everything.
        bases.push(build_base(true, Compression::Lz4, 1 << 20, 8));
        // A 0.2.0 manifest (no max_shard_size) over keyless lz4 shards.
        let mut v2 = build_base(false, Compression::Lz4, 30, 4);
        let shards = v2.files.iter().filter(|(n, _)| n.ends_with(".bin")).count();
        for (name, bytes) in &mut v2.files {
            if name == MANIFEST {
                *bytes =
                    format!("{{\"keyed\": false, \"compression\": \"lz4\", \"shards\": {shards}}}")
                        .into_bytes();
            }
        }
        bases.push(v2);
        // An empty dataset: a manifest and no shards.
        bases.push(build_base(true, Compression::None, 16, 0));
        bases
    })
}

#[derive(Clone, Debug)]
enum FileOp {
    Bytes(ByteOp),
    Delete,
    /// Rewrites manifest.json (whatever `file` picks) with this text.
    Manifest(String),
}

#[derive(Clone, Debug)]
struct Mutation {
    file: Index,
    op: FileOp,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let op = prop_oneof![
        8 => byte_op().prop_map(FileOp::Bytes),
        1 => Just(FileOp::Delete),
        2 => manifest_text().prop_map(FileOp::Manifest),
    ];
    (any::<Index>(), op).prop_map(|(file, op)| Mutation { file, op })
}

/// Applies `mutation` to the files in `dir`, replacing files by rename (a new inode),
/// so that mappings an open handle holds are never truncated under it.
fn apply_mutation(dir: &Path, names: &[String], mutation: &Mutation) {
    let replace = |name: &str, bytes: &[u8]| {
        let tmp = dir.join(".mutating");
        fs::write(&tmp, bytes).unwrap();
        fs::rename(&tmp, dir.join(name)).unwrap();
    };
    if let FileOp::Manifest(text) = &mutation.op {
        replace(MANIFEST, text.as_bytes());
        return;
    }
    if names.is_empty() {
        return;
    }
    let name = &names[mutation.file.index(names.len())];
    let path = dir.join(name);
    let Ok(mut bytes) = fs::read(&path) else {
        return; // Deleted by an earlier mutation.
    };
    match &mutation.op {
        FileOp::Bytes(op) => {
            apply_byte_op(&mut bytes, op);
            replace(name, &bytes);
        }
        FileOp::Delete => fs::remove_file(&path).unwrap(),
        FileOp::Manifest(_) => unreachable!(),
    }
}

fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) {
    fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Opens `dir` and checks the outcome against the model, then reads everything.
fn check_open(dir: &Path, extra_keys: &[Vec<u8>]) {
    let model = model_open(&read_from_disk(dir));
    match (Dataset::open(dir), model) {
        (Ok(ds), Ok(model)) => check_reads(&ds, &model, extra_keys),
        (Err(err), Err(fault)) => check_open_error(dir, &fault, &err),
        (Ok(ds), Err(fault)) => panic!("model expects {fault:?}, but open succeeded: {ds:?}"),
        (Err(err), Ok(model)) => {
            panic!(
                "model reads {} records, but open failed: {err}",
                model.records.len()
            )
        }
    }
}

#[test]
fn directories_in_place_of_files_are_errors_naming_them() {
    let base = &bases()[0];
    for victim in [
        MANIFEST.to_owned(),
        shard_name(1, "idx"),
        shard_name(1, "bin"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        write_files(&dir, &base.files);
        let path = dir.join(&victim);
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        if victim.ends_with(".bin") {
            // Make the index account for exactly the directory's reported length, so
            // open gets as far as mapping it.
            let len = fs::metadata(&path).unwrap().len();
            let mut idx = Vec::new();
            let mut left = len;
            while left > 0 {
                let value = left.min(u32::MAX as u64);
                idx.extend_from_slice(&[0u8; 4]); // an empty key...
                idx.extend_from_slice(&(value as u32).to_le_bytes());
                left -= value;
            }
            fs::write(dir.join(shard_name(1, "idx")), idx).unwrap();
        }
        match Dataset::open(&dir) {
            Ok(ds) => {
                // Only possible for a directory reported as 0 bytes long.
                assert!(victim.ends_with(".bin"));
                let _ = ds.verify();
            }
            Err(err) => {
                let message = err.to_string();
                assert!(message.contains(&path.display().to_string()), "{message}");
            }
        }
    }
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn mutated_dataset_never_panics_and_names_the_file(
        base in 0usize..7,
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let base = &bases()[base];
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        write_files(&dir, &base.files);
        let names: Vec<String> = base.files.iter().map(|(n, _)| n.clone()).collect();
        for m in &mutations {
            apply_mutation(&dir, &names, m);
        }
        check_open(&dir, &base.keys);
    }
}

proptest! {
    #![proptest_config(config(200))]

    /// Well-formed index and data files whose sizes and bytes are arbitrary: opens
    /// whenever sizes add up, and then every value is read (mostly corrupt LZ4).
    #[test]
    fn arbitrary_consistent_shards_read_without_panicking(
        keyed in any::<bool>(),
        lz4 in any::<bool>(),
        shards in prop::collection::vec(
            prop::collection::vec(
                (0usize..4, prop_oneof![
                    prop::collection::vec(any::<u8>(), 0..40),
                    (interesting_u32(), prop::collection::vec(any::<u8>(), 0..40))
                        .prop_map(|(prefix, block)| {
                            let mut v = prefix.to_le_bytes().to_vec();
                            v.extend(block);
                            v
                        }),
                ]),
                0..6,
            ),
            0..4,
        ),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let compression = if lz4 { "\"lz4\"" } else { "null" };
        let manifest = format!(
            "{{\"keyed\": {keyed}, \"compression\": {compression}, \
             \"max_shard_size\": 10, \"shards\": {}}}",
            shards.len()
        );
        fs::write(dir.join(MANIFEST), manifest).unwrap();
        let mut all_keys = Vec::new();
        for (id, records) in shards.iter().enumerate() {
            let (mut idx, mut bin) = (Vec::new(), Vec::new());
            for (key_size, stored) in records {
                let key_size = if keyed { (*key_size).min(stored.len()) } else { 0 };
                if keyed {
                    idx.extend_from_slice(&(key_size as u32).to_le_bytes());
                    all_keys.push(stored[..key_size].to_vec());
                }
                idx.extend_from_slice(&((stored.len() - key_size) as u32).to_le_bytes());
                bin.extend_from_slice(stored);
            }
            fs::write(dir.join(shard_name(id as u64, "idx")), idx).unwrap();
            fs::write(dir.join(shard_name(id as u64, "bin")), bin).unwrap();
        }
        check_open(dir, &all_keys);
    }
}

// ---------------------------------------------------------------------------
// (b') refresh picking up damaged shards another writer committed
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(80))]

    #[test]
    fn refresh_of_mutated_new_shards_never_panics(
        base in 0usize..4,
        mutations in prop::collection::vec(mutation(), 1..3),
    ) {
        let base = &bases()[base];
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        // The handle first sees only shard 0; the rest are then "committed" by
        // another writer, and damaged.
        let shards = base.files.iter().filter(|(n, _)| n.ends_with(".bin")).count() as u64;
        let original = |name: &str| {
            base.files.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone())
        };
        let first = model_manifest(&original).unwrap();
        prop_assume!(shards >= 2);
        let mut prefix: Vec<(String, Vec<u8>)> = base
            .files
            .iter()
            .filter(|(n, _)| n.starts_with(&shard_name(0, "")))
            .cloned()
            .collect();
        prefix.push((MANIFEST.to_owned(), Manifest { shards: 1, ..first }.to_bytes()));
        write_files(&dir, &prefix);
        let mut ds = Dataset::open(&dir).unwrap();
        let before = model_open(&read_from_disk(&dir)).unwrap();
        check_reads(&ds, &before, &base.keys);

        // Shard 0 is mapped: leave its files alone.
        let rest: Vec<(String, Vec<u8>)> = base
            .files
            .iter()
            .filter(|(n, _)| !n.starts_with(&shard_name(0, "")))
            .cloned()
            .collect();
        write_files(&dir, &rest);
        // Damage only what the handle has not mapped (the view the model reads).
        let names: Vec<String> = base
            .files
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| !n.starts_with(&shard_name(0, "")))
            .collect();
        for m in &mutations {
            apply_mutation(&dir, &names, m);
        }

        let on_disk = read_from_disk(&dir);
        let view = |name: &str| {
            if name.starts_with(&shard_name(0, "")) {
                original(name)
            } else {
                on_disk(name)
            }
        };
        let expected = model_manifest(&view).and_then(|manifest| {
            if manifest.keyed != first.keyed
                || manifest.compression != first.compression
                || manifest.shards < 1
            {
                return Err(Fault::Changed);
            }
            let mut records = before.records.clone();
            let mut seen: HashSet<Vec<u8>> = records.iter().map(|r| r.key.clone()).collect();
            model_shards(&view, &manifest, 1, &mut records, &mut seen)?;
            Ok(ModelDataset { manifest, records })
        });
        match (ds.refresh(), expected) {
            (Ok(()), Ok(model)) => check_reads(&ds, &model, &base.keys),
            (Err(err), Err(fault)) => {
                check_open_error(&dir, &fault, &err);
                // A failed refresh leaves the handle as it was.
                check_reads(&ds, &before, &base.keys);
            }
            (Ok(()), Err(fault)) => panic!("model expects {fault:?}, but refresh succeeded"),
            (Err(err), Ok(_)) => panic!("model expects success, refresh failed: {err}"),
        }
    }
}

// ---------------------------------------------------------------------------
// (c) LZ4 values
// ---------------------------------------------------------------------------

fn check_lz4_decode(stored: &[u8], buffer_len: usize) {
    let declared = lz4_block::declared_len(stored);
    match &declared {
        Ok(d) if stored.is_empty() => assert_eq!(*d, 0),
        Ok(d) => {
            assert!(stored.len() >= 4);
            let bound = 255 * (stored.len() as u64 - 4) + 64;
            assert!(
                *d as u64 <= bound,
                "declared {d} > {bound} for {} bytes",
                stored.len()
            );
            let prefix = u32::from_le_bytes(stored[..4].try_into().unwrap());
            assert_eq!(*d, prefix as usize);
        }
        Err(_) => assert!(!stored.is_empty()),
    }
    if (1..4).contains(&stored.len()) {
        assert!(declared.is_err());
    }

    let decoded = lz4_block::decompress(stored);
    match (&decoded, &declared) {
        (Ok(v), Ok(d)) => assert_eq!(v.len(), *d),
        (Ok(_), Err(e)) => panic!("decompress accepted what declared_len rejected: {e:?}"),
        (Err(_), _) => {}
    }

    let mut buffer = vec![0xAB; buffer_len];
    let result = lz4_block::decompress_into(stored, &mut buffer);
    assert!(
        buffer.len() >= buffer_len,
        "decompress_into shrank the buffer"
    );
    match (&result, &decoded) {
        (Ok(n), Ok(v)) => assert_eq!(&buffer[..*n], &v[..]),
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("decompress_into gave {a:?}, decompress gave {b:?}"),
    }
}

fn lz4_mode() -> impl Strategy<Value = Lz4Mode> {
    prop_oneof![
        4 => (1i32..=12).prop_map(Lz4Mode::High),
        2 => (1i32..=16).prop_map(Lz4Mode::Fast),
        1 => prop::sample::select(vec![
            Lz4Mode::High(0),
            Lz4Mode::High(-7),
            Lz4Mode::High(13),
            Lz4Mode::High(i32::MAX),
            Lz4Mode::High(i32::MIN),
            Lz4Mode::Fast(0),
            Lz4Mode::Fast(-3),
            Lz4Mode::Fast(70_000),
            Lz4Mode::Fast(i32::MAX),
            Lz4Mode::Fast(i32::MIN),
        ]),
    ]
}

/// Values that compress (runs and repeated patterns) as well as noise.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..48),
        2 => (any::<u8>(), 0usize..120).prop_map(|(b, n)| vec![b; n]),
        2 => (prop::collection::vec(any::<u8>(), 1..6), 1usize..30)
            .prop_map(|(pattern, n)| pattern.repeat(n)),
        1 => Just(Vec::new()),
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn lz4_arbitrary_bytes_never_panic(
        stored in prop::collection::vec(any::<u8>(), 0..200),
        buffer_len in 0usize..64,
    ) {
        check_lz4_decode(&stored, buffer_len);
    }

    /// A plausible size prefix, so the block itself reaches the decoder.
    #[test]
    fn lz4_plausible_prefix_arbitrary_block_never_panics(
        (declared, block) in prop::collection::vec(any::<u8>(), 0..120)
            .prop_flat_map(|block| (0..=255 * block.len() as u32 + 70, Just(block))),
        buffer_len in 0usize..64,
    ) {
        let mut stored = declared.to_le_bytes().to_vec();
        stored.extend_from_slice(&block);
        check_lz4_decode(&stored, buffer_len);
    }

    #[test]
    fn lz4_mutated_valid_values_never_panic(
        value in value(),
        mode in lz4_mode(),
        ops in prop::collection::vec(byte_op(), 1..4),
        buffer_len in 0usize..200,
    ) {
        let mut stored = Vec::new();
        lz4_block::compress_into(&value, mode, &mut stored).unwrap();
        for op in &ops {
            apply_byte_op(&mut stored, op);
        }
        check_lz4_decode(&stored, buffer_len);
    }

    #[test]
    fn lz4_round_trips_in_every_mode(value in value(), mode in lz4_mode()) {
        let mut stored = vec![1, 2, 3];
        lz4_block::compress_into(&value, mode, &mut stored).unwrap();
        if value.is_empty() {
            prop_assert!(stored.is_empty());
        } else {
            prop_assert_eq!(&stored[..4], &(value.len() as u32).to_le_bytes()[..]);
        }
        prop_assert_eq!(lz4_block::declared_len(&stored).unwrap(), value.len());
        prop_assert_eq!(lz4_block::decompress(&stored).unwrap(), value.clone());
        let mut buffer = vec![9; 3];
        let n = lz4_block::decompress_into(&stored, &mut buffer).unwrap();
        prop_assert_eq!(&buffer[..n], &value[..]);
        check_lz4_decode(&stored, 0);
    }
}

#[test]
fn lz4_hostile_prefixes_at_the_bound() {
    for block_len in [0usize, 1, 2, 5, 100] {
        let block = vec![0u8; block_len];
        let bound = 255 * block_len as u64 + 64;
        for declared in [bound - 1, bound, bound + 1, u32::MAX as u64] {
            let Ok(declared) = u32::try_from(declared) else {
                continue;
            };
            let mut stored = declared.to_le_bytes().to_vec();
            stored.extend_from_slice(&block);
            check_lz4_decode(&stored, 0);
            assert_eq!(
                lz4_block::declared_len(&stored).is_ok(),
                declared as u64 <= bound
            );
        }
    }
}

// ---------------------------------------------------------------------------
// (d) Round trip and the sharding rule
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct RoundTrip {
    keyed: bool,
    lz4: bool,
    max_shard_size: u64,
    /// Each inner vector is one extend (keys ignored when keyless).
    batches: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    /// Reopen the dataset between extends instead of reusing the handle.
    reopen_between: bool,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..6),
        2 => prop::collection::vec(0u8..3, 0..4),
        1 => Just(Vec::new()),
    ]
}

fn round_trip() -> impl Strategy<Value = RoundTrip> {
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![1u64..8, 8u64..64, 64u64..300],
        prop::collection::vec(prop::collection::vec((key(), value()), 0..10), 1..4),
        any::<bool>(),
    )
        .prop_map(
            |(keyed, lz4, max_shard_size, mut batches, reopen_between)| {
                if keyed {
                    // Keys are unique across the whole dataset.
                    let mut seen = HashSet::new();
                    for batch in &mut batches {
                        batch.retain(|(k, _)| seen.insert(k.clone()));
                    }
                }
                RoundTrip {
                    keyed,
                    lz4,
                    max_shard_size,
                    batches,
                    reopen_between,
                }
            },
        )
}

/// Where each record should land: the sharding rule, restated. Every extend starts a
/// new shard; within one, a new shard starts when the current one is non-empty and
/// the record (key + stored value) would take it past `max_shard_size`.
fn model_sharding(
    batches: &[Vec<(Vec<u8>, Vec<u8>)>],
    max_shard_size: u64,
) -> (Vec<u64>, Vec<Vec<u64>>) {
    let mut shard_of = Vec::new();
    let mut per_batch_shards = Vec::new();
    let mut next: u64 = 0;
    for batch in batches {
        let mut current: Option<(u64, u64)> = None; // (id, size)
        let first = next;
        for (key, stored) in batch {
            let size = (key.len() + stored.len()) as u64;
            let start_new = match current {
                None => true,
                Some((_, used)) => used > 0 && used + size > max_shard_size,
            };
            if start_new {
                current = Some((next, 0));
                next += 1;
            }
            let (id, used) = current.as_mut().unwrap();
            *used += size;
            shard_of.push(*id);
        }
        per_batch_shards.push((first..next).collect());
    }
    (shard_of, per_batch_shards)
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn round_trip_matches_the_sharding_model(case in round_trip()) {
        let RoundTrip { keyed, lz4, max_shard_size, batches, reopen_between } = case;
        let compression = if lz4 { Compression::Lz4 } else { Compression::None };
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("ds");
        let mut ds = Dataset::create(&path, CreateOptions { keyed, compression, max_shard_size })
            .unwrap();

        // The stored form of every record, computed outside the dataset.
        let stored_batches: Vec<Vec<(Vec<u8>, Vec<u8>)>> = batches
            .iter()
            .map(|batch| {
                batch
                    .iter()
                    .map(|(k, v)| {
                        let key = if keyed { k.clone() } else { Vec::new() };
                        let stored = if lz4 {
                            let mut out = Vec::new();
                            lz4_block::compress_into(v, Lz4Mode::default(), &mut out).unwrap();
                            out
                        } else {
                            v.clone()
                        };
                        (key, stored)
                    })
                    .collect()
            })
            .collect();
        let (shard_of, per_batch) = model_sharding(&stored_batches, max_shard_size);

        for (b, batch) in batches.iter().enumerate() {
            if reopen_between {
                ds = Dataset::open(&path).unwrap();
            }
            let summary = if keyed {
                ds.extend(batch.iter().map(|(k, v)| (k, v))).unwrap()
            } else {
                ds.extend_values(batch.iter().map(|(_, v)| v)).unwrap()
            };
            prop_assert_eq!(summary.records, batch.len() as u64);
            prop_assert_eq!(summary.shards, per_batch[b].len() as u64);
            let bytes: usize = stored_batches[b].iter().map(|(k, s)| k.len() + s.len()).sum();
            prop_assert_eq!(summary.bytes_stored, bytes as u64);
        }
        let shards = per_batch.iter().flatten().max().map_or(0, |s| s + 1);

        // Byte for byte: the manifest, and each shard's .idx and .bin.
        let compression_json = if lz4 { "\"lz4\"" } else { "null" };
        prop_assert_eq!(
            fs::read_to_string(path.join(MANIFEST)).unwrap(),
            format!(
                "{{\"keyed\": {keyed}, \"compression\": {compression_json}, \
                 \"max_shard_size\": {max_shard_size}, \"shards\": {shards}}}"
            )
        );
        let stored: Vec<&(Vec<u8>, Vec<u8>)> = stored_batches.iter().flatten().collect();
        let mut expected_records = Vec::new();
        for id in 0..shards {
            let (mut idx, mut bin) = (Vec::new(), Vec::new());
            for (i, (key, value)) in stored.iter().enumerate() {
                if shard_of[i] != id {
                    continue;
                }
                if keyed {
                    idx.extend_from_slice(&(key.len() as u32).to_le_bytes());
                }
                idx.extend_from_slice(&(value.len() as u32).to_le_bytes());
                bin.extend_from_slice(key);
                bin.extend_from_slice(value);
                expected_records.push(ModelRecord {
                    shard: id,
                    record: shard_of[..i].iter().filter(|&&s| s == id).count() as u64,
                    key: key.clone(),
                    stored: value.clone(),
                });
            }
            prop_assert!(!bin.is_empty() || !idx.is_empty(), "shard {} is empty", id);
            let on_disk = |ext| fs::read(path.join(shard_name(id, ext))).unwrap();
            prop_assert_eq!(on_disk("idx"), idx, "shard {}", id);
            prop_assert_eq!(on_disk("bin"), bin, "shard {}", id);
        }
        prop_assert!(!path.join(shard_name(shards, "idx")).exists());
        prop_assert!(!path.join(shard_name(shards, "bin")).exists());

        // The same records, in order, through both the writing handle and a fresh one.
        let values: Vec<&Vec<u8>> = batches.iter().flatten().map(|(_, v)| v).collect();
        let model = ModelDataset {
            manifest: Manifest::parse(&fs::read(path.join(MANIFEST)).unwrap(), Path::new(MANIFEST))
                .unwrap(),
            records: expected_records,
        };
        let keys: Vec<Vec<u8>> = batches.iter().flatten().map(|(k, _)| k.clone()).collect();
        for handle in [&ds, &Dataset::open(&path).unwrap()] {
            prop_assert_eq!(handle.len(), values.len());
            for (i, v) in values.iter().enumerate() {
                prop_assert_eq!(&handle.at(i).unwrap()[..], &v[..]);
                if keyed {
                    let got = handle.get(&keys[i]).unwrap();
                    prop_assert_eq!(got.as_deref(), Some(&v[..]));
                }
            }
            prop_assert!(handle.verify().is_empty());
            check_reads(handle, &model, &keys);
        }
    }
}

#[test]
fn model_sharding_examples() {
    let rec = |k: usize, v: usize| (vec![b'k'; k], vec![b'v'; v]);
    // Empty records never open a shard past an empty one; oversized ones get their own.
    let (shards, per_batch) = model_sharding(
        &[
            vec![
                rec(0, 0),
                rec(0, 0),
                rec(3, 3),
                rec(0, 10),
                rec(0, 0),
                rec(1, 1),
            ],
            vec![],
            vec![rec(1, 0)],
        ],
        6,
    );
    assert_eq!(shards, vec![0, 0, 0, 1, 2, 2, 3]);
    assert_eq!(per_batch, vec![vec![0, 1, 2], vec![], vec![3]]);
}
