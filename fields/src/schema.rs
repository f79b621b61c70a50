//! The dataset schema: one ordered list of nullable Arrow fields for the whole
//! dataset, and how a shard's columns unify with it (FORMAT.md, "Fields").

use std::sync::Arc;

use arrow_schema::{DataType, Field, FieldRef, Fields as ArrowFields, Schema, SchemaRef};
use base64::Engine as _;
use serde_json::{Map, Value};

use crate::error::{FieldsError, Result};
use crate::json_util;

/// The largest encoded schema [`DatasetSchema::decode`] reads (base64 text).
pub const MAX_SCHEMA_BYTES: usize = 1 << 20;

/// Two types that do not unify, found at `path` (the field's name, then
/// `.child` for a struct's child and `[]` for a list's elements).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TypeConflict {
    pub path: String,
    /// The types, as the messages show them (with an Arrow extension's name).
    pub existing: String,
    pub new: String,
}

impl TypeConflict {
    /// The error for a conflict with the dataset's schema.
    pub(crate) fn in_dataset(self) -> FieldsError {
        FieldsError::DatasetConflict {
            field: self.path,
            new: self.new,
            existing: self.existing,
        }
    }

    /// The error for a conflict with earlier records of a shard.
    pub(crate) fn in_record(self, origin: &str) -> FieldsError {
        FieldsError::RecordConflict {
            field: self.path,
            new: self.new,
            existing: self.existing,
            origin: origin.to_owned(),
        }
    }
}

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

/// The metadata key naming a field's Arrow extension type (`arrow.uuid`,
/// `arrow.json`, `arrow.fixed_shape_tensor`, ...): the storage type alone does
/// not say what the values mean.
pub(crate) const EXTENSION_NAME_KEY: &str = "ARROW:extension:name";
/// The metadata key of an extension type's parameters (a tensor's shape).
pub(crate) const EXTENSION_METADATA_KEY: &str = "ARROW:extension:metadata";

/// A field's type as messages show it: with its extension's name, if any.
fn described(field: &Field) -> String {
    match field.metadata().get(EXTENSION_NAME_KEY) {
        Some(name) => format!("{} (extension {name})", field.data_type()),
        None => field.data_type().to_string(),
    }
}

/// The unified field: `existing`'s name and metadata (with `new`'s keys it
/// lacks), the unified type, nullable if either is. An Arrow extension type
/// (its name and parameters) must be the same on both sides, or absent on both:
/// the same bytes under another extension mean something else.
pub(crate) fn unify_fields(
    existing: &FieldRef,
    new: &FieldRef,
    path: &str,
) -> std::result::Result<FieldRef, TypeConflict> {
    let extension = |f: &Field| {
        (
            f.metadata().get(EXTENSION_NAME_KEY).cloned(),
            f.metadata().get(EXTENSION_METADATA_KEY).cloned(),
        )
    };
    // A column of nulls so far (or here) has no meaning to keep: the other side's
    // extension, if any, is taken.
    let typed = |f: &Field| f.data_type() != &DataType::Null;
    if typed(existing) && typed(new) && extension(existing) != extension(new) {
        return Err(TypeConflict {
            path: path.to_owned(),
            existing: described(existing),
            new: described(new),
        });
    }
    let data_type = unify_types(existing.data_type(), new.data_type(), path)?;
    let nullable = existing.is_nullable() || new.is_nullable();
    let missing_metadata = new
        .metadata()
        .keys()
        .any(|k| !existing.metadata().contains_key(k));
    if &data_type == existing.data_type() && nullable == existing.is_nullable() && !missing_metadata
    {
        return Ok(existing.clone());
    }
    let mut metadata = existing.metadata().clone();
    for (k, v) in new.metadata().iter() {
        if !metadata.contains_key(k) {
            metadata.insert(k.clone(), v.clone());
        }
    }
    Ok(Arc::new(
        Field::new(existing.name(), data_type, nullable).with_metadata(metadata),
    ))
}

/// Bit width and signedness of an integer type.
fn integer(t: &DataType) -> Option<(u32, bool)> {
    use DataType::*;
    Some(match t {
        Int8 => (8, true),
        Int16 => (16, true),
        Int32 => (32, true),
        Int64 => (64, true),
        UInt8 => (8, false),
        UInt16 => (16, false),
        UInt32 => (32, false),
        UInt64 => (64, false),
        _ => return None,
    })
}

/// Unifies two types (FORMAT.md, "Fields": schema rules); `path` names the
/// field in a conflict.
pub(crate) fn unify_types(
    existing: &DataType,
    new: &DataType,
    path: &str,
) -> std::result::Result<DataType, TypeConflict> {
    use DataType::*;
    if existing == new {
        return Ok(existing.clone());
    }
    let conflict = || TypeConflict {
        path: path.to_owned(),
        existing: existing.to_string(),
        new: new.to_string(),
    };
    match (existing, new) {
        (Null, t) | (t, Null) => Ok(t.clone()),
        (a, b) if integer(a).is_some() && integer(b).is_some() => {
            let (Some((wa, sa)), Some((wb, sb))) = (integer(a), integer(b)) else {
                return Err(conflict());
            };
            // The wider one holds every value of the narrower one: a signed
            // into a wider signed, an unsigned into a wider unsigned or signed.
            let fits = |(w1, s1): (u32, bool), (w2, s2): (u32, bool)| w1 < w2 && (s1 == s2 || s2);
            if fits((wa, sa), (wb, sb)) {
                Ok(b.clone())
            } else if fits((wb, sb), (wa, sa)) {
                Ok(a.clone())
            } else {
                Err(conflict())
            }
        }
        (List(a), List(b)) => Ok(List(unify_fields(a, b, &format!("{path}[]"))?)),
        (LargeList(a), LargeList(b)) => Ok(LargeList(unify_fields(a, b, &format!("{path}[]"))?)),
        (FixedSizeList(a, n), FixedSizeList(b, m)) if n == m => {
            Ok(FixedSizeList(unify_fields(a, b, &format!("{path}[]"))?, *n))
        }
        (Struct(a), Struct(b)) => {
            let mut children: Vec<FieldRef> = a.iter().cloned().collect();
            for child in b.iter() {
                match children.iter().position(|c| c.name() == child.name()) {
                    Some(i) => {
                        children[i] =
                            unify_fields(&children[i], child, &format!("{path}.{}", child.name()))?
                    }
                    None => children.push(child.clone()),
                }
            }
            Ok(Struct(ArrowFields::from(children)))
        }
        _ => Err(conflict()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DataType::*;

    fn list(t: DataType) -> DataType {
        List(Arc::new(Field::new("item", t, true)))
    }

    fn strukt(children: &[(&str, DataType)]) -> DataType {
        Struct(
            children
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), true))
                .collect(),
        )
    }

    fn unify(a: &DataType, b: &DataType) -> std::result::Result<DataType, TypeConflict> {
        unify_types(a, b, "f")
    }

    #[test]
    fn integers_widen_in_either_order() {
        let cases = [
            (Int8, Int16, Some(Int16)),
            (Int32, Int64, Some(Int64)),
            (Int64, Int32, Some(Int64)),
            (UInt8, UInt64, Some(UInt64)),
            (UInt8, Int16, Some(Int16)),
            (UInt32, Int64, Some(Int64)),
            (Int64, UInt32, Some(Int64)),
            (UInt32, Int32, None),
            (Int8, UInt8, None),
            (Int8, UInt64, None),
            (UInt64, Int64, None),
            (Int64, Float64, None),
            (Float32, Float64, None),
        ];
        for (a, b, want) in cases {
            assert_eq!(unify(&a, &b).ok(), want, "{a} + {b}");
            assert_eq!(unify(&b, &a).ok(), unify(&a, &b).ok(), "{a} + {b} commutes");
        }
    }

    #[test]
    fn null_gives_way_to_anything() {
        assert_eq!(unify(&Null, &Utf8).unwrap(), Utf8);
        assert_eq!(unify(&list(Int64), &Null).unwrap(), list(Int64));
        assert_eq!(unify(&list(Null), &list(Int32)).unwrap(), list(Int32));
    }

    #[test]
    fn nested_types_unify_recursively() {
        assert_eq!(unify(&list(Int32), &list(Int64)).unwrap(), list(Int64));
        let a = strukt(&[("x", Int32), ("y", Utf8)]);
        let b = strukt(&[("z", Boolean), ("x", Int64)]);
        assert_eq!(
            unify(&a, &b).unwrap(),
            strukt(&[("x", Int64), ("y", Utf8), ("z", Boolean)])
        );
        // A list's element field keeps the dataset's name ("element" from Parquet).
        let parquet = List(Arc::new(Field::new("element", Int64, false)));
        assert_eq!(
            unify(&parquet, &list(Int32)).unwrap(),
            List(Arc::new(Field::new("element", Int64, true)))
        );
    }

    #[test]
    fn a_nested_conflict_names_its_path_and_both_types() {
        let a = strukt(&[("meta", strukt(&[("tags", list(Utf8))]))]);
        let b = strukt(&[("meta", strukt(&[("tags", list(Int64))]))]);
        let err = unify_types(&a, &b, "info").unwrap_err();
        assert_eq!(err.path, "info.meta.tags[]");
        assert_eq!(
            (err.existing, err.new),
            (Utf8.to_string(), Int64.to_string())
        );
    }

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
