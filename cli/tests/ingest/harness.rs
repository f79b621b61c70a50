//! Fixtures, test data, and tar written and read here independently of the
//! code under test.

use std::path::{Path, PathBuf};

use bcd_test_support::{hex, tree_snapshot, unhex, Rng};
use serde_json::{json, Value};

use crate::common::*;
use crate::{ingest, ingest_args};

pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/tar")
        .join(name)
}

pub(crate) fn fixture_str(name: &str) -> String {
    fixture(name).to_str().unwrap().to_owned()
}

/// One member of a fixture archive as the tool that wrote it reads it back.
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) data: Vec<u8>,
}

/// Every member of fixture `archive`, from `fixtures/tar/expected.json`.
pub(crate) fn fixture_members(archive: &str) -> Vec<Member> {
    let text = std::fs::read_to_string(fixture("expected.json")).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    expected[archive]
        .as_array()
        .unwrap_or_else(|| panic!("{archive} is not in expected.json"))
        .iter()
        .map(|m| Member {
            name: m["name"].as_str().unwrap().to_owned(),
            kind: m["type"].as_str().unwrap().to_owned(),
            data: m["hex"].as_str().map(unhex).unwrap_or_default(),
        })
        .collect()
}

/// The regular-file members of fixture `archive`, in order: what ingest must store.
pub(crate) fn fixture_files(archive: &str) -> Records {
    fixture_members(archive)
        .into_iter()
        .filter(|m| m.kind == "file")
        .map(|m| (m.name.into_bytes(), m.data))
        .collect()
}

/// Records as the reference's `dump` prints them (keyed: [key hex, value hex]).
pub(crate) fn as_dump(records: &Records) -> Value {
    Value::Array(
        records
            .iter()
            .map(|(k, v)| json!([hex(k), hex(v)]))
            .collect(),
    )
}

// ---------------------------------------------------------------------------
// Helpers: tar, written and read here independently of the code under test
// ---------------------------------------------------------------------------

/// A ustar archive of regular files.
pub(crate) fn tar_of(members: &Records) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in members {
        write_member(&mut out, name, data).unwrap();
    }
    out.extend_from_slice(&[0u8; 1024]);
    out
}

pub(crate) fn octal(field: &[u8]) -> usize {
    let text = std::str::from_utf8(field).unwrap();
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    usize::from_str_radix(text, 8).unwrap_or_else(|_| panic!("octal field {field:?}"))
}

/// The members of an archive as (name, type flag, data), reading ustar, GNU long
/// names and PAX `path` records; checks every header checksum and the end blocks.
pub(crate) fn parse_tar(data: &[u8]) -> Vec<(Vec<u8>, u8, Vec<u8>)> {
    assert_eq!(data.len() % 512, 0, "a tar is whole 512-byte blocks");
    let mut members = Vec::new();
    let mut pos = 0;
    let mut long_name: Option<Vec<u8>> = None;
    loop {
        let header = &data[pos..pos + 512];
        if header.iter().all(|&b| b == 0) {
            assert!(
                data[pos..].len() >= 1024 && data[pos..pos + 1024].iter().all(|&b| b == 0),
                "the archive must end with two zero blocks"
            );
            return members;
        }
        let sum: usize = header
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    b as usize
                }
            })
            .sum();
        assert_eq!(octal(&header[148..156]), sum, "header checksum at {pos}");
        let size = octal(&header[124..136]);
        let kind = header[156];
        let body = data[pos + 512..pos + 512 + size].to_vec();
        pos += 512 + size.next_multiple_of(512);
        let field = |range: std::ops::Range<usize>| {
            let raw = &header[range];
            raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())].to_vec()
        };
        match kind {
            b'L' => long_name = Some(body.split(|&b| b == 0).next().unwrap().to_vec()),
            b'x' => {
                let text = String::from_utf8(body).unwrap();
                for record in text.lines() {
                    if let Some((_, path)) = record.split_once(" path=") {
                        long_name = Some(path.as_bytes().to_vec());
                    }
                }
            }
            _ => {
                let name = long_name.take().unwrap_or_else(|| {
                    let prefix = field(345..500);
                    let name = field(0..100);
                    match prefix.is_empty() {
                        true => name,
                        false => [prefix, b"/".to_vec(), name].concat(),
                    }
                });
                members.push((name, kind, body));
            }
        }
    }
}

/// The regular files of an archive as (name, data): what export must have written.
pub(crate) fn tar_files(data: &[u8]) -> Records {
    parse_tar(data)
        .into_iter()
        .map(|(name, kind, body)| {
            assert!(kind == b'0' || kind == 0, "member {name:?} of type {kind}");
            (name, body)
        })
        .collect()
}

/// `count` records whose values mix every kind of compressibility: empty, small
/// random, text, runs of one byte, and 16-24 KiB random (found incompressible by
/// the adaptive mode's probe) or repetitive (compressed) values.
pub(crate) fn mixed_records(count: usize, seed: u64) -> Records {
    let mut rng = Rng::new(seed);
    let words: [&[u8]; 6] = [b"cat ", b"dog ", b"label ", b"\x00\xff", b"jpeg ", b"\n"];
    (0..count)
        .map(|i| {
            let value = match i % 6 {
                0 => Vec::new(),
                1 => {
                    let n = 1 + rng.below(3000);
                    rng.bytes(n)
                }
                2 => {
                    let n = 1 + rng.below(600);
                    (0..n)
                        .flat_map(|_| words[rng.below(words.len())])
                        .copied()
                        .collect()
                }
                3 => vec![(i % 251) as u8; 1 + rng.below(8000)],
                4 => {
                    let n = (16 << 10) + rng.below(8 << 10);
                    rng.bytes(n)
                }
                _ => {
                    let block = rng.bytes(300);
                    repeat_to(&block, (16 << 10) + rng.below(8 << 10))
                }
            };
            (format!("rec/{i:05}.bin").into_bytes(), value)
        })
        .collect()
}

/// A keyed lz4 dataset at `dir/name` holding the six records of fixture
/// shards-000000.tar (keys no other input of these tests has), made by
/// `bcd ingest` (so it also holds the writer's lock file).
pub(crate) fn existing_dataset(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let summary = ingest(&[&fixture_str("shards-000000.tar")], &path, &[]);
    assert_eq!(summary["records"], 6);
    path
}

/// Asserts that ingesting `sources` fails with exit status 1 and a message
/// containing every one of `needles`, both into an existing dataset (whose files
/// must be byte-for-byte as before) and into a new one (which must not exist
/// afterwards). Returns the message of the run into the existing dataset.
pub(crate) fn assert_ingest_fails_cleanly(
    sources: &[&str],
    extra: &[&str],
    needles: &[&str],
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let existing = existing_dataset(dir.path(), "existing");
    let before = tree_snapshot(&existing);
    let new = dir.path().join("new");
    let mut first = None;
    for into in [&existing, &new] {
        let args = ingest_args(sources, into, extra);
        let stderr = fails(&args);
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "bcd {args:?}: the message should name {needle:?}: {stderr}"
            );
        }
        first.get_or_insert(stderr);
    }
    assert_eq!(
        tree_snapshot(&existing),
        before,
        "the existing dataset changed"
    );
    assert_eq!(
        tree_snapshot(&new),
        None,
        "a failed run left the dataset it created"
    );
    first.unwrap()
}
