//! Every source ends at its first error: after an `Err`, `next()` is `None`, even
//! when more records (a next file, a next archive, a next row) could be read.
//! Each case puts good records after the failure, so a source that went on would
//! yield them.

use std::fs;
use std::path::{Path, PathBuf};

use bcd_converters::csv_source::{CsvOptions, CsvSource};
use bcd_converters::dir_source::{DirOptions, DirSource};
use bcd_converters::jsonl_source::{JsonlOptions, JsonlSource};
use bcd_converters::megatron_source::MegatronSource;
use bcd_converters::parquet_source::ParquetSource;
use bcd_converters::samples::SampleOptions;
use bcd_converters::tar_source::{TarOptions, TarSource};
use bcd_converters::tfrecord_source::{TfRecordOptions, TfRecordSource};
use bcd_converters::TableOptions;
use bcd_converters::{Chain, Source};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(path)
}

/// Reads `source` up to its first error and checks that nothing follows it; returns
/// the keys read before it and the error's message.
fn read_to_error(source: &mut dyn Source) -> (Vec<String>, String) {
    let mut keys = Vec::new();
    let error = loop {
        match source.next() {
            Some(Ok(record)) => keys.push(String::from_utf8_lossy(&record.key).into_owned()),
            Some(Err(error)) => break error.to_string(),
            None => panic!("the source ended without an error after {keys:?}"),
        }
    };
    for _ in 0..3 {
        if let Some(item) = source.next() {
            panic!("after the error {error:?} the source went on with {item:?}");
        }
    }
    (keys, error)
}

fn tree(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in files {
        fs::write(dir.path().join(name), name.as_bytes()).unwrap();
    }
    dir
}

#[test]
fn the_directory_source_stops_at_a_file_it_cannot_read() {
    let dir = tree(&["a.txt", "b.txt", "c.txt"]);
    let mut source = DirSource::new(dir.path(), &DirOptions::default()).unwrap();
    assert_eq!(source.next().unwrap().unwrap().key, b"a.txt");
    // The directory has been listed: b.txt is gone when its turn comes, which
    // fails its read whoever runs the test (permission bits would not stop root).
    fs::remove_file(dir.path().join("b.txt")).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert!(keys.is_empty(), "{keys:?}");
    assert!(error.contains("b.txt"), "{error}");
}

#[cfg(unix)]
#[test]
fn the_directory_source_stops_at_an_entry_it_cannot_walk() {
    let dir = tree(&["a.txt", "c.txt"]);
    std::os::unix::fs::symlink(dir.path().join("gone"), dir.path().join("b.txt")).unwrap();
    let options = DirOptions {
        follow_links: true,
        ..Default::default()
    };
    let mut source = DirSource::new(dir.path(), &options).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert_eq!(keys, ["a.txt"]);
    assert!(error.contains("b.txt"), "{error}");
}

#[test]
fn a_chain_of_directories_does_not_go_on_to_the_next_one() {
    let first = tree(&["a.txt", "b.txt"]);
    let second = tree(&["z.txt"]);
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(DirSource::new(first.path(), &DirOptions::default()).unwrap()),
        Box::new(DirSource::new(second.path(), &DirOptions::default()).unwrap()),
    ];
    let mut chain = Chain::new(sources);
    assert_eq!(chain.next().unwrap().unwrap().key, b"a.txt");
    fs::remove_file(first.path().join("b.txt")).unwrap();
    let (keys, error) = read_to_error(&mut chain);
    assert!(keys.is_empty(), "{keys:?}");
    assert!(error.contains("b.txt"), "{error}");
}

#[test]
fn the_tar_source_does_not_go_on_to_the_next_archive() {
    let dir = tempfile::tempdir().unwrap();
    let whole = fs::read(fixture("tar/gnu.tar")).unwrap();
    // Cut inside the header after the first regular file (dir/, dir/a.txt).
    let cut = dir.path().join("cut.tar");
    fs::write(&cut, &whole[..512 * 3 + 100]).unwrap();
    let names = [
        cut.display().to_string(),
        fixture("tar/gnu.tar").display().to_string(),
    ];
    let mut source = TarSource::new(&names).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert_eq!(keys, ["dir/a.txt"]);
    assert!(error.contains("cut.tar"), "{error}");
}

#[test]
fn the_csv_source_stops_at_a_missing_file_and_a_bad_csv() {
    let dir = tree(&["ok.txt", "later.txt"]);
    let list = dir.path().join("list.csv");
    fs::write(&list, "path\nok.txt\nmissing.txt\nlater.txt\n").unwrap();
    let mut source = CsvSource::new(&[list], CsvOptions::default()).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert_eq!(keys, ["ok.txt"]);
    assert!(error.contains("missing.txt"), "{error}");

    // A CSV file without the path column, then a good one.
    let bad = dir.path().join("bad.csv");
    fs::write(&bad, "file\nok.txt\n").unwrap();
    let good = dir.path().join("good.csv");
    fs::write(&good, "path\nlater.txt\n").unwrap();
    let mut source = CsvSource::new(&[bad, good], CsvOptions::default()).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert!(keys.is_empty(), "{keys:?}");
    assert!(error.contains("bad.csv"), "{error}");
}

#[test]
fn the_parquet_source_does_not_go_on_to_the_next_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.parquet");
    fs::write(&bad, b"not a parquet file at all").unwrap();
    let options = TableOptions {
        value_column: "value".into(),
        ..Default::default()
    };
    let good = fixture("parquet/codec-none.parquet");
    // The good file alone yields records: the case below is not vacuous.
    let mut alone = ParquetSource::new(std::slice::from_ref(&good), options.clone()).unwrap();
    assert!(alone.next().unwrap().is_ok());

    let mut source = ParquetSource::new(&[bad, good], options).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert!(keys.is_empty(), "{keys:?}");
    assert!(error.contains("bad.parquet"), "{error}");
}

#[test]
fn the_tfrecord_source_does_not_go_on_to_the_next_file() {
    let dir = tempfile::tempdir().unwrap();
    let whole = fs::read(fixture("tfrecord/examples.tfrecord")).unwrap();
    let cut = dir.path().join("cut.tfrecord");
    fs::write(&cut, &whole[..whole.len() - 3]).unwrap();
    let good = fixture("tfrecord/examples.tfrecord");
    let mut source = TfRecordSource::new(&[cut, good], TfRecordOptions::default()).unwrap();
    let mut records = 0;
    let error = loop {
        match source.next() {
            Some(Ok(_)) => records += 1,
            Some(Err(error)) => break error.to_string(),
            None => panic!("no error after {records} records"),
        }
    };
    assert!(records > 0 && error.contains("cut.tfrecord"), "{error}");
    assert!(source.next().is_none());
    assert!(source.next().is_none());
}

#[test]
fn a_record_the_tfrecord_source_cannot_decode_ends_it_too() {
    // Every record of the fixture lacks the feature asked for.
    let options = TfRecordOptions {
        feature: Some("no/such/feature".into()),
        ..Default::default()
    };
    let files = [
        fixture("tfrecord/examples.tfrecord"),
        fixture("tfrecord/examples.tfrecord"),
    ];
    let mut source = TfRecordSource::new(&files, options).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert!(keys.is_empty(), "{keys:?}");
    assert!(error.contains("no/such/feature"), "{error}");
}

#[test]
fn the_tar_source_in_samples_stops_at_a_bad_sample() {
    // A WebDataset shard, then an archive that continues its last sample (a
    // sample may not span archives), then the next shard.
    let dir = tempfile::tempdir().unwrap();
    let shard = |n: u32| {
        fixture(&format!("tar/shards-00000{n}.tar"))
            .display()
            .to_string()
    };
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_ustar();
    header.set_size(1);
    header.set_mode(0o644);
    header.set_cksum();
    builder
        .append_data(&mut header, "sample000101.txt", &b"x"[..])
        .unwrap();
    let tail = dir.path().join("tail.tar");
    fs::write(&tail, builder.into_inner().unwrap()).unwrap();
    let names = [shard(0), tail.display().to_string(), shard(1)];
    let options = TarOptions {
        samples: Some(SampleOptions::default()),
    };
    let mut source = TarSource::with_options(&names, &options).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert_eq!(keys, ["sample000100", "sample000101"]);
    assert!(
        error.contains("tail.tar") && error.contains("may not span archives"),
        "{error}"
    );
}

#[test]
fn the_jsonl_source_does_not_go_on_to_the_next_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    fs::write(&bad, "{\"text\": \"a\"}\n{\"text\": 1}\n").unwrap();
    let good = dir.path().join("good.jsonl");
    fs::write(&good, "{\"text\": \"b\"}\n").unwrap();
    // A given schema: nothing is read before the first record is asked for.
    let options = JsonlOptions {
        schema: Some(std::sync::Arc::new(arrow_schema::Schema::empty())),
        ..JsonlOptions::default()
    };
    let mut source = JsonlSource::new(&[bad, good], options).unwrap();
    let mut records = 0;
    let error = loop {
        match source.next() {
            Some(Ok(_)) => records += 1,
            Some(Err(error)) => break error.to_string(),
            None => panic!("no error after {records} records"),
        }
    };
    assert!(error.contains("bad.jsonl: line 2"), "{error}");
    for _ in 0..3 {
        assert!(source.next().is_none());
    }
}

#[test]
fn the_megatron_source_does_not_go_on_to_the_next_dataset() {
    let dir = tempfile::tempdir().unwrap();
    // A .bin one byte short: its last sequence reaches past the end.
    fs::copy(fixture("megatron/uint16.idx"), dir.path().join("short.idx")).unwrap();
    let bin = fs::read(fixture("megatron/uint16.bin")).unwrap();
    fs::write(dir.path().join("short.bin"), &bin[..bin.len() - 1]).unwrap();
    let mut source = MegatronSource::new(&[
        fixture("megatron/int32"),
        dir.path().join("short"),
        fixture("megatron/uint16"),
    ]);
    let (keys, error) = read_to_error(&mut source);
    // The five sequences of int32, then the refusal of the second dataset.
    assert_eq!(keys.len(), 5, "{keys:?}");
    assert!(
        error.contains("short.idx") && error.contains("sequence 5"),
        "{error}"
    );
}

#[test]
fn the_hf_disk_source_does_not_go_on_to_the_next_data_file() {
    use bcd_converters::hf_disk_source::{HfDiskOptions, HfDiskSource};
    let dir = tempfile::tempdir().unwrap();
    let photos = fixture("hf_disk/photos");
    for entry in fs::read_dir(&photos).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    // The first data file is garbage; the second, good, holds two rows.
    fs::write(dir.path().join("data-00000-of-00002.arrow"), b"not arrow").unwrap();
    let options = HfDiskOptions {
        columns: TableOptions {
            value_column: "image".into(),
            key_column: Some("id".into()),
            ..Default::default()
        },
        split: None,
    };
    let mut source = HfDiskSource::new(dir.path(), options).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert!(keys.is_empty(), "{keys:?}");
    assert!(error.contains("data-00000-of-00002.arrow"), "{error}");
}

#[test]
fn the_lmdb_source_stops_at_an_entry_it_cannot_decode() {
    use bcd_converters::lmdb_source::{LmdbOptions, LmdbSource, LmdbValue};
    // The tuple fixture read as Caffe Datums: its first entry is no Datum; the
    // other entries and a good environment after it are never read.
    let options = LmdbOptions {
        value: LmdbValue::CaffeDatum,
        ..Default::default()
    };
    let mut source = LmdbSource::new(
        &[
            fixture("lmdb/pickle-tuple.lmdb"),
            fixture("lmdb/caffe-datum"),
        ],
        options,
    );
    let (keys, error) = read_to_error(&mut source);
    assert!(keys.is_empty(), "{keys:?}");
    assert!(
        error.contains("pickle-tuple.lmdb") && error.contains("key \"0\""),
        "{error}"
    );
}

/// A copy of the fixture directory `name` in a temporary directory.
fn copy_dir(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    fs::create_dir(&dir).unwrap();
    for entry in fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    (tmp, dir)
}

#[test]
fn the_mds_source_does_not_go_on_to_the_next_shard() {
    use bcd_converters::mds_source::MdsSource;
    use bcd_converters::sample_shards::ColumnOptions;
    // Three shards of two samples; the second is garbage, the third good.
    let (_tmp, dir) = copy_dir("mds/zstd");
    fs::write(dir.join("shard.00001.mds.zstd"), b"not zstd").unwrap();
    let options = ColumnOptions {
        key_column: Some("id".into()),
        ..Default::default()
    };
    let mut source = MdsSource::open(&[dir], &options).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert_eq!(keys, ["s00", "s01"]);
    assert!(error.contains("shard.00001.mds.zstd"), "{error}");
}

#[test]
fn the_litdata_source_does_not_go_on_to_the_next_chunk() {
    use bcd_converters::litdata_source::LitdataSource;
    use bcd_converters::sample_shards::ColumnOptions;
    // Three chunks of 2, 2 and 1 items; the second is garbage, the third good.
    let (_tmp, dir) = copy_dir("litdata/zstd-sample");
    let chunk = dir.join("chunk-0-1.bin");
    let len = fs::metadata(&chunk).unwrap().len() as usize;
    fs::write(&chunk, vec![0xee; len]).unwrap();
    let options = ColumnOptions {
        key_column: Some("name".into()),
        ..Default::default()
    };
    let mut source = LitdataSource::open(&[dir], &options).unwrap();
    let (keys, error) = read_to_error(&mut source);
    assert_eq!(keys, ["n0", "n1"]);
    assert!(error.contains("chunk-0-1.bin"), "{error}");
}
