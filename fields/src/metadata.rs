//! How a run's metadata joins the dataset's (FORMAT.md, "`commit.NNNNNN.json`",
//! "Merging metadata"): the dataset owns its meanings. A class vocabulary is
//! append-only (known names keep their index, new names get the next ones, and
//! the run's index columns are renumbered by name: [`Remap`]); a few list keys
//! grow; every other value must agree, or the commit is refused naming the key
//! and both values.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{FieldsError, Result};

/// The metadata key of the class names that `label_index` counts in.
pub const CLASS_NAMES_KEY: &str = "class_names";
/// The index column [`CLASS_NAMES_KEY`] names the classes of.
pub const CLASS_NAMES_COLUMN: &str = "label_index";
/// The metadata key of the class names of each ClassLabel column, by column.
pub const CLASS_LABELS_KEY: &str = "class_labels";
/// The metadata key of a Parquet file's `huggingface` schema metadata.
pub const HUGGINGFACE_KEY: &str = "huggingface";
/// The metadata key of how a source's value and key were extracted.
pub const VALUE_KEY: &str = "value";

/// The metadata of a commit after a run, and how the run's index columns are
/// renumbered into the dataset's vocabularies.
#[derive(Clone, Debug, PartialEq)]
pub struct MergedMetadata {
    /// The dataset's metadata with the run's merged in.
    pub metadata: Map<String, Value>,
    /// The run's index columns whose numbers change.
    pub remap: Remap,
}

/// How a run's class indices become the dataset's, by column: index `i` of the
/// run becomes `to[i]`. Only columns whose numbers change are listed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remap {
    pub(crate) columns: BTreeMap<String, Vec<i64>>,
}

impl Remap {
    /// No column changes.
    pub fn is_identity(&self) -> bool {
        self.columns.is_empty()
    }

    /// The columns renumbered, each with the new index of every run index.
    pub fn columns(&self) -> impl Iterator<Item = (&str, &[i64])> {
        self.columns.iter().map(|(c, to)| (c.as_str(), &to[..]))
    }
}

/// Merges the metadata a run brings (`run`) into the dataset's (`dataset`), by
/// the rules of FORMAT.md:
///
/// - vocabularies (`class_names`, each column's names in `class_labels`, the
///   `names` of every ClassLabel feature in `huggingface`, with its
///   `num_classes`) keep the dataset's names at their indices and append the
///   run's new names in the run's order; the run's indices of `label_index`
///   (for `class_names`) and of each `class_labels` column are renumbered by name;
/// - `derived_fields` is the union (the dataset's names, then the run's new ones),
///   `sources` the dataset's entries followed by the run's; `value` (the value
///   and key columns of the first source, which an export names its columns
///   after) stays the dataset's;
/// - objects merge member by member; any other value the run gives must equal
///   the dataset's (a key only one side has is taken as it is), else the merge
///   is refused naming the key and both values.
///
/// ```
/// use bcd_fields::merge_metadata;
/// use serde_json::json;
///
/// let dataset = json!({"class_names": ["cat", "dog"]});
/// let run = json!({"class_names": ["ant", "cat"]});
/// let merged = merge_metadata(dataset.as_object().unwrap(), run.as_object().unwrap()).unwrap();
/// assert_eq!(merged.metadata["class_names"], json!(["cat", "dog", "ant"]));
/// // The run's ant (0) is the dataset's 2, its cat (1) the dataset's 0.
/// assert_eq!(merged.remap.columns().collect::<Vec<_>>(), [("label_index", &[2, 0][..])]);
/// ```
pub fn merge_metadata(
    dataset: &Map<String, Value>,
    run: &Map<String, Value>,
) -> Result<MergedMetadata> {
    let mut metadata = dataset.clone();
    let mut remap = Remap::default();
    for (key, new) in run {
        let Some(old) = dataset.get(key) else {
            metadata.insert(key.clone(), new.clone());
            continue;
        };
        let merged = match key.as_str() {
            CLASS_NAMES_KEY => {
                let (names, to) = vocabulary(old, new, key)?;
                remap.add(CLASS_NAMES_COLUMN, to);
                names
            }
            CLASS_LABELS_KEY => {
                let (old_labels, new_labels) = (object(old, key)?, object(new, key)?);
                let mut labels = old_labels.clone();
                for (column, names) in new_labels {
                    let path = format!("{key}.{column}");
                    let merged = match old_labels.get(column) {
                        None => names.clone(),
                        Some(known) => {
                            let (merged, to) = vocabulary(known, names, &path)?;
                            remap.add(column, to);
                            merged
                        }
                    };
                    labels.insert(column.clone(), merged);
                }
                Value::Object(labels)
            }
            // How the first source's value and key were extracted names the
            // columns of an export; a later source's own layout does not change
            // what the stored values are.
            VALUE_KEY => old.clone(),
            "derived_fields" => union(old, new, key)?,
            "sources" => concatenation(old, new, key)?,
            _ => agree(old, new, key)?,
        };
        metadata.insert(key.clone(), merged);
    }
    Ok(MergedMetadata { metadata, remap })
}

impl Remap {
    fn add(&mut self, column: &str, to: Vec<i64>) {
        let identity = to.iter().enumerate().all(|(i, &t)| t == i as i64);
        if !identity {
            self.columns.insert(column.to_owned(), to);
        }
    }
}

/// The merged names of a vocabulary and the new index of each of `new`'s.
fn vocabulary(old: &Value, new: &Value, key: &str) -> Result<(Value, Vec<i64>)> {
    let (Value::Array(known), Value::Array(added)) = (old, new) else {
        return Err(conflict(key, old, new));
    };
    let mut names = known.clone();
    let mut to = Vec::with_capacity(added.len());
    for name in added {
        // A name given twice keeps its first index: the same name, the same class.
        let at = match names.iter().position(|n| n == name) {
            Some(at) => at,
            None => {
                names.push(name.clone());
                names.len() - 1
            }
        };
        to.push(at as i64);
    }
    Ok((Value::Array(names), to))
}

/// Values the run gives where the dataset has some: objects member by member
/// (ClassLabel features by their vocabulary), anything else equal.
fn agree(old: &Value, new: &Value, key: &str) -> Result<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) if is_class_label(o) && is_class_label(n) => {
            let mut merged = o.clone();
            let mut n = n.clone();
            // The count follows the names: it is the merged vocabulary's size.
            let (added, counted) = (n.remove("names"), n.remove("num_classes"));
            let names = match (o.get("names"), added) {
                (Some(known), Some(added)) => {
                    Some(vocabulary(known, &added, &format!("{key}.names"))?.0)
                }
                (None, Some(added)) => Some(added),
                (_, None) => None,
            };
            if let Some(names) = names {
                if merged.contains_key("num_classes") || counted.is_some() {
                    let count = names.as_array().map_or(0, Vec::len);
                    merged.insert("num_classes".into(), count.into());
                }
                merged.insert("names".into(), names);
            }
            for (member, value) in n {
                let path = format!("{key}.{member}");
                let value = match o.get(&member) {
                    Some(known) => agree(known, &value, &path)?,
                    None => value,
                };
                merged.insert(member, value);
            }
            Ok(Value::Object(merged))
        }
        (Value::Object(o), Value::Object(n)) => {
            let mut merged = o.clone();
            for (member, value) in n {
                let path = format!("{key}.{member}");
                let value = match o.get(member) {
                    Some(known) => agree(known, value, &path)?,
                    None => value.clone(),
                };
                merged.insert(member.clone(), value);
            }
            Ok(Value::Object(merged))
        }
        _ if old == new => Ok(old.clone()),
        _ => Err(conflict(key, old, new)),
    }
}

fn is_class_label(object: &Map<String, Value>) -> bool {
    object.get("_type").and_then(Value::as_str) == Some("ClassLabel")
}

fn union(old: &Value, new: &Value, key: &str) -> Result<Value> {
    let (Value::Array(known), Value::Array(added)) = (old, new) else {
        return Err(conflict(key, old, new));
    };
    let mut all = known.clone();
    for value in added {
        if !all.contains(value) {
            all.push(value.clone());
        }
    }
    Ok(Value::Array(all))
}

fn concatenation(old: &Value, new: &Value, key: &str) -> Result<Value> {
    let (Value::Array(known), Value::Array(added)) = (old, new) else {
        return Err(conflict(key, old, new));
    };
    Ok(Value::Array(known.iter().chain(added).cloned().collect()))
}

fn object<'v>(value: &'v Value, key: &str) -> Result<&'v Map<String, Value>> {
    value.as_object().ok_or_else(|| {
        FieldsError::Unsupported(format!(
            "metadata \"{key}\" is {value}, not an object of class names by column"
        ))
    })
}

fn conflict(key: &str, dataset: &Value, run: &Value) -> FieldsError {
    FieldsError::MetadataConflict {
        key: key.to_owned(),
        dataset: dataset.to_string(),
        run: run.to_string(),
    }
}

/// Parses a JSON object of metadata given by a caller (`name` names it in
/// errors), refusing a number JSON readers cannot keep exactly: an integer
/// outside `-2^63 .. 2^64` would be read as the nearest double
/// (`18446744073709551617` as `18446744073709551616`).
pub fn metadata_from_json(text: &str, name: &str) -> Result<Map<String, Value>> {
    let value: Value = serde_json::from_str(text).map_err(|source| FieldsError::InvalidJson {
        name: name.to_owned(),
        what: "not JSON".into(),
        source,
    })?;
    let Value::Object(map) = value else {
        return Err(FieldsError::invalid(name, "not a JSON object"));
    };
    if let Some(literal) = inexact_integer(text) {
        return Err(FieldsError::invalid(
            name,
            format!(
                "the integer {literal} is outside -2^63 .. 2^64: JSON readers would keep it only approximately; store it as a string"
            ),
        ));
    }
    Ok(map)
}

/// The first integer literal of the JSON text `text` (valid JSON) that neither
/// an `i64` nor a `u64` holds.
fn inexact_integer(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // Skip the string, escapes included.
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let literal = &text[start..i];
                let integer = !literal.contains(['.', 'e', 'E']);
                if integer && literal.parse::<i64>().is_err() && literal.parse::<u64>().is_err() {
                    return Some(literal);
                }
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests;
