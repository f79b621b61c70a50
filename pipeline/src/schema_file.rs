//! The schema of JSON Lines sources as the front ends take it: a JSON list of
//! fields, each `{"name": NAME, "type": TYPE}`, in order, for example
//!
//! ```json
//! [{"name": "label", "type": "int64"}, {"name": "tags", "type": "list<string>"}]
//! ```
//!
//! TYPE is `int64`, `float64`, `float32`, `bool`, `string`, `binary`, or
//! `list<TYPE>` (lists nest, up to [`MAX_LIST_DEPTH`] deep). Every field is
//! nullable. A field of the lines that the schema does not name is left out.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bcd_converters::regular_file::{open_regular, ReadRegularError};

/// Largest schema file read: 1 MiB.
pub(crate) const MAX_SCHEMA_BYTES: u64 = 1 << 20;
/// Deepest nesting of `list<...>` accepted.
pub(crate) const MAX_LIST_DEPTH: usize = 32;

/// Why a schema file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaFileError {
    /// The file could not be read.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file is not a schema.
    #[error("{}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Reads the schema file at `path` (a regular file of at most
/// [`MAX_SCHEMA_BYTES`]; see [`parse_schema`]).
pub fn read_schema(path: &Path) -> Result<SchemaRef, SchemaFileError> {
    let invalid = |reason: String| SchemaFileError::Invalid {
        path: path.to_owned(),
        reason,
    };
    let io_error = |source| SchemaFileError::Io {
        path: path.to_owned(),
        source,
    };
    let file = match open_regular(path) {
        Ok((file, _)) => file,
        Err(ReadRegularError::Io(source)) => return Err(io_error(source)),
        Err(ReadRegularError::NotRegular(kind)) => {
            return Err(invalid(format!("it is {kind}, not a regular file")))
        }
        Err(ReadRegularError::TooLarge(size)) => {
            return Err(invalid(format!("{size} bytes is too large for a schema")))
        }
    };
    let mut text = Vec::new();
    file.take(MAX_SCHEMA_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(io_error)?;
    if text.len() as u64 > MAX_SCHEMA_BYTES {
        return Err(invalid(format!(
            "larger than the limit of {MAX_SCHEMA_BYTES} bytes for a schema"
        )));
    }
    let text = String::from_utf8(text).map_err(|_| invalid("not UTF-8 text".into()))?;
    parse_schema(&text).map_err(invalid)
}

/// Parses the JSON text of a schema (see the module documentation).
///
/// ```
/// use arrow_schema::DataType;
/// use bcd_pipeline::parse_schema;
///
/// let schema = parse_schema(r#"[{"name": "tags", "type": "list<string>"}]"#)?;
/// assert!(matches!(schema.field(0).data_type(), DataType::List(item) if item.data_type() == &DataType::Utf8));
/// assert!(parse_schema(r#"[{"name": "x", "type": "int"}]"#).is_err());
/// # Ok::<(), String>(())
/// ```
pub fn parse_schema(text: &str) -> Result<SchemaRef, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let serde_json::Value::Array(entries) = value else {
        return Err(r#"expected a JSON list of {"name": NAME, "type": TYPE} objects"#.into());
    };
    let mut fields: Vec<Field> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let at = |reason: String| format!("field {}: {reason}", i + 1);
        let serde_json::Value::Object(entry) = entry else {
            return Err(at(r#"expected {"name": NAME, "type": TYPE}"#.into()));
        };
        if let Some(other) = entry.keys().find(|k| *k != "name" && *k != "type") {
            return Err(at(format!(
                "unknown key {other:?}; a field has \"name\" and \"type\""
            )));
        }
        let text = |key: &str| match entry.get(key) {
            Some(serde_json::Value::String(text)) => Ok(text.as_str()),
            Some(_) => Err(at(format!("\"{key}\" must be a string"))),
            None => Err(at(format!("no \"{key}\""))),
        };
        let name = text("name")?;
        if name.is_empty() {
            return Err(at("the name is empty".into()));
        }
        if fields.iter().any(|f| f.name() == name) {
            return Err(at(format!("the name {name:?} is given twice")));
        }
        let data_type =
            data_type(text("type")?, 0).map_err(|reason| at(format!("{name:?}: {reason}")))?;
        fields.push(Field::new(name, data_type, true));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The Arrow type a schema's TYPE names.
fn data_type(text: &str, depth: usize) -> Result<DataType, String> {
    let text = text.trim();
    Ok(match text {
        "int64" => DataType::Int64,
        "float64" => DataType::Float64,
        "float32" => DataType::Float32,
        "bool" => DataType::Boolean,
        "string" => DataType::Utf8,
        "binary" => DataType::Binary,
        _ => {
            let Some(item) = text
                .strip_prefix("list<")
                .and_then(|rest| rest.strip_suffix('>'))
            else {
                return Err(format!(
                    "unknown type {text:?}; expected int64, float64, float32, bool, string, binary or list<TYPE>"
                ));
            };
            if depth == MAX_LIST_DEPTH {
                return Err(format!("lists nested more than {MAX_LIST_DEPTH} deep"));
            }
            DataType::List(Arc::new(Field::new(
                "item",
                data_type(item, depth + 1)?,
                true,
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_and_nested_lists() {
        let schema = parse_schema(
            r#"[{"name": "a", "type": "int64"}, {"name": "b", "type": "float64"},
                {"name": "c", "type": "float32"}, {"name": "d", "type": "bool"},
                {"name": "e", "type": "string"}, {"name": "f", "type": "binary"},
                {"name": "g", "type": "list< list<int64> >"}]"#,
        )
        .unwrap();
        let types: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| format!("{}: {}", f.name(), f.data_type()))
            .collect();
        assert_eq!(
            types,
            [
                "a: Int64",
                "b: Float64",
                "c: Float32",
                "d: Boolean",
                "e: Utf8",
                "f: Binary",
                "g: List(List(Int64))"
            ]
        );
        assert!(schema.fields().iter().all(|f| f.is_nullable()));
        assert_eq!(parse_schema("[]").unwrap().fields().len(), 0);
    }

    #[test]
    fn mistakes_are_named() {
        for (text, message) in [
            ("{}", "expected a JSON list"),
            ("[1]", "field 1: expected"),
            (r#"[{"name": "a"}]"#, "field 1: no \"type\""),
            (r#"[{"type": "int64"}]"#, "field 1: no \"name\""),
            (
                r#"[{"name": "a", "type": "int"}]"#,
                "field 1: \"a\": unknown type \"int\"",
            ),
            (
                r#"[{"name": "a", "type": "list<int>"}]"#,
                "unknown type \"int\"",
            ),
            (
                r#"[{"name": "a", "type": "int64", "nullable": false}]"#,
                "unknown key \"nullable\"",
            ),
            (
                r#"[{"name": "a", "type": "int64"}, {"name": "a", "type": "bool"}]"#,
                "field 2: the name \"a\" is given twice",
            ),
            ("[", "not valid JSON"),
        ] {
            let error = parse_schema(text).unwrap_err();
            assert!(error.contains(message), "{text}: {error}");
        }
        let deep = format!("{}int64{}", "list<".repeat(100), ">".repeat(100));
        let error = parse_schema(&format!(r#"[{{"name": "a", "type": "{deep}"}}]"#)).unwrap_err();
        assert!(error.contains("nested more than 32"), "{error}");
    }

    #[test]
    fn files_are_read_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schema.json");
        std::fs::write(&path, r#"[{"name": "a", "type": "bool"}]"#).unwrap();
        assert_eq!(read_schema(&path).unwrap().field(0).name(), "a");
        std::fs::write(&path, vec![b' '; MAX_SCHEMA_BYTES as usize + 1]).unwrap();
        let error = read_schema(&path).unwrap_err().to_string();
        assert!(error.contains("larger than the limit"), "{error}");
        let error = read_schema(&dir.path().join("missing.json")).unwrap_err();
        assert!(matches!(error, SchemaFileError::Io { .. }), "{error}");
        let error = read_schema(dir.path()).unwrap_err().to_string();
        assert!(error.contains("a directory"), "{error}");
    }
}
