//! The dataset schema: one ordered list of nullable Arrow fields for the whole
//! dataset, and how a shard's columns unify with it (FORMAT.md, "Fields").

use std::sync::Arc;

use arrow_schema::{FieldRef, Schema, SchemaRef};
use base64::Engine as _;
use serde_json::{Map, Value};

use crate::error::{FieldsError, Result};
use crate::json_util;
use crate::unify::{unify_fields, TypeConflict};

/// The largest encoded schema [`DatasetSchema::decode`] reads (base64 text).
pub const MAX_SCHEMA_BYTES: usize = 1 << 20;

/// The dataset schema: the columns every shard's fields are read as, in order
/// of first appearance, all nullable.
///
/// ```
/// use std::sync::Arc;
/// use arrow_schema::{DataType, Field, Schema};
/// use bcd_fields::DatasetSchema;
///
/// let mut schema = DatasetSchema::new();
/// schema.unify(&Schema::new(vec![Field::new("label", DataType::Int32, true)])).unwrap();
/// schema.unify(&Schema::new(vec![
///     Field::new("caption", DataType::Utf8, true),
///     Field::new("label", DataType::Int64, true),
/// ])).unwrap();
/// let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
/// assert_eq!(names, ["label", "caption"]);
/// assert_eq!(schema.field("label").unwrap().data_type(), &DataType::Int64);
///
/// let err = schema.unify(&Schema::new(vec![Field::new("label", DataType::Utf8, true)]));
/// assert_eq!(
///     err.unwrap_err().to_string(),
///     "field \"label\": type Utf8 conflicts with Int64 already in the dataset"
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DatasetSchema {
    fields: Vec<FieldRef>,
}

impl DatasetSchema {
    /// No columns.
    pub fn new() -> DatasetSchema {
        DatasetSchema::default()
    }

    /// A schema of these fields, in order, made nullable. Names must be unique.
    pub fn from_fields(fields: impl IntoIterator<Item = FieldRef>) -> Result<DatasetSchema> {
        let mut schema = DatasetSchema::new();
        for field in fields {
            if schema.position(field.name()).is_some() {
                return Err(FieldsError::Unsupported(format!(
                    "field \"{}\" appears twice in the schema",
                    field.name()
                )));
            }
            schema.fields.push(nullable(field));
        }
        Ok(schema)
    }

    /// The columns, in order.
    pub fn fields(&self) -> &[FieldRef] {
        &self.fields
    }

    /// The column named `name`.
    pub fn field(&self, name: &str) -> Option<&FieldRef> {
        self.position(name).map(|i| &self.fields[i])
    }

    /// The position of the column named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name() == name)
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are no columns.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The schema as an Arrow schema (no schema metadata).
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.fields.clone()))
    }

    /// Unifies a shard's columns into the schema (FORMAT.md, "Fields": schema
    /// rules): a known column keeps its place and takes the unified type, a new
    /// one is appended. On a conflict the schema is left unchanged and the
    /// error names the field and both types.
    pub fn unify(&mut self, incoming: &Schema) -> Result<()> {
        let unified = self.unified(incoming.fields())?;
        *self = unified;
        Ok(())
    }

    /// [`DatasetSchema::unify`] without changing `self`: the unified schema.
    pub fn unified(&self, incoming: &[FieldRef]) -> Result<DatasetSchema> {
        let mut fields = self.fields.clone();
        for field in incoming {
            match fields.iter().position(|f| f.name() == field.name()) {
                Some(i) => {
                    fields[i] = unify_fields(&fields[i], field, field.name())
                        .map_err(TypeConflict::in_dataset)?
                }
                None => fields.push(nullable(field.clone())),
            }
        }
        Ok(DatasetSchema { fields })
    }

    /// The schema as the Arrow IPC schema message (the encapsulated message:
    /// `0xFFFFFFFF`, a little-endian `i32` length, the flatbuffer `Message`
    /// with a `Schema` header, padding to 8 bytes), as `pyarrow.Schema.serialize`
    /// writes it.
    pub fn ipc_message(&self) -> Result<Vec<u8>> {
        use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteOptions};
        let options = IpcWriteOptions::default();
        let encoded = IpcDataGenerator::default().schema_to_bytes_with_dictionary_tracker(
            &Schema::new(self.fields.clone()),
            &mut DictionaryTracker::new(false),
            &options,
        );
        let mut out = Vec::new();
        arrow_ipc::writer::write_message(&mut out, encoded, &options)
            .map_err(|e| FieldsError::arrow("encoding the dataset schema", e))?;
        Ok(out)
    }

    /// The schema as the commit file holds it:
    /// `{"ipc": "<base64 of the IPC schema message>", "fields": [{"name": .., "type": ..}, ..]}`.
    /// `"fields"` (the types as Arrow displays them) is for people; readers
    /// use `"ipc"` only.
    pub fn to_json(&self) -> Result<Value> {
        let ipc = base64::engine::general_purpose::STANDARD.encode(self.ipc_message()?);
        let fields = self
            .fields
            .iter()
            .map(|f| {
                let mut m = Map::new();
                m.insert("name".into(), f.name().clone().into());
                m.insert("type".into(), f.data_type().to_string().into());
                Value::Object(m)
            })
            .collect::<Vec<_>>();
        let mut map = Map::new();
        map.insert("ipc".into(), ipc.into());
        map.insert("fields".into(), fields.into());
        Ok(Value::Object(map))
    }

    /// Reads [`DatasetSchema::to_json`]'s object; `"fields"` is ignored.
    pub fn from_json(value: &Value, name: &str) -> Result<DatasetSchema> {
        let obj = json_util::as_object(value, "\"schema\"", name)?;
        let ipc = json_util::as_str(
            json_util::member(obj, "ipc", name)?,
            "\"schema\".\"ipc\"",
            name,
        )?;
        DatasetSchema::decode(ipc, name)
    }

    /// Reads the base64 text of [`DatasetSchema::ipc_message`], refusing more
    /// than [`MAX_SCHEMA_BYTES`], schema metadata, duplicate names and types
    /// this crate cannot read back.
    pub fn decode(base64_text: &str, name: &str) -> Result<DatasetSchema> {
        if base64_text.len() > MAX_SCHEMA_BYTES {
            return Err(FieldsError::invalid(
                name,
                format!(
                    "the schema is {} bytes, more than the {MAX_SCHEMA_BYTES} allowed",
                    base64_text.len()
                ),
            ));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(base64_text)
            .map_err(|e| FieldsError::invalid(name, format!("the schema is not base64: {e}")))?;
        DatasetSchema::from_ipc_message(&bytes, name)
    }

    /// Reads an IPC schema message (see [`DatasetSchema::ipc_message`]).
    pub fn from_ipc_message(bytes: &[u8], name: &str) -> Result<DatasetSchema> {
        let schema = crate::guard::no_panic(name, "the schema", || {
            arrow_ipc::convert::try_schema_from_ipc_buffer(bytes).map_err(|source| {
                FieldsError::InvalidArrow {
                    name: name.to_owned(),
                    what: "the schema is not an Arrow IPC schema message".to_owned(),
                    source,
                }
            })
        })?;
        for field in schema.fields() {
            crate::types::check_supported(field.data_type()).map_err(|what| {
                FieldsError::invalid(
                    name,
                    format!("the schema's field \"{}\": {what}", field.name()),
                )
            })?;
        }
        DatasetSchema::from_fields(schema.fields().iter().cloned())
            .map_err(|e| FieldsError::invalid(name, e.to_string()))
    }
}

/// `field`, nullable.
fn nullable(field: FieldRef) -> FieldRef {
    if field.is_nullable() {
        field
    } else {
        Arc::new(field.as_ref().clone().with_nullable(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unify::tests::{list, strukt};
    use crate::unify::EXTENSION_NAME_KEY;
    use arrow_schema::{DataType, Field};
    use DataType::*;

    #[test]
    fn conflicts_leave_the_schema_unchanged() {
        let mut schema = DatasetSchema::new();
        schema
            .unify(&Schema::new(vec![Field::new("a", Int64, true)]))
            .unwrap();
        let before = schema.clone();
        let err = schema
            .unify(&Schema::new(vec![
                Field::new("b", Utf8, true),
                Field::new("a", Utf8, true),
            ]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "field \"a\": type Utf8 conflicts with Int64 already in the dataset"
        );
        assert_eq!(schema, before);
    }

    #[test]
    fn fields_are_nullable_and_ordered_by_first_appearance() {
        let mut schema = DatasetSchema::new();
        schema
            .unify(&Schema::new(vec![Field::new("b", Int8, false)]))
            .unwrap();
        schema
            .unify(&Schema::new(vec![
                Field::new("a", Utf8, false),
                Field::new("b", Int16, false),
            ]))
            .unwrap();
        let got: Vec<_> = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
            .collect();
        assert_eq!(
            got,
            [
                ("b".to_string(), Int16, true),
                ("a".to_string(), Utf8, true)
            ]
        );
    }

    #[test]
    fn field_metadata_is_kept() {
        let mut schema = DatasetSchema::new();
        let with_ext = Field::new("jpg", Binary, true).with_metadata([("bcd.member_ext", "jpg")]);
        schema
            .unify(&Schema::new(vec![Field::new("jpg", Null, true)]))
            .unwrap();
        schema.unify(&Schema::new(vec![with_ext.clone()])).unwrap();
        assert_eq!(schema.field("jpg").unwrap().as_ref(), &with_ext);
    }

    #[test]
    fn an_extension_type_unifies_only_with_itself_or_nulls() {
        let uuid = |name: &str| {
            Field::new(name, FixedSizeBinary(16), true).with_metadata(
                [(EXTENSION_NAME_KEY.to_owned(), "arrow.uuid".to_owned())]
                    .into_iter()
                    .collect::<std::collections::HashMap<_, _>>(),
            )
        };
        let mut schema = DatasetSchema::new();
        schema
            .unify(&Schema::new(vec![Field::new("id", Null, true)]))
            .unwrap();
        schema.unify(&Schema::new(vec![uuid("id")])).unwrap();
        schema
            .unify(&Schema::new(vec![Field::new("id", Null, true)]))
            .unwrap();
        assert_eq!(schema.field("id").unwrap().as_ref(), &uuid("id"));
        // The same bytes without the extension, or under another, mean something else.
        let plain = Schema::new(vec![Field::new("id", FixedSizeBinary(16), true)]);
        let err = schema.unify(&plain).unwrap_err().to_string();
        assert!(err.contains("extension arrow.uuid"), "{err}");
        let mut other = DatasetSchema::new();
        other.unify(&plain).unwrap();
        assert!(other.unify(&Schema::new(vec![uuid("id")])).is_err());
    }

    #[test]
    fn the_encoding_round_trips() {
        let schema = DatasetSchema::from_fields([
            Arc::new(Field::new("label", Int64, true)),
            Arc::new(Field::new("tags", list(Utf8), true)),
            Arc::new(
                Field::new(
                    "meta",
                    strukt(&[
                        ("w", UInt16),
                        (
                            "t",
                            Timestamp(arrow_schema::TimeUnit::Millisecond, Some("UTC".into())),
                        ),
                    ]),
                    true,
                )
                .with_metadata([("bcd.member_ext", "json")]),
            ),
            Arc::new(Field::new("nothing", Null, true)),
        ])
        .unwrap();
        let json = schema.to_json().unwrap();
        assert_eq!(
            json["fields"][0],
            serde_json::json!({"name": "label", "type": "Int64"})
        );
        assert_eq!(
            DatasetSchema::from_json(&json, "commit.000001.json").unwrap(),
            schema
        );
        assert_eq!(
            DatasetSchema::from_json(&DatasetSchema::new().to_json().unwrap(), "c").unwrap(),
            DatasetSchema::new()
        );
    }

    #[test]
    fn decoding_refuses_damage_with_the_file_name() {
        let ipc = DatasetSchema::from_fields([Arc::new(Field::new("a", Int64, true))])
            .unwrap()
            .ipc_message()
            .unwrap();
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let mut bad = vec![
            "not base64!".to_string(),
            b64(&ipc[..ipc.len() / 2]),
            b64(&[0xff; 3]),
            b64(&[]),
            "A".repeat(MAX_SCHEMA_BYTES + 4),
        ];
        for i in 0..ipc.len() {
            let mut damaged = ipc.clone();
            damaged[i] ^= 0x55;
            bad.push(b64(&damaged));
        }
        for text in bad {
            if let Err(e) = DatasetSchema::decode(&text, "commit.000003.json") {
                assert!(e.to_string().starts_with("commit.000003.json: "), "{e}");
            }
        }
        assert!(DatasetSchema::decode("A".repeat(MAX_SCHEMA_BYTES + 4).as_str(), "c").is_err());
    }
}
