//! What killed writers leave, and the next command (issue 20): a writer never
//! writes through a leftover file (it may be a hard link to another dataset's
//! committed file), and a directory holding only what a killed run that
//! created a dataset left is finished by re-running the command, and cleaned by
//! `bcd gc`; anything else in it is refused, by name.

use std::fs;
use std::path::Path;

use bcd::Dataset;
use bcd_test_support::{read_all, snapshot};

mod common;
use common::{fails, ok, s};

/// A directory tree of `count` files under `class/`, named `prefix-N.jpg`.
fn tree(dir: &Path, prefix: &str, count: usize) {
    for i in 0..count {
        let class = ["cat", "dog"][i % 2];
        fs::create_dir_all(dir.join(class)).unwrap();
        fs::write(
            dir.join(format!("{class}/{prefix}-{i}.jpg")),
            format!("{prefix} {i} ").repeat(30 + i),
        )
        .unwrap();
    }
}

fn ingest(source: &Path, into: &Path) {
    ok(&[
        "ingest",
        s(source),
        "--into",
        s(into),
        "--labels",
        "folder",
        "--quiet",
    ]);
}

/// The keys `bcd ls` lists, one a line.
fn listed(dataset: &Path) -> String {
    String::from_utf8(ok(&["ls", s(dataset)])).unwrap()
}

#[test]
fn an_ingest_replaces_leftover_links_to_another_datasets_files_instead_of_writing_through_them() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for (name, count) in [("a", 6), ("b", 5), ("c", 4)] {
        tree(&root.join(name), name, count);
    }
    let (target, part) = (root.join("T"), root.join("P"));
    ingest(&root.join("a"), &target);
    ingest(&root.join("c"), &part);
    let part_files = snapshot(&part);
    let part_listing = listed(&part);
    // What a merge of P killed before its commit leaves in T: P's shard 0 (and
    // its sidecars) linked as T's shard 1, past T's count; and a temporary
    // manifest that is a link to P's manifest.
    for (from, to) in [
        ("000000.bin", "000001.bin"),
        ("000000.idx", "000001.idx"),
        ("000000.fields.arrow", "000001.fields.arrow"),
        ("000000.stats.json", "000001.stats.json"),
        ("commit.000001.json", "commit.000002.json"),
        ("manifest.json", ".manifest.json.tmp"),
    ] {
        fs::hard_link(part.join(from), target.join(to)).unwrap();
    }
    ingest(&root.join("b"), &target);

    let now = snapshot(&part);
    assert_eq!(
        now.keys().collect::<Vec<_>>(),
        part_files.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &part_files {
        assert!(now[name] == *bytes, "P's {name} changed");
    }
    assert_eq!(listed(&part), part_listing);
    ok(&["verify", s(&part)]);
    ok(&["verify", s(&target)]);
    assert_eq!(Dataset::open(&target).unwrap().len(), 11);
    assert_eq!(read_all(&Dataset::open(&part).unwrap()).len(), 4);
}

/// The kinds of directory a killed run that was creating a dataset leaves: only
/// the lock; the lock and a temporary manifest; shards, sidecars and a commit
/// file without a manifest (killed while removing what it had made).
fn leftover_directories(root: &Path) -> Vec<std::path::PathBuf> {
    let source = root.join("leftover-source");
    tree(&source, "x", 4);
    let mut dirs = Vec::new();
    let lock_only = root.join("lock-only");
    fs::create_dir(&lock_only).unwrap();
    fs::write(lock_only.join(".bcd.lock"), b"").unwrap();
    dirs.push(lock_only);
    let temporary = root.join("temporary-manifest");
    fs::create_dir(&temporary).unwrap();
    fs::write(temporary.join(".bcd.lock"), b"").unwrap();
    fs::write(temporary.join(".manifest.json.tmp"), b"{\"keyed\": tr").unwrap();
    dirs.push(temporary);
    let shards = root.join("shards-only");
    ingest(&source, &shards);
    fs::remove_file(shards.join("manifest.json")).unwrap();
    assert!(shards.join("000000.bin").is_file() && shards.join("000000.stats.json").is_file());
    dirs.push(shards);
    dirs
}

#[test]
fn rerunning_an_ingest_killed_while_creating_its_dataset_completes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("a");
    tree(&source, "a", 6);
    for dir in leftover_directories(tmp.path()) {
        ingest(&source, &dir);
        let dataset = Dataset::open(&dir).unwrap();
        assert_eq!(dataset.len(), 6, "{}", dir.display());
        ok(&["verify", s(&dir)]);
        let names: Vec<String> = snapshot(&dir).into_keys().collect();
        assert!(
            !names
                .iter()
                .any(|n| n == ".manifest.json.tmp" || n.starts_with("000001")),
            "{}: leftovers kept: {names:?}",
            dir.display()
        );
    }
}

#[test]
fn create_and_merge_into_a_directory_of_leftovers_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let part = tmp.path().join("part");
    tree(&tmp.path().join("p"), "p", 5);
    for dir in leftover_directories(tmp.path()) {
        ok(&["create", s(&dir), "--keyed"]);
        assert_eq!(Dataset::open(&dir).unwrap().len(), 0, "{}", dir.display());
        ok(&["verify", s(&dir)]);
    }
    let merged = tmp.path().join("merged");
    fs::create_dir(&merged).unwrap();
    for (i, dir) in leftover_directories(&merged).into_iter().enumerate() {
        let _ = fs::remove_dir_all(&part);
        ingest(&tmp.path().join("p"), &part);
        let out = ok(&["merge", s(&part), "--into", s(&dir)]);
        assert_eq!(
            Dataset::open(&dir).unwrap().len(),
            5,
            "{i}: {}",
            String::from_utf8_lossy(&out)
        );
        ok(&["verify", s(&dir)]);
        assert!(!part.exists());
    }
}

#[test]
fn gc_cleans_a_directory_of_leftovers() {
    let tmp = tempfile::tempdir().unwrap();
    for dir in leftover_directories(tmp.path()) {
        let out = String::from_utf8(ok(&["gc", s(&dir)])).unwrap();
        assert!(out.contains("removed"), "{out}");
        assert_eq!(
            snapshot(&dir).into_keys().collect::<Vec<_>>(),
            Vec::<String>::new(),
            "{}: {out}",
            dir.display()
        );
    }
}

#[test]
fn a_directory_without_a_manifest_holding_other_files_is_refused_by_name_and_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("a");
    tree(&source, "a", 3);
    for dir in leftover_directories(tmp.path()) {
        fs::write(dir.join("notes.txt"), b"mine").unwrap();
        let before = snapshot(&dir);
        let show = dir.display().to_string();
        for args in [
            vec!["ingest", s(&source), "--into", s(&dir), "--quiet"],
            vec!["create", s(&dir)],
            vec!["gc", s(&dir)],
        ] {
            let message = fails(&args);
            assert!(message.contains("notes.txt"), "{show}: {args:?}: {message}");
            assert_eq!(snapshot(&dir), before, "{show}: {args:?}");
        }
    }
}
