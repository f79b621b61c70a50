//! Tests of `open_sources`: detection, option checks and errors, on the fixtures.

use std::io;

use bcd_converters::dir_source::LabelMode;

use super::*;

/// A fixture file or directory, as a source name.
fn fixture(path: &str) -> String {
    format!("{}/../fixtures/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn open_one(name: &str, options: &SourceOptions) -> Result<OpenedSource, SourceSetupError> {
    open_sources(&[name.to_owned()], options)
}

fn parquet_options() -> SourceOptions {
    SourceOptions {
        value_column: Some("value".into()),
        ..Default::default()
    }
}

#[test]
fn names_tell_the_format() {
    let none = SourceOptions::default();
    for (name, format) in [
        ("-", SourceFormat::Tar),
        ("shards-{000000..000009}.tar", SourceFormat::Tar),
        ("a.tar", SourceFormat::Tar),
        ("a.TAR.GZ", SourceFormat::Tar),
        ("a.tgz", SourceFormat::Tar),
        ("a.tar.zst", SourceFormat::Tar),
        ("a.tzst", SourceFormat::Tar),
        ("a.tar.zstd", SourceFormat::Tar),
        ("a.parquet", SourceFormat::Parquet),
        ("a.pq", SourceFormat::Parquet),
        ("a.csv", SourceFormat::Csv),
        ("a.tsv", SourceFormat::Csv),
        ("a.tfrecord", SourceFormat::Tfrecord),
        ("a.tfrecords.gz", SourceFormat::Tfrecord),
        ("train.tfrecord-00000-of-00010", SourceFormat::Tfrecord),
        ("a.jsonl", SourceFormat::Jsonl),
        ("a.JSONL.GZ", SourceFormat::Jsonl),
        ("a.jsonl.zst", SourceFormat::Jsonl),
        ("a.ndjson", SourceFormat::Jsonl),
    ] {
        assert_eq!(
            detect_format(name.as_ref(), &none).unwrap(),
            format,
            "{name}"
        );
    }
    // A value column means Parquet whatever the name, but a .jsonl name stays
    // JSON Lines (and the Parquet option is then refused).
    assert_eq!(
        detect_format("dump".as_ref(), &parquet_options()).unwrap(),
        SourceFormat::Parquet
    );
    assert_eq!(
        detect_format("a.jsonl".as_ref(), &parquet_options()).unwrap(),
        SourceFormat::Jsonl
    );
}

#[test]
fn each_fixture_opens_as_the_format_its_name_tells() {
    for (name, options, format) in [
        ("imagefolder", SourceOptions::default(), SourceFormat::Dir),
        ("tar/gnu.tar", SourceOptions::default(), SourceFormat::Tar),
        ("tar/pax.tgz", SourceOptions::default(), SourceFormat::Tar),
        (
            "parquet/codec-none.parquet",
            parquet_options(),
            SourceFormat::Parquet,
        ),
        ("csv/list.csv", SourceOptions::default(), SourceFormat::Csv),
        (
            "tfrecord/examples.tfrecord",
            SourceOptions::default(),
            SourceFormat::Tfrecord,
        ),
        (
            "tfrecord/examples.tfrecord.gz",
            SourceOptions::default(),
            SourceFormat::Tfrecord,
        ),
    ] {
        let mut opened = open_one(&fixture(name), &options).unwrap();
        assert_eq!(opened.format, format, "{name}");
        let first = opened.source.next();
        assert!(matches!(first, Some(Ok(_))), "{name}: {first:?}");
    }
}

#[test]
fn a_given_format_overrides_detection() {
    let options = SourceOptions {
        format: Some(SourceFormat::Tar),
        ..Default::default()
    };
    // No tar suffix, but read as tar all the same.
    let renamed = tempfile::tempdir().unwrap();
    let archive = renamed.path().join("archive.bin");
    std::fs::copy(fixture("tar/gnu.tar"), &archive).unwrap();
    let opened = open_one(archive.to_str().unwrap(), &options).unwrap();
    assert_eq!(opened.format, SourceFormat::Tar);
}

#[test]
fn mixed_formats_are_refused_listing_them() {
    let error = open_sources(
        &[fixture("imagefolder"), fixture("tar/gnu.tar")],
        &SourceOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, SourceSetupError::MixedFormats { formats }
            if formats == &[SourceFormat::Dir, SourceFormat::Tar]),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the sources are of different formats (dir, tar); ingest them in separate runs or pass `format`"
    );
}

#[test]
fn an_empty_list_is_refused() {
    for format in [None, Some(SourceFormat::Tar)] {
        let options = SourceOptions {
            format,
            ..Default::default()
        };
        let error = open_sources::<String>(&[], &options).unwrap_err();
        assert!(matches!(error, SourceSetupError::NoSources), "{error:?}");
    }
}

#[test]
fn an_option_for_another_format_is_refused_naming_it() {
    let tar = fixture("tar/gnu.tar");
    let cases = [
        (
            SourceOptions {
                include: vec!["*.jpg".into()],
                ..Default::default()
            },
            "`include` applies to dir sources only, not tar",
        ),
        (
            // Given explicitly, even with the default value.
            SourceOptions {
                delimiter: Some(b','),
                ..Default::default()
            },
            "`delimiter` applies to csv sources only, not tar",
        ),
        (
            SourceOptions {
                key_feature: Some("image/filename".into()),
                ..Default::default()
            },
            "`key_feature` applies to tfrecord sources only, not tar",
        ),
        (
            SourceOptions {
                key_column: Some("id".into()),
                ..Default::default()
            },
            "`key_column` applies to parquet, hf-disk, csv, mds and litdata sources only, not tar",
        ),
        (
            SourceOptions {
                fields: Some(bcd_converters::FieldSelection::None),
                ..Default::default()
            },
            "`fields` applies to parquet, hf-disk, csv, tfrecord, mds and litdata sources only, not tar",
        ),
        (
            SourceOptions {
                field_type: vec![("label".into(), bcd_converters::FieldType::Int64)],
                ..Default::default()
            },
            "`field_type` applies to csv sources only, not tar",
        ),
    ];
    for (options, message) in cases {
        let error = open_one(&tar, &options).unwrap_err();
        assert_eq!(error.to_string(), message);
    }
    let error = open_one(
        &fixture("csv/list.csv"),
        &SourceOptions {
            skip_nulls: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            SourceSetupError::OptionForOtherFormats {
                option: "skip_nulls",
                format: SourceFormat::Csv,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn fields_naming_the_value_or_key_are_refused_before_anything_is_read() {
    let only = |names: &[&str]| {
        Some(bcd_converters::FieldSelection::Only(
            names.iter().map(|n| n.to_string()).collect(),
        ))
    };
    let parquet = SourceOptions {
        value_column: Some("value".into()),
        key_column: Some("key".into()),
        fields: only(&["key"]),
        ..Default::default()
    };
    let csv = SourceOptions {
        fields: only(&["label"]),
        field_type: vec![("id".into(), bcd_converters::FieldType::String)],
        ..Default::default()
    };
    let tfrecord = SourceOptions {
        feature: Some("image/encoded".into()),
        fields: only(&["image/encoded"]),
        ..Default::default()
    };
    for (source, options, message) in [
        (
            "parquet/codec-none.parquet",
            parquet,
            "`fields` names \"key\", which is the key column: it is stored as such, not as a field",
        ),
        (
            "csv/list.csv",
            csv,
            "`field_type` declares column \"id\", which is not a field (see `fields`)",
        ),
        (
            "tfrecord/examples.tfrecord",
            tfrecord,
            "`fields` names \"image/encoded\", which is the value feature: it is stored as such, not as a field",
        ),
    ] {
        let error = open_one(&fixture(source), &options).unwrap_err();
        assert!(
            matches!(error, SourceSetupError::Open(SourceError::Usage(_))),
            "{error:?}"
        );
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn parquet_without_a_value_column_is_refused() {
    let options = SourceOptions {
        format: Some(SourceFormat::Parquet),
        ..Default::default()
    };
    let error = open_one(&fixture("parquet/codec-none.parquet"), &options).unwrap_err();
    assert!(
        matches!(error, SourceSetupError::MissingValueColumn { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("`value_column` COL"), "{error}");
}

#[test]
fn a_missing_source_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // Detected from the name, then opened.
    let archive = dir.path().join("missing.tar").display().to_string();
    let error = open_sources(
        &[fixture("tar/gnu.tar"), archive.clone()],
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        matches!(error, SourceSetupError::Open(SourceError::Io { .. })),
        "{error:?}"
    );
    assert!(error.to_string().starts_with(&archive), "{error}");
    // The cause stays reachable, as the CLI prints the chain.
    let cause = std::error::Error::source(&error).expect("a cause");
    assert!(cause.downcast_ref::<io::Error>().is_some(), "{cause:?}");
    // Without a telling name, detection itself needs the file.
    let tree = dir.path().join("missing-dir").display().to_string();
    let error = open_one(&tree, &Default::default()).unwrap_err();
    assert!(
        matches!(error, SourceSetupError::Unreadable { .. }),
        "{error:?}"
    );
    assert!(error.to_string().starts_with(&tree), "{error}");
}

#[test]
fn a_file_whose_name_says_nothing_is_detected_by_its_first_bytes() {
    // TFX writes GZIP TFRecord shards named `data_tfrecord-00000-of-00012.gz`.
    let dir = tempfile::tempdir().unwrap();
    for (fixture_name, renamed, format) in [
        (
            "tfrecord/examples.tfrecord.gz",
            "data_tfrecord-00000.gz",
            SourceFormat::Tfrecord,
        ),
        ("tfrecord/examples.tfrecord", "data", SourceFormat::Tfrecord),
        ("tar/gnu.tar.gz", "shard.gz", SourceFormat::Tar),
        ("tar/pax.tar", "shard.bin", SourceFormat::Tar),
    ] {
        let path = dir.path().join(renamed);
        std::fs::copy(fixture(fixture_name), &path).unwrap();
        let opened = open_one(path.to_str().unwrap(), &Default::default()).unwrap();
        assert_eq!(opened.format, format, "{fixture_name}");
    }
    // Parquet by its magic: then its value column is asked for.
    let path = dir.path().join("table.bin");
    std::fs::copy(fixture("parquet/nulls.parquet"), &path).unwrap();
    let error = open_one(path.to_str().unwrap(), &Default::default()).unwrap_err();
    assert!(
        matches!(error, SourceSetupError::MissingValueColumn { .. }),
        "{error:?}"
    );
}

#[test]
fn a_megatron_dataset_is_named_by_its_prefix_or_either_file_or_found_by_its_magic() {
    for name in [
        "megatron/uint16",
        "megatron/uint16.idx",
        "megatron/int32.bin",
    ] {
        let opened = open_one(&fixture(name), &Default::default()).unwrap();
        assert_eq!(opened.format, SourceFormat::Megatron, "{name}");
    }
    // An .idx renamed so that its name says nothing: its MMIDIDX magic does.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    std::fs::copy(fixture("megatron/uint16.idx"), &path).unwrap();
    let opened = open_one(path.to_str().unwrap(), &Default::default()).unwrap();
    assert_eq!(opened.format, SourceFormat::Megatron);
    // A prefix whose .bin is missing is no Megatron dataset by name.
    assert_eq!(
        formats::detect_by_name(path.as_os_str(), &Default::default()),
        None
    );
    // It takes no option of another format.
    let error = open_one(
        &fixture("megatron/uint16"),
        &SourceOptions {
            key_field: Some("k".into()),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "`key_field` applies to jsonl sources only, not megatron"
    );
}

#[test]
fn a_file_without_a_telling_name_is_refused_listing_the_formats() {
    let error = open_one(&fixture("imagefolder/labels.txt"), &Default::default()).unwrap_err();
    assert!(
        error.to_string().ends_with(
            "cannot tell its format from the name or the first bytes; pass `format` dir|tar|parquet|hf-disk|csv|tfrecord|jsonl|megatron|lmdb|mds|litdata"
        ),
        "{error}"
    );
}

#[test]
fn format_names_round_trip() {
    for format in SourceFormat::all() {
        assert_eq!(format.to_string().parse::<SourceFormat>().unwrap(), format);
    }
    let error = "zip".parse::<SourceFormat>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "\"zip\": unknown source format; expected one of dir, tar, parquet, hf-disk, csv, tfrecord, jsonl, megatron, lmdb, mds, litdata"
    );
}

#[test]
fn an_error_in_one_directory_ends_the_sources_before_the_next_directory() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    for (dir, name) in [(&first, "a.txt"), (&first, "b.txt"), (&second, "z.txt")] {
        std::fs::write(dir.path().join(name), name).unwrap();
    }
    let names = [first.path().to_owned(), second.path().to_owned()];
    let mut opened = open_sources(&names, &SourceOptions::default()).unwrap();
    assert_eq!(opened.source.next().unwrap().unwrap().key, b"a.txt");
    // b.txt was listed with its directory; gone now, its read fails.
    std::fs::remove_file(first.path().join("b.txt")).unwrap();
    let error = opened.source.next().unwrap().unwrap_err();
    assert!(error.to_string().contains("b.txt"), "{error}");
    assert!(
        opened.source.next().is_none(),
        "z.txt was read after the error"
    );
    assert!(opened.source.next().is_none());
}

#[test]
fn field_options_belong_to_their_format_and_sample_options_need_samples() {
    let tar = fixture("tar/gnu.tar");
    let dir = fixture("imagefolder");
    let schema = Some(std::sync::Arc::new(arrow_schema::Schema::empty()));
    let cases = [
        (
            &dir,
            SourceOptions {
                samples: true,
                ..Default::default()
            },
            "`samples` applies to tar sources only, not dir",
        ),
        (
            &tar,
            SourceOptions {
                labels: Some(LabelMode::Folder),
                ..Default::default()
            },
            "`labels` applies to dir sources only, not tar",
        ),
        (
            &dir,
            SourceOptions {
                value_ext: vec!["jpg".into()],
                ..Default::default()
            },
            "`value_ext` applies to tar sources only, not dir",
        ),
        (
            &tar,
            SourceOptions {
                json_fields: true,
                ..Default::default()
            },
            "`json_fields` applies to tar sources read with `samples` only",
        ),
        (
            &tar,
            SourceOptions {
                value_ext: vec!["jpg".into()],
                skip_bad_samples: true,
                ..Default::default()
            },
            "`value_ext` applies to tar sources read with `samples` only",
        ),
        (
            &tar,
            SourceOptions {
                key_field: Some("id".into()),
                ..Default::default()
            },
            "`key_field` applies to jsonl sources only, not tar",
        ),
        (
            &dir,
            SourceOptions {
                schema: schema.clone(),
                ..Default::default()
            },
            "`schema` applies to jsonl sources only, not dir",
        ),
        (
            &dir,
            SourceOptions {
                value_base64: true,
                ..Default::default()
            },
            "`value_base64` applies to jsonl sources only, not dir",
        ),
        (
            &tar,
            SourceOptions {
                value_field: Some("text".into()),
                ..Default::default()
            },
            "`value_field` applies to jsonl sources only, not tar",
        ),
    ];
    for (name, options, message) in cases {
        let error = open_one(name, &options).unwrap_err();
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn the_new_options_reach_their_sources() {
    // Directory labels: the fixture's class folders.
    let options = SourceOptions {
        labels: Some(LabelMode::Folder),
        ..Default::default()
    };
    let mut opened = open_one(&fixture("imagefolder"), &options).unwrap();
    let record = opened.source.next().unwrap().unwrap();
    assert!(record.fields.get("label_index").is_some(), "{record:?}");
    assert!(opened.source.metadata().contains_key("class_names"));

    // WebDataset samples, with the value extension given in upper case.
    let options = SourceOptions {
        samples: true,
        value_ext: vec![".JSON".into()],
        json_fields: true,
        ..Default::default()
    };
    let mut opened = open_one(&fixture("tar/shards-000000.tar"), &options).unwrap();
    let record = opened.source.next().unwrap().unwrap();
    assert_eq!(
        record.fields.get("bcd.value_ext"),
        Some(&bcd_converters::FieldValue::String("json".into()))
    );
    assert!(opened.source.metadata().contains_key("derived_fields"));

    // JSON Lines, detected from the name, keyed by a field.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    std::fs::write(&path, "{\"id\": 7, \"body\": \"x\", \"n\": 1}\n").unwrap();
    let options = SourceOptions {
        value_field: Some("body".into()),
        key_field: Some("id".into()),
        ..Default::default()
    };
    let mut opened = open_one(path.to_str().unwrap(), &options).unwrap();
    assert_eq!(opened.format, SourceFormat::Jsonl);
    assert!(opened.source.keyed());
    let record = opened.source.next().unwrap().unwrap();
    assert_eq!((&record.key[..], &record.value[..]), (&b"7"[..], &b"x"[..]));
    assert!(record.fields.get("n").is_some());
}

#[test]
fn directories_labelled_by_folder_need_the_same_class_folders() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    for (dir, path) in [
        (&first, "cat/1.jpg"),
        (&first, "dog/1.jpg"),
        (&second, "cat/2.jpg"),
        (&second, "dog/2.jpg"),
    ] {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }
    let options = SourceOptions {
        labels: Some(LabelMode::Folder),
        ..Default::default()
    };
    let names = [first.path().to_owned(), second.path().to_owned()];
    let opened = open_sources(&names, &options).unwrap();
    assert_eq!(
        opened.source.metadata()["class_names"],
        serde_json::json!(["cat", "dog"])
    );
    std::fs::create_dir(second.path().join("emu")).unwrap();
    let error = open_sources(&names, &options).unwrap_err();
    assert!(
        matches!(error, SourceSetupError::DifferentClasses { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .ends_with("but only the second has \"emu\""),
        "{error}"
    );
}

#[test]
fn a_local_only_format_in_object_storage_is_refused_listing_the_formats_there() {
    // Refused before any store is reached: no listing, no credentials.
    let error = open_one("s3://bucket/list.csv", &SourceOptions::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "s3://bucket/list.csv: csv sources must be local; object storage holds tar, parquet, tfrecord and jsonl sources"
    );
    let dir = SourceOptions {
        format: Some(SourceFormat::Dir),
        ..Default::default()
    };
    let error = open_one("s3://bucket/photos/", &dir).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("s3://bucket/photos/: dir sources must be local;"),
        "{error}"
    );
}

#[test]
fn a_save_to_disk_directory_is_hf_disk_even_with_a_value_column() {
    let image = SourceOptions {
        value_column: Some("image".into()),
        ..Default::default()
    };
    // A value column alone would say Parquet (a directory of Parquet files); what
    // the directory holds is surer.
    let mut opened = open_one(&fixture("hf_disk/photos"), &image).unwrap();
    assert_eq!(opened.format, SourceFormat::HfDisk);
    assert!(matches!(opened.source.next(), Some(Ok(_))));
    let split = SourceOptions {
        value_column: Some("text".into()),
        split: Some("test".into()),
        ..Default::default()
    };
    let opened = open_one(&fixture("hf_disk/splits"), &split).unwrap();
    assert_eq!(opened.format, SourceFormat::HfDisk);
    assert_eq!(opened.source.count(), 2);
    // Other directories are still dir, and a split is no option of theirs.
    let dir_split = SourceOptions {
        split: Some("train".into()),
        ..Default::default()
    };
    let error = open_one(&fixture("imagefolder"), &dir_split).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`split` applies to hf-disk sources only, not dir"
    );
    let error = open_one(&fixture("hf_disk/photos"), &SourceOptions::default()).unwrap_err();
    assert!(
        matches!(
            error,
            SourceSetupError::MissingValueColumn {
                format: SourceFormat::HfDisk
            }
        ),
        "{error:?}"
    );
}

#[test]
fn mds_and_litdata_directories_are_told_by_their_index_even_with_a_value_column() {
    for (name, format, value) in [
        ("mds/zstd", SourceFormat::Mds, "image"),
        ("litdata/zstd-batch", SourceFormat::Litdata, "image"),
    ] {
        // With no options, and with a value column that alone would say Parquet.
        for options in [
            SourceOptions::default(),
            SourceOptions {
                value_column: Some(value.into()),
                key_column: Some("label".into()),
                ..Default::default()
            },
        ] {
            let opened = open_one(&fixture(name), &options).unwrap();
            assert_eq!(opened.format, format, "{name}");
            assert_eq!(
                opened.source.count(),
                5 + usize::from(format == SourceFormat::Mds),
                "{name}"
            );
        }
        let error = open_one(
            &fixture(name),
            &SourceOptions {
                skip_nulls: true,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("`skip_nulls` applies to parquet and hf-disk sources only, not {format}")
        );
    }
    // An index.json that is neither is a plain directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.json"), b"{\"version\": 1}").unwrap();
    let opened = open_one(dir.path().to_str().unwrap(), &SourceOptions::default()).unwrap();
    assert_eq!(opened.format, SourceFormat::Dir);
}
