//! The Megatron source against datasets Megatron Core's `IndexedDatasetBuilder`
//! wrote (`fixtures/megatron/`, with what Megatron's `IndexedDataset` reads
//! from them in `expected.json`), and against `.idx` files that claim more than
//! they hold.

use std::fs;
use std::path::{Path, PathBuf};

use bcd_converters::megatron_index::{write_index, Dtype, IndexError, MegatronIndex};
use bcd_converters::megatron_source::MegatronSource;
use bcd_converters::{FieldValue, Source};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/megatron")
        .join(name)
}

fn expected() -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(fixture("expected.json")).unwrap()).unwrap()
}

/// The little-endian bytes of `tokens` in `dtype`.
fn token_bytes(dtype: &str, tokens: &[serde_json::Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for token in tokens {
        let t = token.as_i64().unwrap();
        match dtype {
            "uint16" => out.extend_from_slice(&(t as u16).to_le_bytes()),
            "int32" => out.extend_from_slice(&(t as i32).to_le_bytes()),
            other => panic!("no fixture of {other}"),
        }
    }
    out
}

fn int_field(fields: &bcd_converters::Fields, name: &str) -> i64 {
    match fields.iter().find(|(n, _)| &**n == name) {
        Some((_, FieldValue::Int64(v))) => *v,
        other => panic!("field {name}: {other:?}"),
    }
}

#[test]
fn every_sequence_is_read_as_megatron_reads_it() {
    let expected = expected();
    for name in ["uint16", "int32"] {
        let want = &expected[name];
        // PREFIX, PREFIX.idx and PREFIX.bin all name the dataset.
        for arg in [
            name.to_owned(),
            format!("{name}.idx"),
            format!("{name}.bin"),
        ] {
            let mut source = MegatronSource::new(&[fixture(&arg)]);
            let records: Vec<_> = source.by_ref().map(Result::unwrap).collect();
            let sequences = want["sequences"].as_array().unwrap();
            assert_eq!(records.len(), sequences.len(), "{arg}");
            for (record, sequence) in records.iter().zip(sequences) {
                let tokens = sequence["tokens"].as_array().unwrap();
                assert_eq!(record.value, token_bytes(name, tokens), "{arg}");
                assert!(record.key.is_empty());
                assert_eq!(int_field(&record.fields, "document"), sequence["document"]);
                assert_eq!(int_field(&record.fields, "length"), sequence["length"]);
            }
            assert!(!source.keyed());
            let metadata = source.metadata();
            assert_eq!(metadata["megatron"]["dtype"], want["dtype"]);
            assert_eq!(
                metadata["megatron"]["document_count"],
                want["document_indices"].as_array().unwrap().len()
            );
        }
    }
}

#[test]
fn the_writer_writes_the_index_megatron_wrote() {
    for name in ["uint16", "int32"] {
        let bytes = fs::read(fixture(&format!("{name}.idx"))).unwrap();
        let bin_len = fs::metadata(fixture(&format!("{name}.bin"))).unwrap().len();
        let index = MegatronIndex::parse(bytes.clone(), bin_len).unwrap();
        let lengths: Vec<i32> = (0..index.sequences())
            .map(|i| index.length(i) as i32)
            .collect();
        let starts: Vec<i64> = (0..index.documents())
            .map(|d| index.document_start(d))
            .collect();
        assert_eq!(write_index(index.dtype(), &lengths, &starts, None), bytes);
    }
}

#[test]
fn every_dtype_code_of_megatron_is_known_with_its_size() {
    let codes: Vec<(u8, &str, usize)> = (0..=255u8)
        .filter_map(Dtype::from_code)
        .map(|d| (d.code(), d.name(), d.size()))
        .collect();
    assert_eq!(
        codes,
        [
            (1, "uint8", 1),
            (2, "int8", 1),
            (3, "int16", 2),
            (4, "int32", 4),
            (5, "int64", 8),
            (6, "float64", 8),
            (7, "float32", 4),
            (8, "uint16", 2),
        ]
    );
}

fn uint16_idx() -> Vec<u8> {
    fs::read(fixture("uint16.idx")).unwrap()
}

fn parse(bytes: Vec<u8>) -> Result<MegatronIndex, IndexError> {
    MegatronIndex::parse(bytes, 24)
}

#[test]
fn a_bad_magic_version_or_dtype_is_refused_where_it_is() {
    let mut magic = uint16_idx();
    magic[0] = b'X';
    assert_eq!(parse(magic).unwrap_err(), IndexError::BadMagic);
    let mut version = uint16_idx();
    version[9] = 2;
    assert_eq!(parse(version).unwrap_err(), IndexError::BadVersion(2));
    for code in [0u8, 9, 255] {
        let mut dtype = uint16_idx();
        dtype[17] = code;
        assert_eq!(parse(dtype).unwrap_err(), IndexError::BadDtype(code));
    }
    assert_eq!(
        parse(uint16_idx()[..20].to_vec()).unwrap_err(),
        IndexError::ShortHeader(20)
    );
}

#[test]
fn counts_beyond_the_file_or_overflowing_are_refused_before_allocating() {
    for (sequences, documents) in [
        (1u64 << 60, 4u64),
        (6, u64::MAX),
        (u64::MAX / 12 + 1, 0),
        (7, 4),
    ] {
        let mut bytes = uint16_idx();
        bytes[18..26].copy_from_slice(&sequences.to_le_bytes());
        bytes[26..34].copy_from_slice(&documents.to_le_bytes());
        let error = parse(bytes).unwrap_err();
        assert!(
            matches!(error, IndexError::SizeMismatch { actual: 138, .. }),
            "{error}"
        );
    }
}

#[test]
fn a_sequence_beyond_the_end_of_the_bin_is_refused_naming_it() {
    // The .bin holds 24 bytes; 23 cuts the last sequence (5: tokens 14, 15).
    let error = MegatronIndex::parse(uint16_idx(), 23).unwrap_err();
    assert!(
        matches!(error, IndexError::BadSequence { sequence: 5, .. }),
        "{error}"
    );
    let dir = tempfile::tempdir().unwrap();
    fs::copy(fixture("uint16.idx"), dir.path().join("d.idx")).unwrap();
    fs::write(
        dir.path().join("d.bin"),
        &fs::read(fixture("uint16.bin")).unwrap()[..23],
    )
    .unwrap();
    let mut source = MegatronSource::new(&[dir.path().join("d")]);
    let message = source.next().unwrap().unwrap_err().to_string();
    assert!(
        message.contains("d.idx") && message.contains("d.bin"),
        "{message}"
    );
    assert!(message.contains("sequence 5"), "{message}");
    assert!(source.next().is_none());
}

#[test]
fn documents_out_of_order_or_past_the_sequences_are_refused() {
    // The document indices of uint16 are at 34 + 12 * 6 = 106: 0, 2, 3, 6.
    for (at, value) in [(106usize, 1i64), (114, 4), (130, 7)] {
        let mut bytes = uint16_idx();
        bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        let error = parse(bytes).unwrap_err();
        assert!(matches!(error, IndexError::BadDocument { .. }), "{error}");
    }
}

#[test]
fn negative_lengths_and_pointers_are_refused() {
    let mut length = uint16_idx();
    length[34..38].copy_from_slice(&(-1i32).to_le_bytes());
    assert!(matches!(
        parse(length).unwrap_err(),
        IndexError::BadSequence { sequence: 0, .. }
    ));
    let mut pointer = uint16_idx();
    pointer[58..66].copy_from_slice(&(-2i64).to_le_bytes());
    assert!(matches!(
        parse(pointer).unwrap_err(),
        IndexError::BadSequence { sequence: 0, .. }
    ));
}

#[test]
fn sequence_modes_are_read_from_a_multimodal_index() {
    let lengths = [2, 1];
    let index = write_index(
        Dtype::from_name("uint8").unwrap(),
        &lengths,
        &[0, 2],
        Some(&[0, 1]),
    );
    let parsed = MegatronIndex::parse(index, 3).unwrap();
    assert!(parsed.multimodal());
    assert_eq!((parsed.mode(0), parsed.mode(1)), (Some(0), Some(1)));
}

#[test]
fn a_fifo_in_place_of_the_bin_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(fixture("uint16.idx"), dir.path().join("d.idx")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(dir.path().join("d.bin"))
        .status()
        .unwrap();
    assert!(status.success());
    let mut source = MegatronSource::new(&[dir.path().join("d")]);
    let message = source.next().unwrap().unwrap_err().to_string();
    assert!(message.contains("a FIFO"), "{message}");
}

#[test]
fn a_sparse_index_claiming_a_terabyte_is_refused_by_its_header_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(fixture("uint16.bin"), dir.path().join("d.bin")).unwrap();
    let idx = fs::File::create(dir.path().join("d.idx")).unwrap();
    use std::io::Write;
    (&idx).write_all(&uint16_idx()[..34]).unwrap();
    // Holes read as zeros: reading it whole would take a terabyte of memory.
    idx.set_len(1 << 40).unwrap();
    let mut source = MegatronSource::new(&[dir.path().join("d")]);
    let message = source.next().unwrap().unwrap_err().to_string();
    assert!(
        message.contains("the file holds 1099511627776"),
        "{message}"
    );
}

#[test]
fn every_truncation_and_byte_flip_of_megatrons_files_is_refused_or_in_bounds() {
    // What the fuzz target checks, over every single-byte change of the
    // fixtures: no panic, and whatever parses stays inside its .bin.
    for name in ["uint16", "int32", "uint16-joined"] {
        let idx = fs::read(fixture(&format!("{name}.idx"))).unwrap();
        let bin_len = fs::metadata(fixture(&format!("{name}.bin"))).unwrap().len();
        let mut variants: Vec<Vec<u8>> = (0..idx.len()).map(|n| idx[..n].to_vec()).collect();
        for at in 0..idx.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bytes = idx.clone();
                bytes[at] ^= flip;
                variants.push(bytes);
            }
        }
        for bytes in variants {
            if let Ok(index) = MegatronIndex::parse(bytes, bin_len) {
                for i in 0..index.sequences() {
                    let end = index.pointer(i) + index.length(i) * index.dtype().size() as u64;
                    assert!(end <= bin_len, "{name}: sequence {i} ends at {end}");
                }
            }
        }
    }
}
