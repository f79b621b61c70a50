//! Parquet sources, as pyarrow and Hugging Face `datasets` wrote them.

use bcd_test_support::tree_snapshot;
use serde_json::{json, Value};

use crate::checks::{
    assert_all_hold, assert_summary, case_args, edited, ingest_cases, parquet_sources, with_errors,
    with_records, Holds,
};
use crate::common::*;
use crate::datasets::{assert_fails_cleanly, expected, fixture, fixtures, json_strings};
use crate::per_source::{dump_records, nightly_args, rows_from};
use crate::{assert_one_clean_error, bcd_in, ingest, ingest_args, strings};

/// The value-types.parquet cases: every value column type (binary, large_binary,
/// string, large_string, fixed_size_binary, binary_view, string_view,
/// struct<bytes, path>, dictionary<binary>) and every key type (binary, strings,
/// string_view, fixed_size_binary, signed and unsigned integers as decimal text,
/// dictionary<string>), keyed and keyless.
#[test]
fn parquet_every_value_and_key_type_is_ingested_as_pyarrow_wrote_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("parquet")["cases"].as_array().unwrap().clone();
    let cases: Vec<&Value> = with_records(&cases)
        .into_iter()
        .filter(|c| c["files"] == json!(["value-types.parquet"]))
        .collect();
    assert_eq!(
        cases.len(),
        20,
        "value-types.parquet cases in expected.json"
    );
    let all = ingest_cases(tmp.path(), "parquet", &cases, parquet_sources, case_args);
    assert_all_hold(&all);
}

/// Uncompressed, snappy, gzip, zstd, lz4 and brotli pages; several row groups;
/// v2 data pages with batches crossing row groups; page checksums; two files in
/// one run; dictionary-encoded string keys and integer keys.
#[test]
fn parquet_every_page_codec_and_row_group_layout_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = expected("parquet");
    let files = &expected["files"];
    for codec in ["none", "snappy", "gzip", "zstd", "lz4", "brotli"] {
        let file = &files[format!("codec-{codec}.parquet")];
        let want = match codec {
            "none" => "UNCOMPRESSED".to_owned(),
            other => other.to_uppercase(),
        };
        assert_eq!(file["codecs"], json!([want]), "codec-{codec}.parquet");
        assert_eq!(file["row_groups"], json!(3), "codec-{codec}.parquet");
    }
    assert_eq!(files["many-row-groups.parquet"]["row_groups"], json!(11));
    let cases = expected["cases"].as_array().unwrap().clone();
    let cases: Vec<&Value> = with_records(&cases)
        .into_iter()
        .filter(|c| {
            let files = json_strings(&c["files"]);
            files.iter().any(|f| {
                f.starts_with("codec-")
                    || f == "many-row-groups.parquet"
                    || f == "checksummed.parquet"
            })
        })
        .collect();
    assert_eq!(
        cases.len(),
        10,
        "codec and row group cases in expected.json"
    );
    let all = ingest_cases(tmp.path(), "parquet", &cases, parquet_sources, case_args);
    assert_all_hold(&all);
}

/// A `datasets` export (struct<bytes: binary, path: string> image, ClassLabel
/// label, the `huggingface` schema metadata): the image bytes are the values.
#[test]
fn parquet_hugging_face_image_export_stores_the_image_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = expected("parquet");
    let file = &expected["files"]["hf-images.parquet"];
    assert_eq!(file["schema_metadata_keys"], json!(["huggingface"]));
    assert!(
        file["arrow_schema"]
            .as_str()
            .unwrap()
            .starts_with("image: struct<bytes: binary, path: string>"),
        "{file}"
    );
    let cases = expected["cases"].as_array().unwrap().clone();
    let cases: Vec<&Value> = with_records(&cases)
        .into_iter()
        .filter(|c| c["files"] == json!(["hf-images.parquet"]))
        .collect();
    assert_eq!(cases.len(), 1);
    let all = ingest_cases(tmp.path(), "parquet", &cases, parquet_sources, case_args);
    assert_all_hold(&all);

    // The label is an integer column: a value column must hold bytes.
    let message = assert_fails_cleanly(
        tmp.path(),
        &[fixture("parquet", "hf-images.parquet")],
        &strings(&["--value-column", "label"]),
        false,
        &strings(&[
            "hf-images.parquet",
            "column \"label\" has type Int64",
            "expected binary",
        ]),
    );
    assert!(message.contains("struct<bytes: binary>"), "{message}");
}

/// A null value or key stops the run naming the file, the row and the column,
/// unless --skip-nulls, which skips such rows and counts them in the summary.
#[test]
fn parquet_null_fails_naming_file_row_and_column_unless_skip_nulls_counts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("parquet")["cases"].as_array().unwrap().clone();
    let nulls: Vec<Value> = cases
        .iter()
        .filter(|c| c["files"] == json!(["nulls.parquet"]))
        .cloned()
        .collect();
    let errors = with_errors(&nulls);
    assert_eq!(errors.len(), 4, "null error cases in expected.json");
    for case in errors {
        let error = &case["error"];
        let message = assert_fails_cleanly(
            tmp.path(),
            &parquet_sources(case),
            &case_args(case),
            case["keyed"].as_bool().unwrap(),
            &[
                fixture("parquet", "nulls.parquet"),
                format!("row {}", error["row"]),
                format!("column {} is null", error["column"]),
                "--skip-nulls".to_owned(),
            ],
        );
        assert!(message.contains(": row "), "{message}");
    }
    let skipping = with_records(&nulls);
    assert_eq!(skipping.len(), 4, "--skip-nulls cases in expected.json");
    assert!(skipping
        .iter()
        .all(|c| c["skipped_nulls"].as_u64().unwrap() > 0));
    let all = ingest_cases(tmp.path(), "parquet", &skipping, parquet_sources, case_args);
    assert_all_hold(&all);
}

#[test]
fn parquet_missing_or_mistyped_column_fails_leaving_the_dataset_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let nulls = vec![fixture("parquet", "nulls.parquet")];
    let columns = "[\"id\", \"data\", \"image\", \"clean\"]";
    for (args, keyed, fragments) in [
        (
            vec!["--value-column", "nope"],
            false,
            vec!["no column \"nope\"", columns],
        ),
        (
            vec!["--value-column", "data", "--key-column", "nope"],
            true,
            vec!["no column \"nope\"", columns],
        ),
        (
            // A struct is a value type (Hugging Face Image) but not a key type.
            vec!["--value-column", "clean", "--key-column", "image"],
            true,
            vec![
                "column \"image\" has type Struct",
                "expected a string, binary or integer column",
            ],
        ),
    ] {
        let mut fragments = strings(&fragments);
        fragments.push(nulls[0].clone());
        assert_fails_cleanly(tmp.path(), &nulls, &strings(&args), keyed, &fragments);
    }
    // An integer column is a key type but not a value type.
    assert_fails_cleanly(
        tmp.path(),
        &[fixture("parquet", "value-types.parquet")],
        &strings(&["--value-column", "key_int64", "--key-column", "name"]),
        true,
        &strings(&["value-types.parquet", "column \"key_int64\" has type Int64"]),
    );
}

#[test]
fn parquet_corrupt_file_fails_cleanly_leaving_the_dataset_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = expected("parquet");
    let key = strings(&["--value-column", "value", "--key-column", "key"]);
    let original = std::fs::read(fixtures("parquet").join("codec-gzip.parquet")).unwrap();

    // Truncated anywhere, the footer is gone or cut.
    for keep in [
        0,
        5,
        original.len() / 2,
        original.len() - 8,
        original.len() - 1,
    ] {
        let name = format!("truncated-{keep}.parquet");
        let path = edited(tmp.path(), "parquet", "codec-gzip.parquet", &name, |b| {
            b.truncate(keep)
        });
        assert_fails_cleanly(
            tmp.path(),
            &[path],
            &key,
            true,
            &[name, "file metadata".into(), "truncated or corrupt".into()],
        );
    }

    // A flipped byte inside a gzip page (row group 1, rows 16..31): the deflate
    // stream or its CRC32 no longer checks.
    let chunk = &expected["files"]["codec-gzip.parquet"]["value_chunks"][1];
    assert_eq!(chunk[0], json!(1));
    let (start, length) = (chunk[1].as_u64().unwrap(), chunk[2].as_u64().unwrap());
    for at in [start + length / 2, start + length * 9 / 10] {
        let name = format!("flipped-gzip-page-{at}.parquet");
        let path = edited(tmp.path(), "parquet", "codec-gzip.parquet", &name, |b| {
            b[at as usize] ^= 0x55
        });
        let message = assert_fails_cleanly(
            tmp.path(),
            &[path],
            &key,
            true,
            &[name, "rows from ".into(), "truncated or corrupt".into()],
        );
        assert!(rows_from(&message) <= 16, "{message}");
    }

    // A flipped byte in an uncompressed page that carries a CRC (pyarrow's
    // write_page_checksum): the checksum is verified.
    let marker = expected["flip_marker"]
        .as_str()
        .unwrap()
        .as_bytes()
        .to_vec();
    let path = edited(
        tmp.path(),
        "parquet",
        "checksummed.parquet",
        "flipped-crc.parquet",
        |b| {
            let at = b.windows(marker.len()).position(|w| w == marker).unwrap();
            b[at + 3] ^= 0x01;
        },
    );
    assert_fails_cleanly(
        tmp.path(),
        &[path],
        &key,
        true,
        &strings(&[
            "flipped-crc.parquet",
            "rows from 0",
            "CRC checksum mismatch",
        ]),
    );

    // Found by flipping every byte of the fixtures: a column chunk offset made
    // negative in the footer, and definition levels that disagree with their
    // page, made the parquet crate panic.
    let path = edited(
        tmp.path(),
        "parquet",
        "checksummed.parquet",
        "negative-offset.parquet",
        |b| b[348] ^= 0xff,
    );
    assert_fails_cleanly(
        tmp.path(),
        &[path],
        &key,
        true,
        &strings(&[
            "negative-offset.parquet",
            "file metadata",
            "is not inside the",
        ]),
    );
    let path = edited(
        tmp.path(),
        "parquet",
        "codec-snappy.parquet",
        "bad-levels.parquet",
        |b| b[476] ^= 0xff,
    );
    assert_fails_cleanly(
        tmp.path(),
        &[path],
        &strings(&["--value-column", "value", "--key-column", "id"]),
        true,
        &strings(&["bad-levels.parquet", "rows from 0", "truncated or corrupt"]),
    );
}

/// Without --key-column a Parquet source is keyless: into a new dataset that
/// makes a keyless one, but a keyed dataset refuses it and says what to pass.
#[test]
fn keyless_parquet_source_into_a_keyed_dataset_fails_telling_to_pass_key_column() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("nightly");
    let day2 = vec![fixture("parquet", "dump-day2.parquet")];
    ingest(
        &[fixture("parquet", "dump-day1.parquet")],
        &dataset,
        &nightly_args(),
    );
    let before = tree_snapshot(&dataset);
    let args = ingest_args(&day2, &dataset, &strings(&["--value-column", "image"]));
    let run = bcd_in(None, &args);
    assert_one_clean_error(&run, &show(&args));
    for fragment in [
        s(&dataset),
        "is a keyed dataset but the source has no keys",
        "pass a key (e.g. --key-column)",
    ] {
        assert!(
            run.stderr.contains(fragment),
            "lacks {fragment:?}: {}",
            run.stderr
        );
    }
    assert_eq!(
        tree_snapshot(&dataset),
        before,
        "the refused ingest changed the dataset"
    );

    let keyless = tmp.path().join("keyless");
    let summary = ingest(&day2, &keyless, &strings(&["--value-column", "image"]));
    assert_summary(&summary, 10, json!({}), "keyless day 2");
    let values: Records = dump_records("dump-day2.parquet")
        .into_iter()
        .map(|(_, v)| (Vec::new(), v))
        .collect();
    assert_all_hold(&[Holds {
        dataset: keyless,
        keyed: false,
        records: values,
        what: "day 2 without --key-column".into(),
    }]);
}
