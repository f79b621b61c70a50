use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Int64Array, Int8Array, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field};
use serde_json::{json, Value};

use super::*;

fn merged(dataset: Value, run: Value) -> Result<MergedMetadata> {
    merge_metadata(dataset.as_object().unwrap(), run.as_object().unwrap())
}

fn remaps(remap: &Remap) -> Vec<(String, Vec<i64>)> {
    remap
        .columns()
        .map(|(c, to)| (c.to_owned(), to.to_vec()))
        .collect()
}

#[test]
fn known_class_names_keep_their_index_and_new_ones_are_appended() {
    let m = merged(
        json!({"class_names": ["cat", "dog"]}),
        json!({"class_names": ["ant", "cat"]}),
    )
    .unwrap();
    assert_eq!(m.metadata["class_names"], json!(["cat", "dog", "ant"]));
    // The run's ant (0) is the dataset's 2, its cat (1) the dataset's 0.
    assert_eq!(remaps(&m.remap), [("label_index".to_owned(), vec![2, 0])]);
}

#[test]
fn a_run_whose_names_extend_the_datasets_in_order_renumbers_nothing() {
    for run in [
        json!(["cat"]),
        json!(["cat", "dog"]),
        json!(["cat", "dog", "owl"]),
    ] {
        let m = merged(
            json!({"class_names": ["cat", "dog"]}),
            json!({"class_names": run}),
        )
        .unwrap();
        assert!(m.remap.is_identity(), "{run}");
    }
    let first = merged(json!({}), json!({"class_names": ["b", "a"]})).unwrap();
    assert_eq!(first.metadata["class_names"], json!(["b", "a"]));
    assert!(first.remap.is_identity());
}

#[test]
fn class_labels_merge_column_by_column() {
    let m = merged(
        json!({"class_labels": {"label": ["cat", "dog"], "size": ["s", "l"]}}),
        json!({"class_labels": {"label": ["dog", "eel"], "colour": ["red"]}}),
    )
    .unwrap();
    assert_eq!(
        m.metadata["class_labels"],
        json!({"label": ["cat", "dog", "eel"], "size": ["s", "l"], "colour": ["red"]})
    );
    assert_eq!(remaps(&m.remap), [("label".to_owned(), vec![1, 2])]);
}

#[test]
fn huggingface_class_label_features_describe_the_merged_names() {
    let hf = |names: Value, description: &str| {
        json!({"info": {"description": description, "features": {
            "image": {"_type": "Image"},
            "label": {"_type": "ClassLabel", "names": names, "num_classes": 2},
        }}})
    };
    let m = merged(
        json!({"huggingface": hf(json!(["cat", "dog"]), "pets")}),
        json!({"huggingface": hf(json!(["ant", "cat"]), "pets")}),
    )
    .unwrap();
    let label = &m.metadata["huggingface"]["info"]["features"]["label"];
    assert_eq!(label["names"], json!(["cat", "dog", "ant"]));
    assert_eq!(label["num_classes"], 3);
    // Names the dataset's ClassLabel lacked are the run's.
    let named = merged(
        json!({"huggingface": {"label": {"_type": "ClassLabel", "num_classes": 2}}}),
        json!({"huggingface": {"label": {"_type": "ClassLabel", "names": ["a", "b", "c"]}}}),
    )
    .unwrap();
    assert_eq!(
        named.metadata["huggingface"]["label"],
        json!({"_type": "ClassLabel", "names": ["a", "b", "c"], "num_classes": 3})
    );
    // A feature only the run has is added.
    let more = merged(
        json!({"huggingface": {"info": {"features": {"a": {"_type": "Value", "dtype": "int64"}}}}}),
        json!({"huggingface": {"info": {"features": {"b": {"_type": "Value", "dtype": "string"}}}}}),
    )
    .unwrap();
    assert_eq!(
        more.metadata["huggingface"]["info"]["features"],
        json!({"a": {"_type": "Value", "dtype": "int64"}, "b": {"_type": "Value", "dtype": "string"}})
    );
    // Anything else that differs is refused, naming where.
    let err = merged(
        json!({"huggingface": hf(json!(["cat"]), "pets")}),
        json!({"huggingface": hf(json!(["cat"]), "insects")}),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "metadata \"huggingface.info.description\": \"insects\" conflicts with \"pets\" already in the dataset; a dataset's metadata is not replaced by an append"
    );
}

#[test]
fn a_conflicting_value_is_refused_naming_the_key_and_both_values() {
    let err = merged(
        json!({"description": "pets", "info": {"licence": "cc0", "year": 2024}}),
        json!({"description": "pets", "info": {"licence": "cc-by"}}),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "metadata \"info.licence\": \"cc-by\" conflicts with \"cc0\" already in the dataset; a dataset's metadata is not replaced by an append"
    );
    let err = merged(json!({"class_names": ["a"]}), json!({"class_names": "a"})).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("metadata \"class_names\": \"a\" conflicts with [\"a\"]"),
        "{err}"
    );
    // Equal values, and keys only one side has, are kept.
    let m = merged(
        json!({"description": "pets", "a": 1}),
        json!({"description": "pets", "b": 2}),
    )
    .unwrap();
    assert_eq!(
        Value::Object(m.metadata),
        json!({"description": "pets", "a": 1, "b": 2})
    );
}

#[test]
fn the_first_sources_value_layout_stays_the_datasets() {
    let m = merged(
        json!({"value": {"column": "image", "hf_struct": true, "key_column": "id"}}),
        json!({"value": {"column": "img", "hf_struct": false}}),
    )
    .unwrap();
    assert_eq!(
        m.metadata["value"],
        json!({"column": "image", "hf_struct": true, "key_column": "id"})
    );
}

#[test]
fn derived_fields_unite_and_sources_accumulate() {
    let m = merged(
        json!({"derived_fields": ["json.w"], "sources": [{"paths": ["a"]}]}),
        json!({"derived_fields": ["json.h", "json.w"], "sources": [{"paths": ["b"]}]}),
    )
    .unwrap();
    assert_eq!(m.metadata["derived_fields"], json!(["json.w", "json.h"]));
    assert_eq!(
        m.metadata["sources"],
        json!([{"paths": ["a"]}, {"paths": ["b"]}])
    );
}

fn remap_of(column: &str, to: Vec<i64>) -> Remap {
    let mut remap = Remap::default();
    remap.add(column, to);
    remap
}

#[test]
fn a_batch_is_renumbered_by_name_keeping_nulls_and_negative_indices() {
    let batch = RecordBatch::try_from_iter([
        (
            "label",
            Arc::new(StringArray::from(vec!["ant", "cat", "x", "y"])) as ArrayRef,
        ),
        (
            "label_index",
            Arc::new(Int64Array::from(vec![Some(0), Some(1), None, Some(-1)])) as ArrayRef,
        ),
    ])
    .unwrap();
    let out = remap_of("label_index", vec![2, 0])
        .apply(&batch, "shard 3")
        .unwrap();
    let got = out.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(
        got.iter().collect::<Vec<_>>(),
        [Some(2), Some(0), None, Some(-1)]
    );
    assert_eq!(out.column(0), batch.column(0));
}

#[test]
fn an_index_beyond_the_runs_names_or_the_columns_type_is_refused() {
    let batch = RecordBatch::try_from_iter([(
        "label_index",
        Arc::new(Int64Array::from(vec![0, 5])) as ArrayRef,
    )])
    .unwrap();
    let err = remap_of("label_index", vec![2, 0])
        .apply(&batch, "shard 3")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "shard 3, row 1: class index 5 of column \"label_index\" is not among the 2 class names given with it"
    );
    // An Int8 column cannot hold index 200: refused, not wrapped.
    let narrow =
        RecordBatch::try_from_iter([("label", Arc::new(Int8Array::from(vec![0])) as ArrayRef)])
            .unwrap();
    let err = remap_of("label", vec![200])
        .apply(&narrow, "part p")
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("part p: class indices of column \"label\""),
        "{err}"
    );
}

#[test]
fn a_nested_class_label_is_renumbered_through_structs_and_lists() {
    // `datasets` writes a Sequence of dicts as a struct of lists, a List of
    // dicts as a list of structs: both reach `objects.category`.
    let category = Field::new("category", DataType::Int64, true);
    let item = Arc::new(Field::new("item", DataType::Int64, true));
    let lists = ListArray::new(
        item,
        OffsetBuffer::from_lengths([2, 0, 1]),
        Arc::new(Int64Array::from(vec![0, 1, 1])),
        None,
    );
    let struct_of_lists = StructArray::from(vec![(
        Arc::new(Field::new("category", lists.data_type().clone(), true)),
        Arc::new(lists) as ArrayRef,
    )]);
    let structs = StructArray::from(vec![(
        Arc::new(category.clone()),
        Arc::new(Int64Array::from(vec![1, 0, 0])) as ArrayRef,
    )]);
    let list_of_structs = ListArray::new(
        Arc::new(Field::new("item", structs.data_type().clone(), true)),
        OffsetBuffer::from_lengths([1, 2]),
        Arc::new(structs),
        None,
    );
    let remap = remap_of("objects.category", vec![2, 0]);
    let rows = |batch: &RecordBatch| -> Value {
        (0..batch.num_rows())
            .map(|r| Value::Object(crate::json_row::row_to_json(batch, r)))
            .collect()
    };
    let a =
        RecordBatch::try_from_iter([("objects", Arc::new(struct_of_lists) as ArrayRef)]).unwrap();
    assert_eq!(
        rows(&remap.apply(&a, "s").unwrap()),
        json!([
            {"objects": {"category": [2, 0]}},
            {"objects": {"category": []}},
            {"objects": {"category": [0]}}
        ])
    );
    let b =
        RecordBatch::try_from_iter([("objects", Arc::new(list_of_structs) as ArrayRef)]).unwrap();
    assert_eq!(
        rows(&remap.apply(&b, "s").unwrap()),
        json!([
            {"objects": [{"category": 0}]},
            {"objects": [{"category": 2}, {"category": 2}]}
        ])
    );
    // A batch without the column is left as it is.
    let other =
        RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![7])) as ArrayRef)])
            .unwrap();
    assert_eq!(remap.apply(&other, "s").unwrap(), other);
}

#[test]
fn metadata_numbers_that_json_cannot_keep_exactly_are_refused() {
    let err = metadata_from_json(r#"{"id": 18446744073709551617}"#, "metadata").unwrap_err();
    assert_eq!(
        err.to_string(),
        "metadata: the integer 18446744073709551617 is outside -2^63 .. 2^64: JSON readers would keep it only approximately; store it as a string"
    );
    assert!(metadata_from_json(r#"{"a": [{"b": -9223372036854775809}]}"#, "m").is_err());
    let ok = metadata_from_json(
        r#"{"max": 18446744073709551615, "min": -9223372036854775808, "f": 0.1, "e": 1e300, "s": "18446744073709551617 \" 99999999999999999999"}"#,
        "m",
    )
    .unwrap();
    assert_eq!(ok["max"], json!(u64::MAX));
    assert_eq!(ok["min"], json!(i64::MIN));
    assert_eq!(ok["f"], json!(0.1));
    assert!(metadata_from_json("[1]", "m").is_err());
    assert!(metadata_from_json("{", "m").is_err());
}
