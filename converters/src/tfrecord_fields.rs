//! The features of `tf.train.Example` records as fields: a prescan over every
//! input file decides each feature's type, then each record's features are
//! decoded into it.
//!
//! Types: `int64_list` -> Int64, `float_list` -> Float32, `bytes_list` -> Utf8
//! when every value of every record is valid UTF-8, else Binary; a scalar when
//! every record that has the feature holds exactly one value, else a list of that
//! type (Arrow `List`, items nullable). A record without the feature has null.
//! A feature whose kind differs between records is an error naming both places.
//! Columns come sorted by name (chosen ones in the order chosen).
//!
//! A `tf.train.SequenceExample` gives its context features as an Example gives
//! its features, and each of its feature lists as one field too: a list with one
//! item per step (Arrow `List`), the item typed as a feature is (a scalar when
//! every step of every record holds exactly one value, else a list: `List<List>`);
//! a step without a value list is a null item. A context feature and a feature
//! list of the same name are an error (a field has one name).
//!
//! The prescan reads every file once more (checksums and all) and walks each
//! record's features without copying a value: it costs about one more read of
//! the input, and keeps one entry per feature name (at most [`MAX_FEATURES`],
//! each name at most [`MAX_FEATURE_NAME`] bytes). It needs files it can read
//! twice, so a pipe is refused. Decoded list values take at most 8 bytes per
//! byte of the record (a packed varint is at least 1 byte, an Int64 8); a
//! feature list's, at most 24 while its column is built (an optional Int64 is 16
//! bytes, then 8 in the array).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, ListBuilder, StringBuilder};
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BinaryArray, Float32Array, Int64Array, ListArray, StringArray};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::Field;

use crate::example::{self, FeatureError, Kind, Values};
use crate::field_options::FieldSelection;
use crate::sequence_example;
use crate::{FieldValue, Fields, SourceError};

/// Distinct feature names a prescan keeps, at most.
pub(crate) const MAX_FEATURES: usize = 4096;
/// Longest feature name taken as a field.
pub(crate) const MAX_FEATURE_NAME: usize = 1024;

/// One feature's column, as the prescan decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FeatureField {
    pub name: Arc<str>,
    /// `None`: no record had a value list for it (the column is all null).
    pub kind: Option<Kind>,
    /// Some record holds other than one value.
    pub list: bool,
    /// Every bytes value is UTF-8.
    pub utf8: bool,
    /// A SequenceExample's feature list (one item per step); `list` then says
    /// whether some step holds other than one value.
    pub sequence: bool,
}

struct Seen {
    field: FeatureField,
    /// Where its kind was first seen, for messages.
    first: String,
}

/// Decides the fields of the features `selection` chooses (and `skip` does not
/// name: the value and key features) over every record of the inputs named
/// `paths`. `read(i, ..)` reads input `i` once more, calling back with each
/// record's number, frame offset and bytes.
pub(crate) fn prescan(
    paths: &[PathBuf],
    selection: &FieldSelection,
    skip: &[&str],
    mut read: impl FnMut(
        usize,
        &mut dyn FnMut(u64, u64, &[u8]) -> Result<(), SourceError>,
    ) -> Result<(), SourceError>,
) -> Result<Vec<FeatureField>, SourceError> {
    let mut seen: Vec<Seen> = Vec::new();
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    // Names not chosen, for the message when a chosen one is missing.
    let mut others: Vec<String> = Vec::new();
    for (at, path) in paths.iter().enumerate() {
        read(at, &mut |record, offset, data| {
            let place = || format!("{}: record {record} at byte {offset}", path.display());
            let invalid = |reason: String| SourceError::Invalid {
                file: path.display().to_string(),
                location: format!("record {record} at byte {offset}"),
                reason,
            };
            let bad = |e: FeatureError| invalid(e.to_string());
            let context = example::features(data).map_err(bad)?;
            let lists = sequence_example::feature_lists(data).map_err(bad)?;
            let named = (context.into_iter().map(|(n, f)| (n, f, false)))
                .chain(lists.into_iter().map(|(n, l)| (n, l, true)));
            for (name, feature, sequence) in named {
                let i = match index.get(name) {
                    Some(&i) => {
                        if seen[i].field.sequence != sequence {
                            return Err(invalid(format!(
                                "{:?} is both a context feature and a feature list of SequenceExamples{}; a field has one name (leave it out with `fields`)",
                                seen[i].field.name,
                                match seen[i].first.is_empty() {
                                    true => String::new(),
                                    false => format!(" (the other seen in {})", seen[i].first),
                                }
                            )));
                        }
                        i
                    }
                    None => {
                        let text = String::from_utf8_lossy(name);
                        // The value and key features are context features.
                        if !sequence && skip.contains(&&*text) {
                            continue;
                        }
                        if !selection.includes(&text) {
                            if others.len() < 64 && !others.iter().any(|o| *o == text) {
                                others.push(text.into_owned());
                            }
                            continue;
                        }
                        let Ok(text) = std::str::from_utf8(name) else {
                            return Err(invalid(format!(
                                "feature name {text:?} is not UTF-8, so it cannot be a field; choose the fields with `fields`"
                            )));
                        };
                        if name.len() > MAX_FEATURE_NAME {
                            return Err(invalid(format!(
                                "a feature name of {} bytes is longer than the {MAX_FEATURE_NAME} bytes a field name may have; choose the fields with `fields`",
                                name.len()
                            )));
                        }
                        if seen.len() >= MAX_FEATURES {
                            return Err(invalid(format!(
                                "more than {MAX_FEATURES} distinct features; choose the fields with `fields`"
                            )));
                        }
                        index.insert(name.to_vec(), seen.len());
                        seen.push(Seen {
                            field: FeatureField {
                                name: text.into(),
                                kind: None,
                                list: false,
                                utf8: true,
                                sequence,
                            },
                            first: String::new(),
                        });
                        seen.len() - 1
                    }
                };
                // A feature is one Feature; a feature list one per step.
                let mut one = Some(Ok(feature));
                let mut steps = sequence_example::steps(feature);
                let each = std::iter::from_fn(|| match sequence {
                    false => one.take(),
                    true => steps.next(),
                });
                for step in each {
                    let shape = example::shape(step.map_err(bad)?).map_err(bad)?;
                    let Some(kind) = shape.kind else {
                        continue; // no value list: null here
                    };
                    let entry = &mut seen[i];
                    match entry.field.kind {
                        None => {
                            entry.field.kind = Some(kind);
                            entry.first = place();
                        }
                        Some(known) if known != kind => {
                            return Err(invalid(format!(
                                "{} {:?} is {}, but {} in {}; a field has one type (leave it out with `fields`)",
                                match sequence {
                                    true => "a step of feature list",
                                    false => "feature",
                                },
                                entry.field.name,
                                article(kind),
                                article(known),
                                entry.first
                            )));
                        }
                        Some(_) => {}
                    }
                    entry.field.list |= shape.count != 1;
                    entry.field.utf8 &= shape.utf8;
                }
            }
            Ok(())
        })?;
    }
    let mut fields: Vec<FeatureField> = seen.into_iter().map(|s| s.field).collect();
    // An Example's features are a map, serialized in no order a writer keeps
    // (protobuf's upb implementation changes it from run to run): by name, the
    // same records give the same columns.
    fields.sort_by(|a, b| a.name.cmp(&b.name));
    match selection {
        FieldSelection::Only(names) => names
            .iter()
            .map(|wanted| {
                fields
                    .iter()
                    .find(|f| &*f.name == wanted)
                    .cloned()
                    .ok_or_else(|| {
                        let files: Vec<String> =
                            paths.iter().map(|p| p.display().to_string()).collect();
                        SourceError::Usage(format!(
                            "{}: no Example has a feature {wanted:?} (asked for by `fields`); the other features are {others:?}",
                            files.join(", ")
                        ))
                    })
            })
            .collect(),
        _ => Ok(fields),
    }
}

/// "a bytes_list", "an int64_list".
fn article(kind: Kind) -> String {
    match kind {
        Kind::Int64 => format!("an {}", kind.name()),
        _ => format!("a {}", kind.name()),
    }
}

/// The fields of one record (a serialized Example), typed as `columns` says; an
/// error if the record does not fit them (the file changed since the prescan).
pub(crate) fn record_fields(columns: &[FeatureField], data: &[u8]) -> Result<Fields, String> {
    let features: HashMap<&[u8], &[u8]> = example::features(data)
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    let lists: HashMap<&[u8], &[u8]> = match columns.iter().any(|c| c.sequence) {
        true => sequence_example::feature_lists(data)
            .map_err(|e| e.to_string())?
            .into_iter()
            .collect(),
        false => HashMap::new(),
    };
    let mut fields = Fields::new();
    for column in columns {
        let changed = || {
            format!(
                "{} {:?} does not have the type the prescan of the files gave it; did a file change during the ingest?",
                match column.sequence {
                    true => "feature list",
                    false => "feature",
                },
                column.name
            )
        };
        let value = match column.sequence {
            false => match features.get(column.name.as_bytes()) {
                None => FieldValue::Null,
                Some(feature) => {
                    let values = example::values(feature).map_err(|e| e.to_string())?;
                    decode(column, values).ok_or_else(changed)?
                }
            },
            true => match lists.get(column.name.as_bytes()) {
                None => FieldValue::Null,
                Some(list) => match sequence(column, list)? {
                    Some(value) => value,
                    None => return Err(changed()),
                },
            },
        };
        fields.push(column.name.clone(), value);
    }
    Ok(fields)
}

/// The values of a feature list's steps, one after another: each step's values,
/// or (a scalar column) its one value, null for a step without a value list.
enum Flat<'a> {
    Int64(Vec<Option<i64>>),
    Float(Vec<Option<f32>>),
    Bytes(Vec<Option<&'a [u8]>>),
}

impl<'a> Flat<'a> {
    fn len(&self) -> usize {
        match self {
            Flat::Int64(v) => v.len(),
            Flat::Float(v) => v.len(),
            Flat::Bytes(v) => v.len(),
        }
    }

    /// Appends a step's values; `None` if they are not of this kind.
    fn extend(&mut self, values: Values<'a>) -> Option<()> {
        match (self, values) {
            (Flat::Int64(out), Values::Int64(v)) => out.extend(v.into_iter().map(Some)),
            (Flat::Float(out), Values::Float(v)) => out.extend(v.into_iter().map(Some)),
            (Flat::Bytes(out), Values::Bytes(v)) => out.extend(v.into_iter().map(Some)),
            _ => return None,
        }
        Some(())
    }

    fn push_null(&mut self) {
        match self {
            Flat::Int64(v) => v.push(None),
            Flat::Float(v) => v.push(None),
            Flat::Bytes(v) => v.push(None),
        }
    }

    /// The values as an Arrow array; `None` if a value is not UTF-8 in a Utf8
    /// column.
    fn into_array(self, utf8: bool) -> Option<ArrayRef> {
        Some(match self {
            Flat::Int64(v) => Arc::new(Int64Array::from(v)),
            Flat::Float(v) => Arc::new(Float32Array::from(v)),
            Flat::Bytes(v) if utf8 => {
                let strings = v
                    .into_iter()
                    .map(|b| b.map(std::str::from_utf8).transpose().ok())
                    .collect::<Option<Vec<Option<&str>>>>()?;
                Arc::new(StringArray::from(strings))
            }
            Flat::Bytes(v) => Arc::new(BinaryArray::from(v)),
        })
    }
}

/// A list of `values` split by `lengths` (a `None` length is a null list).
fn list_of(values: ArrayRef, lengths: &[Option<usize>]) -> Result<ArrayRef, String> {
    let total: usize = lengths.iter().map(|n| n.unwrap_or(0)).sum();
    if total > i32::MAX as usize {
        return Err(format!(
            "a feature list of {total} values is more than one Arrow list holds"
        ));
    }
    let offsets = OffsetBuffer::from_lengths(lengths.iter().map(|n| n.unwrap_or(0)));
    let nulls = lengths
        .iter()
        .any(Option::is_none)
        .then(|| NullBuffer::from_iter(lengths.iter().map(Option::is_some)));
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    let list = ListArray::try_new(field, offsets, values, nulls).map_err(|e| e.to_string())?;
    Ok(Arc::new(list))
}

/// A record's feature list as the column says (`Ok(None)`: not of its type).
fn sequence(column: &FeatureField, list: &[u8]) -> Result<Option<FieldValue>, String> {
    let Some(kind) = column.kind else {
        return Ok(Some(FieldValue::Null)); // no step of any record has values
    };
    let mut flat = match kind {
        Kind::Int64 => Flat::Int64(Vec::new()),
        Kind::Float => Flat::Float(Vec::new()),
        Kind::Bytes => Flat::Bytes(Vec::new()),
    };
    // Per step: its number of values, or None for a step without a value list.
    let mut lengths: Vec<Option<usize>> = Vec::new();
    for step in sequence_example::steps(list) {
        let values =
            example::values(step.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        if values == Values::Empty {
            match column.list {
                true => lengths.push(None),
                false => flat.push_null(),
            }
            continue;
        }
        let before = flat.len();
        if flat.extend(values).is_none() {
            return Ok(None);
        }
        let n = flat.len() - before;
        match column.list {
            true => lengths.push(Some(n)),
            false if n != 1 => return Ok(None),
            false => {}
        }
    }
    let steps = match column.list {
        true => lengths.len(),
        false => flat.len(),
    };
    let Some(items) = flat.into_array(column.utf8) else {
        return Ok(None);
    };
    let items = match column.list {
        true => list_of(items, &lengths)?,
        false => items,
    };
    let outer = list_of(items, &[Some(steps)])?;
    Ok(Some(FieldValue::Arrow(outer, 0)))
}

fn decode(column: &FeatureField, values: Values<'_>) -> Option<FieldValue> {
    let scalar = !column.list;
    let one = |n: usize| !scalar || n == 1;
    Some(match (column.kind, values) {
        (_, Values::Empty) => FieldValue::Null,
        (Some(Kind::Int64), Values::Int64(v)) if one(v.len()) => match scalar {
            true => FieldValue::Int64(v[0]),
            false => list(ListArray::from_iter_primitive::<Int64Type, _, _>([Some(
                v.into_iter().map(Some),
            )])),
        },
        (Some(Kind::Float), Values::Float(v)) if one(v.len()) => match scalar {
            true => FieldValue::Float32(v[0]),
            false => list(ListArray::from_iter_primitive::<Float32Type, _, _>([Some(
                v.into_iter().map(Some),
            )])),
        },
        (Some(Kind::Bytes), Values::Bytes(v)) if one(v.len()) => match (scalar, column.utf8) {
            (true, true) => FieldValue::String(std::str::from_utf8(v[0]).ok()?.to_owned()),
            (true, false) => FieldValue::Binary(v[0].to_vec()),
            (false, true) => {
                let mut builder = ListBuilder::new(StringBuilder::new());
                for value in v {
                    builder
                        .values()
                        .append_value(std::str::from_utf8(value).ok()?);
                }
                builder.append(true);
                list(builder.finish())
            }
            (false, false) => {
                let mut builder = ListBuilder::new(BinaryBuilder::new());
                for value in v {
                    builder.values().append_value(value);
                }
                builder.append(true);
                list(builder.finish())
            }
        },
        _ => return None,
    })
}

fn list(array: ListArray) -> FieldValue {
    FieldValue::Arrow(Arc::new(array) as ArrayRef, 0)
}
