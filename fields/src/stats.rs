//! A shard's statistics (`NNNNNN.stats.json`) and their merged totals (in the
//! commit file): sizes of keys and values, a value size histogram, and each
//! column's [`FieldStats`].

use arrow_array::RecordBatch;
use serde_json::{Map, Value};

use crate::error::{FieldsError, Result};
use crate::field_stats::FieldStats;
use crate::fingerprint::Fingerprint;
use crate::json_util;

/// The statistics format this crate writes (`"format"`).
pub const STATS_FORMAT: u64 = 1;
/// The largest statistics file [`ShardStats::decode`] reads.
pub const MAX_STATS_BYTES: usize = 64 << 20;

/// The bucket of a value size in the histogram: 0 for 0, else
/// `ceil(ln(s) / ln(1.01)) + 1` (natural logarithms in `f64`). Bucket `b >= 1`
/// holds the sizes in `(1.01^(b-2), 1.01^(b-1)]`.
pub fn size_bucket(size: u64) -> u32 {
    if size == 0 {
        0
    } else {
        ((size as f64).ln() / 1.01f64.ln()).ceil() as u32 + 1
    }
}

/// The bucket of `u64::MAX`, the last.
const MAX_BUCKET: u32 = 4460;

/// The statistics of one shard, or the merged totals of several
/// (FORMAT.md, "Fields": statistics).
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use bcd_fields::ShardStats;
///
/// let mut stats = ShardStats::new();
/// for (i, size) in [100u64, 200, 300].into_iter().enumerate() {
///     stats.add_record(4, size / 2, size);
/// }
/// let labels = RecordBatch::try_from_iter([("label", Arc::new(Int64Array::from(vec![1, 1, 2])) as _)]).unwrap();
/// stats.add_fields(&labels).unwrap();
///
/// assert_eq!((stats.records, stats.raw_bytes, stats.key_bytes), (3, 600, 12));
/// let p50 = stats.value_size_percentile(0.5).unwrap();
/// assert!((198..=202).contains(&p50));
/// assert_eq!(stats.field("label").unwrap().distinct(), Some(2));
///
/// let json = stats.encode();
/// assert_eq!(ShardStats::decode(&json, "000000.stats.json").unwrap(), stats);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ShardStats {
    /// The shard's fingerprint (per-shard files only; `None` in totals).
    pub fingerprint: Option<Fingerprint>,
    /// Records.
    pub records: u64,
    /// Bytes of keys.
    pub key_bytes: u64,
    /// Bytes of values as stored (LZ4 blocks with their size prefixes).
    pub stored_bytes: u64,
    /// Bytes of values uncompressed.
    pub raw_bytes: u64,
    /// The smallest uncompressed value size.
    pub min_value_size: Option<u64>,
    /// The largest uncompressed value size.
    pub max_value_size: Option<u64>,
    /// Records per size bucket ([`size_bucket`]), index = bucket.
    histogram: Vec<u64>,
    /// Column statistics in order of first appearance.
    fields: Vec<(String, FieldStats)>,
}

impl ShardStats {
    /// No records.
    pub fn new() -> ShardStats {
        ShardStats::default()
    }

    /// Adds one record's sizes: its key, its value as stored, and its value
    /// uncompressed.
    #[inline]
    pub fn add_record(&mut self, key_len: u64, stored_len: u64, raw_len: u64) {
        self.records += 1;
        self.key_bytes += key_len;
        self.stored_bytes += stored_len;
        self.raw_bytes += raw_len;
        self.min_value_size = Some(self.min_value_size.map_or(raw_len, |m| m.min(raw_len)));
        self.max_value_size = Some(self.max_value_size.map_or(raw_len, |m| m.max(raw_len)));
        let b = size_bucket(raw_len) as usize;
        if b >= self.histogram.len() {
            self.histogram.resize(b + 1, 0);
        }
        self.histogram[b] += 1;
    }

    /// Adds the fields of the next `batch.num_rows()` records: every column's
    /// statistics. A record without a column counts as a null of it (so the
    /// batches need not have the same columns, and records added without
    /// fields are nulls of every column).
    pub fn add_fields(&mut self, batch: &RecordBatch) -> Result<()> {
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            let i = match self.fields.iter().position(|(n, _)| n == field.name()) {
                Some(i) => i,
                None => {
                    self.fields
                        .push((field.name().clone(), FieldStats::new(field.data_type())));
                    self.fields.len() - 1
                }
            };
            self.fields[i].1.add_array(column).map_err(|e| {
                FieldsError::Unsupported(format!("field \"{}\": {e}", field.name()))
            })?;
        }
        Ok(())
    }

    /// Forgets every column's statistics (the sizes are kept): for a writer
    /// that adds the same fields again.
    pub fn clear_fields(&mut self) {
        self.fields.clear();
    }

    /// The statistics of column `name`.
    pub fn field(&self, name: &str) -> Option<&FieldStats> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }

    /// Every column's statistics, in order of first appearance (decoded ones
    /// in name order).
    pub fn fields(&self) -> impl Iterator<Item = (&str, &FieldStats)> {
        self.fields.iter().map(|(n, s)| (n.as_str(), s))
    }

    /// Records of column `name` that are null: those without a value.
    pub fn nulls(&self, name: &str) -> u64 {
        self.records - self.field(name).map_or(0, |f| f.count().min(self.records))
    }

    /// The histogram's non-empty buckets, as (bucket, records).
    pub fn histogram(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.histogram
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(b, &n)| (b as u32, n))
    }

    /// The value size at quantile `q` (0 to 1; 0.5 is the median) from the
    /// histogram: the upper bound of the bucket holding the value of rank
    /// `ceil(q n)`, within the exact min and max. Within 1% of the exact
    /// percentile; `None` without records.
    pub fn value_size_percentile(&self, q: f64) -> Option<u64> {
        let (min, max) = (self.min_value_size?, self.max_value_size?);
        let rank = ((q.clamp(0.0, 1.0) * self.records as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (b, n) in self.histogram() {
            seen += n;
            if seen >= rank {
                let upper = if b == 0 {
                    0.0
                } else {
                    1.01f64.powi(b as i32 - 1)
                };
                return Some((upper.floor() as u64).clamp(min, max));
            }
        }
        Some(max)
    }

    /// Adds another shard's (or total's) statistics: sizes and counts add,
    /// mins and maxes combine, histograms add, and columns merge (a column
    /// one side lacks is null in its records). The result has no
    /// fingerprint. An error (two types that do not unify) leaves `self`
    /// unchanged.
    pub fn merge(&mut self, other: &ShardStats) -> Result<()> {
        let mut fields = self.fields.clone();
        for (name, stats) in &other.fields {
            match fields.iter_mut().find(|(n, _)| n == name) {
                Some((_, mine)) => mine
                    .merge(stats)
                    .map_err(|e| FieldsError::Unsupported(format!("field \"{name}\": {e}")))?,
                None => fields.push((name.clone(), stats.clone())),
            }
        }
        self.fields = fields;
        self.fingerprint = None;
        self.records += other.records;
        self.key_bytes += other.key_bytes;
        self.stored_bytes += other.stored_bytes;
        self.raw_bytes += other.raw_bytes;
        self.min_value_size = option_fold(self.min_value_size, other.min_value_size, u64::min);
        self.max_value_size = option_fold(self.max_value_size, other.max_value_size, u64::max);
        if other.histogram.len() > self.histogram.len() {
            self.histogram.resize(other.histogram.len(), 0);
        }
        for (a, b) in self.histogram.iter_mut().zip(&other.histogram) {
            *a += b;
        }
        Ok(())
    }

    /// The JSON object of FORMAT.md ("fingerprint" only when there is one).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("format".into(), STATS_FORMAT.into());
        if let Some(f) = &self.fingerprint {
            m.insert("fingerprint".into(), f.to_json());
        }
        m.insert("records".into(), self.records.into());
        m.insert("key_bytes".into(), self.key_bytes.into());
        m.insert("stored_bytes".into(), self.stored_bytes.into());
        m.insert("raw_bytes".into(), self.raw_bytes.into());
        let mut sizes = Map::new();
        sizes.insert("min".into(), self.min_value_size.into());
        sizes.insert("max".into(), self.max_value_size.into());
        let histogram: Vec<Value> = self
            .histogram()
            .map(|(b, n)| Value::from(vec![u64::from(b), n]))
            .collect();
        sizes.insert("histogram".into(), histogram.into());
        m.insert("value_sizes".into(), Value::Object(sizes));
        let fields: Map<String, Value> = self
            .fields
            .iter()
            .map(|(n, s)| (n.clone(), s.to_json(self.records)))
            .collect();
        m.insert("fields".into(), Value::Object(fields));
        Value::Object(m)
    }

    /// The bytes of `NNNNNN.stats.json`: [`ShardStats::to_json`], compact.
    pub fn encode(&self) -> Vec<u8> {
        self.to_json().to_string().into_bytes()
    }

    /// Reads `NNNNNN.stats.json` (at most [`MAX_STATS_BYTES`]), checking it:
    /// format 1, every count a non-negative integer, the histogram summing to
    /// the records, each column's nulls and values summing to them, exact
    /// counts summing to the values. `name` names the file in errors.
    pub fn decode(bytes: &[u8], name: &str) -> Result<ShardStats> {
        let obj = json_util::parse_object(bytes, MAX_STATS_BYTES, name)?;
        ShardStats::from_json(&Value::Object(obj), name)
    }

    /// Reads [`ShardStats::to_json`]'s object (see [`ShardStats::decode`]).
    pub fn from_json(value: &Value, name: &str) -> Result<ShardStats> {
        let obj = json_util::as_object(value, "the statistics", name)?;
        let format = json_util::u64_member(obj, "format", name)?;
        if format != STATS_FORMAT {
            return Err(FieldsError::invalid(
                name,
                format!("statistics format {format} is not {STATS_FORMAT}"),
            ));
        }
        let fingerprint = match obj.get("fingerprint") {
            None | Some(Value::Null) => None,
            Some(v) => Some(Fingerprint::from_json(v, name)?),
        };
        let records = json_util::u64_member(obj, "records", name)?;
        let sizes = json_util::as_object(
            json_util::member(obj, "value_sizes", name)?,
            "\"value_sizes\"",
            name,
        )?;
        let optional = |key: &str| -> Result<Option<u64>> {
            match sizes.get(key).unwrap_or(&Value::Null) {
                Value::Null => Ok(None),
                v => json_util::as_u64(v, &format!("\"value_sizes\".\"{key}\""), name).map(Some),
            }
        };
        let (min_value_size, max_value_size) = (optional("min")?, optional("max")?);
        let consistent = match (min_value_size, max_value_size) {
            (None, None) => records == 0,
            (Some(lo), Some(hi)) => records > 0 && lo <= hi,
            _ => false,
        };
        if !consistent {
            return Err(FieldsError::invalid(
                name,
                "\"value_sizes\" min and max do not fit the records",
            ));
        }
        let entries = json_util::member(sizes, "histogram", name)?
            .as_array()
            .ok_or_else(|| {
                FieldsError::invalid(name, "\"value_sizes\".\"histogram\" is not an array")
            })?;
        let mut histogram = Vec::new();
        let mut total: u64 = 0;
        for entry in entries {
            let pair = entry.as_array().map(Vec::as_slice);
            let (b, n) = match pair {
                Some([b, n]) => (
                    json_util::as_u64(b, "a histogram bucket", name)?,
                    json_util::as_u64(n, "a histogram count", name)?,
                ),
                _ => {
                    return Err(FieldsError::invalid(
                        name,
                        format!("histogram entry {entry} is not [bucket, count]"),
                    ))
                }
            };
            if b > u64::from(MAX_BUCKET) || n == 0 || (b as usize) < histogram.len() {
                return Err(FieldsError::invalid(
                    name,
                    format!("histogram entry [{b}, {n}] is out of order, empty or past bucket {MAX_BUCKET}"),
                ));
            }
            histogram.resize(b as usize + 1, 0);
            histogram[b as usize] = n;
            total = total
                .checked_add(n)
                .ok_or_else(|| FieldsError::invalid(name, "the histogram overflows"))?;
        }
        if total != records {
            return Err(FieldsError::invalid(
                name,
                format!("the histogram holds {total} records, not {records}"),
            ));
        }
        let fields_obj =
            json_util::as_object(json_util::member(obj, "fields", name)?, "\"fields\"", name)?;
        let mut fields = Vec::with_capacity(fields_obj.len());
        for (field, v) in fields_obj {
            let stats = FieldStats::from_json(v, records, &format!("field \"{field}\""), name)?;
            fields.push((field.clone(), stats));
        }
        Ok(ShardStats {
            fingerprint,
            records,
            key_bytes: json_util::u64_member(obj, "key_bytes", name)?,
            stored_bytes: json_util::u64_member(obj, "stored_bytes", name)?,
            raw_bytes: json_util::u64_member(obj, "raw_bytes", name)?,
            min_value_size,
            max_value_size,
            histogram,
            fields,
        })
    }

    /// Fields in name order.
    fn sorted_fields(&self) -> Vec<&(String, FieldStats)> {
        let mut f: Vec<_> = self.fields.iter().collect();
        f.sort_by(|a, b| a.0.cmp(&b.0));
        f
    }
}

/// Equal statistics, whatever the order of their columns (decoded ones are in
/// name order) and the length of their histograms' empty tails.
impl PartialEq for ShardStats {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
            && self.records == other.records
            && self.key_bytes == other.key_bytes
            && self.stored_bytes == other.stored_bytes
            && self.raw_bytes == other.raw_bytes
            && self.min_value_size == other.min_value_size
            && self.max_value_size == other.max_value_size
            && self.histogram().eq(other.histogram())
            && self.sorted_fields() == other.sorted_fields()
    }
}

fn option_fold(a: Option<u64>, b: Option<u64>, f: fn(u64, u64) -> u64) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, StringArray};

    #[test]
    fn buckets_are_log_1_01() {
        assert_eq!(size_bucket(0), 0);
        assert_eq!(size_bucket(1), 1);
        assert_eq!(size_bucket(2), 71);
        assert_eq!(size_bucket(u64::MAX), MAX_BUCKET);
        // Every size is within 1% below its bucket's upper bound.
        for s in (1..100_000u64).chain([1 << 20, 1 << 32, u64::MAX / 3]) {
            let b = size_bucket(s);
            let upper = 1.01f64.powi(b as i32 - 1);
            assert!(
                upper >= s as f64 * (1.0 - 1e-12) && upper <= s as f64 * 1.01 * (1.0 + 1e-12),
                "{s}"
            );
        }
    }

    #[test]
    fn percentiles_are_within_one_percent() {
        let mut stats = ShardStats::new();
        let mut sizes: Vec<u64> = (0..10_000u64).map(|i| (i * 7919) % 1_000_003 + 1).collect();
        for &s in &sizes {
            stats.add_record(0, s, s);
        }
        sizes.sort_unstable();
        for q in [0.5, 0.9, 0.99] {
            let exact = sizes[(q * sizes.len() as f64).ceil() as usize - 1] as f64;
            let got = stats.value_size_percentile(q).unwrap() as f64;
            assert!(
                (got - exact).abs() <= exact * 0.01 + 1.0,
                "p{q}: {got} vs {exact}"
            );
        }
        assert_eq!(stats.value_size_percentile(1.0), stats.max_value_size);
        assert_eq!(ShardStats::new().value_size_percentile(0.5), None);
    }

    fn sample(offset: i64) -> ShardStats {
        let mut s = ShardStats::new();
        for i in 0..4u64 {
            s.add_record(3, 10 + i, 20 + i * 1000);
        }
        let batch = RecordBatch::try_from_iter([
            (
                "n",
                Arc::new(Int64Array::from(vec![Some(offset), None, Some(2), Some(3)])) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from(vec!["a", "b", "c", "d"])) as ArrayRef,
            ),
        ])
        .unwrap();
        s.add_fields(&batch).unwrap();
        s
    }

    #[test]
    fn the_json_round_trips_and_has_the_documented_shape() {
        let mut s = sample(1);
        s.fingerprint = Some(Fingerprint {
            records: 4,
            data_len: 40,
            index_xxh3: 1,
            edges_xxh3: 2,
        });
        let json = s.to_json();
        assert_eq!(json["format"], 1);
        assert_eq!(json["value_sizes"]["min"], 20);
        assert_eq!(json["fields"]["n"]["nulls"], 1);
        assert_eq!(
            json["fields"]["n"]["counts"],
            serde_json::json!([[1, 1], [2, 1], [3, 1]])
        );
        assert_eq!(json["fields"]["s"]["type"], "Utf8");
        let back = ShardStats::decode(&s.encode(), "000003.stats.json").unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn merge_adds_and_fills_missing_columns_with_nulls() {
        let mut a = sample(1);
        let mut b = ShardStats::new();
        b.add_record(1, 1, 1);
        a.merge(&b).unwrap();
        assert_eq!((a.records, a.nulls("n"), a.nulls("s")), (5, 2, 1));
        assert_eq!(a.min_value_size, Some(1));
        let json = a.to_json();
        assert_eq!(json["fields"]["s"]["nulls"], 1);
        assert_eq!(
            ShardStats::from_json(&json, "commit.000002.json").unwrap(),
            a
        );
    }

    #[test]
    fn decoding_refuses_inconsistent_files() {
        let good = sample(1).to_json();
        type Edit = Box<dyn Fn(&mut Value)>;
        let edits: Vec<(&str, Edit)> = vec![
            ("format", Box::new(|v| v["format"] = 2.into())),
            ("records", Box::new(|v| v["records"] = 5.into())),
            ("records float", Box::new(|v| v["records"] = 4.0.into())),
            ("key_bytes", Box::new(|v| v["key_bytes"] = (-1).into())),
            (
                "histogram sum",
                Box::new(|v| v["value_sizes"]["histogram"][0][1] = 9.into()),
            ),
            (
                "histogram order",
                Box::new(|v| v["value_sizes"]["histogram"] = serde_json::json!([[900, 2], [5, 2]])),
            ),
            (
                "histogram bucket",
                Box::new(|v| v["value_sizes"]["histogram"] = serde_json::json!([[4461, 4]])),
            ),
            (
                "min > max",
                Box::new(|v| v["value_sizes"]["min"] = 1_000_000.into()),
            ),
            (
                "missing max",
                Box::new(|v| v["value_sizes"]["max"] = Value::Null),
            ),
            ("fields", Box::new(|v| v["fields"] = serde_json::json!([]))),
            (
                "field nulls",
                Box::new(|v| v["fields"]["n"]["nulls"] = 0.into()),
            ),
            (
                "fingerprint",
                Box::new(|v| v["fingerprint"] = serde_json::json!({"records": 1})),
            ),
        ];
        for (what, edit) in edits {
            let mut bad = good.clone();
            edit(&mut bad);
            let err = ShardStats::decode(bad.to_string().as_bytes(), "000007.stats.json");
            let err = err
                .err()
                .unwrap_or_else(|| panic!("{what} accepted"))
                .to_string();
            assert!(err.starts_with("000007.stats.json: "), "{what}: {err}");
        }
        assert!(ShardStats::decode(b"[]", "s").is_err());
        assert!(ShardStats::decode(&vec![b' '; MAX_STATS_BYTES + 1], "s").is_err());
    }
}
