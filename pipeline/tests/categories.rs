//! Each record's category from a stored field (issue 21): the codes
//! `--balance-by` and `bcd.torch`'s `balance_by=` share, over shards with and
//! without fields.

use bcd::{CreateOptions, Dataset};
use bcd_fields::{FieldValue, Fields};
use bcd_pipeline::fields::FieldsWriter;
use bcd_pipeline::{field_categories, CategoriesError};

/// Records with the labels given (`None`: no field), in shards of two records,
/// then two records appended without fields, as the reference writes them.
fn labelled(dir: &std::path::Path, labels: &[Option<&str>]) -> Dataset {
    let path = dir.join("ds");
    let mut dataset = Dataset::create(
        &path,
        CreateOptions {
            max_shard_size: 16,
            ..CreateOptions::default()
        },
    )
    .unwrap();
    let mut extend = dataset.begin_extend().unwrap();
    let mut writer = FieldsWriter::begin(extend.dataset()).unwrap();
    for (i, label) in labels.iter().enumerate() {
        extend.push_value(&[i as u8; 8]).unwrap();
        let mut fields = Fields::new();
        if let Some(label) = label {
            fields.push("label", FieldValue::String((*label).to_owned()));
        }
        fields.push("score", FieldValue::Float64(i as f64));
        writer
            .push(0, 8, &fields, &format_args!("record {i}"))
            .unwrap();
        writer.shards_finished(&mut extend).unwrap();
    }
    writer.finish(&mut extend).unwrap();
    extend.commit().unwrap();
    dataset
        .extend_values([&[9u8; 8][..], &[9u8; 8][..]])
        .unwrap();
    Dataset::open(&path).unwrap()
}

#[test]
fn classes_are_numbered_by_first_appearance_and_nulls_are_one_class_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = labelled(
        dir.path(),
        &[Some("dog"), Some("cat"), None, Some("dog"), Some("owl")],
    );
    assert!(dataset.shards() > 2, "the field spans shards");
    // The record without a label and the two the reference wrote are nulls.
    assert_eq!(
        field_categories(&dataset, "label").unwrap(),
        [0, 1, 3, 0, 2, 3, 3]
    );
}

#[test]
fn a_missing_field_or_one_without_classes_is_an_error_naming_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = labelled(dir.path(), &[Some("a"), Some("b")]);
    let name = dataset.path().display().to_string();
    let error = field_categories(&dataset, "kind").unwrap_err();
    assert!(matches!(error, CategoriesError::NoField { .. }));
    assert_eq!(
        error.to_string(),
        format!("{name} has no field \"kind\" for `balance_by` (its fields: label, score)")
    );
    let error = field_categories(&dataset, "score").unwrap_err();
    assert!(
        error.to_string().starts_with(&format!(
            "field \"score\" of {name} has type Float64, which has no categories"
        )),
        "{error}"
    );
}
