//! Checks on the Rust side: extending, reading back through every read path,
//! and comparing two dataset directories byte for byte.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use bcd::{Dataset, Error};
use bcd_test_support::{snapshot, Record};

use crate::corpus::assert_records_eq;
use crate::harness::{Spec, LOCK_NAME};

pub fn rust_extend(dataset: &mut Dataset, records: &[Record]) {
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
pub fn assert_rust_reads(dataset: &Dataset, spec: Spec, expected: &[Record], context: &str) {
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

/// A snapshot of a directory Rust wrote to, without the (empty) lock file that is
/// Rust's only addition to the format.
pub fn snapshot_without_lock(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = snapshot(dir);
    if let Some(lock) = files.remove(LOCK_NAME) {
        assert!(lock.is_empty(), "{LOCK_NAME} holds data");
    }
    files
}

pub fn shard_file_count(files: &BTreeMap<String, Vec<u8>>) -> usize {
    files.keys().filter(|name| name.ends_with(".bin")).count()
}

/// Asserts that two directories hold the same files byte for byte, explaining the
/// first difference in terms of records.
pub fn assert_same_files(rust_dir: &Path, reference_dir: &Path, context: &str) {
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
pub fn first_stored_difference(rust_dir: &Path, reference_dir: &Path) -> String {
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
