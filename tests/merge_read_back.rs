//! Nothing a merge commits fails to read back (issue 20): the commit file its
//! hook hands over (the merged schema and metadata) is read back from disk
//! before the manifest moves; a disk that tore it fails the merge naming the
//! file, and the target and the part are left as they were.

use std::path::Path;
use std::sync::Arc;

use bcd::{CreateOptions, Dataset, MergeCommitInput, MergeOptions, PartSource};
use bcd_test_support::{read_all, TornWrites};

fn keyed(dir: &Path, tag: &str) -> Dataset {
    let options = CreateOptions {
        keyed: true,
        ..CreateOptions::default()
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..5)
        .map(|i| (format!("{tag}{i}").into_bytes(), b"value".to_vec()))
        .collect();
    dataset
        .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    dataset
}

#[test]
fn a_merged_commit_file_that_does_not_read_back_is_never_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, part) = (tmp.path().join("target"), tmp.path().join("part"));
    let before = read_all(&keyed(&target, "t"));
    let part_records = read_all(&keyed(&part, "p"));
    let manifest = std::fs::read(target.join("manifest.json")).unwrap();

    let mut dataset = Dataset::open_with_storage(
        &target,
        Arc::new(TornWrites {
            torn: |name| name.starts_with("commit."),
        }),
    )
    .unwrap();
    let hook = |_: &MergeCommitInput<'_>| -> Result<Option<Vec<u8>>, bcd::HookError> {
        Ok(Some(br#"{"schema": "of the merged state"}"#.to_vec()))
    };
    let options = MergeOptions {
        commit_file: Some(&hook),
        ..MergeOptions::default()
    };
    let error = dataset
        .merge(&[PartSource::new(&part)], &options)
        .unwrap_err();

    let mut message = error.to_string();
    let mut cause = std::error::Error::source(&error);
    while let Some(next) = cause {
        message += &format!(": {next}");
        cause = next.source();
    }
    assert!(message.contains("commit.000002.json"), "{message}");
    assert!(
        message.contains("other bytes than were written"),
        "{message}"
    );
    assert_eq!(
        std::fs::read(target.join("manifest.json")).unwrap(),
        manifest
    );
    assert_eq!(read_all(&Dataset::open(&target).unwrap()), before);
    assert_eq!(read_all(&Dataset::open(&part).unwrap()), part_records);
    assert!(!target.join("commit.000002.json").exists());
}
