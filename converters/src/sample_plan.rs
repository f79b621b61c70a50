//! Which column (MDS) or leaf (LitData) of a sample is the value, which the
//! key and which are fields ([`Plan`], from [`ColumnOptions`]), and one
//! batch of samples made into records by it ([`Plan::read_batch`]): the rules the
//! MDS and LitData sources share.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use arrow_array::ArrayRef;

use crate::sample_columns::{row_fields, Cell, ColumnBuilder, Kind, MAX_FIELD_BYTES};
use crate::{FieldSelection, Fields, Origin, Record, SourceError};

/// Which columns (MDS) or leaves (LitData) a source of these shards makes
/// the value, the key and the fields.
#[derive(Clone, Debug, Default)]
pub struct ColumnOptions {
    /// The column holding the values. Default: the only column of a binary
    /// kind (bytes, an image, an array), else the only text one (the key
    /// column aside).
    pub value_column: Option<String>,
    /// The column holding the keys; without it the records are keyless.
    pub key_column: Option<String>,
    /// Which other columns become fields. Default: all of them.
    pub fields: crate::FieldSelection,
}

/// Samples read at once: their fields are built as one batch.
const BATCH_SAMPLES: usize = 256;
/// Sample bytes read at once (at least one sample).
const BATCH_BYTES: usize = 32 << 20;

/// One column (or leaf) as the plan sees it.
#[derive(Clone, Debug)]
pub(crate) struct Part {
    pub name: String,
    /// Its encoding or format, as the index names it (for messages).
    pub described: String,
    /// Its field's kind; `None` for pickled Python objects.
    pub kind: Option<Kind>,
    /// Bytes a value is made of (bytes, an image, an array).
    pub binary: bool,
    /// Text (the default value when nothing is binary).
    pub text: bool,
}

impl Part {
    fn keyable(&self) -> bool {
        matches!(
            self.kind,
            Some(
                Kind::Binary
                    | Kind::Utf8
                    | Kind::Int8
                    | Kind::Int16
                    | Kind::Int32
                    | Kind::Int64
                    | Kind::UInt8
                    | Kind::UInt16
                    | Kind::UInt32
                    | Kind::UInt64
            )
        )
    }
}

/// What each part of a sample is for.
pub(crate) struct Plan {
    pub parts: Vec<Part>,
    pub value: usize,
    pub key: Option<usize>,
    /// The field parts: their part, kind, and whether an array's bytes are a
    /// field (false for the value's dtype and shape).
    pub fields: Vec<(usize, Kind, bool)>,
}

impl Plan {
    /// The plan `options` ask for; `index` (the index file) and `what`
    /// (`("column", "columns")`, `("leaf", "leaves")`) name things in messages.
    pub(crate) fn new(
        parts: Vec<Part>,
        options: &ColumnOptions,
        index: &Path,
        (what, whats): (&str, &str),
    ) -> Result<Plan, SourceError> {
        let usage = |message: String| SourceError::Usage(format!("{}: {message}", index.display()));
        let names: Vec<&str> = parts.iter().map(|c| c.name.as_str()).collect();
        let find = |name: &str| {
            (names.iter().position(|n| *n == name))
                .ok_or_else(|| usage(format!("no {what} {name:?}; the {whats} are {names:?}")))
        };
        let key = options.key_column.as_deref().map(find).transpose()?;
        let value = match &options.value_column {
            Some(name) => find(name)?,
            None => default_value(&parts, key).ok_or_else(|| {
                usage(format!(
                    "which {what} is the value? Give `value_column` (the {whats} are {})",
                    describe(&parts)
                ))
            })?,
        };
        let mut taken = vec![(names[value], "value column")];
        if let Some(key) = key {
            taken.push((names[key], "key column"));
        }
        options.fields.refuse(&taken)?;
        if let FieldSelection::Only(selected) = &options.fields {
            for name in selected {
                find(name)?;
            }
        }
        let refuse_pickle = |i: usize, next: &str| match parts[i].kind {
            Some(kind) => Ok(kind),
            None => Err(usage(format!(
                "{what} {:?} is pickled Python objects ({}), which bcd never unpickles; {next}",
                parts[i].name, parts[i].described
            ))),
        };
        let value_kind = refuse_pickle(value, "choose another `value_column`")?;
        if let Some(key) = key.filter(|k| !parts[*k].keyable()) {
            return Err(usage(format!(
                "key column {:?} is {}; a key is bytes, text or an integer",
                parts[key].name, parts[key].described
            )));
        }
        let mut fields = Vec::new();
        if value_kind == Kind::Array {
            fields.push((value, Kind::Array, false));
        }
        for (i, part) in parts.iter().enumerate() {
            if i == value || Some(i) == key || !options.fields.includes(&part.name) {
                continue;
            }
            let kind = refuse_pickle(
                i,
                &format!("leave it out with `fields` (name the {whats} to keep, or none)"),
            )?;
            fields.push((i, kind, true));
        }
        let mut seen = HashSet::new();
        for (i, kind, data) in &fields {
            for name in ColumnBuilder::field_names(&parts[*i].name, *kind, *data) {
                if !seen.insert(name.clone()) {
                    return Err(usage(format!(
                        "two fields would be named {name:?}; leave one out with `fields`"
                    )));
                }
            }
        }
        Ok(Plan {
            parts,
            value,
            key,
            fields,
        })
    }

    /// The plan of a source with no samples.
    pub(crate) fn empty() -> Plan {
        Plan {
            parts: Vec::new(),
            value: 0,
            key: None,
            fields: Vec::new(),
        }
    }

    /// Builders of one batch's field columns.
    fn builders(&self) -> Vec<ColumnBuilder> {
        (self.fields.iter())
            .map(|(i, kind, data)| ColumnBuilder::new(&self.parts[*i].name, *kind, *data))
            .collect()
    }

    /// The dataset metadata of the value layout (`value`: the column and the
    /// key column), as the Parquet source gives it.
    pub(crate) fn value_metadata(&self) -> serde_json::Value {
        let mut value = serde_json::json!({ "column": self.parts[self.value].name });
        if let Some(key) = self.key {
            value["key_column"] = self.parts[key].name.clone().into();
        }
        value
    }

    /// Reads up to a batch of samples from `samples` (256, or 32 MiB, but at
    /// least one) as records with their fields; true with them if `samples`
    /// ended.
    pub(crate) fn read_batch(
        &self,
        layout: &dyn Layout,
        samples: &mut dyn Samples,
    ) -> Result<(Vec<Record>, bool), SourceError> {
        let mut builders = self.builders();
        let mut records = Vec::new();
        let (mut bytes, mut ended) = (0, false);
        // One path for the batch's origins (a sample's copies none of it).
        let file: Arc<Path> = Arc::from(samples.path());
        while records.len() < BATCH_SAMPLES && bytes < BATCH_BYTES {
            let Some((i, offset, sample)) = samples.next_sample()? else {
                ended = true;
                break;
            };
            bytes += sample.len();
            let origin = Origin::Record {
                file: Arc::clone(&file),
                record: i,
                offset,
            };
            records.push(self.record(&mut builders, layout, &sample, origin)?);
        }
        let columns: Vec<(Arc<str>, ArrayRef)> = builders
            .iter_mut()
            .flat_map(ColumnBuilder::finish)
            .collect();
        for (row, record) in records.iter_mut().enumerate() {
            record.fields = row_fields(&columns, row);
        }
        Ok((records, ended))
    }

    /// One sample as a record without its fields, which the batch's arrays
    /// give: its field cells are pushed into `builders`. Errors name the
    /// sample by `origin`.
    fn record(
        &self,
        builders: &mut [ColumnBuilder],
        layout: &dyn Layout,
        sample: &[u8],
        origin: Origin,
    ) -> Result<Record, SourceError> {
        let (file, location) = match &origin {
            Origin::Record {
                file,
                record,
                offset,
            } => (
                file.display().to_string(),
                format!("sample {record} at byte {offset}"),
            ),
            other => (other.to_string(), String::new()),
        };
        let corrupt = |reason: String| SourceError::Corrupt {
            file: file.clone(),
            location: location.clone(),
            reason,
        };
        let parts = layout.split(sample).map_err(corrupt)?;
        let cell = |i: usize| -> Result<Cell<'_>, SourceError> {
            let part = &self.parts[i];
            let cell = (layout.decode(i, parts[i]))
                .map_err(|e| corrupt(format!("{:?} ({}): {e}", part.name, part.described)))?;
            if cell.byte_len() > MAX_FIELD_BYTES && i != self.value {
                return Err(SourceError::TooLarge {
                    file: file.clone(),
                    location: format!("{location}, {:?}", part.name),
                    what: "a field".into(),
                    size: cell.byte_len() as u64,
                    limit: MAX_FIELD_BYTES as u64,
                });
            }
            Ok(cell)
        };
        let value_cell = cell(self.value)?;
        let value = match &value_cell {
            Cell::Array { data, .. } => data.to_vec(),
            _ => parts[self.value].to_vec(),
        };
        let key = match self.key {
            Some(i) => cell(i)?.key_bytes().expect("key kinds checked"),
            None => Vec::new(),
        };
        // Every cell is decoded before any is pushed, so a refused sample
        // leaves the builders as they were.
        let mut cells = Vec::with_capacity(self.fields.len());
        for (i, _, data) in &self.fields {
            cells.push(match *i == self.value && !data {
                true => value_cell.clone(),
                false => cell(*i)?,
            });
        }
        for (builder, cell) in builders.iter_mut().zip(&cells) {
            builder.push(cell).map_err(corrupt)?;
        }
        Ok(Record {
            key,
            value,
            origin,
            fields: Fields::new(),
        })
    }
}

/// How a format splits a sample into its parts and decodes each.
pub(crate) trait Layout {
    /// The parts' bytes, in order.
    fn split<'a>(&self, sample: &'a [u8]) -> Result<Vec<&'a [u8]>, String>;
    /// Part `part` decoded.
    fn decode<'a>(&self, part: usize, bytes: &'a [u8]) -> Result<Cell<'a>, String>;
}

/// A shard or chunk read sample by sample.
pub(crate) trait Samples {
    /// The next sample: its number in the file, its byte offset and its bytes.
    /// (A slice of a mapped file, or bytes read for it.)
    fn next_sample(&mut self) -> Result<Option<(u64, u64, bytes::Bytes)>, SourceError>;
    /// The file, for origins and messages.
    fn path(&self) -> &Path;
}

/// The value part when none is given: the only binary one, else the only
/// text one; the key part (`key`) is neither.
fn default_value(parts: &[Part], key: Option<usize>) -> Option<usize> {
    let only = |pick: &dyn Fn(&Part) -> bool| {
        let mut found = (parts.iter().enumerate()).filter(|(i, c)| Some(*i) != key && pick(c));
        match (found.next(), found.next()) {
            (Some((i, _)), None) => Some(Some(i)),
            (None, _) => None,
            _ => Some(None),
        }
    };
    match only(&|c| c.binary) {
        Some(found) => found,
        None => only(&|c| c.text).flatten(),
    }
}

/// `name (encoding), ...`, for messages.
pub(crate) fn describe(parts: &[Part]) -> String {
    (parts.iter())
        .map(|c| format!("{} ({})", c.name, c.described))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(name: &str, kind: Kind) -> Part {
        Part {
            name: name.into(),
            described: "x".into(),
            kind: Some(kind),
            binary: kind == Kind::Binary,
            text: kind == Kind::Utf8,
        }
    }

    fn value_of(parts: &[Part], key: Option<&str>) -> Result<String, SourceError> {
        let options = ColumnOptions {
            key_column: key.map(str::to_owned),
            ..Default::default()
        };
        let plan = Plan::new(parts.to_vec(), &options, Path::new("i"), ("leaf", "leaves"))?;
        Ok(plan.parts[plan.value].name.clone())
    }

    #[test]
    fn the_default_value_is_the_only_binary_part_else_the_only_text_one_the_key_aside() {
        let text = [part("id", Kind::Utf8), part("text", Kind::Utf8)];
        assert!(value_of(&text, None).is_err());
        assert_eq!(value_of(&text, Some("id")).unwrap(), "text");
        assert_eq!(value_of(&text, Some("text")).unwrap(), "id");
        let bytes = [part("id", Kind::Binary), part("img", Kind::Binary)];
        assert_eq!(value_of(&bytes, Some("id")).unwrap(), "img");
        let mixed = [part("img", Kind::Binary), part("caption", Kind::Utf8)];
        assert_eq!(value_of(&mixed, None).unwrap(), "img");
        // A binary key leaves the text as the value.
        assert_eq!(value_of(&mixed, Some("img")).unwrap(), "caption");
    }
}
