//! Statistics kept at write time (FORMAT.md, "Fields": statistics): per shard
//! in its `NNNNNN.stats.json`, merged into the commit file's totals, so a
//! dataset's statistics are read, not computed from its records.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use serde_json::{json, Map, Value};
use xxhash_rust::xxh3::xxh3_64;

use crate::error::{FieldsError, Result};
use crate::fingerprint::Fingerprint;
use crate::hll::Hll;

/// Exact value counts are kept while a field has at most this many distinct
/// values (labels, categories); beyond, only the HyperLogLog estimate.
pub const MAX_EXACT_COUNTS: usize = 1024;
/// Strings longer than this are not counted exactly, and min/max keep this
/// many bytes (at a character boundary).
pub const MAX_COUNTED_STRING: usize = 256;
/// Growth factor of the value size histogram's buckets: percentiles are
/// within 1% of the exact ones.
pub const SIZE_BUCKET_GROWTH: f64 = 1.01;
/// Version of the statistics JSON.
pub const STATS_FORMAT: u64 = 1;

/// The value size histogram: bucket 0 holds empty values, bucket `b >= 1`
/// sizes in `(1.01^(b-2), 1.01^(b-1)]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SizeHistogram {
    /// Smallest size.
    pub min: Option<u64>,
    /// Largest size.
    pub max: Option<u64>,
    /// Count per bucket.
    pub buckets: BTreeMap<u32, u64>,
}

/// The bucket of a value of `size` bytes.
pub fn size_bucket(size: u64) -> u32 {
    if size == 0 {
        0
    } else {
        ((size as f64).ln() / SIZE_BUCKET_GROWTH.ln()).ceil() as u32 + 1
    }
}

impl SizeHistogram {
    fn add(&mut self, size: u64) {
        self.min = Some(self.min.map_or(size, |m| m.min(size)));
        self.max = Some(self.max.map_or(size, |m| m.max(size)));
        *self.buckets.entry(size_bucket(size)).or_default() += 1;
    }

    fn merge(&mut self, other: &SizeHistogram) {
        for bound in [other.min, other.max].into_iter().flatten() {
            self.min = Some(self.min.map_or(bound, |m| m.min(bound)));
            self.max = Some(self.max.map_or(bound, |m| m.max(bound)));
        }
        for (&bucket, &count) in &other.buckets {
            *self.buckets.entry(bucket).or_default() += count;
        }
    }

    /// The `q`-quantile (0..=1) of the sizes, within 1% (None when empty): the
    /// upper bound of its bucket, clamped to the exact min and max.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let total: u64 = self.buckets.values().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (&bucket, &count) in &self.buckets {
            seen += count;
            if seen >= rank {
                let upper = if bucket == 0 {
                    0
                } else {
                    SIZE_BUCKET_GROWTH.powi(bucket as i32 - 1).floor() as u64
                };
                return Some(upper.clamp(self.min.unwrap_or(0), self.max.unwrap_or(u64::MAX)));
            }
        }
        self.max
    }
}

/// Statistics of one field (column).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldStats {
    /// The column's Arrow type, as displayed.
    pub data_type: String,
    /// Non-null values.
    pub count: u64,
    /// Null values (records of the shards this covers that had the column).
    pub nulls: u64,
    /// Smallest value (ordered primitive types), as JSON.
    pub min: Option<Value>,
    /// Largest value.
    pub max: Option<Value>,
    /// Whether `min`/`max` strings were cut at [`MAX_COUNTED_STRING`] bytes.
    pub truncated: bool,
    /// Distinct values sketch (None for nested types).
    pub hll: Option<Hll>,
    /// Exact counts by value (its JSON text), while at most
    /// [`MAX_EXACT_COUNTS`] distinct values; None past that, or for types not
    /// counted.
    pub counts: Option<BTreeMap<String, (Value, u64)>>,
}

/// Statistics of a shard, or merged over shards.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardStats {
    /// Records.
    pub records: u64,
    /// Bytes of keys.
    pub key_bytes: u64,
    /// Bytes of values as stored (compressed or not).
    pub stored_bytes: u64,
    /// Bytes of values uncompressed.
    pub raw_bytes: u64,
    /// Uncompressed value sizes.
    pub value_sizes: SizeHistogram,
    /// Per field, by name.
    pub fields: BTreeMap<String, FieldStats>,
}

impl ShardStats {
    /// Empty statistics.
    pub fn new() -> ShardStats {
        ShardStats::default()
    }

    /// Counts one record: its key's and uncompressed value's sizes.
    pub fn add_record(&mut self, key_len: u64, raw_len: u64) {
        self.records += 1;
        self.key_bytes += key_len;
        self.raw_bytes += raw_len;
        self.value_sizes.add(raw_len);
    }

    /// Sets the stored bytes (known per shard, from its data file).
    pub fn set_stored_bytes(&mut self, bytes: u64) {
        self.stored_bytes = bytes;
    }

    /// Adds the statistics of a batch of fields (the shard's records' fields).
    pub fn add_fields(&mut self, batch: &RecordBatch) -> Result<()> {
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            let stats = column_stats(column)?;
            match self.fields.get_mut(field.name()) {
                Some(existing) => existing.merge(&stats),
                None => {
                    self.fields.insert(field.name().clone(), stats);
                }
            }
        }
        Ok(())
    }

    /// Adds `other`'s statistics: the statistics of both together.
    pub fn merge(&mut self, other: &ShardStats) {
        self.records += other.records;
        self.key_bytes += other.key_bytes;
        self.stored_bytes += other.stored_bytes;
        self.raw_bytes += other.raw_bytes;
        self.value_sizes.merge(&other.value_sizes);
        for (name, stats) in &other.fields {
            match self.fields.get_mut(name) {
                Some(existing) => existing.merge(stats),
                None => {
                    self.fields.insert(name.clone(), stats.clone());
                }
            }
        }
    }

    /// The JSON form (FORMAT.md), with the shard's fingerprint for a shard's file.
    pub fn to_json(&self, fingerprint: Option<&Fingerprint>) -> Value {
        let mut out = Map::new();
        out.insert("format".into(), json!(STATS_FORMAT));
        if let Some(f) = fingerprint {
            out.insert("fingerprint".into(), f.to_json());
        }
        out.insert("records".into(), json!(self.records));
        out.insert("key_bytes".into(), json!(self.key_bytes));
        out.insert("stored_bytes".into(), json!(self.stored_bytes));
        out.insert("raw_bytes".into(), json!(self.raw_bytes));
        let histogram: Vec<[u64; 2]> = self
            .value_sizes
            .buckets
            .iter()
            .map(|(&b, &c)| [b as u64, c])
            .collect();
        out.insert(
            "value_sizes".into(),
            json!({"min": self.value_sizes.min, "max": self.value_sizes.max, "histogram": histogram}),
        );
        let fields: Map<String, Value> = self
            .fields
            .iter()
            .map(|(name, f)| (name.clone(), f.to_json()))
            .collect();
        out.insert("fields".into(), Value::Object(fields));
        Value::Object(out)
    }

    /// [`ShardStats::to_json`] as bytes.
    pub fn to_json_bytes(&self, fingerprint: Option<&Fingerprint>) -> Result<Vec<u8>> {
        Ok(self.to_json(fingerprint).to_string().into_bytes())
    }

    /// Reads what [`ShardStats::to_json`] wrote, with its fingerprint if any;
    /// `name` names the file in errors.
    pub fn from_json(value: &Value, name: &str) -> Result<(ShardStats, Option<Fingerprint>)> {
        let bad = |what: String| FieldsError::Invalid {
            name: name.to_owned(),
            what: format!("statistics: {what}"),
        };
        let u = |v: &Value, key: &str| -> Result<u64> {
            v.get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| bad(format!("no unsigned integer {key:?}")))
        };
        if u(value, "format")? != STATS_FORMAT {
            return Err(bad("unknown format".into()));
        }
        let fingerprint = match value.get("fingerprint") {
            Some(f) => Some(Fingerprint::from_json(f, name)?),
            None => None,
        };
        let sizes = value
            .get("value_sizes")
            .ok_or_else(|| bad("no value_sizes".into()))?;
        let opt = |key: &str| sizes.get(key).and_then(Value::as_u64);
        let mut buckets = BTreeMap::new();
        for pair in sizes
            .get("histogram")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no histogram".into()))?
        {
            let pair = pair.as_array().filter(|p| p.len() == 2);
            let (b, c) = pair
                .and_then(|p| Some((u32::try_from(p[0].as_u64()?).ok()?, p[1].as_u64()?)))
                .ok_or_else(|| bad("a histogram bucket is not [bucket, count]".into()))?;
            buckets.insert(b, c);
        }
        let mut fields = BTreeMap::new();
        if let Some(map) = value.get("fields").and_then(Value::as_object) {
            for (field, v) in map {
                fields.insert(field.clone(), FieldStats::from_json(v, name, field)?);
            }
        }
        Ok((
            ShardStats {
                records: u(value, "records")?,
                key_bytes: u(value, "key_bytes")?,
                stored_bytes: u(value, "stored_bytes")?,
                raw_bytes: u(value, "raw_bytes")?,
                value_sizes: SizeHistogram {
                    min: opt("min"),
                    max: opt("max"),
                    buckets,
                },
                fields,
            },
            fingerprint,
        ))
    }

    /// [`ShardStats::from_json`] of bytes.
    pub fn from_json_bytes(bytes: &[u8], name: &str) -> Result<(ShardStats, Option<Fingerprint>)> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| FieldsError::InvalidJson {
            name: name.to_owned(),
            what: "statistics are not JSON".into(),
            source: e,
        })?;
        ShardStats::from_json(&value, name)
    }

    /// The report `bcd stats --json` prints: sizes with percentiles, and per
    /// field (in `order`, then any others) its nulls over all `records`,
    /// min/max, distinct count (exact when counted) and exact counts.
    pub fn report(&self, order: &[String]) -> Value {
        let sizes = &self.value_sizes;
        let mut fields = Map::new();
        let mut names: Vec<&String> = order
            .iter()
            .filter(|n| self.fields.contains_key(*n))
            .collect();
        names.extend(self.fields.keys().filter(|n| !order.contains(n)));
        for name in order {
            if !self.fields.contains_key(name) {
                fields.insert(name.clone(), json!({"nulls": self.records, "count": 0}));
            }
        }
        for name in names {
            let f = &self.fields[name];
            let distinct = match &f.counts {
                Some(counts) => Some(counts.len() as u64),
                None => f.hll.as_ref().map(|h| h.estimate().round() as u64),
            };
            let counts = f.counts.as_ref().map(|c| {
                let mut pairs: Vec<(&Value, u64)> = c.values().map(|(v, n)| (v, *n)).collect();
                pairs.sort_by_key(|p| std::cmp::Reverse(p.1));
                pairs
                    .into_iter()
                    .map(|(v, n)| json!([v, n]))
                    .collect::<Vec<_>>()
            });
            fields.insert(
                name.clone(),
                json!({
                    "type": f.data_type,
                    "count": f.count,
                    "nulls": self.records.saturating_sub(f.count),
                    "min": f.min,
                    "max": f.max,
                    "min_max_truncated": f.truncated,
                    "distinct": distinct,
                    "distinct_exact": f.counts.is_some(),
                    "counts": counts,
                }),
            );
        }
        json!({
            "records": self.records,
            "key_bytes": self.key_bytes,
            "stored_bytes": self.stored_bytes,
            "raw_bytes": self.raw_bytes,
            "value_size": {
                "min": sizes.min,
                "p50": sizes.quantile(0.5),
                "p90": sizes.quantile(0.9),
                "p99": sizes.quantile(0.99),
                "max": sizes.max,
                "mean": (self.records > 0).then(|| self.raw_bytes as f64 / self.records as f64),
            },
            "fields": fields,
        })
    }
}

impl FieldStats {
    fn merge(&mut self, other: &FieldStats) {
        if self.data_type != other.data_type && other.count > 0 {
            // A widened integer column: the wider type is the later one.
            self.data_type = other.data_type.clone();
        }
        self.count += other.count;
        self.nulls += other.nulls;
        self.truncated |= other.truncated;
        self.min = pick(self.min.take(), other.min.clone(), std::cmp::Ordering::Less);
        self.max = pick(
            self.max.take(),
            other.max.clone(),
            std::cmp::Ordering::Greater,
        );
        self.hll = match (self.hll.take(), &other.hll) {
            (Some(mut a), Some(b)) => {
                a.merge(b);
                Some(a)
            }
            (a, b) => a.or_else(|| b.clone()),
        };
        self.counts = match (self.counts.take(), &other.counts) {
            (Some(mut a), Some(b)) => {
                for (k, (v, n)) in b {
                    a.entry(k.clone()).or_insert_with(|| (v.clone(), 0)).1 += n;
                }
                (a.len() <= MAX_EXACT_COUNTS).then_some(a)
            }
            // A shard whose column was all null counted nothing.
            (Some(a), None) if other.count == 0 => Some(a),
            (None, Some(b)) if self.count == other.count => Some(b.clone()),
            _ => None,
        };
    }

    fn to_json(&self) -> Value {
        let counts = self
            .counts
            .as_ref()
            .map(|c| c.values().map(|(v, n)| json!([v, n])).collect::<Vec<_>>());
        json!({
            "type": self.data_type,
            "count": self.count,
            "nulls": self.nulls,
            "min": self.min,
            "max": self.max,
            "truncated": self.truncated,
            "hll": self.hll.as_ref().map(Hll::to_json),
            "counts": counts,
        })
    }

    fn from_json(value: &Value, name: &str, field: &str) -> Result<FieldStats> {
        let bad = |what: &str| FieldsError::Invalid {
            name: name.to_owned(),
            what: format!("statistics of field {field:?}: {what}"),
        };
        let u = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| bad(key))
        };
        let hll = match value.get("hll") {
            None | Some(Value::Null) => None,
            Some(h) => Some(Hll::from_json(h, name)?),
        };
        let counts = match value.get("counts") {
            None | Some(Value::Null) => None,
            Some(Value::Array(pairs)) => {
                if pairs.len() > MAX_EXACT_COUNTS {
                    return Err(bad("too many counts"));
                }
                let mut map = BTreeMap::new();
                for pair in pairs {
                    let pair = pair
                        .as_array()
                        .filter(|p| p.len() == 2)
                        .ok_or_else(|| bad("counts"))?;
                    let n = pair[1].as_u64().ok_or_else(|| bad("counts"))?;
                    map.insert(pair[0].to_string(), (pair[0].clone(), n));
                }
                Some(map)
            }
            Some(_) => return Err(bad("counts")),
        };
        let bound = |key: &str| value.get(key).filter(|v| !v.is_null()).cloned();
        Ok(FieldStats {
            data_type: value
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("type"))?
                .to_owned(),
            count: u("count")?,
            nulls: u("nulls")?,
            min: bound("min"),
            max: bound("max"),
            truncated: value
                .get("truncated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            hll,
            counts,
        })
    }
}

/// The smaller (`Less`) or larger (`Greater`) of two JSON scalars of one type.
fn pick(a: Option<Value>, b: Option<Value>, want: std::cmp::Ordering) -> Option<Value> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if compare(&b, &a) == want { b } else { a }),
        (a, b) => a.or(b),
    }
}

fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    use std::cmp::Ordering::Equal;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x.cmp(&y),
                (_, _, Some(x), Some(y)) => x.cmp(&y),
                _ => x
                    .as_f64()
                    .unwrap_or(0.0)
                    .partial_cmp(&y.as_f64().unwrap_or(0.0))
                    .unwrap_or(Equal),
            }
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => Equal,
    }
}

/// Statistics of one column.
fn column_stats(column: &ArrayRef) -> Result<FieldStats> {
    let mut stats = FieldStats {
        data_type: column.data_type().to_string(),
        count: (column.len() - column.logical_null_count()) as u64,
        nulls: column.logical_null_count() as u64,
        ..FieldStats::default()
    };
    let mut acc = Accumulator::default();
    let column = match column.data_type() {
        DataType::Dictionary(_, _)
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(_, _)
        | DataType::Utf8View
        | DataType::BinaryView
        | DataType::LargeUtf8
        | DataType::LargeBinary => {
            let target = match column.data_type() {
                DataType::Dictionary(_, value) => match value.as_ref() {
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
                    other if other.is_integer() => DataType::Int64,
                    _ => return Ok(stats),
                },
                DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
                DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
                _ => DataType::Int64,
            };
            arrow_cast::cast(column, &target).map_err(|e| FieldsError::Arrow {
                context: format!("statistics of a {} column", column.data_type()),
                source: e,
            })?
        }
        _ => column.clone(),
    };
    macro_rules! ints {
        ($t:ty) => {
            for v in column.as_primitive::<$t>().iter().flatten() {
                acc.int(v as i128);
            }
        };
    }
    match column.data_type() {
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        DataType::Float32 => {
            for v in column.as_primitive::<Float32Type>().iter().flatten() {
                acc.float(v as f64);
            }
        }
        DataType::Float64 => {
            for v in column.as_primitive::<Float64Type>().iter().flatten() {
                acc.float(v);
            }
        }
        DataType::Boolean => {
            for v in column.as_boolean().iter().flatten() {
                acc.boolean(v);
            }
        }
        DataType::Utf8 => {
            for v in column.as_string::<i32>().iter().flatten() {
                acc.string(v);
            }
        }
        DataType::Binary => {
            for v in column.as_binary::<i32>().iter().flatten() {
                acc.hll.add_hash(xxh3_64(v));
            }
            acc.hashed = true;
            acc.countable = false;
        }
        // Nested and other types: nulls only.
        _ => return Ok(stats),
    }
    acc.finish(&mut stats);
    Ok(stats)
}

/// Min, max, sketch and exact counts of one column's values. Canonical bytes
/// hashed: integers as little-endian i128 (so a widened column hashes alike),
/// floats as f64 bits, booleans as one byte, strings and binaries as their bytes.
struct Accumulator {
    min: Option<Value>,
    max: Option<Value>,
    truncated: bool,
    hll: Hll,
    hashed: bool,
    counts: BTreeMap<String, (Value, u64)>,
    countable: bool,
    int_bounds: Option<(i128, i128)>,
    float_bounds: Option<(f64, f64)>,
}

impl Default for Accumulator {
    fn default() -> Self {
        Accumulator {
            min: None,
            max: None,
            truncated: false,
            hll: Hll::default(),
            hashed: false,
            counts: BTreeMap::new(),
            countable: true,
            int_bounds: None,
            float_bounds: None,
        }
    }
}

impl Accumulator {
    fn count(&mut self, value: impl FnOnce() -> Value) {
        if !self.countable {
            return;
        }
        let value = value();
        let key = value.to_string();
        if let Some(entry) = self.counts.get_mut(&key) {
            entry.1 += 1;
        } else if self.counts.len() < MAX_EXACT_COUNTS {
            self.counts.insert(key, (value, 1));
        } else {
            self.countable = false;
            self.counts.clear();
        }
    }

    fn int(&mut self, v: i128) {
        self.hashed = true;
        self.hll.add_hash(xxh3_64(&v.to_le_bytes()));
        self.int_bounds = Some(match self.int_bounds {
            Some((lo, hi)) => (lo.min(v), hi.max(v)),
            None => (v, v),
        });
        self.count(|| int_json(v));
    }

    fn float(&mut self, v: f64) {
        self.hashed = true;
        self.countable = false;
        self.hll.add_hash(xxh3_64(&v.to_bits().to_le_bytes()));
        if !v.is_nan() {
            self.float_bounds = Some(match self.float_bounds {
                Some((lo, hi)) => (lo.min(v), hi.max(v)),
                None => (v, v),
            });
        }
    }

    fn boolean(&mut self, v: bool) {
        self.hashed = true;
        self.hll.add_hash(xxh3_64(&[v as u8]));
        self.min = Some(Value::Bool(
            self.min
                .as_ref()
                .and_then(Value::as_bool)
                .map_or(v, |m| m & v),
        ));
        self.max = Some(Value::Bool(
            self.max
                .as_ref()
                .and_then(Value::as_bool)
                .map_or(v, |m| m | v),
        ));
        self.count(|| Value::Bool(v));
    }

    fn string(&mut self, v: &str) {
        self.hashed = true;
        self.hll.add_hash(xxh3_64(v.as_bytes()));
        let cut = truncate(v, MAX_COUNTED_STRING);
        if cut.len() < v.len() {
            self.truncated = true;
        }
        if self
            .min
            .as_ref()
            .and_then(Value::as_str)
            .is_none_or(|m| cut < m)
        {
            self.min = Some(Value::String(cut.to_owned()));
        }
        if self
            .max
            .as_ref()
            .and_then(Value::as_str)
            .is_none_or(|m| cut > m)
        {
            self.max = Some(Value::String(cut.to_owned()));
        }
        if v.len() > MAX_COUNTED_STRING {
            self.countable = false;
            self.counts.clear();
        } else {
            self.count(|| Value::String(v.to_owned()));
        }
    }

    fn finish(self, stats: &mut FieldStats) {
        if let Some((lo, hi)) = self.int_bounds {
            stats.min = Some(int_json(lo));
            stats.max = Some(int_json(hi));
        } else if let Some((lo, hi)) = self.float_bounds {
            stats.min = serde_json::Number::from_f64(lo).map(Value::Number);
            stats.max = serde_json::Number::from_f64(hi).map(Value::Number);
        } else {
            stats.min = self.min;
            stats.max = self.max;
        }
        stats.truncated = self.truncated;
        stats.hll = self
            .hashed
            .then_some(self.hll)
            .or_else(|| Some(Hll::default()));
        stats.counts = self.countable.then_some(self.counts);
    }
}

fn int_json(v: i128) -> Value {
    match (i64::try_from(v), u64::try_from(v)) {
        (Ok(i), _) => json!(i),
        (_, Ok(u)) => json!(u),
        _ => Value::Null,
    }
}

/// The longest prefix of `s` of at most `max` bytes, at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float32Array, Int32Array, Int64Array, StringArray};
    use std::sync::Arc;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn merging_shards_equals_the_statistics_of_all_records() {
        let labels = ["cat", "dog", "cat", "eel", "cat", "dog"];
        let mut whole = ShardStats::new();
        let mut parts = ShardStats::new();
        let mut part = ShardStats::new();
        for (i, label) in labels.iter().enumerate() {
            whole.add_record(3, 10 * i as u64);
            part.add_record(3, 10 * i as u64);
            let b = batch(vec![
                (
                    "label",
                    Arc::new(StringArray::from(vec![*label])) as ArrayRef,
                ),
                (
                    "n",
                    Arc::new(Int32Array::from(vec![Some(i as i32)])) as ArrayRef,
                ),
            ]);
            part.add_fields(&b).unwrap();
            if i % 2 == 1 {
                parts.merge(&part);
                part = ShardStats::new();
            }
        }
        let all = batch(vec![
            (
                "label",
                Arc::new(StringArray::from(labels.to_vec())) as ArrayRef,
            ),
            (
                "n",
                Arc::new(Int32Array::from((0..6).map(Some).collect::<Vec<_>>())) as ArrayRef,
            ),
        ]);
        whole.add_fields(&all).unwrap();
        assert_eq!(parts, whole);
        let report = whole.report(&["label".into(), "n".into(), "missing".into()]);
        assert_eq!(
            report["fields"]["label"]["counts"],
            json!([["cat", 3], ["dog", 2], ["eel", 1]])
        );
        assert_eq!(report["fields"]["label"]["distinct"], json!(3));
        assert_eq!(report["fields"]["n"]["min"], json!(0));
        assert_eq!(report["fields"]["n"]["max"], json!(5));
        assert_eq!(report["fields"]["missing"]["nulls"], json!(6));
        assert_eq!(report["value_size"]["max"], json!(50));
    }

    #[test]
    fn json_round_trips() {
        let mut stats = ShardStats::new();
        for i in 0..5000u64 {
            stats.add_record(i % 7, i);
        }
        stats.set_stored_bytes(1234);
        let b = batch(vec![
            (
                "i",
                Arc::new(Int64Array::from_iter(
                    (0..5000).map(|i| (i % 3 != 0).then_some(i)),
                )),
            ),
            (
                "f",
                Arc::new(Float32Array::from_iter(
                    (0..5000).map(|i| Some(i as f32 / 3.0)),
                )),
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..5000).map(|i| format!("v{}", i % 10)),
                )),
            ),
        ]);
        stats.add_fields(&b).unwrap();
        let print = Fingerprint {
            records: 5000,
            data_len: 1,
            index_xxh3: 2,
            edges_xxh3: 3,
        };
        let bytes = stats.to_json_bytes(Some(&print)).unwrap();
        let (back, fp) = ShardStats::from_json_bytes(&bytes, "s.json").unwrap();
        assert_eq!(fp, Some(print));
        assert_eq!(back, stats);
        assert!(
            stats.fields["i"].counts.is_none(),
            "more than 1024 distinct"
        );
        assert_eq!(stats.fields["s"].counts.as_ref().unwrap().len(), 10);
        assert_eq!(stats.fields["i"].nulls, 1667);
        assert!(ShardStats::from_json_bytes(b"{", "s.json")
            .unwrap_err()
            .to_string()
            .starts_with("s.json"));
    }

    #[test]
    fn percentiles_are_within_one_percent() {
        let mut h = SizeHistogram::default();
        for size in 1..=100_000u64 {
            h.add(size);
        }
        for (q, exact) in [(0.5, 50_000.0), (0.9, 90_000.0), (0.99, 99_000.0)] {
            let got = h.quantile(q).unwrap() as f64;
            assert!((got - exact).abs() / exact <= 0.011, "{q}: {got}");
        }
        assert_eq!(h.quantile(0.0), Some(1));
        assert_eq!(h.quantile(1.0), Some(100_000));
    }
}
