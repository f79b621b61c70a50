//! Folding a column's values into its statistics.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, ArrayAccessor, ArrayRef};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;

use super::*;

impl FieldStats {
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
                    let hash = |v: i128| xxh3_64_with_seed(&v.to_le_bytes(), canonical::SEED_INT);
                    if counted && acc.counts.is_some() {
                        each_valid(values.len(), nulls.as_ref(), |i| {
                            let v = i128::from(values[i]);
                            let h = hash(v);
                            acc.hash(h);
                            acc.count(h, KeyRef::Int(v));
                        });
                    } else {
                        // Past the exact counts (or without them): the sketch only.
                        let hll = &mut acc.hll;
                        each_valid(values.len(), nulls.as_ref(), |i| {
                            if let Some(hll) = hll.as_mut() {
                                hll.add_hash(hash(i128::from(values[i])));
                            }
                        });
                    }
                    // Arrow's kernels skip the nulls (integers: exact).
                    if let (Some(lo), Some(hi)) = (
                        arrow_arith::aggregate::min(a),
                        arrow_arith::aggregate::max(a),
                    ) {
                        acc.int(i128::from(lo));
                        acc.int(i128::from(hi));
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
                    each_valid(values.len(), nulls.as_ref(), |i| add(f64::from(values[i])));
                } else {
                    let values = array.as_primitive::<Float64Type>().values();
                    each_valid(values.len(), nulls.as_ref(), |i| add(values[i]));
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
                let range = match &t {
                    DataType::Utf8 => add_strings(array.as_string::<i32>(), &nulls, &mut acc),
                    DataType::LargeUtf8 => add_strings(array.as_string::<i64>(), &nulls, &mut acc),
                    _ => add_strings(array.as_string_view(), &nulls, &mut acc),
                };
                if let Some((lo, hi)) = range {
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
}

/// Calls `f` with each row of `len` rows that `nulls` does not make null.
#[inline]
fn each_valid(len: usize, nulls: Option<&NullBuffer>, f: impl FnMut(usize)) {
    match nulls {
        Some(n) if n.null_count() > 0 => n.valid_indices().for_each(f),
        _ => (0..len).for_each(f),
    }
}

/// Adds the valid strings of `array` to `acc`'s sketch and counts; returns
/// their least and greatest (by bytes), if any.
fn add_strings<'a, A>(
    array: A,
    nulls: &Option<NullBuffer>,
    acc: &mut Acc,
) -> Option<(&'a str, &'a str)>
where
    A: ArrayAccessor<Item = &'a str>,
{
    let mut range: Option<(&str, &str)> = None;
    each_valid(array.len(), nulls.as_ref(), |i| {
        let s = array.value(i);
        let h = xxh3_64_with_seed(s.as_bytes(), canonical::SEED_UTF8);
        acc.hash(h);
        if s.len() <= MAX_STRING_STAT_BYTES {
            acc.count(h, KeyRef::Utf8(s));
        } else {
            acc.counts = None;
        }
        range = Some(match range {
            Some((lo, hi)) => (if s < lo { s } else { lo }, if s > hi { s } else { hi }),
            None => (s, s),
        });
    });
    range
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
