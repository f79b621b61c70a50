//! A complete sample as a record: its value member, and its other members as
//! fields typed by their extensions (integers, text, JSON objects spread into
//! top-level fields), as webdataset's default decoders read them.

use super::*;

/// The part of an extension that decides its type: after its last `.`, as
/// webdataset's `re.sub(r".*[.]", "", key)` (whose `.*` stops at a newline).
pub(super) fn type_part(extension: &str) -> &str {
    let searchable = &extension[..extension.find('\n').unwrap_or(extension.len())];
    match searchable.rfind('.') {
        Some(dot) => &extension[dot + 1..],
        None => extension,
    }
}

/// The record of a complete sample with the names of its fields derived from
/// JSON members, or why it cannot be one.
pub(super) fn build_record(
    archive: &str,
    sample: Sample,
    options: &SampleOptions,
) -> Result<(Record, Vec<String>), SourceError> {
    let key_text = show(&sample.key);
    let error = |part: &Part, reason: String| SourceError::Invalid {
        file: archive.to_owned(),
        location: format!(
            "sample {key_text:?} (member {:?}, header at byte {})",
            part.name, part.offset
        ),
        reason,
    };
    let Some(value_at) = options
        .value_exts
        .iter()
        .find_map(|wanted| sample.parts.iter().position(|p| &p.extension == wanted))
    else {
        let first = &sample.parts[0];
        let extensions: Vec<&str> = sample.parts.iter().map(|p| p.extension.as_str()).collect();
        return Err(error(
            first,
            format!(
                "no value member: its extensions are {} and none is one of the value extensions ({})",
                extensions.join(", "),
                options.value_exts.join(", ")
            ),
        ));
    };
    let mut fields = Fields::new();
    let mut derived = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    let mut add = |fields: &mut Fields, part: &Part, name: String, value: FieldValue| {
        if !names.insert(name.clone()) {
            return Err(error(
                part,
                format!("the field {name:?} would be given twice"),
            ));
        }
        fields.push(name, value);
        Ok(())
    };
    for (i, part) in sample.parts.iter().enumerate() {
        if i == value_at {
            continue;
        }
        let kind = type_part(&part.extension);
        let value = if INTEGER_EXTS.contains(&kind) {
            FieldValue::Int64(parse_integer(&part.data).map_err(|reason| error(part, reason))?)
        } else if TEXT_EXTS.contains(&kind) {
            FieldValue::String(utf8(&part.data).map_err(|reason| error(part, reason))?)
        } else if JSON_EXTS.contains(&kind) {
            let text = utf8(&part.data).map_err(|reason| error(part, reason))?;
            let TopLevel(entries) = serde_json::from_str(&text)
                .map_err(|e| error(part, format!("not valid JSON: {e}")))?;
            add(
                &mut fields,
                part,
                part.extension.clone(),
                FieldValue::String(text),
            )?;
            if options.json_fields {
                if let Some(entries) = entries {
                    for (key, value) in entries {
                        if let Some(value) = scalar(value) {
                            let name = format!("{}.{key}", part.extension);
                            add(&mut fields, part, name.clone(), value)?;
                            derived.push(name);
                        }
                    }
                }
            }
            continue;
        } else {
            FieldValue::Binary(part.data.clone())
        };
        add(&mut fields, part, part.extension.clone(), value)?;
    }
    let mut parts = sample.parts;
    let value = parts.swap_remove(value_at);
    if value.extension != UNNAMED_VALUE_EXT {
        add(
            &mut fields,
            &value,
            VALUE_EXT_FIELD.to_owned(),
            FieldValue::String(value.extension.clone()),
        )?;
    }
    let record = Record {
        key: sample.key,
        value: value.data,
        origin: Origin::Member {
            archive: archive.to_owned(),
            member: value.name,
            offset: value.offset,
        },
        fields,
    };
    Ok((record, derived))
}

/// The entries of a JSON document's top-level object in document order (a
/// repeated key keeps its first place and its last value, as in Python's
/// `json`), or `None` for a document that is not an object.
struct TopLevel(Option<Vec<(String, serde_json::Value)>>);

impl<'de> serde::Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TopLevelVisitor)
    }
}

struct TopLevelVisitor;

impl<'de> serde::de::Visitor<'de> for TopLevelVisitor {
    type Value = TopLevel;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
        let mut entries: Vec<(String, serde_json::Value)> = Vec::new();
        let mut at = std::collections::HashMap::new();
        while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
            match at.get(&key) {
                Some(&i) => entries[i] = (key, value),
                None => {
                    at.insert(key.clone(), entries.len());
                    entries.push((key, value));
                }
            }
        }
        Ok(TopLevel(Some(entries)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<TopLevel, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(TopLevel(None))
    }

    fn visit_bool<E>(self, _: bool) -> Result<TopLevel, E> {
        Ok(TopLevel(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<TopLevel, E> {
        Ok(TopLevel(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<TopLevel, E> {
        Ok(TopLevel(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<TopLevel, E> {
        Ok(TopLevel(None))
    }

    fn visit_str<E>(self, _: &str) -> Result<TopLevel, E> {
        Ok(TopLevel(None))
    }

    fn visit_unit<E>(self) -> Result<TopLevel, E> {
        Ok(TopLevel(None))
    }
}

/// A JSON scalar as a typed field value; `None` for arrays and objects.
fn scalar(value: serde_json::Value) -> Option<FieldValue> {
    use serde_json::Value;
    Some(match value {
        Value::Null => FieldValue::Null,
        Value::Bool(b) => FieldValue::Bool(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => FieldValue::Int64(i),
            // Integers beyond i64 and every other number: a float.
            None => FieldValue::Float64(n.as_f64()?),
        },
        Value::String(s) => FieldValue::String(s),
        Value::Array(_) | Value::Object(_) => return None,
    })
}

fn utf8(data: &[u8]) -> Result<String, String> {
    String::from_utf8(data.to_vec()).map_err(|e| format!("not valid UTF-8 text: {e}"))
}

/// A decimal integer with an optional sign, trimmed of ASCII whitespace.
pub(super) fn parse_integer(data: &[u8]) -> Result<i64, String> {
    let text = data.trim_ascii();
    let bad = || {
        let shown = String::from_utf8_lossy(&text[..text.len().min(40)]).into_owned();
        format!("{shown:?} is not a decimal integer")
    };
    let digits = text
        .strip_prefix(b"+")
        .or_else(|| text.strip_prefix(b"-"))
        .unwrap_or(text);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.trim_start_matches('+').parse::<i64>().ok())
        .ok_or_else(|| {
            format!(
                "{} does not fit a 64-bit signed integer",
                String::from_utf8_lossy(text)
            )
        })
}
