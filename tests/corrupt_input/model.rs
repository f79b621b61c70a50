//! An independent model of the format: it reads a dataset's files itself and
//! decides whether opening must succeed and, if not, which file the error must
//! name; then every read API is checked against it.

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use bcd::{Compression, Dataset, Error, Manifest};

use crate::{shard_name, MANIFEST, MAX_MANIFEST_BYTES};

/// One committed record, as the model reads it from the files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRecord {
    pub shard: u64,
    /// Record number within its shard.
    pub record: u64,
    pub key: Vec<u8>,
    pub stored: Vec<u8>,
}

/// A dataset as the model reads it.
#[derive(Debug)]
pub struct ModelDataset {
    pub manifest: Manifest,
    pub records: Vec<ModelRecord>,
}

/// Why the model says open must fail.
#[derive(Debug, PartialEq, Eq)]
pub enum Fault {
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
pub type ReadFile<'a> = dyn Fn(&str) -> Option<Vec<u8>> + 'a;

pub fn read_from_disk(dir: &Path) -> impl Fn(&str) -> Option<Vec<u8>> + '_ {
    move |name: &str| match fs::read(dir.join(name)) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => panic!("model cannot read {name}: {e}"),
    }
}

pub fn model_manifest(read: &ReadFile) -> Result<Manifest, Fault> {
    let bytes = read(MANIFEST).ok_or(Fault::NoManifest)?;
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(Fault::BadManifest);
    }
    Manifest::parse(&bytes, Path::new(MANIFEST)).map_err(|_| Fault::BadManifest)
}

/// Reads shards `from..manifest.shards` the way the format defines them, the first
/// `records` already loaded (their keys in `seen`).
pub fn model_shards(
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

pub fn model_open(read: &ReadFile) -> Result<ModelDataset, Fault> {
    let manifest = model_manifest(read)?;
    let mut records = Vec::new();
    model_shards(read, &manifest, 0, &mut records, &mut HashSet::new())?;
    Ok(ModelDataset { manifest, records })
}

/// Checks that `err` is the failure the model predicts, naming the right file.
pub fn check_open_error(dir: &Path, fault: &Fault, err: &Error) {
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
pub fn check_corrupt_value(dir: &Path, index: usize, expected: &ModelRecord, err: &Error) {
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
pub fn check_reads(ds: &Dataset, model: &ModelDataset, extra_keys: &[Vec<u8>]) {
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
