//! Duplicate keys: refused by default, skipped and counted on request.

use bcd::Dataset;
use bcd_test_support::{read_all, tree_snapshot};
use serde_json::json;

use crate::common::*;
use crate::harness::{assert_ingest_fails_cleanly, fixture_str, mixed_records, tar_of};
use crate::{ingest, ingest_args};

#[test]
fn duplicate_key_fails_naming_archive_and_key_and_commits_nothing() {
    // Against a committed key: webdataset.tar is new, pax.tar repeats gnu.tar's keys.
    let pax = fixture_str("pax.tar");
    let stderr = {
        let dir = tempfile::tempdir().unwrap();
        let ds = dir.path().join("ds");
        ingest(&[&fixture_str("gnu.tar")], &ds, &[]);
        let before = tree_snapshot(&ds);
        let stderr = fails(&ingest_args(
            &[&fixture_str("webdataset.tar"), &pax],
            &ds,
            &[],
        ));
        assert_eq!(tree_snapshot(&ds), before);
        stderr
    };
    assert!(
        stderr.contains(&pax) && stderr.contains("\"dir/a.txt\"") && stderr.contains("duplicate"),
        "{stderr}"
    );

    // Within one run, into a new dataset: the same archive twice.
    let wds = fixture_str("webdataset.tar");
    let stderr = assert_ingest_fails_cleanly(&[&wds, &wds], &[], &[&wds, "sample000000.cls"]);
    assert!(stderr.contains("duplicate key"), "{stderr}");
    // The library names the option by field; the CLI spells it as its flag.
    assert!(
        stderr.contains("(use --on-duplicate skip to keep the first)"),
        "{stderr}"
    );

    // Within one batch of a long input, with more batches queued behind it: the
    // run must stop at once rather than wait for the rest.
    let dir = tempfile::tempdir().unwrap();
    let mut members = mixed_records(1200, 8);
    members[1].0 = members[0].0.clone();
    let archive = dir.path().join("dup-early.tar");
    std::fs::write(&archive, tar_of(&members)).unwrap();
    let archive = s(&archive).to_owned();
    assert_ingest_fails_cleanly(
        &[&archive],
        &["--jobs", "1"],
        &[&archive, "\"rec/00000.bin\""],
    );

    // In the last record, after several batches were written to new shard files:
    // those files are removed.
    let mut members = mixed_records(1200, 8);
    members[1199].0 = members[7].0.clone();
    let archive = dir.path().join("dup-late.tar");
    std::fs::write(&archive, tar_of(&members)).unwrap();
    let archive = s(&archive).to_owned();
    assert_ingest_fails_cleanly(
        &[&archive],
        &["--jobs", "1"],
        &[&archive, "\"rec/00007.bin\""],
    );
}

#[test]
fn on_duplicate_skip_keeps_the_first_counts_the_rest_and_reruns_add_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first: Records = vec![
        (b"a".to_vec(), b"first a".to_vec()),
        (b"b".to_vec(), b"first b".to_vec()),
    ];
    let second: Records = vec![
        (b"b".to_vec(), b"second b".to_vec()),
        (b"c".to_vec(), b"second c".to_vec()),
        (b"a".to_vec(), b"second a".to_vec()),
        (b"c".to_vec(), b"second c again".to_vec()),
    ];
    let (one, two) = (dir.path().join("one.tar"), dir.path().join("two.tar"));
    std::fs::write(&one, tar_of(&first)).unwrap();
    std::fs::write(&two, tar_of(&second)).unwrap();
    let ds = dir.path().join("ds");
    let skip = ["--on-duplicate", "skip"];

    let summary = ingest(&[s(&one), s(&two)], &ds, &skip);
    assert_eq!(
        (&summary["records"], &summary["skipped"]),
        (&json!(3), &json!(3))
    );
    let wanted: Records = vec![
        (b"a".to_vec(), b"first a".to_vec()),
        (b"b".to_vec(), b"first b".to_vec()),
        (b"c".to_vec(), b"second c".to_vec()),
    ];
    assert_eq!(read_all(&Dataset::open(&ds).unwrap()), wanted);

    // The same ingest again adds nothing and changes no file.
    let before = tree_snapshot(&ds);
    let summary = ingest(&[s(&one), s(&two)], &ds, &skip);
    assert_eq!(
        (&summary["records"], &summary["skipped"]),
        (&json!(0), &json!(6))
    );
    assert_eq!(summary["created"], false);
    assert_eq!(tree_snapshot(&ds), before);
    assert_eq!(read_all(&Dataset::open(&ds).unwrap()), wanted);

    // The default policy refuses the same input, naming the file and key.
    let stderr = fails(&ingest_args(&[s(&two)], &ds, &[]));
    assert!(
        stderr.contains(s(&two)) && stderr.contains("\"b\""),
        "{stderr}"
    );
    assert_eq!(tree_snapshot(&ds), before);
}
