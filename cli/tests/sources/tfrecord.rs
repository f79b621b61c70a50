//! TFRecord sources, plain and gzip, as the `tfrecord` package wrote them.

use crate::checks::{assert_all_hold, case_args, edited, ingest_cases, with_errors, with_records};
use crate::datasets::{assert_fails_cleanly, expected, fixture, fixtures};
use crate::per_source::{gunzip, gzip, tfrecord_sources};
use crate::strings;

/// Whole records, one bytes_list feature, and keyed by another, from plain and
/// GZIP files and both in one run; records that are not Examples as they are.
#[test]
fn tfrecord_plain_and_gzip_records_are_ingested_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("tfrecord")["cases"].as_array().unwrap().clone();
    let cases = with_records(&cases);
    assert_eq!(
        cases.len(),
        9,
        "tfrecord cases with records in expected.json"
    );
    let all = ingest_cases(tmp.path(), "tfrecord", &cases, tfrecord_sources, case_args);
    assert_all_hold(&all);
}

#[test]
fn tfrecord_missing_or_non_bytes_feature_fails_naming_record_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("tfrecord")["cases"].as_array().unwrap().clone();
    let errors = with_errors(&cases);
    assert_eq!(errors.len(), 4, "tfrecord error cases in expected.json");
    for case in errors {
        let error = &case["error"];
        let feature = error["feature"].as_str().unwrap();
        let mut fragments = vec![
            fixture("tfrecord", error["file"].as_str().unwrap()),
            format!("record {} at byte {}", error["record"], error["offset"]),
        ];
        match error["reason"].as_str().unwrap() {
            "missing" => fragments.push(format!("the Example has no feature {feature:?}")),
            "int64_list" => fragments.push(format!(
                "feature {feature:?} is an int64_list, not a bytes_list"
            )),
            "float_list" => fragments.push(format!(
                "feature {feature:?} is a float_list, not a bytes_list"
            )),
            other => panic!("unexpected reason {other:?} in expected.json"),
        }
        assert_fails_cleanly(
            tmp.path(),
            &tfrecord_sources(case),
            &case_args(case),
            case["keyed"].as_bool().unwrap(),
            &fragments,
        );
    }
    // Records that are not Examples have no features.
    assert_fails_cleanly(
        tmp.path(),
        &[fixture("tfrecord", "not-examples.tfrecord")],
        &strings(&["--feature", "image/encoded"]),
        false,
        &strings(&[
            "not-examples.tfrecord",
            "record 0 at byte 0",
            "not a valid tf.train.Example",
        ]),
    );
}

/// Truncations and flipped bytes, in plain files and inside GZIP streams: the
/// message names the file, the record and its byte offset (in the decompressed
/// stream for GZIP), and what is wrong.
#[test]
fn tfrecord_truncated_or_flipped_fails_naming_record_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = expected("tfrecord");
    let frame = |file: &str, n: usize| -> (usize, usize) {
        let frame = &expected["files"][file]["frames"][n];
        (
            frame[0].as_u64().unwrap() as usize,
            frame[1].as_u64().unwrap() as usize,
        )
    };
    let keyed = strings(&[
        "--feature",
        "image/encoded",
        "--key-feature",
        "image/filename",
    ]);
    let whole: Vec<String> = Vec::new();

    let plain = "examples.tfrecord";
    let (off1, _) = frame(plain, 1);
    let (off2, _) = frame(plain, 2);
    let (off3, len3) = frame(plain, 3);
    let (off4, len4) = frame(plain, 4);
    let (off5, len5) = frame(plain, 5);
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let plain_cases: Vec<(&str, Edit, String, String)> = vec![
        (
            "cut-data",
            Box::new(move |b| b.truncate(off3 + 12 + 10)),
            format!("record 3 at byte {off3}"),
            format!("truncated: 10 of {len3} data bytes"),
        ),
        (
            "cut-header",
            Box::new(move |b| b.truncate(off2 + 5)),
            format!("record 2 at byte {off2}"),
            "truncated: 5 of the 12 header bytes".into(),
        ),
        (
            "cut-crc",
            Box::new(move |b| b.truncate(b.len() - 2)),
            format!("record 5 at byte {off5}"),
            "truncated: 2 of the 4 checksum bytes".into(),
        ),
        (
            "flipped-data",
            Box::new(move |b| b[off4 + 12 + len4 / 2] ^= 0x01),
            format!("record 4 at byte {off4}"),
            "data checksum mismatch".into(),
        ),
        (
            "flipped-length",
            Box::new(move |b| b[off1] ^= 0x01),
            format!("record 1 at byte {off1}"),
            "length checksum mismatch".into(),
        ),
    ];
    assert_eq!(
        off5 + 16 + len5,
        std::fs::metadata(fixtures("tfrecord").join(plain))
            .unwrap()
            .len() as usize
    );
    for (label, edit, location, reason) in plain_cases {
        let name = format!("{label}.tfrecord");
        let path = edited(tmp.path(), "tfrecord", plain, &name, edit);
        for args in [&keyed, &whole] {
            let keyed = !args.is_empty();
            let fragments = [name.clone(), location.clone(), reason.clone()];
            assert_fails_cleanly(
                tmp.path(),
                std::slice::from_ref(&path),
                args,
                keyed,
                &fragments,
            );
        }
    }

    // GZIP: edits of the decompressed stream, compressed again, and edits of the
    // compressed file itself.
    let zipped = "examples.tfrecord.gz";
    let (off3, len3) = frame(zipped, 3);
    let (off6, len6) = frame(zipped, 6);
    let (off7, _) = frame(zipped, 7);
    let decompressed = |edit: Edit| -> Edit {
        Box::new(move |b: &mut Vec<u8>| {
            let mut stream = gunzip(b);
            edit(&mut stream);
            *b = gzip(&stream);
        })
    };
    let gzip_cases: Vec<(&str, Edit, String, String)> = vec![
        (
            "cut-data",
            decompressed(Box::new(move |b| b.truncate(off3 + 12 + 10))),
            format!("record 3 at byte {off3} of the decompressed stream"),
            format!("truncated: 10 of {len3} data bytes"),
        ),
        (
            "flipped-data",
            decompressed(Box::new(move |b| b[off6 + 12 + len6 / 3] ^= 0x80)),
            format!("record 6 at byte {off6} of the decompressed stream"),
            "data checksum mismatch".into(),
        ),
        (
            "cut-compressed",
            Box::new(|b| b.truncate(b.len() / 2)),
            "of the decompressed stream".into(),
            "truncated or corrupt".into(),
        ),
        (
            // The gzip trailer's CRC32 of the stream: read after the last record.
            "flipped-gzip-crc",
            Box::new(|b| {
                let at = b.len() - 6;
                b[at] ^= 0x01
            }),
            format!(
                "record 8 at byte {} of the decompressed stream",
                off7 + 16 + frame(zipped, 7).1
            ),
            "truncated or corrupt".into(),
        ),
    ];
    for (label, edit, location, reason) in gzip_cases {
        let name = format!("{label}.tfrecord.gz");
        let path = edited(tmp.path(), "tfrecord", zipped, &name, edit);
        for args in [&keyed, &whole] {
            let keyed = !args.is_empty();
            let fragments = [name.clone(), location.clone(), reason.clone()];
            assert_fails_cleanly(
                tmp.path(),
                std::slice::from_ref(&path),
                args,
                keyed,
                &fragments,
            );
        }
    }
}
