//! `Dataset::open` on a directory built from the input, then every read API.
//!
//! Input layout: one flag byte, then sections, each a length byte followed by up to
//! that many bytes (cut short at the end of the input):
//!
//! * flags bit 0: keyed; bit 1: lz4; bits 2-3: the manifest's shard count (0..=3);
//!   bit 4: the manifest is the first section, verbatim (otherwise it is generated
//!   from the flags); bit 5: each .idx section is read as one byte per size and
//!   repaired so the sizes add up to the .bin length (so most inputs open and the
//!   values get decoded); bit 6: a generated manifest uses the 0.2.0 layout.
//! * then, for shards 0, 1, 2, 3: the .idx section, then the .bin section. A section
//!   the input does not reach is a file that is not written (a missing shard).
//!
//! Open must fail with an error naming a file in the directory, or succeed; then
//! every read must return `Ok` or `Err` (never panic), and every `CorruptValue` must
//! name the shard's .bin file and the record.
#![no_main]

use std::fs;
use std::path::Path;
use std::sync::OnceLock;

use bcd::{Dataset, Error};
use libfuzzer_sys::fuzz_target;

const SHARDS: u64 = 4;

fn dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temporary directory"))
        .path()
}

struct Sections<'a>(&'a [u8]);

impl<'a> Sections<'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        let (&len, rest) = self.0.split_first()?;
        let len = (len as usize).min(rest.len());
        let (section, rest) = rest.split_at(len);
        self.0 = rest;
        Some(section)
    }
}

/// One size per byte of `spec`, cut so they never pass `data_len`; a last record
/// takes what is left, so the sizes add up to `data_len`.
fn repaired_index(spec: &[u8], data_len: usize, keyed: bool) -> Vec<u8> {
    let fields = if keyed { 2 } else { 1 };
    let mut sizes: Vec<u32> = Vec::new();
    let mut left = data_len;
    for &b in &spec[..spec.len() / fields * fields] {
        let size = (b as usize).min(left);
        sizes.push(size as u32);
        left -= size;
    }
    if left > 0 {
        if keyed {
            sizes.push(0);
        }
        sizes.push(left as u32);
    }
    sizes.iter().flat_map(|s| s.to_le_bytes()).collect()
}

fn write_dataset(dir: &Path, data: &[u8]) -> bool {
    let Some((&flags, rest)) = data.split_first() else {
        return false;
    };
    let keyed = flags & 1 != 0;
    let lz4 = flags & 2 != 0;
    let shards = (flags >> 2) & 3;
    let mut sections = Sections(rest);
    let manifest = if flags & 0x10 != 0 {
        sections.next().unwrap_or_default().to_vec()
    } else {
        let compression = if lz4 { "\"lz4\"" } else { "null" };
        let max = if flags & 0x40 != 0 {
            String::new()
        } else {
            "\"max_shard_size\": 64, ".to_owned()
        };
        format!("{{\"keyed\": {keyed}, \"compression\": {compression}, {max}\"shards\": {shards}}}")
            .into_bytes()
    };
    fs::write(dir.join("manifest.json"), manifest).expect("write manifest");
    for id in 0..SHARDS {
        let Some(index) = sections.next() else { break };
        let Some(values) = sections.next() else {
            fs::write(dir.join(format!("{id:06}.idx")), index).expect("write idx");
            break;
        };
        let index = if flags & 0x20 != 0 {
            repaired_index(index, values.len(), keyed)
        } else {
            index.to_vec()
        };
        fs::write(dir.join(format!("{id:06}.idx")), index).expect("write idx");
        fs::write(dir.join(format!("{id:06}.bin")), values).expect("write bin");
    }
    true
}

fn clear(dir: &Path) {
    let _ = fs::remove_file(dir.join("manifest.json"));
    for id in 0..SHARDS {
        for ext in ["idx", "bin"] {
            let _ = fs::remove_file(dir.join(format!("{id:06}.{ext}")));
        }
    }
}

fn check_corrupt_value(error: &Error, index: usize) {
    match error {
        Error::CorruptValue {
            path,
            record,
            index: i,
            ..
        } => {
            assert_eq!(*i, index as u64);
            assert!(path.starts_with(dir()) && path.extension().is_some_and(|e| e == "bin"));
            let message = error.to_string();
            assert!(message.contains(&path.display().to_string()), "{message}");
            assert!(message.contains(&format!("record {record} ")), "{message}");
        }
        other => panic!("reading record {index}: {other:?}"),
    }
}

fn read_everything(ds: &Dataset) {
    let len = ds.len();
    let mut buffer = Vec::new();
    let mut errors = Vec::new();
    for i in 0..len {
        let stored = ds.stored_at(i).expect("stored_at in range");
        let value = ds.at(i);
        if let Err(e) = &value {
            check_corrupt_value(e, i);
            errors.push(e.to_string());
        } else if ds.compression() == bcd::Compression::None {
            assert_eq!(value.as_deref().ok(), Some(stored));
        }
        match (&value, ds.at_with_buffer(i, &mut buffer)) {
            (Ok(a), Ok(b)) => assert_eq!(&a[..], b),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("record {i}: at {a:?}, at_with_buffer {b:?}"),
        }
        if ds.keyed() {
            let key = ds.key_at(i).expect("key_at in range").to_vec();
            assert!(ds.contains(&key));
            assert_eq!(ds.position(&key).expect("keyed"), Some(i));
            match (&value, ds.get(&key)) {
                (Ok(a), Ok(Some(b))) => assert_eq!(a, &b),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("key {key:?}: at {a:?}, get {b:?}"),
            }
        } else {
            assert!(ds.key_at(i).is_err());
            assert!(!ds.contains(b"k"));
            assert!(ds.get(b"k").is_err());
        }
    }
    for bad in [len, usize::MAX] {
        assert!(ds.at(bad).is_err());
        assert!(ds.stored_at(bad).is_err());
        assert!(ds.key_at(bad).is_err());
        assert!(ds.at_with_buffer(bad, &mut buffer).is_err());
    }
    let n = len as i64;
    for index in [i64::MIN, -n - 1, -n, -1, 0, n - 1, n, i64::MAX] {
        let resolved = ds.resolve_index(index);
        assert_eq!(resolved.is_ok(), (-n..n).contains(&index), "{index} of {n}");
    }
    let problems: Vec<String> = ds.verify().iter().map(Error::to_string).collect();
    assert_eq!(problems, errors);
}

fuzz_target!(|data: &[u8]| {
    let dir = dir();
    clear(dir);
    if !write_dataset(dir, data) {
        return;
    }
    match Dataset::open(dir) {
        Ok(ds) => read_everything(&ds),
        Err(e) => {
            let message = e.to_string();
            assert!(message.starts_with(&dir.display().to_string()), "{message}");
            assert!(
                ["manifest.json", ".idx", ".bin"]
                    .iter()
                    .any(|name| message.contains(name)),
                "{message}"
            );
        }
    }
});
