//! Round trips: ingest then export (or extract) gives back the same members.

use std::process::Command;

use bcd::Dataset;
use bcd_test_support::{read_all, tree_snapshot, Rng};
use serde_json::json;

use crate::common::*;
use crate::harness::{fixture_files, fixture_str, tar_files};
use crate::{ingest, run};

#[test]
fn tar_ingest_then_export_reproduces_member_names_bytes_and_order() {
    let dir = tempfile::tempdir().unwrap();
    for archive in ["gnu.tar", "pax.tar"] {
        let ds = dir.path().join(archive).with_extension("ds");
        ingest(&[&fixture_str(archive)], &ds, &[]);
        let out = dir.path().join(archive).with_extension("out.tar");
        let run = run(&["export", s(&ds), "--to", s(&out)]);
        assert!(run.status.success(), "{}", run.stderr);
        assert!(
            run.stderr.contains("exported 7 members"),
            "summary: {}",
            run.stderr
        );
        assert_eq!(
            tar_files(&std::fs::read(&out).unwrap()),
            fixture_files(archive),
            "{archive}: export differs from what tarfile wrote"
        );
    }
}

#[test]
fn directory_tree_round_trips_through_ingest_export_and_extraction() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let long_dir = "d".repeat(60);
    let files: Records = vec![
        (b"a.txt".to_vec(), b"alpha\n".to_vec()),
        (b"cats/1.jpg".to_vec(), Rng::new(1).bytes(5000)),
        (b"cats/2.jpg".to_vec(), Vec::new()),
        (
            format!("{long_dir}/{long_dir}/long-name.bin").into_bytes(),
            vec![9; 700],
        ),
        (
            "ünïcödé/名前.txt".as_bytes().to_vec(),
            "grüße".as_bytes().to_vec(),
        ),
    ];
    for (name, data) in &files {
        let path = tree.join(std::str::from_utf8(name).unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    }
    let wanted = tree_snapshot(&tree).unwrap();
    assert_eq!(wanted.len(), files.len());
    // A symbolic link is passed over and counted, not stored.
    #[cfg(unix)]
    std::os::unix::fs::symlink("a.txt", tree.join("link.txt")).unwrap();

    let ds = dir.path().join("ds");
    let summary = ingest(&[s(&tree)], &ds, &[]);
    assert_eq!(summary["records"], 5);
    #[cfg(unix)]
    assert_eq!(summary["skipped_members"], json!({"symlink": 1}));
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(
        read_all(&Dataset::open(&ds).unwrap()),
        sorted,
        "keys are relative paths, in sorted order"
    );
    let out = dir.path().join("tree.tar");
    ok(&["export", s(&ds), "--to", s(&out)]);

    // Python's tarfile extracts it...
    let by_python = dir.path().join("by-python");
    run_python(
        "import sys, tarfile\n\
         with tarfile.open(sys.argv[1]) as tar:\n\
         \x20   tar.extractall(sys.argv[2], filter='data')\n",
        &[s(&out), s(&by_python)],
    );
    assert_eq!(
        tree_snapshot(&by_python).unwrap(),
        wanted,
        "tarfile extraction"
    );

    // ... and so does tar -x, where the command exists.
    if Command::new("tar").arg("--version").output().is_ok() {
        let by_tar = dir.path().join("by-tar");
        std::fs::create_dir(&by_tar).unwrap();
        let status = Command::new("tar")
            .args(["-xf", s(&out), "-C", s(&by_tar)])
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(tree_snapshot(&by_tar).unwrap(), wanted, "tar -x extraction");
    } else {
        eprintln!("no tar command: checked the extraction by Python's tarfile only");
    }
}

#[test]
fn keyless_export_names_members_by_zero_padded_index() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let summary = ingest(&[&fixture_str("webdataset.tar")], &ds, &["--keyless"]);
    assert_eq!(summary["records"], 12);
    assert!(!Dataset::open(&ds).unwrap().keyed());
    let values: Vec<Vec<u8>> = fixture_files("webdataset.tar")
        .into_iter()
        .map(|(_, v)| v)
        .collect();

    let plain = dir.path().join("plain.tar");
    ok(&["export", s(&ds), "--to", s(&plain)]);
    let suffixed = dir.path().join("suffixed.tar");
    ok(&[
        "export",
        s(&ds),
        "--to",
        s(&suffixed),
        "--keyless-suffix",
        ".bin",
    ]);
    for (path, suffix) in [(plain, ""), (suffixed, ".bin")] {
        let wanted: Records = values
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{i:06}{suffix}").into_bytes(), v.clone()))
            .collect();
        assert_eq!(tar_files(&std::fs::read(path).unwrap()), wanted);
    }
}
