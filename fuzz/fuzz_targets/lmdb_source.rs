//! The LMDB source: a `data.mdb` of arbitrary bytes is refused by the meta page
//! checks, or read by liblmdb with every key and value checked to lie within
//! the file, in strictly increasing key order; every error names the data file.
//! liblmdb itself trusts the pages it walks: a crash here inside liblmdb is a
//! file that passes the checks and still crashes it (the README's limits say
//! how often the mutations of `fuzz/lmdb_mutations.py` found one).
//!
//! Input: a flag byte (its value modulo 3: values as stored, as pickles, as
//! Caffe Datums), then the data file's bytes (seeds: `fixtures/lmdb/*`'s).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use bcd_converters::lmdb_source::{LmdbOptions, LmdbSource, LmdbValue};
use libfuzzer_sys::fuzz_target;

/// The environment's directory, made once.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        (dir, path)
    });
    path
}

fuzz_target!(|data: &[u8]| {
    let Some((&flag, file_bytes)) = data.split_first() else {
        return;
    };
    let dir = dir();
    let file = dir.join("data.mdb");
    std::fs::write(&file, file_bytes).unwrap();
    let value = [LmdbValue::Raw, LmdbValue::Pickle, LmdbValue::CaffeDatum][usize::from(flag % 3)];
    let options = LmdbOptions {
        value,
        ..Default::default()
    };
    let shown = file.display().to_string();
    let mut last: Option<Vec<u8>> = None;
    for item in LmdbSource::new(&[dir.clone()], options) {
        match item {
            Ok(record) => {
                assert!(last.as_ref().is_none_or(|l| *l < record.key));
                assert!(record.value.len() <= file_bytes.len());
                last = Some(record.key);
            }
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains(&shown), "{message}");
            }
        }
    }
});
