//! Property tests: schema unification commutes and widens, shard files round
//! trip, a shard written batch by batch (through memory or a scratch file)
//! reads back as the one batch of all its records with the same statistics,
//! merged statistics are the statistics of the concatenation, and a column's
//! statistics skip its nulls and a slice's offset.

use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use bcd_fields::{
    align, decode_shard, encode_shard, row_to_json, BatchBuilder, DatasetSchema, FieldValue,
    Fields, Fingerprint, ShardBatches, ShardFileWriter, ShardStats,
};
use proptest::prelude::*;

fn int_type() -> impl Strategy<Value = DataType> {
    prop_oneof![
        Just(DataType::Int8),
        Just(DataType::Int16),
        Just(DataType::Int32),
        Just(DataType::Int64),
        Just(DataType::UInt8),
        Just(DataType::UInt16),
        Just(DataType::UInt32),
        Just(DataType::UInt64),
    ]
}

fn data_type() -> impl Strategy<Value = DataType> {
    let leaf = prop_oneof![
        int_type(),
        Just(DataType::Null),
        Just(DataType::Utf8),
        Just(DataType::Float64)
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            inner
                .clone()
                .prop_map(|t| DataType::List(Arc::new(Field::new("item", t, true)))),
            proptest::collection::vec((prop_oneof![Just("a"), Just("b"), Just("c")], inner), 1..3)
                .prop_map(|children| {
                    let mut fields: Vec<Field> = Vec::new();
                    for (n, t) in children {
                        if !fields.iter().any(|f| f.name() == n) {
                            fields.push(Field::new(n, t, true));
                        }
                    }
                    DataType::Struct(fields.into())
                }),
        ]
    })
}

/// `t` with struct children sorted by name (unify keeps the existing side's
/// order, so the two orders of unification differ only there).
fn normalized(t: &DataType) -> DataType {
    match t {
        DataType::List(f) => DataType::List(Arc::new(Field::new(
            f.name(),
            normalized(f.data_type()),
            f.is_nullable(),
        ))),
        DataType::Struct(fields) => {
            let mut v: Vec<Field> = fields
                .iter()
                .map(|f| Field::new(f.name(), normalized(f.data_type()), f.is_nullable()))
                .collect();
            v.sort_by(|a, b| a.name().cmp(b.name()));
            DataType::Struct(v.into())
        }
        t => t.clone(),
    }
}

fn unify(a: &DataType, b: &DataType) -> Option<DataType> {
    let mut schema = DatasetSchema::new();
    schema
        .unify(&Schema::new(vec![Field::new("f", a.clone(), true)]))
        .unwrap();
    schema
        .unify(&Schema::new(vec![Field::new("f", b.clone(), true)]))
        .ok()?;
    Some(schema.field("f").unwrap().data_type().clone())
}

/// `default` cases, unless `PROPTEST_CASES` asks for another number (`make soak`).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(512), ..ProptestConfig::default() })]

    #[test]
    fn unify_commutes_and_widens(a in data_type(), b in data_type()) {
        let ab = unify(&a, &b);
        let ba = unify(&b, &a);
        prop_assert_eq!(ab.as_ref().map(normalized), ba.as_ref().map(normalized));
        if let Some(u) = ab {
            // The result holds both: unifying either into it changes nothing.
            prop_assert_eq!(unify(&u, &a), Some(u.clone()));
            prop_assert_eq!(unify(&u, &b), Some(u.clone()));
        }
        prop_assert_eq!(unify(&a, &a), Some(a.clone()));
    }

    #[test]
    fn integer_widening_keeps_every_value(a in int_type(), b in int_type(), values in proptest::collection::vec(any::<i64>(), 0..20)) {
        let Some(wide) = unify(&a, &b) else { return Ok(()) };
        // The values that fit the narrow type (a cast gives null for the others).
        let wide64: Arc<dyn Array> = Arc::new(arrow_array::Int64Array::from(values));
        let narrow: Arc<dyn Array> = arrow_cast::cast(&wide64, &a).unwrap();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![Field::new("f", a.clone(), true)])), vec![narrow.clone()]).unwrap();
        let schema = DatasetSchema::from_fields([Arc::new(Field::new("f", wide.clone(), true))]).unwrap();
        let out = align(&[batch], &schema).unwrap();
        let back = arrow_cast::cast(out[0].column(0), &a).unwrap();
        prop_assert_eq!(out[0].column(0).data_type(), &wide);
        prop_assert_eq!(back.as_ref(), narrow.as_ref());
    }
}

/// A dynamic value of one of a few shapes (`kind`, below 8), so columns
/// mostly agree.
fn value(kind: u8) -> BoxedStrategy<FieldValue> {
    let v = match kind {
        0 => any::<bool>().prop_map(FieldValue::Bool).boxed(),
        // Int64 values and rows of an Arrow Int32 array: a column narrower in
        // its first records than in later ones.
        1 => prop_oneof![
            (-50i64..50).prop_map(FieldValue::Int64),
            (0usize..8).prop_map(|row| {
                let array = arrow_array::Int32Array::from((-4..4).collect::<Vec<i32>>());
                FieldValue::Arrow(Arc::new(array), row)
            }),
        ]
        .boxed(),
        2 => prop_oneof![any::<f64>(), Just(f64::NAN), Just(-0.0)]
            .prop_map(FieldValue::Float64)
            .boxed(),
        3 => "[a-d]{0,3}|[é中a]{0,8}"
            .prop_map(FieldValue::String)
            .boxed(),
        4 => proptest::collection::vec(any::<u8>(), 0..6)
            .prop_map(FieldValue::Binary)
            .boxed(),
        5 => proptest::collection::vec(
            prop_oneof![
                Just(FieldValue::Null),
                (0i64..5).prop_map(FieldValue::Int64)
            ],
            0..4,
        )
        .prop_map(FieldValue::List)
        .boxed(),
        6 => (any::<bool>(), "[xy]{0,2}")
            .prop_map(|(b, s)| {
                FieldValue::Struct(vec![
                    ("flag".into(), FieldValue::Bool(b)),
                    ("tag".into(), FieldValue::String(s)),
                ])
            })
            .boxed(),
        // Structs whose `tag` child only some records give (a shard's early
        // batches then lack it).
        _ => (any::<bool>(), proptest::option::of("[xy]{0,2}"))
            .prop_map(|(b, s)| {
                let mut children = vec![("flag".into(), FieldValue::Bool(b))];
                if let Some(s) = s {
                    children.push(("tag".into(), FieldValue::String(s)));
                }
                FieldValue::Struct(children)
            })
            .boxed(),
    };
    prop_oneof![1 => Just(FieldValue::Null), 4 => v].boxed()
}

/// A record over up to 4 columns, column `c` of kind `kinds[c]`, each present
/// or not.
fn record(kinds: &[u8]) -> impl Strategy<Value = Fields> {
    (
        value(kinds[0]),
        value(kinds[1]),
        value(kinds[2]),
        value(kinds[3]),
        proptest::collection::vec(any::<bool>(), 4),
    )
        .prop_map(|(a, b, c, d, present)| {
            let mut f = Fields::new();
            for (i, v) in [a, b, c, d].into_iter().enumerate() {
                if present[i] {
                    f.push(format!("c{i}"), v);
                }
            }
            f
        })
}

/// Up to `max` records whose columns have one kind each (below `kinds`).
fn records(max: usize, kinds: u8) -> impl Strategy<Value = Vec<Fields>> {
    proptest::collection::vec(0..kinds, 4)
        .prop_flat_map(move |kinds| proptest::collection::vec(record(&kinds), 0..max))
}

/// Two shards' records, with the same kinds of columns (of the first seven:
/// structs whose children differ between shards hash differently, so their
/// sketches merge to more than the concatenation's; FORMAT.md).
fn two_shards(max: usize) -> impl Strategy<Value = (Vec<Fields>, Vec<Fields>)> {
    proptest::collection::vec(0..7u8, 4).prop_flat_map(move |kinds| {
        (
            proptest::collection::vec(record(&kinds), 0..max),
            proptest::collection::vec(record(&kinds), 0..max),
        )
    })
}

fn build(records: &[Fields]) -> RecordBatch {
    let mut b = BatchBuilder::new();
    for (i, r) in records.iter().enumerate() {
        b.push(r, &format!("record {i}")).unwrap();
    }
    b.finish().unwrap()
}

fn stats_of(batch: &RecordBatch) -> ShardStats {
    let mut s = ShardStats::new();
    for i in 0..batch.num_rows() as u64 {
        s.add_record(i % 3, i * 5 % 17, i * 131 % 1000);
    }
    s.add_fields(batch).unwrap();
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    #[test]
    fn shard_files_round_trip(records in records(40, 8)) {
        let batch = build(&records);
        let fp = Fingerprint { records: batch.num_rows() as u64, data_len: 1, index_xxh3: 2, edges_xxh3: 3 };
        let bytes = encode_shard(&batch, &fp).unwrap();
        let back = decode_shard(Arc::new(bytes), &fp, "f").unwrap().unwrap();
        let rows: usize = back.iter().map(|b| b.num_rows()).sum();
        prop_assert_eq!(rows, batch.num_rows());
        if let Some(first) = back.first() {
            prop_assert_eq!(first.columns(), batch.columns());
            let (s1, s2) = (first.schema(), batch.schema());
            prop_assert_eq!(s1.fields(), s2.fields());
            for row in 0..batch.num_rows() {
                prop_assert_eq!(row_to_json(first, row), row_to_json(&batch, row));
            }
        }
    }

    #[test]
    fn a_shard_written_batch_by_batch_reads_as_one_batch(
        records in records(60, 8),
        batch_rows in 1usize..9,
        spill in any::<bool>(),
    ) {
        let one = build(&records);
        let fp = Fingerprint { records: one.num_rows() as u64, data_len: 1, index_xxh3: 2, edges_xxh3: 3 };
        let one_stats = stats_of(&one);

        // As a writer does: batches of at most `batch_rows` rows built as
        // records arrive, kept until the shard ends (in a scratch file when
        // `spill`), then written as the shard's columns.
        let dir = tempfile::tempdir().unwrap();
        let mut builder = BatchBuilder::new();
        let mut shard = ShardBatches::with_budget(dir.path(), if spill { 0 } else { usize::MAX });
        for (i, r) in records.iter().enumerate() {
            builder.push(r, &format!("record {i}")).unwrap();
            if builder.len() >= batch_rows {
                shard.push(builder.take(batch_rows).unwrap()).unwrap();
            }
        }
        shard.push(builder.take(usize::MAX).unwrap()).unwrap();
        prop_assert_eq!(shard.spilled(), spill && !records.is_empty());
        let columns = builder.shard_fields(|name| shard.has_column(name));
        let schema = one.schema();
        prop_assert_eq!(&columns, schema.fields());
        let mut stats = ShardStats::new();
        for i in 0..one.num_rows() as u64 {
            stats.add_record(i % 3, i * 5 % 17, i * 131 % 1000);
        }
        let mut writer = ShardFileWriter::try_new(Vec::new(), &columns, &fp).unwrap();
        for batch in shard.into_batches(&columns).unwrap() {
            let batch = batch.unwrap();
            prop_assert!(batch.num_rows() <= batch_rows);
            stats.add_fields(&batch).unwrap();
            writer.write(&batch).unwrap();
        }
        let bytes = writer.finish().unwrap();

        let back = decode_shard(Arc::new(bytes), &fp, "f").unwrap().unwrap();
        prop_assert_eq!(back.len(), one.num_rows().div_ceil(batch_rows));
        for batch in &back {
            let read = batch.schema();
            prop_assert_eq!(read.fields(), schema.fields());
        }
        let whole = arrow_select::concat::concat_batches(&schema, &back).unwrap();
        prop_assert_eq!(whole.columns(), one.columns());
        for row in 0..one.num_rows() {
            prop_assert_eq!(row_to_json(&whole, row), row_to_json(&one, row));
        }
        prop_assert_eq!(&stats, &one_stats);
        prop_assert_eq!(stats.encode(), one_stats.encode());
    }

    #[test]
    fn merged_statistics_are_those_of_the_concatenation((a, b) in two_shards(30)) {
        let (ba, bb) = (build(&a), build(&b));
        let mut schema = DatasetSchema::new();
        schema.unify(&ba.schema()).unwrap();
        schema.unify(&bb.schema()).unwrap();
        let mut aligned = align(std::slice::from_ref(&ba), &schema).unwrap();
        aligned.extend(align(std::slice::from_ref(&bb), &schema).unwrap());
        let whole = arrow_select::concat::concat_batches(&schema.arrow_schema(), &aligned).unwrap();

        let mut merged = stats_of(&ba);
        let sb = stats_of(&bb);
        merged.merge(&sb).unwrap();
        // The concatenation's records: the same sizes in the same order.
        let mut expected = ShardStats::new();
        for batch in [&ba, &bb] {
            for i in 0..batch.num_rows() as u64 {
                expected.add_record(i % 3, i * 5 % 17, i * 131 % 1000);
            }
        }
        expected.add_fields(&whole).unwrap();
        // Columns absent from both shards' batches exist in neither.
        prop_assert_eq!(&merged, &expected);
        // And the JSON of each side decodes to what it encoded.
        prop_assert_eq!(&ShardStats::decode(&merged.encode(), "m").unwrap(), &merged);
    }
}

/// A column of one of the statistics' kinds: `kind` picks Int64, Int32,
/// UInt64, Float64 (NaN, both zeros and infinities among the values), Utf8,
/// LargeUtf8 or Utf8View; `None` is a null.
fn stats_column(kind: u8, values: &[Option<i64>]) -> arrow_array::ArrayRef {
    use arrow_array::*;
    let float = |v: i64| match v.rem_euclid(9) {
        0 => f64::NAN,
        1 => -0.0,
        2 => 0.0,
        3 => f64::NEG_INFINITY,
        _ => v as f64 / 4.0,
    };
    let string = |v: i64| format!("s{}", v.rem_euclid(50));
    let it = values.iter().copied();
    match kind % 7 {
        0 => Arc::new(Int64Array::from_iter(it)),
        1 => Arc::new(Int32Array::from_iter(it.map(|v| v.map(|v| v as i32)))),
        2 => Arc::new(UInt64Array::from_iter(it.map(|v| v.map(|v| v as u64)))),
        3 => Arc::new(Float64Array::from_iter(it.map(|v| v.map(float)))),
        4 => Arc::new(StringArray::from_iter(it.map(|v| v.map(string)))),
        5 => Arc::new(LargeStringArray::from_iter(it.map(|v| v.map(string)))),
        _ => Arc::new(StringViewArray::from_iter(it.map(|v| v.map(string)))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(512), ..ProptestConfig::default() })]

    /// A column's statistics, over a slice of an array with nulls, are those of
    /// its valid values alone in an array of no nulls (count, min, max, exact
    /// counts and sketch), and its min and max are those found value by value
    /// (NaN never one, strings by their bytes).
    #[test]
    fn column_statistics_skip_nulls_and_slices(
        kind in 0u8..7,
        values in proptest::collection::vec(proptest::option::weighted(0.8, -3000i64..3000), 0..300),
        cut in 0usize..20,
    ) {
        let whole = stats_column(kind, &values);
        let cut = cut.min(values.len());
        let sliced = whole.slice(cut, values.len() - cut);
        let valid: Vec<Option<i64>> = values[cut..].iter().copied().filter(|v| v.is_some()).collect();
        let compact = stats_column(kind, &valid);
        prop_assert_eq!(compact.null_count(), 0);
        let stats = |array: &arrow_array::ArrayRef| {
            let batch = RecordBatch::try_from_iter([("c", array.clone())]).unwrap();
            let mut s = ShardStats::new();
            s.add_fields(&batch).unwrap();
            s.field("c").unwrap().clone()
        };
        let (got, want) = (stats(&sliced), stats(&compact));
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(got.counts(), want.counts());
        prop_assert_eq!(got.count(), valid.len() as u64);
        // Min and max value by value.
        use bcd_fields::Scalar;
        let (lo, hi) = match kind % 7 {
            0..=2 => {
                let ints = (0..compact.len()).map(|i| match kind % 7 {
                    0 => i128::from(compact.as_any().downcast_ref::<arrow_array::Int64Array>().unwrap().value(i)),
                    1 => i128::from(compact.as_any().downcast_ref::<arrow_array::Int32Array>().unwrap().value(i)),
                    _ => i128::from(compact.as_any().downcast_ref::<arrow_array::UInt64Array>().unwrap().value(i)),
                });
                let v: Vec<i128> = ints.collect();
                (v.iter().min().map(|&m| Scalar::Int(m)), v.iter().max().map(|&m| Scalar::Int(m)))
            }
            3 => {
                let a = compact.as_any().downcast_ref::<arrow_array::Float64Array>().unwrap();
                let v: Vec<f64> = a.values().iter().copied().filter(|v| !v.is_nan()).collect();
                (
                    v.iter().copied().reduce(f64::min).map(Scalar::Float),
                    v.iter().copied().reduce(f64::max).map(Scalar::Float),
                )
            }
            _ => {
                let v: Vec<String> = valid.iter().map(|v| format!("s{}", v.unwrap().rem_euclid(50))).collect();
                let s = |m: Option<&String>| m.map(|m| Scalar::Utf8 { value: m.clone(), truncated: false });
                (s(v.iter().min()), s(v.iter().max()))
            }
        };
        prop_assert_eq!(got.min(), lo.as_ref());
        prop_assert_eq!(got.max(), hi.as_ref());
    }
}
