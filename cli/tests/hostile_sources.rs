//! `bcd ingest` against inputs that claim more than they hold or that loop back on
//! themselves (issue 14, items 2 and 10): a 46 KB archive claiming a 1.5 GB member
//! name fails cleanly under a 1 GiB address-space limit, and a dataset ingested
//! into its own source tree does not store itself.

use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use bcd_test_support::{read_all, tree_snapshot};
use common::*;

fn records(dataset: &Path) -> Vec<bcd_test_support::Record> {
    read_all(&bcd::Dataset::open(dataset).unwrap())
}

/// A zstd frame (128 KiB window, no checksum) of one raw block holding `head`,
/// `count` bytes of `byte` as RLE blocks, and a raw block holding `tail`: a huge
/// stream in a few bytes per 128 KiB. (zstd format, RFC 8878, section 3.1.1.2.)
fn zstd_rle_frame(head: &[u8], byte: u8, count: u64, tail: &[u8]) -> Vec<u8> {
    const MAX_BLOCK: u64 = 128 << 10;
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, (17 - 10) << 3];
    let mut block = |kind: u32, size: u64, content: &[u8], last: bool| {
        let header = u32::from(last) | (kind << 1) | ((size as u32) << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.extend_from_slice(content);
    };
    assert!(head.len() as u64 <= MAX_BLOCK && tail.len() as u64 <= MAX_BLOCK);
    block(0, head.len() as u64, head, false);
    let mut left = count;
    while left > 0 {
        let n = left.min(MAX_BLOCK);
        block(1, n, &[byte], false);
        left -= n;
    }
    block(0, tail.len() as u64, tail, true);
    out
}

/// A GNU tar header, checksummed.
fn tar_header(name: &[u8], type_flag: u8, size: u64) -> Vec<u8> {
    let mut block = vec![0u8; 512];
    block[..name.len()].copy_from_slice(name);
    block[100..108].copy_from_slice(b"0000644\0");
    block[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    block[156] = type_flag;
    block[257..265].copy_from_slice(b"ustar  \0");
    block[148..156].copy_from_slice(b"        ");
    let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
    block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    block
}

#[test]
fn a_46_kb_archive_claiming_a_1_5_gb_name_fails_cleanly_under_a_1_gib_memory_limit() {
    // Issue 14.2's recipe: an `L` header of 1.5 GB of `a`, then one member. Before
    // the bound, ingest read the whole name (8 GB peak) and under a 3 GB limit
    // aborted with signal 6.
    let dir = tempfile::tempdir().unwrap();
    let claimed: u64 = 1_500_000_000;
    let padding = (claimed.next_multiple_of(512) - claimed) as usize;
    let mut tail = vec![0u8; padding];
    tail.extend(tar_header(b"x", b'0', 5));
    tail.extend(b"value");
    tail.resize(tail.len().next_multiple_of(512) + 1024, 0);
    let archive = dir.path().join("ln.tar.zst");
    let frame = zstd_rle_frame(
        &tar_header(b"././@LongLink", b'L', claimed),
        b'a',
        claimed,
        &tail,
    );
    assert!(frame.len() < 60_000, "{} bytes", frame.len());
    std::fs::write(&archive, frame).unwrap();

    let ds = dir.path().join("ds");
    // `ulimit -v` is in KiB: 1 GiB of address space for bcd and its threads.
    let child = Command::new("sh")
        .args(["-c", "ulimit -v 1048576 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_bcd"))
        .args(["ingest", s(&archive), "--into", s(&ds), "--quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = finish(child, "ingest ln.tar.zst under ulimit -v 1 GiB");
    assert_clean_failure(&run, "ingest ln.tar.zst");
    for part in [
        s(&archive),
        "member 0 (header at byte 0)",
        "GNU long name of 1500000000 bytes",
    ] {
        assert!(run.stderr.contains(part), "{:?} lacks {part:?}", run.stderr);
    }
    assert_eq!(
        tree_snapshot(&ds),
        None,
        "the dataset it created was left behind"
    );
}

/// The files of a small tree, as (key, value).
fn make_tree(root: &Path) -> Records {
    let files: Records = vec![
        (b"a.txt".to_vec(), b"alpha".to_vec()),
        (b"sub/b.txt".to_vec(), b"beta".to_vec()),
        (b"z.txt".to_vec(), b"zeta".to_vec()),
    ];
    for (key, value) in &files {
        let path = root.join(std::str::from_utf8(key).unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, value).unwrap();
    }
    files
}

fn ingest_ok(args: &[&str], dir: &Path) {
    let run = finish(spawn(args, false, Some(dir)), &show(args));
    assert!(run.status.success(), "bcd {args:?}: {}", run.stderr);
}

#[test]
fn a_dataset_ingested_into_its_own_source_tree_does_not_store_itself() {
    // Issue 14.10's recipe: `bcd ingest src --into src/ds` recorded ds/.bcd.lock
    // and ds/manifest.json. Then the same spelled differently: `./`, an absolute
    // path, through a symbolic link to the tree.
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let absolute = s(&work.join("t3/ds")).to_owned();
    let mut cases: Vec<(&str, &str, &str)> = vec![
        ("t1", "t1", "t1/ds"),
        ("t2", "./t2/", "t2/./ds"),
        ("t3", "t3", &absolute),
    ];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(work.join("t4"), work.join("l4")).unwrap();
        cases.push(("t4", "t4", "l4/ds"));
    }
    for (tree, source, into) in cases {
        let files = make_tree(&work.join(tree));
        ingest_ok(&["ingest", source, "--into", into, "--quiet"], work);
        assert_eq!(records(&work.join(tree).join("ds")), files, "--into {into}");
    }

    // Following links, the dataset is not read through a link to it either.
    #[cfg(unix)]
    {
        let tree = work.join("t5");
        let files = make_tree(&tree);
        std::os::unix::fs::symlink(tree.join("ds"), tree.join("b-link")).unwrap();
        ingest_ok(
            &[
                "ingest",
                "t5",
                "--into",
                "t5/ds",
                "--follow-links",
                "--quiet",
            ],
            work,
        );
        assert_eq!(records(&tree.join("ds")), files);
    }
}
