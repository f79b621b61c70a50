//! `bcd ingest` and `bcd export` end to end, through the binary: round trips,
//! archives made by real tools (the committed fixtures in `fixtures/tar/`, written
//! by `fixtures/tar/make_tar_fixtures.py` with Python's `tarfile`, `gzip` and
//! WebDataset's `TarWriter`; `expected.json` there lists what those tools wrote),
//! the Python reference reading what ingest wrote, duplicate policies,
//! determinism across job counts, bad input, interruption, and export's safety
//! rules.
//!
//! The reference and the tar extraction run in the virtualenv made by
//! `bash tests/python/setup-env.sh` (`<repo>/.venv`, or `$BCD_TEST_VENV`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;

use bcd::Dataset;
use serde_json::{json, Value};

use bcd_test_support::{hex, read_all, reference_batch, snapshot_names, tree_snapshot, unhex, Rng};

mod common;
use common::*;

// ---------------------------------------------------------------------------
// Helpers: running bcd
// ---------------------------------------------------------------------------

/// Runs bcd with `input` on stdin (none: stdin is empty).
fn run_with(args: &[&str], input: Option<Vec<u8>>) -> Run {
    let mut child = spawn(args, input.is_some(), None);
    let writer = input.map(|data| {
        let mut stdin = child.stdin.take().expect("piped stdin");
        thread::spawn(move || {
            let _ = stdin.write_all(&data); // bcd may stop reading early
        })
    });
    let run = finish(child, &format!("{args:?}"));
    if let Some(writer) = writer {
        writer.join().unwrap();
    }
    run
}

fn run(args: &[&str]) -> Run {
    run_with(args, None)
}

/// `bcd ingest SOURCES --into DATASET --json EXTRA...`: asserts success and returns
/// the JSON summary.
fn ingest(sources: &[&str], into: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["ingest"];
    args.extend_from_slice(sources);
    args.extend_from_slice(&["--into", s(into), "--json", "--quiet"]);
    args.extend_from_slice(extra);
    let stdout = ok(&args);
    serde_json::from_slice(&stdout).unwrap_or_else(|e| {
        panic!(
            "bcd {args:?}: summary is not JSON ({e}): {}",
            String::from_utf8_lossy(&stdout)
        )
    })
}

/// The arguments of `bcd ingest SOURCES --into DATASET EXTRA...`.
fn ingest_args<'a>(sources: &[&'a str], into: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["ingest"];
    args.extend_from_slice(sources);
    args.extend_from_slice(&["--into", s(into), "--quiet"]);
    args.extend_from_slice(extra);
    args
}

// ---------------------------------------------------------------------------
// Helpers: datasets, snapshots, fixtures
// ---------------------------------------------------------------------------

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/tar")
        .join(name)
}

fn fixture_str(name: &str) -> String {
    fixture(name).to_str().unwrap().to_owned()
}

/// One member of a fixture archive as the tool that wrote it reads it back.
struct Member {
    name: String,
    kind: String,
    data: Vec<u8>,
}

/// Every member of fixture `archive`, from `fixtures/tar/expected.json`.
fn fixture_members(archive: &str) -> Vec<Member> {
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
fn fixture_files(archive: &str) -> Records {
    fixture_members(archive)
        .into_iter()
        .filter(|m| m.kind == "file")
        .map(|m| (m.name.into_bytes(), m.data))
        .collect()
}

/// Records as the reference's `dump` prints them (keyed: [key hex, value hex]).
fn as_dump(records: &Records) -> Value {
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
fn tar_of(members: &Records) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in members {
        write_member(&mut out, name, data).unwrap();
    }
    out.extend_from_slice(&[0u8; 1024]);
    out
}

fn octal(field: &[u8]) -> usize {
    let text = std::str::from_utf8(field).unwrap();
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    usize::from_str_radix(text, 8).unwrap_or_else(|_| panic!("octal field {field:?}"))
}

/// The members of an archive as (name, type flag, data), reading ustar, GNU long
/// names and PAX `path` records; checks every header checksum and the end blocks.
fn parse_tar(data: &[u8]) -> Vec<(Vec<u8>, u8, Vec<u8>)> {
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
fn tar_files(data: &[u8]) -> Records {
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
fn mixed_records(count: usize, seed: u64) -> Records {
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
fn existing_dataset(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let summary = ingest(&[&fixture_str("shards-000000.tar")], &path, &[]);
    assert_eq!(summary["records"], 6);
    path
}

/// Asserts that ingesting `sources` fails with exit status 1 and a message
/// containing every one of `needles`, both into an existing dataset (whose files
/// must be byte-for-byte as before) and into a new one (which must not exist
/// afterwards). Returns the message of the run into the existing dataset.
fn assert_ingest_fails_cleanly(sources: &[&str], extra: &[&str], needles: &[&str]) -> String {
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

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Archives made by real tools
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// The Python reference reads what ingest wrote
// ---------------------------------------------------------------------------

/// Checks that `stored` is `value` as a literal-only LZ4 block: size prefix, one
/// token 0xF0, the literal length in 255-steps, the bytes verbatim.
fn assert_literal_only_block(stored: &[u8], value: &[u8]) {
    let mut wanted = (value.len() as u32).to_le_bytes().to_vec();
    wanted.push(0xF0);
    let mut rest = value.len() - 15;
    while rest >= 255 {
        wanted.push(255);
        rest -= 255;
    }
    wanted.push(rest as u8);
    wanted.extend_from_slice(value);
    assert!(stored == wanted, "not stored as a literal-only LZ4 block");
}

#[test]
fn python_reference_reads_what_ingest_wrote_at_every_level_and_without_compression() {
    let dir = tempfile::tempdir().unwrap();
    let random = Rng::new(100).bytes(100 * 1024);
    let mut source = fixture_files("pax.tar");
    source.push((b"random-100k.bin".to_vec(), random.clone()));
    source.extend(mixed_records(30, 5));
    let archive = dir.path().join("source.tar");
    std::fs::write(&archive, tar_of(&source)).unwrap();

    let settings: [(&str, &[&str]); 4] = [
        ("default", &[]),
        ("reference", &["--level", "reference"]),
        ("fast", &["--level", "fast"]),
        ("none", &["--compression", "none"]),
    ];
    let mut steps = Vec::new();
    for (name, extra) in settings {
        let ds = dir.path().join(name);
        let summary = ingest(&[s(&archive)], &ds, extra);
        assert_eq!(summary["records"], source.len(), "{name}");
        steps.push(json!({"command": "dump", "path": s(&ds)}));
    }
    // The reference writes the same records itself, for the byte comparison below.
    let by_reference = dir.path().join("by-reference");
    steps.push(json!({"command": "create", "path": s(&by_reference), "keyed": true}));
    let input: Vec<Value> = source
        .iter()
        .map(|(k, v)| json!([hex(k), hex(v)]))
        .collect();
    steps.push(json!({"command": "extend", "path": s(&by_reference), "input": input}));
    let results = reference_batch("0.3.0", &steps);

    for ((name, _), dump) in settings.iter().zip(&results) {
        let compression = if *name == "none" {
            json!(null)
        } else {
            json!("lz4")
        };
        assert_eq!(dump["keyed"], true, "{name}");
        assert_eq!(dump["compression"], compression, "{name}");
        assert!(
            dump["records"] == as_dump(&source),
            "{name}: the reference reads other records than the source's"
        );
    }

    // The default adaptive mode stores the random member as literals only.
    let default = Dataset::open(dir.path().join("default")).unwrap();
    let index = default.position(b"random-100k.bin").unwrap().unwrap();
    assert_literal_only_block(default.stored_at(index).unwrap(), &random);
    // --level reference writes the reference's bytes.
    for file in ["000000.bin", "000000.idx", "manifest.json"] {
        assert!(
            std::fs::read(dir.path().join("reference").join(file)).unwrap()
                == std::fs::read(by_reference.join(file)).unwrap(),
            "--level reference: {file} differs from the reference's"
        );
    }
}

// ---------------------------------------------------------------------------
// Duplicates
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Determinism
// ---------------------------------------------------------------------------

#[test]
fn dataset_files_are_byte_identical_for_1_2_and_5_jobs() {
    let dir = tempfile::tempdir().unwrap();
    // 1600 records: 7 batches with one job, 2 with five.
    let source = mixed_records(1600, 42);
    let archive = dir.path().join("mixed.tar");
    std::fs::write(&archive, tar_of(&source)).unwrap();
    let mut snapshots = Vec::new();
    for jobs in ["1", "2", "5"] {
        let ds = dir.path().join(format!("jobs-{jobs}"));
        let summary = ingest(
            &[s(&archive)],
            &ds,
            &["--jobs", jobs, "--max-shard-size", "1M"],
        );
        assert_eq!(summary["records"], 1600);
        snapshots.push(tree_snapshot(&ds).unwrap());
    }
    let shards = snapshots[0]
        .keys()
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .count();
    assert!(shards >= 3, "only {shards} shards: not a multi-shard test");
    assert!(
        snapshots[0] == snapshots[1],
        "--jobs 1 and --jobs 2 differ: {:?} / {:?}",
        snapshot_names(&snapshots[0]),
        snapshot_names(&snapshots[1])
    );
    assert!(snapshots[0] == snapshots[2], "--jobs 1 and --jobs 5 differ");
    assert_eq!(
        read_all(&Dataset::open(&dir.path().join("jobs-5")).unwrap()),
        source
    );
}

// ---------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------

/// The path of a copy of fixture gnu.tar altered by `change`, in `dir`.
fn altered_gnu_tar(dir: &Path, name: &str, change: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut bytes = std::fs::read(fixture("gnu.tar")).unwrap();
    change(&mut bytes);
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    s(&path).to_owned()
}

#[test]
fn truncated_tar_fails_naming_archive_and_member_and_changes_nothing() {
    // gnu.tar: "dir/sub/random.bin" (3000 bytes) has its header at 6144 and data
    // at 6656..9656; the next header, "dir/sub/exactly-one-block.bin", is at 9728.
    let dir = tempfile::tempdir().unwrap();
    let mid_member = altered_gnu_tar(dir.path(), "mid-member.tar", |b| b.truncate(8000));
    assert_ingest_fails_cleanly(
        &[&mid_member],
        &[],
        &[
            &mid_member,
            "\"dir/sub/random.bin\"",
            "truncated or corrupt",
        ],
    );
    let mid_header = altered_gnu_tar(dir.path(), "mid-header.tar", |b| b.truncate(9728 + 200));
    assert_ingest_fails_cleanly(
        &[&mid_header],
        &[],
        &[
            &mid_header,
            "\"dir/sub/random.bin\"",
            "truncated or corrupt",
        ],
    );
}

#[test]
fn truncated_tar_after_several_written_batches_fails_and_removes_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let members = mixed_records(1200, 9);
    let mut bytes = Vec::new();
    for (name, data) in &members[..1199] {
        write_member(&mut bytes, name, data).unwrap();
    }
    let (name, data) = &members[1199];
    assert!(data.len() > 2000);
    write_member(&mut bytes, name, data).unwrap();
    bytes.truncate(bytes.len() - data.len().next_multiple_of(512) + 1000);
    let archive = dir.path().join("cut-late.tar");
    std::fs::write(&archive, bytes).unwrap();
    let archive = s(&archive).to_owned();
    assert_ingest_fails_cleanly(
        &[&archive],
        &["--jobs", "1"],
        &[&archive, "\"rec/01199.bin\"", "truncated or corrupt"],
    );
}

#[test]
fn corrupted_header_checksum_fails_naming_the_archive_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The header of "dir/a.txt" is at 512: change its name without its checksum.
    let corrupt = altered_gnu_tar(dir.path(), "bad-checksum.tar", |bytes| {
        assert_eq!(&bytes[512..521], b"dir/a.txt");
        bytes[516] = b'b';
    });
    assert_ingest_fails_cleanly(&[&corrupt], &[], &[&corrupt, "checksum", "\"dir/\""]);
}

#[test]
fn truncated_or_corrupt_gzip_fails_naming_the_archive_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let gz = std::fs::read(fixture("gnu.tar.gz")).unwrap();
    let truncated = dir.path().join("truncated.tar.gz");
    std::fs::write(&truncated, &gz[..gz.len() / 2]).unwrap();
    let truncated = s(&truncated).to_owned();
    assert_ingest_fails_cleanly(
        &[&truncated],
        &[],
        &[&truncated, "member \"", "truncated or corrupt"],
    );

    // Intact deflate data with a wrong CRC-32 in the gzip trailer, which lies past
    // the tar's end-of-archive blocks: `gzip -t` rejects it, and so must ingest.
    let mut bad_crc = gz.clone();
    let crc_at = gz.len() - 8;
    bad_crc[crc_at..crc_at + 4]
        .iter_mut()
        .for_each(|b| *b = !*b);
    let bad_crc_path = dir.path().join("bad-crc.tar.gz");
    std::fs::write(&bad_crc_path, bad_crc).unwrap();
    let bad_crc_path = s(&bad_crc_path).to_owned();
    assert_ingest_fails_cleanly(
        &[&bad_crc_path],
        &[],
        &[&bad_crc_path, "checksum", "truncated or corrupt"],
    );

    // A gzip header whose compression method is not deflate.
    let mut bad = gz.clone();
    bad[2] = 7;
    let corrupt = dir.path().join("corrupt.tgz");
    std::fs::write(&corrupt, bad).unwrap();
    let corrupt = s(&corrupt).to_owned();
    assert_ingest_fails_cleanly(&[&corrupt], &[], &[&corrupt, "gzip"]);
}

#[test]
fn missing_source_file_fails_naming_it_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = s(&dir.path().join("missing.tar")).to_owned();
    let stderr = assert_ingest_fails_cleanly(
        &[&fixture_str("gnu.tar"), &missing],
        &[],
        &[&missing, "No such file"],
    );
    // The cause is said once.
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
    let missing_dir = s(&dir.path().join("missing-dir")).to_owned();
    assert_ingest_fails_cleanly(&[&missing_dir], &[], &[&missing_dir]);
}

#[test]
fn brace_range_naming_a_missing_shard_fails_naming_it_and_changes_nothing() {
    let pattern = fixture_str("shards-{000000..000003}.tar");
    assert_ingest_fails_cleanly(&[&pattern], &[], &[&fixture_str("shards-000003.tar")]);
}

/// A usage error (exit status 2), found before anything is opened for writing.
#[test]
fn mixing_a_directory_and_an_archive_fails_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("x"), b"x").unwrap();
    let existing = existing_dataset(dir.path(), "existing");
    let before = tree_snapshot(&existing);
    let new = dir.path().join("new");
    let archive = fixture_str("webdataset.tar");
    for into in [&existing, &new] {
        let args = ingest_args(&[s(&tree), &archive], into, &[]);
        let run = run(&args);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.starts_with("bcd: ")
                && run.stderr.contains("(dir, tar)")
                && run
                    .stderr
                    .contains("ingest them in separate runs or pass --format"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(tree_snapshot(&existing), before);
    assert_eq!(tree_snapshot(&new), None);
}

#[test]
fn settings_that_conflict_with_the_existing_dataset_fail_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ds = existing_dataset(dir.path(), "keyed");
    let before = tree_snapshot(&ds);
    let wds = fixture_str("webdataset.tar");
    for (extra, needle) in [
        (&["--keyless"][..], "--keyless"),
        (&["--compression", "none"], "compression lz4"),
        (&["--max-shard-size", "64K"], "max_shard_size 1073741824"),
    ] {
        let stderr = fails(&ingest_args(&[&wds], &ds, extra));
        assert!(
            stderr.contains(needle) && stderr.contains(s(&ds)),
            "{extra:?}: {stderr}"
        );
        assert_eq!(tree_snapshot(&ds), before, "{extra:?} changed the dataset");
    }
    // Keys into a keyless dataset need --keyless.
    let keyless = dir.path().join("keyless");
    ingest(&[&wds], &keyless, &["--keyless"]);
    let before = tree_snapshot(&keyless);
    let stderr = fails(&ingest_args(&[&fixture_str("gnu.tar")], &keyless, &[]));
    assert!(stderr.contains("keyless dataset"), "{stderr}");
    assert_eq!(tree_snapshot(&keyless), before);
    // Settings equal to the dataset's are accepted.
    let summary = ingest(
        &[&wds],
        &ds,
        &["--compression", "lz4", "--max-shard-size", "1GiB"],
    );
    assert_eq!(summary["records"], 12);
}

#[test]
fn a_failed_run_into_an_empty_directory_leaves_it_empty() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let cut = altered_gnu_tar(dir.path(), "cut.tar", |b| b.truncate(8000));
    fails(&ingest_args(&[&cut], &empty, &[]));
    assert_eq!(tree_snapshot(&empty), Some(BTreeMap::new()));
}

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

/// A keyed dataset at `dir/name` with the given records, written by the library.
fn keyed_dataset(dir: &Path, name: &str, records: &Records) -> PathBuf {
    let path = dir.join(name);
    let mut dataset = Dataset::create(
        &path,
        bcd::CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    dataset
        .extend(records.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
        .unwrap();
    path
}

#[test]
fn export_refuses_unsafe_keys_naming_the_record_unless_rename_unsafe() {
    let dir = tempfile::tempdir().unwrap();
    for (n, (key, cleaned)) in [
        (&b"/etc/passwd"[..], &b"etc/passwd"[..]),
        (b"a/../../b", b"a/b"),
        (b"", b"unnamed"),
    ]
    .into_iter()
    .enumerate()
    {
        let source: Records = vec![
            (b"fine.txt".to_vec(), b"one".to_vec()),
            (key.to_vec(), b"two".to_vec()),
            (b"last.txt".to_vec(), b"three".to_vec()),
        ];
        let ds = keyed_dataset(dir.path(), &format!("ds{n}"), &source);
        let out_dir = dir.path().join(format!("out{n}"));
        std::fs::create_dir(&out_dir).unwrap();
        let out = out_dir.join("out.tar");
        let stderr = fails(&["export", s(&ds), "--to", s(&out)]);
        let quoted = format!("{:?}", String::from_utf8_lossy(key));
        assert!(
            stderr.contains("record 1")
                && stderr.contains(&quoted)
                && stderr.contains("--rename-unsafe"),
            "{stderr}"
        );
        assert_eq!(
            tree_snapshot(&out_dir),
            Some(BTreeMap::new()),
            "output left behind"
        );

        ok(&["export", s(&ds), "--to", s(&out), "--rename-unsafe"]);
        let wanted: Records = vec![
            (b"fine.txt".to_vec(), b"one".to_vec()),
            (cleaned.to_vec(), b"two".to_vec()),
            (b"last.txt".to_vec(), b"three".to_vec()),
        ];
        assert_eq!(tar_files(&std::fs::read(&out).unwrap()), wanted);
        assert_eq!(
            snapshot_names(&tree_snapshot(&out_dir).unwrap()),
            ["out.tar"]
        );
    }
}

#[test]
fn split_count_and_split_size_archives_concatenate_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest(&[&fixture_str("webdataset.tar")], &ds, &[]);
    let whole = fixture_files("webdataset.tar");

    let by_count = dir.path().join("by-count");
    std::fs::create_dir(&by_count).unwrap();
    let pattern = by_count.join("part-%03d.tar");
    ok(&["export", s(&ds), "--to", s(&pattern), "--split-count", "5"]);
    let files = tree_snapshot(&by_count).unwrap();
    assert_eq!(
        snapshot_names(&files),
        ["part-000.tar", "part-001.tar", "part-002.tar"]
    );
    let parts: Vec<Records> = files.values().map(|bytes| tar_files(bytes)).collect();
    assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [5, 5, 2]);
    assert_eq!(parts.concat(), whole);

    let by_size = dir.path().join("by-size");
    std::fs::create_dir(&by_size).unwrap();
    let pattern = by_size.join("shard-%06d.tar");
    ok(&[
        "export",
        s(&ds),
        "--to",
        s(&pattern),
        "--split-size",
        "1000",
    ]);
    let files = tree_snapshot(&by_size).unwrap();
    assert!(files.len() > 2, "{:?}", snapshot_names(&files));
    let mut all = Vec::new();
    for (i, (name, bytes)) in files.iter().enumerate() {
        assert_eq!(name, Path::new(&format!("shard-{i:06}.tar")));
        let part = tar_files(bytes);
        let payload: usize = part.iter().map(|(_, v)| v.len()).sum();
        assert!(
            payload <= 1000 || part.len() == 1,
            "{}: {payload} bytes in {} members",
            name.display(),
            part.len()
        );
        all.extend(part);
    }
    assert_eq!(all, whole);
}

#[test]
fn export_to_dash_writes_the_tar_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest(&[&fixture_str("pax.tar")], &ds, &[]);
    let stdout = ok(&["export", s(&ds), "--to", "-"]);
    assert_eq!(tar_files(&stdout), fixture_files("pax.tar"));
    // The same bytes as an export to a file.
    let out = dir.path().join("out.tar");
    ok(&["export", s(&ds), "--to", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == stdout);
    // Splitting needs files: a usage error.
    let refused = run(&["export", s(&ds), "--to", "-", "--split-count", "2"]);
    assert_eq!(refused.status.code(), Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("stdout"), "{}", refused.stderr);
    assert!(refused.stdout.is_empty());
}

#[test]
fn failed_export_leaves_no_partial_output_file() {
    let dir = tempfile::tempdir().unwrap();
    // Enough data before the unsafe key that the archive was being written.
    let mut source = mixed_records(200, 3);
    source.push((b"../escape".to_vec(), b"x".to_vec()));
    let ds = keyed_dataset(dir.path(), "ds", &source);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();

    // A new file is never created...
    let out = out_dir.join("new.tar");
    let stderr = fails(&["export", s(&ds), "--to", s(&out)]);
    assert!(stderr.contains("record 200"), "{stderr}");
    assert_eq!(tree_snapshot(&out_dir), Some(BTreeMap::new()));

    // ... and an existing one keeps its bytes.
    let old = out_dir.join("old.tar");
    std::fs::write(&old, b"previous contents").unwrap();
    fails(&["export", s(&ds), "--to", s(&old)]);
    assert_eq!(
        snapshot_names(&tree_snapshot(&out_dir).unwrap()),
        ["old.tar"]
    );
    assert_eq!(std::fs::read(&old).unwrap(), b"previous contents");

    // Split exports keep the archives finished before the failure, never a
    // partial one.
    let pattern = out_dir.join("part-%02d.tar");
    fails(&[
        "export",
        s(&ds),
        "--to",
        s(&pattern),
        "--split-count",
        "150",
    ]);
    let left = tree_snapshot(&out_dir).unwrap();
    assert_eq!(snapshot_names(&left), ["old.tar", "part-00.tar"]);
    assert_eq!(tar_files(&left[Path::new("part-00.tar")]), source[..150]);
}
