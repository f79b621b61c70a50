//! The fields of JSON Lines records: the Arrow schema their objects are decoded
//! with, inferred from the first lines or given, with the value and key columns
//! typed as the source reads them (see [`crate::jsonl_source`] for the rules).

use std::sync::Arc;

use arrow_json::reader::{infer_json_schema_from_iterator, ReaderBuilder};
use arrow_schema::{ArrowError, DataType, Field, Schema};

use crate::SourceError;

/// Lines read to infer the schema when none is given.
pub const INFER_LINES: usize = 1000;
/// Bytes of lines read at most to infer the schema (the line that passes it is
/// the last one read).
pub const INFER_BYTES: usize = 16 << 20;

/// The schema arrow-json infers from `values`, the first objects of the source
/// (parsed from `lines`, their text), checked to decode every one of them; or the
/// position in `lines` of the first line whose types conflict with the lines
/// before it, and why.
pub(crate) fn infer_schema(
    values: &[serde_json::Value],
    lines: &[&[u8]],
) -> Result<Schema, (usize, String)> {
    // arrow-json's inference turns a field that is a number in one line and
    // a string in another into a string column, which the numbers then fail
    // to decode into: the first k lines are good when their inferred schema
    // decodes them all.
    let check = |k: usize| -> Result<Schema, ArrowError> {
        let schema = infer_json_schema_from_iterator(values[..k].iter().map(Ok))?;
        let mut decoder = ReaderBuilder::new(Arc::new(schema.clone()))
            .with_batch_size(k + 1)
            .with_strict_mode(true)
            .build_decoder()?;
        for line in lines.iter().take(k) {
            decoder.decode(line)?;
        }
        decoder.flush()?;
        Ok(schema)
    };
    match check(values.len()) {
        Ok(schema) => Ok(schema),
        Err(error) => {
            // The line that brings the conflict: the shortest failing prefix (a
            // conflict stays once there) ends with it.
            let (mut good, mut bad) = (0, values.len());
            while bad - good > 1 {
                let mid = (good + bad) / 2;
                match check(mid) {
                    Ok(_) => good = mid,
                    Err(_) => bad = mid,
                }
            }
            let error = check(bad).err().unwrap_or(error);
            Err((
                bad - 1,
                format!(
                    "its fields' types conflict with the lines before it ({}); pass `schema` to choose the types",
                    arrow_message(&error)
                ),
            ))
        }
    }
}

/// An arrow-json error's message, without arrow's "Json error: " prefix.
pub(crate) fn arrow_message(error: &ArrowError) -> String {
    match error {
        ArrowError::JsonError(message) => message.clone(),
        other => other.to_string(),
    }
}

/// `schema` with the value field `value_field` a string column and the key field `key_field` a string or
/// integer one, appended when missing. A `given` schema that types them otherwise
/// is refused; an inferred one is corrected (a line that does not fit fails).
pub(crate) fn value_and_key_columns(
    schema: Schema,
    value_field: &str,
    key_field: Option<&str>,
    given: bool,
) -> Result<Schema, SourceError> {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut column = |name: &str, what: &str, allowed: &[DataType]| -> Result<(), SourceError> {
        match fields.iter_mut().find(|f| f.name() == name) {
            None => fields.push(Field::new(name, DataType::Utf8, true)),
            Some(field) if allowed.contains(field.data_type()) => {}
            Some(field) if given => {
                return Err(SourceError::Usage(format!(
                    "the {what} field {name:?} is {} in `schema`; it must be {}",
                    field.data_type(),
                    if allowed.len() == 1 {
                        "string"
                    } else {
                        "string or int64"
                    }
                )))
            }
            Some(field) => *field = field.clone().with_data_type(DataType::Utf8),
        }
        Ok(())
    };
    column(value_field, "value", &[DataType::Utf8])?;
    if let Some(key) = key_field {
        if key == value_field {
            return Err(SourceError::Usage(format!(
                "`key_field` and `value_field` name the same field {key:?}"
            )));
        }
        column(key, "key", &[DataType::Utf8, DataType::Int64])?;
    }
    Ok(Schema::new_with_metadata(fields, schema.metadata().clone()))
}
