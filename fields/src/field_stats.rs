//! One column's statistics: non-null count, min and max, a HyperLogLog
//! sketch and exact value counts while there are few distinct values.

use std::cmp::Ordering;
use std::str::FromStr;

use arrow_schema::DataType;
use hashbrown::HashTable;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::canonical::{self, float_bits, with_int_array};
use crate::error::{FieldsError, Result};
use crate::hll::HyperLogLog;
use crate::unify::unify_types;

mod accumulate;
mod json;

/// Exact value counts are kept while a column has at most this many distinct
/// values.
pub const MAX_EXACT_COUNTS: usize = 1024;
/// Strings are counted exactly only up to this many bytes, and a string min or
/// max is truncated to it (at a character boundary).
pub const MAX_STRING_STAT_BYTES: usize = 256;

/// A column's min or max.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// Integers, dates, times, timestamps and durations (as their integer).
    Int(i128),
    /// Floats (NaN is never a min or max; infinities are).
    Float(f64),
    /// Booleans.
    Bool(bool),
    /// Strings; `truncated` when the value was longer than
    /// [`MAX_STRING_STAT_BYTES`] and this is its prefix.
    Utf8 {
        /// The value or its prefix.
        value: String,
        /// Whether `value` is a prefix.
        truncated: bool,
    },
}

/// A value exact counts are kept of.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CountKey {
    /// A boolean.
    Bool(bool),
    /// An integer (of an integer type).
    Int(i128),
    /// A string of at most [`MAX_STRING_STAT_BYTES`] bytes.
    Utf8(String),
}

#[derive(Clone, Copy)]
enum KeyRef<'a> {
    Bool(bool),
    Int(i128),
    Utf8(&'a str),
}

impl KeyRef<'_> {
    fn matches(&self, key: &CountKey) -> bool {
        match (self, key) {
            (KeyRef::Bool(a), CountKey::Bool(b)) => a == b,
            (KeyRef::Int(a), CountKey::Int(b)) => a == b,
            (KeyRef::Utf8(a), CountKey::Utf8(b)) => *a == b,
            _ => false,
        }
    }

    fn owned(self) -> CountKey {
        match self {
            KeyRef::Bool(b) => CountKey::Bool(b),
            KeyRef::Int(i) => CountKey::Int(i),
            KeyRef::Utf8(s) => CountKey::Utf8(s.to_owned()),
        }
    }
}

/// Exact counts of values, keyed by the value's hash (the one the sketch
/// takes), or `None` once there are too many.
#[derive(Clone, Debug, Default)]
struct Counts {
    table: HashTable<(u64, CountKey, u64)>,
}

impl Counts {
    /// Counts a value; false when it makes more than [`MAX_EXACT_COUNTS`].
    #[inline]
    fn add(&mut self, hash: u64, key: KeyRef<'_>, n: u64) -> bool {
        if let Some(entry) = self
            .table
            .find_mut(hash, |e| e.0 == hash && key.matches(&e.1))
        {
            entry.2 += n;
            return true;
        }
        if self.table.len() >= MAX_EXACT_COUNTS {
            return false;
        }
        self.table
            .insert_unique(hash, (hash, key.owned(), n), |e| e.0);
        true
    }

    fn sorted(&self) -> Vec<(CountKey, u64)> {
        let mut v: Vec<_> = self.table.iter().map(|(_, k, n)| (k.clone(), *n)).collect();
        v.sort_unstable();
        v
    }
}

impl PartialEq for Counts {
    fn eq(&self, other: &Self) -> bool {
        self.sorted() == other.sorted()
    }
}

/// The hash of a count key, as the sketch takes it.
fn key_hash(key: &CountKey) -> u64 {
    match key {
        CountKey::Bool(b) => xxh3_64_with_seed(&[u8::from(*b)], canonical::SEED_BOOL),
        CountKey::Int(i) => xxh3_64_with_seed(&i.to_le_bytes(), canonical::SEED_INT),
        CountKey::Utf8(s) => xxh3_64_with_seed(s.as_bytes(), canonical::SEED_UTF8),
    }
}

/// What statistics a type gets.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Integers: min/max; exact counts only for the integer types proper.
    Int {
        counted: bool,
    },
    Float,
    Bool,
    Utf8,
    /// Hashable but without min/max or counts (binary, decimal, nested).
    Hashed,
    /// Only null and non-null counts.
    Other,
}

fn kind(t: &DataType) -> Kind {
    use DataType::*;
    match t {
        Boolean => Kind::Bool,
        Float32 | Float64 => Kind::Float,
        Utf8 | LargeUtf8 | Utf8View => Kind::Utf8,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => {
            Kind::Int { counted: true }
        }
        _ if canonical::int_like(t) => Kind::Int { counted: false },
        Dictionary(_, v) => kind(v),
        _ if canonical::hashable(t) => Kind::Hashed,
        _ => Kind::Other,
    }
}

/// The statistics of one column (FORMAT.md, "Fields": statistics).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldStats {
    data_type: String,
    count: u64,
    min: Option<Scalar>,
    max: Option<Scalar>,
    hll: Option<HyperLogLog>,
    counts: Option<Counts>,
}

impl FieldStats {
    /// No values yet, of type `t` (a dictionary's: of its value type).
    pub(crate) fn new(t: &DataType) -> FieldStats {
        let t = match t {
            DataType::Dictionary(_, v) => v.as_ref(),
            t => t,
        };
        let k = kind(t);
        FieldStats {
            data_type: t.to_string(),
            count: 0,
            min: None,
            max: None,
            hll: (k != Kind::Other).then(HyperLogLog::new),
            counts: matches!(k, Kind::Int { counted: true } | Kind::Bool | Kind::Utf8)
                .then(Counts::default),
        }
    }

    /// The column's type, as Arrow displays it.
    pub fn data_type(&self) -> &str {
        &self.data_type
    }

    /// Non-null values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The smallest value (NaN ignored), if the type is ordered and there are values.
    pub fn min(&self) -> Option<&Scalar> {
        self.min.as_ref()
    }

    /// The largest value (NaN ignored), if the type is ordered and there are values.
    pub fn max(&self) -> Option<&Scalar> {
        self.max.as_ref()
    }

    /// The HyperLogLog sketch of the non-null values, if the type is hashable.
    pub fn hll(&self) -> Option<&HyperLogLog> {
        self.hll.as_ref()
    }

    /// The exact counts of the non-null values, sorted by value, while there
    /// are at most [`MAX_EXACT_COUNTS`] distinct ones (and the type is
    /// boolean, integer or string with none over [`MAX_STRING_STAT_BYTES`]).
    pub fn counts(&self) -> Option<Vec<(CountKey, u64)>> {
        self.counts.as_ref().map(Counts::sorted)
    }

    /// Distinct non-null values: exact while counts are kept, else the
    /// sketch's estimate; `None` if the type is not hashable.
    pub fn distinct(&self) -> Option<u64> {
        match (&self.counts, &self.hll) {
            (Some(c), _) => Some(c.table.len() as u64),
            (None, Some(h)) => Some(h.estimate()),
            (None, None) => None,
        }
    }

    /// Combines with the statistics of other rows of the same column: counts
    /// add, min/max combine, sketches take the register-wise max, exact counts
    /// unite (none if either has none or the union has too many). A side with
    /// no values (a shard where the column is all null, maybe of the Null
    /// type) changes nothing but the type.
    pub(crate) fn merge(&mut self, other: &FieldStats) -> Result<()> {
        self.data_type = merge_type(&self.data_type, &other.data_type)?;
        if other.count == 0 {
            return Ok(());
        }
        if self.count == 0 {
            let data_type = std::mem::take(&mut self.data_type);
            *self = FieldStats {
                data_type,
                ..other.clone()
            };
            return Ok(());
        }
        self.count += other.count;
        self.min = combine(self.min.take(), other.min.clone(), Ordering::Less);
        self.max = combine(self.max.take(), other.max.clone(), Ordering::Greater);
        self.hll = match (self.hll.take(), &other.hll) {
            (Some(mut a), Some(b)) => {
                a.merge(b);
                Some(a)
            }
            _ => None,
        };
        self.counts = match (self.counts.take(), &other.counts) {
            (Some(mut a), Some(b)) => {
                let mut fits = true;
                for (h, k, n) in b.table.iter() {
                    let key = match k {
                        CountKey::Bool(b) => KeyRef::Bool(*b),
                        CountKey::Int(i) => KeyRef::Int(*i),
                        CountKey::Utf8(s) => KeyRef::Utf8(s),
                    };
                    fits &= a.add(*h, key, *n);
                }
                fits.then_some(a)
            }
            _ => None,
        };
        Ok(())
    }
}

/// Orders two scalars of the same kind.
fn compare(a: &Scalar, b: &Scalar) -> Option<Ordering> {
    match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(y)),
        (Scalar::Float(x), Scalar::Float(y)) => x.partial_cmp(y),
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(x.cmp(y)),
        (Scalar::Utf8 { value: x, .. }, Scalar::Utf8 { value: y, .. }) => Some(x.cmp(y)),
        _ => None,
    }
}

/// The smaller (`want` Less) or larger of two optional scalars. Of two equal
/// strings one of which is truncated, the min is the exact one and the max
/// the truncated one (whose value is longer).
fn combine(a: Option<Scalar>, b: Option<Scalar>, want: Ordering) -> Option<Scalar> {
    match (a, b) {
        (Some(a), Some(b)) => match compare(&b, &a) {
            Some(o) if o == want => Some(b),
            Some(Ordering::Equal) => match (&a, &b) {
                (Scalar::Utf8 { truncated: ta, .. }, Scalar::Utf8 { truncated: tb, .. })
                    if ta != tb =>
                {
                    let truncated = want == Ordering::Greater;
                    Some(if *ta == truncated { a } else { b })
                }
                _ => Some(a),
            },
            _ => Some(a),
        },
        (a, b) => a.or(b),
    }
}

/// The type of a column with values of both types (displayed), by the schema
/// rules.
fn merge_type(a: &str, b: &str) -> Result<String> {
    if a == b {
        return Ok(a.to_owned());
    }
    let fail = || FieldsError::Unsupported(format!("statistics of type {b} cannot merge into {a}"));
    let (ta, tb) = (
        DataType::from_str(a).map_err(|_| fail())?,
        DataType::from_str(b).map_err(|_| fail())?,
    );
    unify_types(&ta, &tb, "")
        .map(|t| t.to_string())
        .map_err(|_| fail())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::ArrayRef;
    use serde_json::Value;
    use std::sync::Arc;

    use arrow_array::{BooleanArray, Float64Array, Int32Array, Int64Array, NullArray, StringArray};

    fn stats(array: ArrayRef) -> FieldStats {
        let mut s = FieldStats::new(array.data_type());
        s.add_array(&array).unwrap();
        s
    }

    #[test]
    fn integers_get_min_max_counts_and_distinct() {
        let s = stats(Arc::new(Int32Array::from(vec![
            Some(3),
            None,
            Some(-7),
            Some(3),
        ])));
        assert_eq!(
            (s.count(), s.min(), s.max()),
            (3, Some(&Scalar::Int(-7)), Some(&Scalar::Int(3)))
        );
        assert_eq!(
            s.counts().unwrap(),
            vec![(CountKey::Int(-7), 1), (CountKey::Int(3), 2)]
        );
        assert_eq!(s.distinct(), Some(2));
        assert_eq!(s.hll().unwrap().estimate(), 2);
    }

    #[test]
    fn floats_ignore_nan_and_keep_infinities() {
        let s = stats(Arc::new(Float64Array::from(vec![
            f64::NAN,
            2.5,
            f64::NEG_INFINITY,
        ])));
        assert_eq!(
            (s.min(), s.max()),
            (
                Some(&Scalar::Float(f64::NEG_INFINITY)),
                Some(&Scalar::Float(2.5))
            )
        );
        assert!(s.counts().is_none());
        let json = s.to_json(3);
        assert_eq!(
            (&json["min"], &json["max"]),
            (&Value::from("-inf"), &Value::from(2.5))
        );
        assert_eq!(FieldStats::from_json(&json, 3, "f", "n").unwrap(), s);
        let only_nan = stats(Arc::new(Float64Array::from(vec![f64::NAN])));
        assert_eq!((only_nan.min(), only_nan.distinct()), (None, Some(1)));
    }

    #[test]
    fn long_strings_are_truncated_and_not_counted() {
        let long = "é".repeat(200); // 400 bytes
        let s = stats(Arc::new(StringArray::from(vec!["b", long.as_str()])));
        let Some(Scalar::Utf8 { value, truncated }) = s.max() else {
            panic!()
        };
        assert_eq!((value.len(), *truncated), (256, true));
        assert_eq!(
            s.min(),
            Some(&Scalar::Utf8 {
                value: "b".into(),
                truncated: false
            })
        );
        assert!(s.counts().is_none());
        let json = s.to_json(2);
        assert_eq!(json["max_truncated"], Value::Bool(true));
        assert!(json.get("min_truncated").is_none());
        assert_eq!(FieldStats::from_json(&json, 2, "f", "n").unwrap(), s);
    }

    #[test]
    fn counts_stop_after_1024_distinct_values() {
        let s = stats(Arc::new(Int64Array::from_iter_values(0..1024)));
        assert_eq!(s.counts().unwrap().len(), 1024);
        let s = stats(Arc::new(Int64Array::from_iter_values(0..1025)));
        assert!(s.counts().is_none());
        assert_eq!(s.distinct(), Some(s.hll().unwrap().estimate()));
    }

    #[test]
    fn dictionaries_have_the_statistics_of_their_values() {
        let dict: arrow_array::DictionaryArray<arrow_array::types::Int8Type> =
            vec![Some("b"), None, Some("a"), Some("b")]
                .into_iter()
                .collect();
        let s = stats(Arc::new(dict));
        let plain = stats(Arc::new(StringArray::from(vec![
            Some("b"),
            None,
            Some("a"),
            Some("b"),
        ])));
        assert_eq!(s, plain);
        assert_eq!(s.data_type(), "Utf8");
    }

    #[test]
    fn booleans_and_nulls() {
        let s = stats(Arc::new(BooleanArray::from(vec![
            Some(true),
            None,
            Some(true),
        ])));
        assert_eq!(
            (s.min(), s.max()),
            (Some(&Scalar::Bool(true)), Some(&Scalar::Bool(true)))
        );
        assert_eq!(s.counts().unwrap(), vec![(CountKey::Bool(true), 2)]);
        let n = stats(Arc::new(NullArray::new(4)));
        assert_eq!((n.count(), n.hll(), n.distinct()), (0, None, None));
        assert_eq!(n.to_json(4)["nulls"], Value::from(4));
    }

    #[test]
    fn merging_widens_types_and_treats_empty_sides_as_nothing() {
        let mut a = stats(Arc::new(NullArray::new(2)));
        let b = stats(Arc::new(Int32Array::from(vec![5, 6])));
        let c = stats(Arc::new(Int64Array::from(vec![1, 5])));
        a.merge(&b).unwrap();
        a.merge(&c).unwrap();
        assert_eq!(a.data_type(), "Int64");
        assert_eq!(
            (a.count(), a.min(), a.max()),
            (4, Some(&Scalar::Int(1)), Some(&Scalar::Int(6)))
        );
        assert_eq!(
            a.counts().unwrap(),
            vec![
                (CountKey::Int(1), 1),
                (CountKey::Int(5), 2),
                (CountKey::Int(6), 1)
            ]
        );
        assert_eq!(a.distinct(), Some(3));
        let err = a
            .merge(&stats(Arc::new(StringArray::from(vec!["x"]))))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "statistics of type Utf8 cannot merge into Int64"
        );
    }

    #[test]
    fn decoding_checks_the_object_against_itself() {
        let s = stats(Arc::new(Int32Array::from(vec![1, 2, 2])));
        let good = s.to_json(3);
        assert_eq!(FieldStats::from_json(&good, 3, "f", "n").unwrap(), s);
        let mut cases: Vec<(&str, Value)> = vec![
            ("nulls", Value::from(1)),
            ("count", Value::from(-1)),
            ("min", Value::from("x")),
            ("min", Value::from(9)),
            ("max", Value::Null),
            ("hll", Value::from("AAAA")),
            ("hll", Value::from(3)),
            ("counts", serde_json::json!([[1, 1], [2, 1]])),
            ("counts", serde_json::json!([[1, 1], [1, 2]])),
            ("counts", serde_json::json!([[1, 0], [2, 3]])),
            ("counts", serde_json::json!([[1.5, 3]])),
            ("counts", serde_json::json!({})),
            ("type", Value::from("")),
            ("distinct", Value::from("many")),
        ];
        for (key, value) in cases.drain(..) {
            let mut bad = good.clone();
            bad[key] = value.clone();
            let err = FieldStats::from_json(&bad, 3, "field \"a\"", "000001.stats.json")
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("000001.stats.json: "),
                "{key}={value}: {err}"
            );
        }
        assert!(FieldStats::from_json(&good, 4, "f", "n").is_err());
    }
}
