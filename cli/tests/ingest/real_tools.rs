//! Archives made by real tools (GNU and pax tar, gzip, zstd, WebDataset), read
//! as those tools wrote them.

use bcd::Dataset;
use bcd_test_support::read_all;
use serde_json::{json, Value};

use crate::common::*;
use crate::harness::{fixture, fixture_files, fixture_members, fixture_str};
use crate::{ingest, run_with};

#[test]
fn gnu_and_pax_archives_keep_long_unicode_and_empty_members_and_skip_symlinks() {
    // The fixtures hold what this test is about.
    let members = fixture_members("gnu.tar");
    let kinds: Vec<&str> = members.iter().map(|m| m.kind.as_str()).collect();
    assert!(kinds.contains(&"dir") && kinds.contains(&"symlink"));
    let files = fixture_files("gnu.tar");
    assert!(files.iter().any(|(name, _)| name.len() > 100));
    assert!(files.iter().any(|(name, _)| !name.is_ascii()));
    assert!(files.iter().any(|(_, data)| data.is_empty()));
    assert_eq!(files.len(), 7);

    let dir = tempfile::tempdir().unwrap();
    for archive in ["gnu.tar", "pax.tar"] {
        assert_eq!(fixture_files(archive), files, "{archive} has other files");
        let ds = dir.path().join(archive).with_extension("ds");
        let summary = ingest(&[&fixture_str(archive)], &ds, &[]);
        assert_eq!(summary["created"], true, "{archive}");
        assert_eq!(summary["records"], 7, "{archive}");
        assert_eq!(summary["skipped"], 0, "{archive}");
        assert_eq!(
            summary["skipped_members"],
            json!({"symlink": 1}),
            "{archive}"
        );
        assert_eq!(
            summary["bytes_in"],
            files.iter().map(|(_, v)| v.len()).sum::<usize>(),
            "{archive}"
        );
        assert_eq!(read_all(&Dataset::open(&ds).unwrap()), files, "{archive}");
        assert!(Dataset::open(&ds).unwrap().keyed());
    }
}

#[test]
fn gzip_archives_tar_gz_and_tgz_ingest_like_the_plain_tar() {
    let dir = tempfile::tempdir().unwrap();
    for (archive, plain) in [("gnu.tar.gz", "gnu.tar"), ("pax.tgz", "pax.tar")] {
        assert_eq!(fixture_files(archive), fixture_files(plain));
        let ds = dir.path().join(archive).with_extension("ds");
        let summary = ingest(&[&fixture_str(archive)], &ds, &[]);
        assert_eq!(summary["skipped_members"], json!({"symlink": 1}));
        assert_eq!(
            read_all(&Dataset::open(&ds).unwrap()),
            fixture_files(archive),
            "{archive}"
        );
    }
}

#[test]
fn zstd_archive_ingests_like_the_plain_tar() {
    let dir = tempfile::tempdir().unwrap();
    let plain = std::fs::read(fixture("pax.tar")).unwrap();
    for name in ["pax.tar.zst", "pax.tzst"] {
        let archive = dir.path().join(name);
        std::fs::write(&archive, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();
        let ds = dir.path().join(format!("{name}.ds"));
        let summary = ingest(&[s(&archive)], &ds, &[]);
        assert_eq!(summary["skipped_members"], json!({"symlink": 1}));
        assert_eq!(
            read_all(&Dataset::open(&ds).unwrap()),
            fixture_files("pax.tar"),
            "{name}"
        );
    }
}

#[test]
fn webdataset_tar_writer_shard_ingests_every_field_in_sample_order() {
    let files = fixture_files("webdataset.tar");
    let names: Vec<String> = files
        .iter()
        .map(|(n, _)| String::from_utf8(n.clone()).unwrap())
        .collect();
    assert_eq!(
        &names[..3],
        ["sample000000.cls", "sample000000.jpg", "sample000000.json"]
    );
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let summary = ingest(&[&fixture_str("webdataset.tar")], &ds, &[]);
    assert_eq!(summary["records"], 12);
    assert_eq!(summary["skipped_members"], json!({}));
    assert_eq!(read_all(&Dataset::open(&ds).unwrap()), files);
}

#[test]
fn several_archives_ingest_in_command_line_order() {
    let dir = tempfile::tempdir().unwrap();
    let order = ["shards-000001.tar", "gnu.tar.gz", "webdataset.tar"];
    let ds = dir.path().join("ds");
    let sources: Vec<String> = order.iter().map(|a| fixture_str(a)).collect();
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    let summary = ingest(&sources, &ds, &[]);
    let wanted: Records = order.iter().flat_map(|a| fixture_files(a)).collect();
    assert_eq!(summary["records"], wanted.len());
    assert_eq!(summary["skipped_members"], json!({"symlink": 1}));
    assert_eq!(read_all(&Dataset::open(&ds).unwrap()), wanted);
}

#[test]
fn brace_range_reads_every_shard_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let pattern = fixture_str("shards-{000000..000002}.tar");
    let summary = ingest(&[&pattern], &ds, &[]);
    let wanted: Records = (0..3)
        .flat_map(|n| fixture_files(&format!("shards-{n:06}.tar")))
        .collect();
    assert_eq!(wanted.len(), 18);
    assert_eq!(summary["records"], 18);
    assert_eq!(read_all(&Dataset::open(&ds).unwrap()), wanted);
    // Keys run on across shards: sample000100 .. sample000105.
    assert_eq!(wanted[0].0, b"sample000100.cls");
    assert_eq!(wanted[17].0, b"sample000105.json");
}

#[test]
fn dash_reads_a_plain_or_gzip_tar_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    for archive in ["webdataset.tar", "pax.tgz"] {
        let ds = dir.path().join(archive).with_extension("ds");
        let input = std::fs::read(fixture(archive)).unwrap();
        let args = ["ingest", "-", "--into", s(&ds), "--json", "--quiet"];
        let run = run_with(&args, Some(input));
        assert!(run.status.success(), "{archive}: {}", run.stderr);
        let summary: Value = serde_json::from_slice(&run.stdout).unwrap();
        assert_eq!(summary["records"], fixture_files(archive).len());
        assert_eq!(
            read_all(&Dataset::open(&ds).unwrap()),
            fixture_files(archive),
            "{archive}"
        );
    }
}
