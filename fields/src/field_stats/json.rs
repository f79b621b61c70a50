//! The statistics object of FORMAT.md: writing it, and reading it back with
//! every value checked against the object itself and the shard.

use serde_json::{Map, Value};

use super::*;
use crate::json_util::{self, float_json};

impl FieldStats {
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
