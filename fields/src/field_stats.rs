//! One column's statistics: non-null count, min and max, a HyperLogLog
//! sketch and exact value counts while there are few distinct values.

use std::cmp::Ordering;
use std::str::FromStr;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use hashbrown::HashTable;
use serde_json::{Map, Value};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::canonical::{self, float_bits, with_int_array};
use crate::error::{FieldsError, Result};
use crate::hll::HyperLogLog;
use crate::json_util;
use crate::schema::unify_types;

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

    /// Adds a column's values.
    pub(crate) fn add_array(&mut self, array: &ArrayRef) -> Result<()> {
        let array = match array.data_type() {
            DataType::Dictionary(_, v) => arrow_cast::cast(array, v).map_err(|e| {
                FieldsError::arrow("reading a dictionary column's values for statistics", e)
            })?,
            _ => array.clone(),
        };
        let t = array.data_type().clone();
        if t.to_string() != self.data_type {
            self.data_type = merge_type(&self.data_type, &t.to_string())?;
        }
        let valid = array.len() - array.logical_null_count();
        self.count += valid as u64;
        if valid == 0 {
            return Ok(());
        }
        let nulls = array.logical_nulls();
        let is_valid = |i: usize| nulls.as_ref().is_none_or(|n| n.is_valid(i));
        let mut acc = Acc::new(self);
        match kind(&t) {
            Kind::Int { counted } => with_int_array!(
                array,
                &t,
                |a| {
                    let values = a.values();
                    for i in (0..a.len()).filter(|&i| is_valid(i)) {
                        let v = i128::from(values[i]);
                        let h = xxh3_64_with_seed(&v.to_le_bytes(), canonical::SEED_INT);
                        acc.hash(h);
                        if counted {
                            acc.count(h, KeyRef::Int(v));
                        }
                        acc.int(v);
                    }
                },
                ()
            ),
            Kind::Float => {
                let mut add = |v: f64| {
                    acc.hash(xxh3_64_with_seed(
                        &float_bits(v).to_le_bytes(),
                        canonical::SEED_FLOAT,
                    ));
                    acc.float(v);
                };
                if let DataType::Float32 = t {
                    let values = array.as_primitive::<Float32Type>().values();
                    (0..values.len())
                        .filter(|&i| is_valid(i))
                        .for_each(|i| add(f64::from(values[i])));
                } else {
                    let values = array.as_primitive::<Float64Type>().values();
                    (0..values.len())
                        .filter(|&i| is_valid(i))
                        .for_each(|i| add(values[i]));
                }
            }
            Kind::Bool => {
                let a = array.as_boolean();
                for i in (0..a.len()).filter(|&i| is_valid(i)) {
                    let v = a.value(i);
                    let h = xxh3_64_with_seed(&[u8::from(v)], canonical::SEED_BOOL);
                    acc.hash(h);
                    acc.count(h, KeyRef::Bool(v));
                    acc.bool(v);
                }
            }
            Kind::Utf8 => {
                let mut lo: Option<&str> = None;
                let mut hi: Option<&str> = None;
                for i in (0..array.len()).filter(|&i| is_valid(i)) {
                    let s = canonical::utf8_at(array.as_ref(), i).unwrap_or_default();
                    let h = xxh3_64_with_seed(s.as_bytes(), canonical::SEED_UTF8);
                    acc.hash(h);
                    if s.len() <= MAX_STRING_STAT_BYTES {
                        acc.count(h, KeyRef::Utf8(s));
                    } else {
                        acc.counts = None;
                    }
                    if lo.is_none_or(|m| s < m) {
                        lo = Some(s);
                    }
                    if hi.is_none_or(|m| s > m) {
                        hi = Some(s);
                    }
                }
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    acc.utf8(lo, hi);
                }
            }
            Kind::Hashed => {
                let mut buf = Vec::new();
                for i in (0..array.len()).filter(|&i| is_valid(i)) {
                    let h = match &t {
                        DataType::Binary
                        | DataType::LargeBinary
                        | DataType::BinaryView
                        | DataType::FixedSizeBinary(_) => xxh3_64_with_seed(
                            canonical::binary_at(array.as_ref(), i).unwrap_or_default(),
                            canonical::SEED_BINARY,
                        ),
                        DataType::Decimal128(..) => xxh3_64_with_seed(
                            &array
                                .as_primitive::<arrow_array::types::Decimal128Type>()
                                .value(i)
                                .to_le_bytes(),
                            canonical::SEED_DECIMAL,
                        ),
                        _ => {
                            buf.clear();
                            canonical::encode_nested(array.as_ref(), i, &mut buf);
                            xxh3_64_with_seed(&buf, canonical::SEED_NESTED)
                        }
                    };
                    acc.hash(h);
                }
            }
            Kind::Other => {}
        }
        acc.finish(self);
        Ok(())
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

    /// The JSON object of FORMAT.md (`nulls` from the shard's `records`).
    pub(crate) fn to_json(&self, records: u64) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), self.data_type.clone().into());
        m.insert("nulls".into(), records.saturating_sub(self.count).into());
        m.insert("count".into(), self.count.into());
        for (key, value) in [("min", &self.min), ("max", &self.max)] {
            m.insert(key.into(), value.as_ref().map_or(Value::Null, scalar_json));
            if let Some(Scalar::Utf8 {
                truncated: true, ..
            }) = value
            {
                m.insert(format!("{key}_truncated"), true.into());
            }
        }
        m.insert(
            "hll".into(),
            self.hll
                .as_ref()
                .map_or(Value::Null, |h| h.to_base64().into()),
        );
        m.insert(
            "distinct".into(),
            self.distinct().map_or(Value::Null, Value::from),
        );
        let counts = self.counts.as_ref().map_or(Value::Null, |c| {
            c.sorted()
                .into_iter()
                .map(|(k, n)| {
                    let k = match k {
                        CountKey::Bool(b) => Value::Bool(b),
                        CountKey::Int(i) => int_json(i),
                        CountKey::Utf8(s) => Value::String(s),
                    };
                    Value::Array(vec![k, n.into()])
                })
                .collect::<Vec<_>>()
                .into()
        });
        m.insert("counts".into(), counts);
        Value::Object(m)
    }

    /// Reads [`FieldStats::to_json`]'s object, checking it against itself and
    /// the shard's `records`. `what` names the field in errors.
    pub(crate) fn from_json(
        value: &Value,
        records: u64,
        what: &str,
        name: &str,
    ) -> Result<FieldStats> {
        let bad = |msg: String| FieldsError::invalid(name, format!("{what}: {msg}"));
        let obj = json_util::as_object(value, what, name)?;
        let data_type =
            json_util::as_str(json_util::member(obj, "type", name)?, "\"type\"", name)?.to_owned();
        if data_type.is_empty() {
            return Err(bad("\"type\" is empty".into()));
        }
        let count = json_util::u64_member(obj, "count", name)?;
        let nulls = json_util::u64_member(obj, "nulls", name)?;
        if count.checked_add(nulls) != Some(records) {
            return Err(bad(format!(
                "{nulls} nulls and {count} values are not the {records} records"
            )));
        }
        let k = DataType::from_str(&data_type).map(|t| kind(&t)).ok();
        let scalar = |key: &str| -> Result<Option<Scalar>> {
            let v = obj.get(key).unwrap_or(&Value::Null);
            if v.is_null() {
                return Ok(None);
            }
            let truncated = match obj.get(&format!("{key}_truncated")) {
                None | Some(Value::Bool(false)) => false,
                Some(Value::Bool(true)) => true,
                Some(_) => return Err(bad(format!("\"{key}_truncated\" is not a boolean"))),
            };
            scalar_from_json(v, k, truncated)
                .map(Some)
                .ok_or_else(|| bad(format!("\"{key}\" {v} is not a {data_type} value")))
        };
        let min = scalar("min")?;
        let max = scalar("max")?;
        if min.is_some() != max.is_some() {
            return Err(bad("has only one of \"min\" and \"max\"".into()));
        }
        if let (Some(a), Some(b)) = (&min, &max) {
            if compare(a, b) == Some(Ordering::Greater) || compare(a, b).is_none() {
                return Err(bad("\"min\" is above \"max\" or of another kind".into()));
            }
        }
        let hll = match obj.get("hll").unwrap_or(&Value::Null) {
            Value::Null => None,
            Value::String(s) => {
                Some(HyperLogLog::from_base64(s).map_err(|e| bad(format!("\"hll\" {e}")))?)
            }
            _ => return Err(bad("\"hll\" is not a string".into())),
        };
        match obj.get("distinct").unwrap_or(&Value::Null) {
            Value::Null => {}
            v => {
                json_util::as_u64(v, &format!("{what}: \"distinct\""), name)?;
            }
        }
        let counts = match obj.get("counts").unwrap_or(&Value::Null) {
            Value::Null => None,
            Value::Array(entries) => {
                if entries.len() > MAX_EXACT_COUNTS {
                    return Err(bad(format!(
                        "\"counts\" has more than {MAX_EXACT_COUNTS} values"
                    )));
                }
                let mut counts = Counts::default();
                let mut total: u64 = 0;
                for entry in entries {
                    let (key, n) = match entry.as_array().map(Vec::as_slice) {
                        Some([key, n]) => (key, n),
                        _ => {
                            return Err(bad(format!(
                                "\"counts\" entry {entry} is not [value, count]"
                            )))
                        }
                    };
                    let n = json_util::as_u64(n, &format!("{what}: a count"), name)?;
                    let key = match key {
                        Value::Bool(b) => CountKey::Bool(*b),
                        Value::String(s) if s.len() <= MAX_STRING_STAT_BYTES => {
                            CountKey::Utf8(s.clone())
                        }
                        Value::Number(num) => match num
                            .as_i64()
                            .map(i128::from)
                            .or(num.as_u64().map(i128::from))
                        {
                            Some(i) => CountKey::Int(i),
                            None => {
                                return Err(bad(format!(
                                    "\"counts\" value {num} is not an integer"
                                )))
                            }
                        },
                        _ => return Err(bad(format!("\"counts\" value {key} cannot be counted"))),
                    };
                    let h = key_hash(&key);
                    if n == 0 || counts.table.find(h, |e| e.1 == key).is_some() {
                        return Err(bad(format!("\"counts\" has {key:?} twice or with count 0")));
                    }
                    counts.table.insert_unique(h, (h, key, n), |e| e.0);
                    total = total
                        .checked_add(n)
                        .ok_or_else(|| bad("\"counts\" overflow".into()))?;
                }
                if total != count {
                    return Err(bad(format!(
                        "\"counts\" sum to {total}, not the {count} values"
                    )));
                }
                Some(counts)
            }
            _ => return Err(bad("\"counts\" is not an array".into())),
        };
        Ok(FieldStats {
            data_type,
            count,
            min,
            max,
            hll,
            counts,
        })
    }
}

/// Folds a column's values into its statistics, one value at a time.
struct Acc {
    hll: Option<HyperLogLog>,
    counts: Option<Counts>,
    min: Option<Scalar>,
    max: Option<Scalar>,
    ints: Option<(i128, i128)>,
    floats: Option<(f64, f64)>,
    bools: Option<(bool, bool)>,
}

impl Acc {
    fn new(stats: &mut FieldStats) -> Acc {
        Acc {
            hll: stats.hll.take(),
            counts: stats.counts.take(),
            min: stats.min.take(),
            max: stats.max.take(),
            ints: None,
            floats: None,
            bools: None,
        }
    }

    #[inline]
    fn hash(&mut self, h: u64) {
        if let Some(hll) = &mut self.hll {
            hll.add_hash(h);
        }
    }

    #[inline]
    fn count(&mut self, h: u64, key: KeyRef<'_>) {
        if let Some(c) = &mut self.counts {
            if !c.add(h, key, 1) {
                self.counts = None;
            }
        }
    }

    #[inline]
    fn int(&mut self, v: i128) {
        self.ints = Some(match self.ints {
            Some((lo, hi)) => (lo.min(v), hi.max(v)),
            None => (v, v),
        });
    }

    #[inline]
    fn float(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.floats = Some(match self.floats {
            Some((lo, hi)) => (lo.min(v), hi.max(v)),
            None => (v, v),
        });
    }

    #[inline]
    fn bool(&mut self, v: bool) {
        self.bools = Some(match self.bools {
            Some((lo, hi)) => (lo & v, hi | v),
            None => (v, v),
        });
    }

    fn utf8(&mut self, lo: &str, hi: &str) {
        self.min = combine(self.min.take(), Some(truncate(lo)), Ordering::Less);
        self.max = combine(self.max.take(), Some(truncate(hi)), Ordering::Greater);
    }

    fn finish(mut self, stats: &mut FieldStats) {
        let range = match (self.ints, self.floats, self.bools) {
            (Some((lo, hi)), _, _) => Some((Scalar::Int(lo), Scalar::Int(hi))),
            (_, Some((lo, hi)), _) => Some((Scalar::Float(lo), Scalar::Float(hi))),
            (_, _, Some((lo, hi))) => Some((Scalar::Bool(lo), Scalar::Bool(hi))),
            _ => None,
        };
        if let Some((lo, hi)) = range {
            self.min = combine(self.min.take(), Some(lo), Ordering::Less);
            self.max = combine(self.max.take(), Some(hi), Ordering::Greater);
        }
        stats.hll = self.hll;
        stats.counts = self.counts;
        stats.min = self.min;
        stats.max = self.max;
    }
}

fn truncate(s: &str) -> Scalar {
    if s.len() <= MAX_STRING_STAT_BYTES {
        return Scalar::Utf8 {
            value: s.to_owned(),
            truncated: false,
        };
    }
    let mut end = MAX_STRING_STAT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Scalar::Utf8 {
        value: s[..end].to_owned(),
        truncated: true,
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

fn int_json(i: i128) -> Value {
    if let Ok(v) = i64::try_from(i) {
        v.into()
    } else if let Ok(v) = u64::try_from(i) {
        v.into()
    } else {
        // Never: every integer type fits i64 or u64.
        Value::String(i.to_string())
    }
}

/// A float as JSON: a number, or `"inf"` / `"-inf"` (NaN is never stored).
pub(crate) fn float_json(v: f64) -> Value {
    if v.is_finite() {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    } else if v.is_nan() {
        Value::String("NaN".into())
    } else if v > 0.0 {
        Value::String("inf".into())
    } else {
        Value::String("-inf".into())
    }
}

fn scalar_json(s: &Scalar) -> Value {
    match s {
        Scalar::Int(i) => int_json(*i),
        Scalar::Float(f) => float_json(*f),
        Scalar::Bool(b) => Value::Bool(*b),
        Scalar::Utf8 { value, .. } => Value::String(value.clone()),
    }
}

fn scalar_from_json(v: &Value, kind: Option<Kind>, truncated: bool) -> Option<Scalar> {
    let int = |v: &Value| v.as_i64().map(i128::from).or(v.as_u64().map(i128::from));
    let float = |v: &Value| match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) if s == "inf" => Some(f64::INFINITY),
        Value::String(s) if s == "-inf" => Some(f64::NEG_INFINITY),
        _ => None,
    };
    let utf8 = |v: &Value| match v {
        Value::String(s) if s.len() <= MAX_STRING_STAT_BYTES => Some(Scalar::Utf8 {
            value: s.clone(),
            truncated,
        }),
        _ => None,
    };
    match kind {
        Some(Kind::Int { .. }) => int(v).map(Scalar::Int),
        Some(Kind::Float) => float(v).map(Scalar::Float),
        Some(Kind::Bool) => v.as_bool().map(Scalar::Bool),
        Some(Kind::Utf8) => utf8(v),
        Some(Kind::Hashed | Kind::Other) => None,
        // A type this version cannot parse: the value's JSON kind decides.
        None => match v {
            Value::Bool(b) => Some(Scalar::Bool(*b)),
            Value::Number(n) if n.is_f64() => n.as_f64().map(Scalar::Float),
            Value::Number(_) => int(v).map(Scalar::Int),
            _ => utf8(v),
        },
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
