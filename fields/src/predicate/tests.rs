use std::sync::Arc;

use arrow_array::builder::{Int64Builder, ListBuilder, StringDictionaryBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, Int8Array, NullArray, RecordBatch,
    StringArray, StructArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Fields};

use super::*;

/// Six rows of every kind of column the sources produce.
fn batch() -> RecordBatch {
    let mut dictionary = StringDictionaryBuilder::<Int32Type>::new();
    for v in [
        Some("cat"),
        Some("dog"),
        None,
        Some("cat"),
        Some("ant"),
        Some("dog"),
    ] {
        dictionary.append_option(v);
    }
    let mut tags = ListBuilder::new(Int64Builder::new());
    for row in [
        Some(vec![1, 2]),
        Some(vec![]),
        None,
        Some(vec![3]),
        Some(vec![2, 2]),
        Some(vec![7]),
    ] {
        match row {
            Some(values) => {
                for v in values {
                    tags.values().append_value(v);
                }
                tags.append(true);
            }
            None => tags.append(false),
        }
    }
    let score = Arc::new(Float64Array::from(vec![
        Some(0.5),
        Some(1.5),
        None,
        Some(-2.0),
        Some(0.5),
        Some(9.0),
    ])) as ArrayRef;
    let meta = StructArray::new(
        Fields::from(vec![Field::new("score", DataType::Float64, true)]),
        vec![score.clone()],
        Some(vec![true, true, true, false, true, true].into()),
    );
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "n",
            Arc::new(Int64Array::from(vec![
                Some(1),
                Some(5),
                None,
                Some(-3),
                Some(5),
                Some(100),
            ])),
        ),
        ("small", Arc::new(Int8Array::from(vec![1, 2, 3, 4, 5, 6]))),
        (
            "big",
            Arc::new(UInt64Array::from(vec![0, 1, u64::MAX, 3, 4, 5])),
        ),
        ("score", score),
        (
            "caption",
            Arc::new(StringArray::from(vec![
                Some("a dog"),
                Some("A Dog!"),
                None,
                Some("cat\\dog"),
                Some("50%"),
                Some("x_y"),
            ])),
        ),
        ("label", Arc::new(dictionary.finish())),
        (
            "ok",
            Arc::new(BooleanArray::from(vec![
                Some(true),
                Some(false),
                None,
                Some(true),
                Some(false),
                Some(true),
            ])),
        ),
        ("tags", Arc::new(tags.finish())),
        ("meta", Arc::new(meta)),
        ("nothing", Arc::new(NullArray::new(6))),
        (
            "json.caption",
            Arc::new(StringArray::from(vec!["p", "q", "p", "q", "p", "q"])),
        ),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn rows(text: &str) -> Vec<usize> {
    let batch = batch();
    let predicate =
        Predicate::compile(text, &batch.schema()).unwrap_or_else(|e| panic!("{text}: {e}"));
    predicate.selection(&batch).unwrap().set_indices().collect()
}

fn error(text: &str) -> String {
    let batch = batch();
    let error = Predicate::compile(text, &batch.schema()).unwrap_err();
    assert!(error.is_usage(), "{error}");
    error.to_string()
}

#[test]
fn comparisons_with_sql_nulls() {
    assert_eq!(rows("n = 5"), [1, 4]);
    assert_eq!(rows("n <> 5"), [0, 3, 5]);
    assert_eq!(rows("n != 5"), [0, 3, 5]);
    assert_eq!(rows("5 < n"), [5]);
    assert_eq!(rows("n >= -3 AND n <= 1"), [0, 3]);
    assert_eq!(rows("n BETWEEN 1 AND 5"), [0, 1, 4]);
    assert_eq!(rows("n NOT BETWEEN 1 AND 5"), [3, 5]);
    assert_eq!(rows("NOT (n = 5)"), [0, 3, 5]);
    assert_eq!(rows("n = 5 OR n IS NULL"), [1, 2, 4]);
    assert_eq!(rows("n IN (1, 100)"), [0, 5]);
    assert_eq!(rows("n NOT IN (1, 100)"), [1, 3, 4]);
    // A NULL in the list makes NOT IN unknown everywhere, IN true only on a match.
    assert_eq!(rows("n IN (1, NULL)"), [0]);
    assert_eq!(rows("n NOT IN (1, NULL)"), Vec::<usize>::new());
    assert_eq!(rows("n = NULL"), Vec::<usize>::new());
    assert_eq!(rows("n > 2.5"), [1, 4, 5]);
    assert_eq!(rows("1 = 1"), [0, 1, 2, 3, 4, 5]);
    assert_eq!(rows("TRUE AND n = 1"), [0]);
}

#[test]
fn integers_compare_exactly_at_every_width() {
    assert_eq!(rows("small > 300"), Vec::<usize>::new());
    assert_eq!(rows("small < 300"), [0, 1, 2, 3, 4, 5]);
    assert_eq!(rows("small >= -1000 AND small = 3"), [2]);
    assert_eq!(rows("big = 18446744073709551615"), [2]);
    assert_eq!(rows("big > -1"), [0, 1, 2, 3, 4, 5]);
    assert_eq!(rows("big > small"), [2]);
    assert_eq!(rows("n = small"), [0, 4]);
    assert_eq!(rows("score < n"), [0, 1, 4, 5]);
}

#[test]
fn text_dictionaries_like_and_booleans() {
    assert_eq!(rows("label = 'cat'"), [0, 3]);
    assert_eq!(rows("label IN ('ant', 'dog')"), [1, 4, 5]);
    assert_eq!(rows("label > 'b'"), [0, 1, 3, 5]);
    assert_eq!(rows("caption LIKE '%dog%'"), [0, 3]);
    assert_eq!(rows("caption ILIKE '%dog%'"), [0, 1, 3]);
    assert_eq!(rows("caption NOT LIKE '%dog%'"), [1, 4, 5]);
    // Without ESCAPE a backslash is itself; with ESCAPE '\' it escapes.
    assert_eq!(rows(r"caption LIKE 'cat\dog'"), [3]);
    assert_eq!(rows(r"caption LIKE '50\%' ESCAPE '\'"), [4]);
    assert_eq!(rows(r"caption LIKE 'x\_y' ESCAPE '\'"), [5]);
    assert_eq!(rows("caption LIKE 'x_y'"), [5]);
    assert_eq!(rows("label LIKE 'c%'"), [0, 3]);
    assert_eq!(rows("ok"), [0, 3, 5]);
    assert_eq!(rows("NOT ok"), [1, 4]);
    assert_eq!(rows("ok = FALSE"), [1, 4]);
    assert_eq!(rows("ok IS NOT TRUE"), [1, 2, 4]);
    assert_eq!(rows("ok IS FALSE"), [1, 4]);
    assert_eq!(rows("(n = 5) IS NULL"), [2]);
    assert_eq!(rows("json.caption = 'p'"), [0, 2, 4]);
    assert_eq!(rows("\"json.caption\" = 'q'"), [1, 3, 5]);
    assert_eq!(rows("CAPTION = 'a dog'"), [0]);
}

#[test]
fn lists_structs_and_nulls() {
    assert_eq!(rows("array_has(tags, 2)"), [0, 4]);
    assert_eq!(rows("list_contains(tags, 7)"), [5]);
    assert_eq!(rows("NOT array_has(tags, 2)"), [1, 3, 5]);
    assert_eq!(rows("cardinality(tags) = 0"), [1]);
    assert_eq!(rows("cardinality(tags) >= 2"), [0, 4]);
    assert_eq!(rows("tags IS NULL"), [2]);
    assert_eq!(rows("meta.score > 0"), [0, 1, 4, 5]);
    // The struct is null in row 3: so is its child.
    assert_eq!(rows("meta.score IS NULL"), [2, 3]);
    assert_eq!(rows("meta IS NULL"), [3]);
    assert_eq!(rows("nothing IS NULL"), [0, 1, 2, 3, 4, 5]);
    assert_eq!(rows("nothing = 1 OR n = 1"), [0]);
    assert_eq!(rows("NOT nothing = 1"), Vec::<usize>::new());
}

#[test]
fn mistakes_name_the_field_or_the_construct() {
    let missing = error("lable = 'cat'");
    assert!(
        missing.contains("no field \"lable\"") && missing.contains("label"),
        "{missing}"
    );
    let child = error("meta.scor > 1");
    assert!(
        child.contains("meta.scor") && child.contains("score"),
        "{child}"
    );
    let text = error("label = 3");
    assert!(
        text.contains("field \"label\": is Utf8; it cannot be compared with the integer 3"),
        "{text}"
    );
    let number = error("n = 'five'");
    assert!(number.contains("field \"n\": is Int64"), "{number}");
    let list = error("tags = 1");
    assert!(
        list.contains("field \"tags\"") && list.contains("array_has(tags, value)"),
        "{list}"
    );
    let columns = error("caption = n");
    assert!(
        columns.contains("field \"caption\": is Utf8; it cannot be compared with field \"n\""),
        "{columns}"
    );
    assert!(error("n").contains("field \"n\": is Int64, not a boolean"));
    assert!(error("n LIKE 'x'").contains("field \"n\": is Int64; LIKE tests text"));
    assert!(error("n + 1 > 2").contains("the operator + is not supported"));
    assert!(error("upper(caption) = 'A'").contains("the function upper is not supported"));
    assert!(error("n = 1 garbage").contains("invalid expression"));
    assert!(error("n = ").contains("invalid expression"));
    assert!(error("").contains("invalid expression"));
    assert!(error("n = 1; DROP TABLE x").contains("invalid expression"));
    assert!(error(&"(".repeat(200)).contains("invalid expression"));
}

/// A chain of thousands of ORs (what an IN list written out looks like)
/// compiles and runs without deep recursion.
#[test]
fn long_chains_stay_flat() {
    let text = (0..5000)
        .map(|i| format!("n = {i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    assert!(text.len() < MAX_PREDICATE_BYTES);
    assert_eq!(rows(&text), [0, 1, 4, 5]);
    let too_long = "n = 1 AND ".repeat(MAX_PREDICATE_BYTES / 8);
    assert!(error(&too_long).contains("more than 65536"));
}

#[test]
fn only_the_columns_used_are_asked_for() {
    let batch = batch();
    let predicate =
        Predicate::compile("meta.score > n AND label = 'x' OR n = 1", &batch.schema()).unwrap();
    assert_eq!(predicate.columns(), ["meta", "n", "label"]);
    // A batch of those columns alone is enough.
    let narrow = batch.project(&[8, 0, 5]).unwrap();
    assert_eq!(
        predicate
            .selection(&narrow)
            .unwrap()
            .set_indices()
            .collect::<Vec<_>>(),
        [0]
    );
}
