//! Small valid datasets, built once per run, and the mutations applied to copies
//! of their files.

use std::fs;
use std::path::Path;
use std::sync::OnceLock;

use bcd::{Compression, CreateOptions, Dataset};
use bcd_test_support::snapshot;
use proptest::prelude::*;
use proptest::sample::Index;

use crate::edits::{apply_byte_op, byte_op, manifest_text, ByteOp};
use crate::MANIFEST;

/// The files of one small valid dataset, and the keys written to it.
pub struct Base {
    pub files: Vec<(String, Vec<u8>)>,
    pub keys: Vec<Vec<u8>>,
}

fn base_records() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (b"".to_vec(), b"".to_vec()),
        (b"a".to_vec(), b"hello hello hello hello hello".to_vec()),
        (vec![0, 255, 10], Vec::new()),
        (b"key\x00with\xffbinary".to_vec(), vec![7; 40]),
        (b"d".to_vec(), b"x".to_vec()),
        (b"e".to_vec(), (0u8..=60).collect()),
        (b"f".to_vec(), b"abcabcabcabcabcabcabcabcabcabc".to_vec()),
        (b"g".to_vec(), Vec::new()),
    ]
}

fn read_dir_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    snapshot(dir)
        .into_iter()
        // The writer's lock file is no part of the format.
        .filter(|(name, _)| !name.starts_with('.'))
        .collect()
}

/// Builds a dataset with `Dataset::create` and two extends (the first `split` records,
/// then the rest), and returns its files.
fn build_base(keyed: bool, compression: Compression, max_shard_size: u64, split: usize) -> Base {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ds");
    let mut ds = Dataset::create(
        &path,
        CreateOptions {
            keyed,
            compression,
            max_shard_size,
        },
    )
    .unwrap();
    let records = base_records();
    for part in [&records[..split], &records[split..]] {
        if keyed {
            ds.extend(part.iter().map(|(k, v)| (k, v))).unwrap();
        } else {
            ds.extend_values(part.iter().map(|(_, v)| v)).unwrap();
        }
    }
    Base {
        files: read_dir_files(&path),
        keys: records.into_iter().map(|(k, _)| k).collect(),
    }
}

pub fn bases() -> &'static [Base] {
    static BASES: OnceLock<Vec<Base>> = OnceLock::new();
    BASES.get_or_init(|| {
        let mut bases = Vec::new();
        for keyed in [true, false] {
            for compression in [Compression::Lz4, Compression::None] {
                bases.push(build_base(keyed, compression, 48, 3));
            }
        }
        // One shard holding everything.
        bases.push(build_base(true, Compression::Lz4, 1 << 20, 8));
        // A 0.2.0 manifest (no max_shard_size) over keyless lz4 shards.
        let mut v2 = build_base(false, Compression::Lz4, 30, 4);
        let shards = v2.files.iter().filter(|(n, _)| n.ends_with(".bin")).count();
        for (name, bytes) in &mut v2.files {
            if name == MANIFEST {
                *bytes =
                    format!("{{\"keyed\": false, \"compression\": \"lz4\", \"shards\": {shards}}}")
                        .into_bytes();
            }
        }
        bases.push(v2);
        // An empty dataset: a manifest and no shards.
        bases.push(build_base(true, Compression::None, 16, 0));
        bases
    })
}

#[derive(Clone, Debug)]
pub enum FileOp {
    Bytes(ByteOp),
    Delete,
    /// Rewrites manifest.json (whatever `file` picks) with this text.
    Manifest(String),
}

#[derive(Clone, Debug)]
pub struct Mutation {
    file: Index,
    op: FileOp,
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    let op = prop_oneof![
        8 => byte_op().prop_map(FileOp::Bytes),
        1 => Just(FileOp::Delete),
        2 => manifest_text().prop_map(FileOp::Manifest),
    ];
    (any::<Index>(), op).prop_map(|(file, op)| Mutation { file, op })
}

/// Applies `mutation` to the files in `dir`, replacing files by rename (a new inode),
/// so that mappings an open handle holds are never truncated under it.
pub fn apply_mutation(dir: &Path, names: &[String], mutation: &Mutation) {
    let replace = |name: &str, bytes: &[u8]| {
        let tmp = dir.join(".mutating");
        fs::write(&tmp, bytes).unwrap();
        fs::rename(&tmp, dir.join(name)).unwrap();
    };
    if let FileOp::Manifest(text) = &mutation.op {
        replace(MANIFEST, text.as_bytes());
        return;
    }
    if names.is_empty() {
        return;
    }
    let name = &names[mutation.file.index(names.len())];
    let path = dir.join(name);
    let Ok(mut bytes) = fs::read(&path) else {
        return; // Deleted by an earlier mutation.
    };
    match &mutation.op {
        FileOp::Bytes(op) => {
            apply_byte_op(&mut bytes, op);
            replace(name, &bytes);
        }
        FileOp::Delete => fs::remove_file(&path).unwrap(),
        FileOp::Manifest(_) => unreachable!(),
    }
}

pub fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) {
    fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        fs::write(dir.join(name), bytes).unwrap();
    }
}
