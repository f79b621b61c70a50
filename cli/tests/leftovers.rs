//! What killed writers leave, and the next command (issue 20): a writer never
//! writes through a leftover file (it may be a hard link to another dataset's
//! committed file).

use std::fs;
use std::path::Path;

use bcd::Dataset;
use bcd_test_support::{read_all, snapshot};

mod common;
use common::{ok, s};

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
