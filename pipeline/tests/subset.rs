//! Subsets for evaluation sets (issue 11): the balanced choice from per-record
//! category codes (what `--balance-by FIELD` reads from a stored field: tests/categories.rs), the
//! export of only those records, and a copy into a new dataset that an interrupt
//! leaves uncommitted and removed.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bcd::{CreateOptions, Dataset};
use bcd_converters::tar_export::Target;
use bcd_pipeline::{
    copy_into, export, sample_records, CopyOptions, ExportError, ExportOptions, SampleError,
    SampleOptions,
};

fn keyless(dir: &Path, count: usize) -> Dataset {
    let path = dir.join("ds");
    let mut dataset = Dataset::create(&path, CreateOptions::default()).unwrap();
    let values: Vec<Vec<u8>> = (0..count).map(|i| format!("{i:05}").into_bytes()).collect();
    dataset
        .extend_values(values.iter().map(|v| &v[..]))
        .unwrap();
    Dataset::open(&path).unwrap()
}

/// 90/9/1 classes over `count` records, interleaved.
fn skewed(count: usize) -> Vec<u32> {
    (0..count)
        .map(|i| match i % 100 {
            0..=89 => 0,
            90..=98 => 1,
            _ => 2,
        })
        .collect()
}

fn per_class(records: &[u64], categories: &[u32]) -> [usize; 3] {
    let mut counts = [0; 3];
    for &r in records {
        counts[categories[r as usize] as usize] += 1;
    }
    counts
}

#[test]
fn balanced_samples_take_equal_counts_where_the_classes_allow_and_spread_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = keyless(dir.path(), 1000);
    let categories = skewed(1000);
    let options = |count| SampleOptions { count, seed: 4 };
    // Room for 8 of each (the rare class has 10).
    let records = sample_records(&dataset, &options(24), Some(&categories)).unwrap();
    assert_eq!(per_class(&records, &categories), [8, 8, 8]);
    // The rare class has 10 records: it gives all, the rest is spread (45, 45).
    let records = sample_records(&dataset, &options(100), Some(&categories)).unwrap();
    assert_eq!(per_class(&records, &categories), [45, 45, 10]);
    assert!(records.windows(2).all(|w| w[0] < w[1]), "record order");
    // Deterministic for the seed; another seed, another subset.
    assert_eq!(
        records,
        sample_records(&dataset, &options(100), Some(&categories)).unwrap()
    );
    let other = sample_records(
        &dataset,
        &SampleOptions {
            count: 100,
            seed: 5,
        },
        Some(&categories),
    )
    .unwrap();
    assert_ne!(records, other);
    assert_eq!(per_class(&other, &categories), [45, 45, 10]);
    // An odd remainder goes to a class the seed picks.
    let records = sample_records(&dataset, &options(101), Some(&categories)).unwrap();
    let counts = per_class(&records, &categories);
    assert_eq!(counts[2], 10);
    assert!(
        counts == [46, 45, 10] || counts == [45, 46, 10],
        "{counts:?}"
    );
}

#[test]
fn samples_that_cannot_be_drawn_are_errors_naming_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = keyless(dir.path(), 10);
    let error = sample_records(&dataset, &SampleOptions { count: 11, seed: 0 }, None).unwrap_err();
    assert!(matches!(
        error,
        SampleError::TooLarge {
            asked: 11,
            available: 10,
            ..
        }
    ));
    assert!(error
        .to_string()
        .contains("`sample` asks for 11 records, but"));
    let error = sample_records(
        &dataset,
        &SampleOptions { count: 2, seed: 0 },
        Some(&[0; 9]),
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("9 categories for the 10 records"),
        "{error}"
    );
}

#[test]
fn an_export_of_records_writes_only_those_in_that_order() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = keyless(dir.path(), 50);
    let archive = dir.path().join("out.tar");
    let options = ExportOptions {
        records: Some(vec![3, 17, 40]),
        ..ExportOptions::new(Target::File(archive.clone()))
    };
    let summary = export(&dataset, &options).unwrap();
    assert_eq!(summary.members, 3);
    let mut tar = tar::Archive::new(std::fs::File::open(&archive).unwrap());
    let names: Vec<String> = tar
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["000003", "000017", "000040"]);
}

#[test]
fn an_interrupted_copy_commits_nothing_and_removes_the_new_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = keyless(dir.path(), 20);
    let into = dir.path().join("copy");
    let options = CopyOptions {
        records: None,
        interrupt: Some(Arc::new(AtomicBool::new(true))),
    };
    assert!(matches!(
        copy_into(&dataset, &into, &options),
        Err(ExportError::Interrupted)
    ));
    assert!(!into.exists());
    // Into an empty directory that exists: the directory stays, empty.
    std::fs::create_dir(&into).unwrap();
    assert!(matches!(
        copy_into(&dataset, &into, &options),
        Err(ExportError::Interrupted)
    ));
    assert_eq!(std::fs::read_dir(&into).unwrap().count(), 0);
    let summary = copy_into(&dataset, &into, &CopyOptions::default()).unwrap();
    assert_eq!(summary.records, 20);
    assert_eq!(Dataset::open(&into).unwrap().at(19).unwrap(), &b"00019"[..]);
}

/// A copy keeps a column's field metadata (`bcd.member_ext`, which a writer
/// may set and the sample export reads) along with the column.
#[test]
fn a_copy_keeps_the_field_metadata_of_the_columns() {
    use bcd_fields::{FieldValue, Fields};
    use bcd_pipeline::fields::{DatasetFields, FieldsWriter};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let mut dataset = Dataset::create(&path, CreateOptions::default()).unwrap();
    let mut extend = dataset.begin_extend().unwrap();
    let mut writer = FieldsWriter::begin(extend.dataset()).unwrap();
    writer.set_column_metadata("seg", "bcd.member_ext", "seg.png");
    for i in 0..6u8 {
        extend.push_value(&[i; 10]).unwrap();
        let mut fields = Fields::new();
        fields.push("seg", FieldValue::Binary(vec![i; 3]));
        writer
            .push(0, 10, &fields, &format_args!("value {i}"))
            .unwrap();
        writer.shards_finished(&mut extend).unwrap();
    }
    writer.finish(&mut extend).unwrap();
    extend.commit().unwrap();
    let source = DatasetFields::load(&dataset).unwrap();
    let ext = |fields: &DatasetFields| {
        fields
            .schema
            .field("seg")
            .unwrap()
            .metadata()
            .get("bcd.member_ext")
            .cloned()
    };
    assert_eq!(ext(&source).as_deref(), Some("seg.png"));

    let into = dir.path().join("copy");
    let options = CopyOptions {
        records: Some(vec![1, 4]),
        ..CopyOptions::default()
    };
    copy_into(&dataset, &into, &options).unwrap();
    let copy = Dataset::open(&into).unwrap();
    let fields = DatasetFields::load(&copy).unwrap();
    assert_eq!(ext(&fields), ext(&source));
    let batches = fields.shard_batches(&copy, 0, None).unwrap();
    assert_eq!(
        batches[0].schema().field(0).metadata(),
        source.schema.field("seg").unwrap().metadata()
    );
}
