//! Megatron indexed datasets through the binary (issue 23): `bcd ingest PREFIX`
//! reads what Megatron Core's `IndexedDatasetBuilder` wrote
//! (`fixtures/megatron/`), `bcd export --to PREFIX --format megatron` writes it
//! back byte for byte, a dataset of other token records goes out with a declared
//! `--dtype`, and a hostile `.idx` is refused with nothing committed.

use std::fs;
use std::path::{Path, PathBuf};

use bcd_test_support::{read_all, tree_snapshot};
use xxhash_rust::xxh3::xxh3_128;

mod common;
use common::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/megatron")
        .join(name)
}

/// The fixture `name` copied into `dir` as `PREFIX.idx` + `PREFIX.bin`, the
/// `.idx` passed through `edit` first.
fn copy_fixture(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let prefix = dir.join(format!("copy-{name}"));
    let mut idx = fs::read(fixture(&format!("{name}.idx"))).unwrap();
    edit(&mut idx);
    fs::write(prefix.with_extension("idx"), idx).unwrap();
    fs::copy(
        fixture(&format!("{name}.bin")),
        prefix.with_extension("bin"),
    )
    .unwrap();
    prefix
}

#[test]
fn an_ingested_megatron_dataset_exports_byte_identical_files() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["uint16", "int32"] {
        let ds = dir.path().join(format!("ds-{name}"));
        ok(&["ingest", s(&fixture(name)), "--into", s(&ds)]);
        let out = dir.path().join(format!("out-{name}"));
        ok(&["export", s(&ds), "--to", s(&out), "--format", "megatron"]);
        for suffix in ["bin", "idx"] {
            // Files are the same when their content checksums are.
            let checksum = |path: PathBuf| xxh3_128(&fs::read(path).unwrap());
            assert_eq!(
                checksum(out.with_extension(suffix)),
                checksum(fixture(&format!("{name}.{suffix}"))),
                "{name}.{suffix}"
            );
        }
        // Only the two files: no temporary file is left beside them.
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("out-"))
            .collect();
        names.sort();
        assert!(
            names
                .iter()
                .all(|n| n.ends_with(".bin") || n.ends_with(".idx")),
            "{names:?}"
        );
    }
}

#[test]
fn the_ingested_records_are_the_sequences_megatron_reads() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    // Named by its .idx this time.
    ok(&["ingest", s(&fixture("int32.idx")), "--into", s(&ds)]);
    let expected: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(fixture("expected.json")).unwrap()).unwrap();
    let sequences = expected["int32"]["sequences"].as_array().unwrap();
    let dataset = bcd::Dataset::open(&ds).unwrap();
    let records = read_all(&dataset);
    assert_eq!(records.len(), sequences.len());
    for (i, ((key, value), sequence)) in records.iter().zip(sequences).enumerate() {
        assert!(key.is_empty());
        let tokens: Vec<u8> = (sequence["tokens"].as_array().unwrap().iter())
            .flat_map(|t| (t.as_i64().unwrap() as i32).to_le_bytes())
            .collect();
        assert_eq!(value, &tokens, "sequence {i}");
    }
    let info = String::from_utf8(ok(&["info", s(&ds)])).unwrap();
    assert!(info.contains(r#""dtype":"int32""#), "{info}");
    let listed = String::from_utf8(ok(&["ls", s(&ds), "--fields"])).unwrap();
    let fields: Vec<(i64, i64)> = (listed.lines())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|f| {
            (
                f["document"].as_i64().unwrap(),
                f["length"].as_i64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(i64, i64)> = (sequences.iter())
        .map(|s| {
            (
                s["document"].as_i64().unwrap(),
                s["length"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(fields, want);
}

/// A change made to a copy of an `.idx`.
type Edit = Box<dyn FnOnce(&mut Vec<u8>)>;

#[test]
fn a_hostile_index_or_a_short_bin_is_refused_naming_it_with_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("existing");
    ok(&["ingest", s(&fixture("uint16")), "--into", s(&existing)]);
    let before = tree_snapshot(&existing);
    let cases: Vec<(&str, Edit, &str)> = vec![
        ("magic", Box::new(|idx| idx[0] = b'X'), "no MMIDIDX header"),
        ("version", Box::new(|idx| idx[9] = 7), "version 7"),
        ("dtype", Box::new(|idx| idx[17] = 9), "dtype code 9"),
        (
            "count",
            Box::new(|idx| idx[18..26].copy_from_slice(&(1u64 << 60).to_le_bytes())),
            "1152921504606846976 sequences",
        ),
        (
            "overflow",
            Box::new(|idx| idx[26..34].copy_from_slice(&u64::MAX.to_le_bytes())),
            "18446744073709551615 documents",
        ),
    ];
    for (what, edit, said) in cases {
        let prefix = copy_fixture(dir.path(), "uint16", edit);
        // The magic case is named by its prefix and then refused as corrupt: a
        // pair of files whose .idx is no Megatron index is not detected, so
        // --format says what it is.
        let fresh = dir.path().join(format!("fresh-{what}"));
        let error = fails(&[
            "ingest",
            s(&prefix),
            "--format",
            "megatron",
            "--into",
            s(&fresh),
        ]);
        assert!(
            error.contains(&format!("{}.idx", s(&prefix))),
            "{what}: {error}"
        );
        assert!(error.contains(said), "{what}: {error}");
        assert_eq!(tree_snapshot(&fresh), None, "{what}");
        fails(&[
            "ingest",
            s(&prefix),
            "--format",
            "megatron",
            "--into",
            s(&existing),
        ]);
        assert_eq!(tree_snapshot(&existing), before, "{what}");
    }
    // A .bin cut short: the sequence that reaches past its end is named.
    let prefix = copy_fixture(dir.path(), "uint16", |_| {});
    let bin = fs::read(prefix.with_extension("bin")).unwrap();
    fs::write(prefix.with_extension("bin"), &bin[..bin.len() - 1]).unwrap();
    let error = fails(&["ingest", s(&prefix), "--into", s(&existing)]);
    assert!(
        error.contains("sequence 5") && error.contains(".bin"),
        "{error}"
    );
    assert_eq!(tree_snapshot(&existing), before);
}

/// A directory of token files: record `i` holds `tokens[i]` as little-endian u16.
fn token_files(dir: &Path, tokens: &[&[u16]]) -> PathBuf {
    let tree = dir.join("tokens");
    fs::create_dir(&tree).unwrap();
    for (i, sequence) in tokens.iter().enumerate() {
        let bytes: Vec<u8> = sequence.iter().flat_map(|t| t.to_le_bytes()).collect();
        fs::write(tree.join(format!("{i:03}.tok")), bytes).unwrap();
    }
    tree
}

#[test]
fn token_records_round_trip_with_a_declared_dtype_one_document_each() {
    let dir = tempfile::tempdir().unwrap();
    let tokens: &[&[u16]] = &[&[1, 2, 3], &[], &[65535], &[4, 5]];
    let tree = token_files(dir.path(), tokens);
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&tree), "--into", s(&ds)]);
    let out = dir.path().join("out");
    // No dtype recorded and none declared: a usage error, nothing written.
    let error = usage_error(&["export", s(&ds), "--to", s(&out), "--format", "megatron"]);
    assert!(error.contains("--dtype"), "{error}");
    assert!(!out.with_extension("bin").exists() && !out.with_extension("idx").exists());
    let error = usage_error(&[
        "export",
        s(&ds),
        "--to",
        s(&out),
        "--format",
        "megatron",
        "--dtype",
        "uint4",
    ]);
    assert!(error.contains("uint16"), "{error}");
    ok(&[
        "export",
        s(&ds),
        "--to",
        s(&out),
        "--format",
        "megatron",
        "--dtype",
        "uint16",
    ]);
    let back = dir.path().join("back");
    ok(&["ingest", s(&out), "--into", s(&back)]);
    let original = read_all(&bcd::Dataset::open(&ds).unwrap());
    let read_back = read_all(&bcd::Dataset::open(&back).unwrap());
    let values = |records: &[(Vec<u8>, Vec<u8>)]| -> Vec<Vec<u8>> {
        records.iter().map(|(_, v)| v.clone()).collect()
    };
    assert_eq!(values(&read_back), values(&original));
    let listed = String::from_utf8(ok(&["ls", s(&back), "--fields"])).unwrap();
    let documents: Vec<i64> = listed
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["document"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(documents, [0, 1, 2, 3]);
    // The dtype is recorded now: another one is refused.
    let error = usage_error(&[
        "export",
        s(&back),
        "--to",
        s(&out),
        "--format",
        "megatron",
        "--dtype",
        "int32",
    ]);
    assert!(error.contains("uint16"), "{error}");
}

#[test]
fn a_value_that_is_not_whole_tokens_is_refused_naming_the_record_leaving_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tokens");
    fs::create_dir(&tree).unwrap();
    fs::write(tree.join("a"), [1, 0, 0, 0]).unwrap();
    fs::write(tree.join("b"), [1, 0, 0]).unwrap();
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&tree), "--into", s(&ds)]);
    let out = dir.path().join("out");
    let error = fails(&[
        "export",
        s(&ds),
        "--to",
        s(&out),
        "--format",
        "megatron",
        "--dtype",
        "int32",
    ]);
    assert!(
        error.contains("record 1") && error.contains("3 bytes"),
        "{error}"
    );
    let left: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("out"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn megatron_export_flags_are_refused_elsewhere_and_others_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&fixture("uint16")), "--into", s(&ds)]);
    let tar = dir.path().join("x.tar");
    let error = usage_error(&["export", s(&ds), "--to", s(&tar), "--dtype", "uint16"]);
    assert!(
        error.contains("--dtype applies to --format megatron"),
        "{error}"
    );
    let error = usage_error(&[
        "export",
        s(&ds),
        "--to",
        s(&tar),
        "--format",
        "megatron",
        "--split-count",
        "2",
    ]);
    assert!(error.contains("--split-size/--split-count"), "{error}");
}

#[test]
fn two_datasets_ingested_together_export_as_megatrons_add_index_joins_them() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let uint16 = fixture("uint16");
    ok(&["ingest", s(&uint16), s(&uint16), "--into", s(&ds)]);
    let out = dir.path().join("joined");
    ok(&["export", s(&ds), "--to", s(&out), "--format", "megatron"]);
    for suffix in ["bin", "idx"] {
        let checksum = |path: PathBuf| xxh3_128(&fs::read(path).unwrap());
        assert_eq!(
            checksum(out.with_extension(suffix)),
            checksum(fixture(&format!("uint16-joined.{suffix}"))),
            "{suffix}"
        );
    }
}

#[test]
fn datasets_of_different_dtypes_are_not_ingested_together() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let error = fails(&[
        "ingest",
        s(&fixture("uint16")),
        s(&fixture("int32")),
        "--into",
        s(&ds),
    ]);
    assert!(error.contains("different dtypes"), "{error}");
    assert_eq!(tree_snapshot(&ds), None);
}

/// A JSON Lines file of token records (uint16, base64) with a `document` field.
fn jsonl_tokens(dir: &Path, rows: &[(&[u16], i64)]) -> PathBuf {
    use std::fmt::Write;
    let mut text = String::new();
    for (tokens, document) in rows {
        let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        let b64 = base64_encode(&bytes);
        writeln!(text, r#"{{"text": "{b64}", "document": {document}}}"#).unwrap();
    }
    let path = dir.join("tokens.jsonl");
    fs::write(&path, text).unwrap();
    path
}

fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn a_document_field_of_another_source_becomes_the_document_indices() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = jsonl_tokens(dir.path(), &[(&[1, 2], 0), (&[3], 0), (&[4, 5, 6], 1)]);
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&jsonl), "--into", s(&ds), "--value-base64"]);
    let out = dir.path().join("out");
    ok(&[
        "export",
        s(&ds),
        "--to",
        s(&out),
        "--format",
        "megatron",
        "--dtype",
        "uint16",
    ]);
    let idx = fs::read(out.with_extension("idx")).unwrap();
    // 3 sequences, 3 document indices: 0, 2 and the closing 3.
    assert_eq!(
        &idx[18..34],
        [3u64.to_le_bytes(), 3u64.to_le_bytes()].concat()
    );
    let starts: Vec<i64> = idx[34 + 36..]
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(starts, [0, 2, 3]);
    assert_eq!(
        fs::read(out.with_extension("bin")).unwrap(),
        [1u8, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0]
    );

    // Documents out of order cannot be Megatron's: refused naming the record.
    let dir = tempfile::tempdir().unwrap();
    let jsonl = jsonl_tokens(dir.path(), &[(&[1], 1), (&[2], 0)]);
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&jsonl), "--into", s(&ds), "--value-base64"]);
    let out = dir.path().join("out");
    let error = fails(&[
        "export",
        s(&ds),
        "--to",
        s(&out),
        "--format",
        "megatron",
        "--dtype",
        "uint16",
    ]);
    assert!(
        error.contains("record 1") && error.contains("document 0"),
        "{error}"
    );
    assert!(!out.with_extension("bin").exists() && !out.with_extension("idx").exists());
}

#[test]
fn appends_of_megatron_datasets_keep_the_dataset_meaning_or_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ok(&["ingest", s(&fixture("uint16")), "--into", s(&ds)]);
    let before = tree_snapshot(&ds);
    // Another document count (or dtype) would change what the metadata says
    // of the stored records: refused, the dataset unchanged.
    for other in ["uint16-joined", "int32"] {
        let error = fails(&["ingest", s(&fixture(other)), "--into", s(&ds)]);
        assert!(error.contains("megatron."), "{other}: {error}");
        assert_eq!(tree_snapshot(&ds), before, "{other}");
    }
    // The same dataset again is appended, its documents numbered from 0 as
    // stored: no longer one Megatron dataset, which the export says.
    ok(&["ingest", s(&fixture("uint16")), "--into", s(&ds)]);
    let out = dir.path().join("out");
    let error = fails(&["export", s(&ds), "--to", s(&out), "--format", "megatron"]);
    assert!(
        error.contains("record 6") && error.contains("in one run"),
        "{error}"
    );
    assert!(!out.with_extension("bin").exists() && !out.with_extension("idx").exists());
}

/// Writes `PREFIX.bin` and `PREFIX.idx` in Megatron's MMIDIDX layout (as
/// `_IndexWriter` does): uint16 tokens, one document per sequence.
fn write_uint16_megatron(prefix: &Path, sequences: &[Vec<u16>]) {
    let bin: Vec<u8> = sequences
        .iter()
        .flatten()
        .flat_map(|t| t.to_le_bytes())
        .collect();
    fs::write(prefix.with_extension("bin"), bin).unwrap();
    let n = sequences.len() as u64;
    let mut idx = b"MMIDIDX\x00\x00".to_vec();
    idx.extend(1u64.to_le_bytes());
    idx.push(8); // uint16
    idx.extend(n.to_le_bytes());
    idx.extend((n + 1).to_le_bytes());
    for sequence in sequences {
        idx.extend((sequence.len() as i32).to_le_bytes());
    }
    let mut pointer = 0i64;
    for sequence in sequences {
        idx.extend(pointer.to_le_bytes());
        pointer += 2 * sequence.len() as i64;
    }
    for document in 0..=n as i64 {
        idx.extend(document.to_le_bytes());
    }
    fs::write(prefix.with_extension("idx"), idx).unwrap();
}

/// Random token ids are incompressible: the default ingest stores each such
/// sequence as a literal-only LZ4 block, which a read hands out in place
/// (borrowed from the shard, at the location `verbatim_location` gives), while
/// sequences that repeat are still compressed; the export gives the files back.
#[test]
fn an_ingest_of_random_tokens_stores_them_literally_and_reads_them_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = bcd_test_support::Rng::new(23);
    let mut sequences: Vec<Vec<u16>> = Vec::new();
    for i in 0..120 {
        let len = 64 + rng.below(4096 - 64 + 1);
        let random: Vec<u16> = (0..len).map(|_| rng.below(50257) as u16).collect();
        if i % 4 == 3 {
            // A phrase repeated: what LZ4 does compress.
            sequences.push(random[..32].repeat(32 + len / 32));
        } else {
            sequences.push(random);
        }
    }
    let prefix = dir.path().join("corpus_text_document");
    write_uint16_megatron(&prefix, &sequences);
    let ds = dir.path().join("ds");
    let summary: serde_json::Value =
        serde_json::from_slice(&ok(&["ingest", s(&prefix), "--into", s(&ds), "--json"])).unwrap();
    assert_eq!(summary["records"], 120);

    let dataset = bcd::Dataset::open(&ds).unwrap();
    let mut literal = Vec::new();
    for (i, sequence) in sequences.iter().enumerate() {
        let tokens: Vec<u8> = sequence.iter().flat_map(|t| t.to_le_bytes()).collect();
        let stored = dataset.stored_at(i).unwrap();
        let value = dataset.at(i).unwrap();
        assert!(*value == tokens[..], "sequence {i}");
        if i % 4 == 3 {
            assert!(
                stored.len() < tokens.len() / 4,
                "sequence {i} is compressed"
            );
            assert_eq!(dataset.verbatim_location(i).unwrap(), None);
            assert!(matches!(value, std::borrow::Cow::Owned(_)), "sequence {i}");
            continue;
        }
        bcd::lz4_block::literal_block_into(&tokens, &mut literal);
        assert!(stored == literal, "sequence {i} is a literal-only block");
        // Read in place: a borrow of the shard's bytes, where the location says.
        assert!(
            matches!(value, std::borrow::Cow::Borrowed(_)),
            "sequence {i}"
        );
        let location = dataset.verbatim_location(i).unwrap().unwrap();
        let shard = fs::read(dataset.shard_data_path(location.shard)).unwrap();
        let start = location.offset as usize;
        assert!(shard[start..start + location.len as usize] == tokens[..]);
    }
    drop(dataset);

    let out = dir.path().join("out");
    ok(&["export", s(&ds), "--to", s(&out), "--format", "megatron"]);
    for suffix in ["bin", "idx"] {
        assert!(
            fs::read(out.with_extension(suffix)).unwrap()
                == fs::read(prefix.with_extension(suffix)).unwrap(),
            "{suffix}"
        );
    }
}
