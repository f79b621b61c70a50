//! The fields of a Parquet source: which columns become fields, how their types
//! must agree across files, the dataset metadata a file contributes (its Hugging
//! Face features, ClassLabel names, how the value was taken), and the value of a
//! Hugging Face Image/Audio row whose bytes are null but whose path names a file.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use arrow_schema::{DataType, Schema};
use serde_json::{Map, Value};

use crate::field_options::FieldSelection;
use crate::regular_file::{read_regular, ReadRegularError};
use crate::{SourceError, MAX_VALUE_SIZE};

/// Where a field's column comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldColumn {
    /// A top-level column, by name.
    Column(String),
    /// The `path` field of the value column's struct (Hugging Face Image/Audio).
    ValuePath,
}

/// One field of a file: its name and column.
#[derive(Clone, Debug)]
pub(crate) struct FieldSpec {
    pub name: Arc<str>,
    pub column: FieldColumn,
}

/// The string child `path` of a struct value column with a `bytes` child: the
/// layout `datasets` gives Image and Audio features.
pub(crate) fn value_path_type(value_type: &DataType) -> Option<&DataType> {
    match value_type {
        DataType::Struct(children) if children.iter().any(|c| c.name() == "bytes") => children
            .iter()
            .find(|c| c.name() == "path")
            .map(|c| c.data_type())
            .filter(|t| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)),
        _ => None,
    }
}

/// Whether the value column is a struct with a `bytes` child.
pub(crate) fn is_hf_struct(value_type: &DataType) -> bool {
    matches!(value_type, DataType::Struct(children) if children.iter().any(|c| c.name() == "bytes"))
}

/// The fields of a file with `schema`, in order: every top-level column but the
/// value and key (schema order) and the value's `path` (named `<value>.path`), or
/// the ones `selection` names (in its order). Naming one the file lacks is an error
/// listing what it has.
pub(crate) fn field_specs(
    path: &Path,
    schema: &Schema,
    selection: &FieldSelection,
    value: &str,
    key: Option<&str>,
) -> Result<Vec<FieldSpec>, SourceError> {
    let mut available: Vec<FieldSpec> = Vec::new();
    for field in schema.fields() {
        let name = field.name();
        if name == value {
            if value_path_type(field.data_type()).is_some() {
                available.push(FieldSpec {
                    name: format!("{value}.path").into(),
                    column: FieldColumn::ValuePath,
                });
            }
        } else if Some(name.as_str()) != key {
            available.push(FieldSpec {
                name: name.as_str().into(),
                column: FieldColumn::Column(name.clone()),
            });
        }
    }
    match selection {
        FieldSelection::All => Ok(available),
        FieldSelection::None => Ok(Vec::new()),
        FieldSelection::Only(names) => names
            .iter()
            .map(|wanted| {
                available
                    .iter()
                    .find(|spec| &*spec.name == wanted)
                    .cloned()
                    .ok_or_else(|| {
                        let names: Vec<&str> = available.iter().map(|s| &*s.name).collect();
                        SourceError::Usage(format!(
                            "{}: no column {wanted:?} (asked for by `fields`); the fields it can give are {names:?}",
                            path.display()
                        ))
                    })
            })
            .collect(),
    }
}

/// The type both `a` and `b` fit in, by the dataset schema's own rule
/// ([`bcd_fields::unify_types`]); `None` if they conflict.
pub(crate) fn unify(a: &DataType, b: &DataType) -> Option<DataType> {
    bcd_fields::unify_types(a, b, "").ok()
}

/// The type of each field column so far and the file that first had it.
#[derive(Default)]
pub(crate) struct FieldTypes(HashMap<Arc<str>, (DataType, PathBuf)>);

impl FieldTypes {
    /// Records that `path` gives field `name` type `data_type`; an error naming
    /// both files if it does not unify with the type an earlier file gave it.
    pub(crate) fn check(
        &mut self,
        path: &Path,
        name: &Arc<str>,
        data_type: &DataType,
    ) -> Result<(), SourceError> {
        match self.0.get_mut(name) {
            None => {
                self.0
                    .insert(name.clone(), (data_type.clone(), path.to_owned()));
                Ok(())
            }
            Some((known, first)) => match unify(known, data_type) {
                Some(unified) => {
                    *known = unified;
                    Ok(())
                }
                None => Err(SourceError::Invalid {
                    file: path.display().to_string(),
                    location: "schema".into(),
                    reason: format!(
                        "column {name:?} has type {data_type}, which conflicts with type {known} in {}; every file's field columns must agree (leave the column out with `fields`)",
                        first.display()
                    ),
                }),
            },
        }
    }
}

/// The `huggingface` key of a file's schema metadata, parsed; `None` when absent
/// or not JSON.
pub(crate) fn huggingface(schema: &Schema) -> Option<Value> {
    serde_json::from_str(schema.metadata().get("huggingface")?).ok()
}

/// Every ClassLabel feature in a `huggingface` metadata object with its names,
/// by dotted path (`label`, `objects.category`): in the top-level features, in
/// struct features (a plain object) and in the element of `List` / `Sequence`
/// features (or `[feature]`).
pub(crate) fn class_labels(huggingface: &Value) -> Vec<(String, Vec<Value>)> {
    fn walk(feature: &Value, path: &str, out: &mut Vec<(String, Vec<Value>)>) {
        match feature {
            Value::Object(object) => match object.get("_type").and_then(Value::as_str) {
                Some("ClassLabel") => {
                    if let Some(names) = object.get("names").and_then(Value::as_array) {
                        out.push((path.to_owned(), names.clone()));
                    }
                }
                Some("Sequence" | "List" | "LargeList") => {
                    if let Some(inner) = object.get("feature") {
                        walk(inner, path, out);
                    }
                }
                Some(_) => {}
                None => {
                    for (name, child) in object {
                        walk(child, &format!("{path}.{name}"), out);
                    }
                }
            },
            Value::Array(items) if items.len() == 1 => walk(&items[0], path, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(Value::Object(features)) = huggingface.pointer("/info/features") {
        for (name, feature) in features {
            walk(feature, name, &mut out);
        }
    }
    out
}

/// The dataset metadata of a Parquet source, merged over its files.
#[derive(Default)]
pub(crate) struct SourceMetadata {
    map: Map<String, Value>,
    /// The file each ClassLabel's names came from.
    labels_from: HashMap<String, PathBuf>,
    /// The extension-type metadata of each field column, and the file it came
    /// from.
    columns: crate::ColumnMetadata,
    columns_from: HashMap<String, PathBuf>,
}

/// The field metadata keys that are part of a column's type.
const EXTENSION_KEYS: [&str; 2] = ["ARROW:extension:name", "ARROW:extension:metadata"];

impl SourceMetadata {
    /// Adds what the file at `path` with `schema` says: the first file's
    /// `huggingface` metadata and value layout are kept; ClassLabel names of
    /// every file's field columns are gathered, and two files that give one column
    /// different names are an error naming both.
    pub(crate) fn add(
        &mut self,
        path: &Path,
        schema: &Schema,
        value: &str,
        key: Option<&str>,
        fields: &[FieldSpec],
    ) -> Result<(), SourceError> {
        for spec in fields {
            let FieldColumn::Column(column) = &spec.column else {
                continue;
            };
            let Ok(field) = schema.field_with_name(column) else {
                continue;
            };
            let extension: std::collections::BTreeMap<String, String> = (field.metadata().iter())
                .filter(|(k, _)| EXTENSION_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            match self.columns_from.get(&*spec.name) {
                Some(from)
                    if self.columns.get(&*spec.name).cloned().unwrap_or_default() != extension =>
                {
                    let show = |e: &std::collections::BTreeMap<String, String>| {
                        e.get(EXTENSION_KEYS[0])
                            .map_or("no extension type".to_owned(), |n| {
                                format!("extension type {n}")
                            })
                    };
                    return Err(SourceError::Invalid {
                        file: path.display().to_string(),
                        location: format!("column {column:?}"),
                        reason: format!(
                            "{} differs from the {} of {}",
                            show(&extension),
                            show(self.columns.get(&*spec.name).unwrap_or(&Default::default())),
                            from.display()
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    self.columns_from
                        .insert(spec.name.to_string(), path.to_owned());
                    if !extension.is_empty() {
                        self.columns.insert(spec.name.to_string(), extension);
                    }
                }
            }
        }
        if !self.map.contains_key("value") {
            let hf_struct = schema
                .field_with_name(value)
                .is_ok_and(|f| is_hf_struct(f.data_type()));
            let mut described = serde_json::json!({"column": value, "hf_struct": hf_struct});
            if let Some(key) = key {
                described["key_column"] = key.into();
            }
            self.map.insert("value".into(), described);
        }
        let Some(hf) = huggingface(schema) else {
            return Ok(());
        };
        let is_field = |label: &str| {
            fields.iter().any(|spec| match &spec.column {
                FieldColumn::Column(column) => {
                    label == column || label.starts_with(&format!("{column}."))
                }
                FieldColumn::ValuePath => false,
            })
        };
        for (column, names) in class_labels(&hf) {
            if !is_field(&column) {
                continue;
            }
            let labels = self
                .map
                .entry("class_labels")
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("class_labels is an object");
            match labels.get(&column) {
                Some(Value::Array(known)) if *known != names => {
                    return Err(SourceError::Invalid {
                        file: path.display().to_string(),
                        location: "schema metadata".into(),
                        reason: format!(
                            "the ClassLabel names of column {column:?}, {}, differ from {} in {}",
                            Value::Array(names),
                            Value::Array(known.clone()),
                            self.labels_from[&column].display()
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    labels.insert(column.clone(), Value::Array(names));
                    self.labels_from.insert(column, path.to_owned());
                }
            }
        }
        self.map.entry("huggingface").or_insert(hf);
        Ok(())
    }

    /// The source's metadata ([`crate::Source::metadata`]): also `class_names`
    /// when exactly one ClassLabel is among the fields.
    pub(crate) fn source_map(&self) -> Map<String, Value> {
        let mut map = self.map.clone();
        let only = map
            .get("class_labels")
            .and_then(|labels| labels.as_object())
            .filter(|labels| labels.len() == 1)
            .and_then(|labels| labels.values().next().cloned());
        if let Some(names) = only {
            map.insert("class_names".into(), names);
        }
        map
    }

    pub(crate) fn columns(&self) -> &crate::ColumnMetadata {
        &self.columns
    }
}

/// Reads the file a Hugging Face Image/Audio row names by `written` (its bytes
/// being null), relative to the directory of the Parquet file `parquet`. Only a
/// relative path that stays inside that directory (no root, no `..`) naming a
/// regular file (or a link to one) of at most [`MAX_VALUE_SIZE`] bytes is read.
pub(crate) fn read_beside(
    parquet: &Path,
    row: u64,
    column: &str,
    written: &str,
) -> Result<Vec<u8>, SourceError> {
    let invalid = |reason: String| SourceError::Invalid {
        file: parquet.display().to_string(),
        location: format!("row {row}"),
        reason: format!("column {column:?}: its bytes are null and its path {written:?} {reason}"),
    };
    let relative = Path::new(written);
    let inside = !written.is_empty()
        && relative
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Err(invalid(
            "is not a relative path inside the Parquet file's directory, so it is not read".into(),
        ));
    }
    let file = parquet
        .parent()
        .map(|dir| dir.join(relative))
        .unwrap_or_else(|| relative.to_owned());
    read_regular(&file).map_err(|error| match error {
        ReadRegularError::Io(e) => invalid(format!("cannot be read ({}): {e}", file.display())),
        ReadRegularError::NotRegular(kind) => SourceError::NotRegularFile {
            file: parquet.display().to_string(),
            location: format!("row {row}, column {column:?}"),
            path: file.clone(),
            kind,
        },
        ReadRegularError::TooLarge(size) => SourceError::TooLarge {
            file: parquet.display().to_string(),
            location: format!("row {row}, column {column:?}"),
            what: format!("the file {}", file.display()),
            size,
            limit: MAX_VALUE_SIZE,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;

    #[test]
    fn integers_widen_and_other_types_conflict() {
        use DataType::*;
        assert_eq!(unify(&Int32, &Int64), Some(Int64));
        assert_eq!(unify(&Int64, &Int8), Some(Int64));
        assert_eq!(unify(&UInt32, &Int64), Some(Int64));
        assert_eq!(unify(&UInt8, &UInt16), Some(UInt16));
        assert_eq!(unify(&UInt32, &Int32), None);
        assert_eq!(unify(&Int8, &UInt64), None);
        assert_eq!(unify(&Null, &Utf8), Some(Utf8));
        assert_eq!(unify(&Utf8, &LargeUtf8), None);
        assert_eq!(unify(&Int64, &Float64), None);
        let list = |t| DataType::new_list(t, true);
        assert_eq!(unify(&list(Int16), &list(Int32)), Some(list(Int32)));
        let a = Struct(vec![Field::new("x", Int32, true)].into());
        let b = Struct(vec![Field::new("y", Utf8, true), Field::new("x", Int64, true)].into());
        let both = Struct(vec![Field::new("x", Int64, true), Field::new("y", Utf8, true)].into());
        assert_eq!(unify(&a, &b), Some(both));
    }

    #[test]
    fn fixed_size_lists_unify_as_the_dataset_schema_does() {
        use DataType::*;
        // The copy this replaced refused them: files with embeddings of the same
        // width but another element type could not be ingested together.
        let fixed = |t, n| DataType::new_fixed_size_list(t, n, true);
        assert_eq!(
            unify(&fixed(Float16, 4), &fixed(Null, 4)),
            Some(fixed(Float16, 4))
        );
        assert_eq!(
            unify(&fixed(Int8, 4), &fixed(Int32, 4)),
            Some(fixed(Int32, 4))
        );
        assert_eq!(unify(&fixed(Int8, 4), &fixed(Int8, 8)), None);
    }

    #[test]
    fn class_labels_are_found_at_any_depth() {
        let hf: Value = serde_json::json!({"info": {"features": {
            "label": {"names": ["cat", "dog"], "_type": "ClassLabel"},
            "caption": {"dtype": "string", "_type": "Value"},
            "objects": {"feature": {"category": {"names": ["a"], "_type": "ClassLabel"}}, "_type": "Sequence"},
            "tags": [{"names": ["t"], "_type": "ClassLabel"}],
        }}});
        let mut found = class_labels(&hf);
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["label", "objects.category", "tags"]);
        assert_eq!(found[0].1, vec![Value::from("cat"), Value::from("dog")]);
    }

    #[test]
    fn paths_outside_the_directory_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let parquet = dir.path().join("d.parquet");
        std::fs::write(dir.path().join("a.png"), b"png").unwrap();
        assert_eq!(
            read_beside(&parquet, 0, "image", "./a.png").unwrap(),
            b"png"
        );
        for bad in ["/etc/passwd", "../a.png", "x/../../a.png", ""] {
            let error = read_beside(&parquet, 3, "image", bad)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("row 3") && error.contains("not a relative path inside"),
                "{error}"
            );
        }
        let error = read_beside(&parquet, 1, "image", "missing.png").unwrap_err();
        assert!(error.to_string().contains("cannot be read"), "{error}");
    }
}
