//! Records with their fields as WebDataset samples (`bcd export --samples`):
//! each record becomes `KEY.<value extension>` and one member per non-null field,
//! `KEY.<extension>`, members sorted by extension as webdataset's `TarWriter`
//! writes them. A dataset ingested from WebDataset shards with `samples` comes
//! back with the same member names and bytes, in the same order.
//!
//! Names: the value's extension is the record's `bcd.value_ext` field when it
//! has one; otherwise the key is split as webdataset splits member names
//! (`cat/0001.jpg` is sample `cat/0001`, extension `jpg`), and a key that does
//! not split keeps `bin`. A field's extension is the `bcd.member_ext` metadata
//! of its column (a member of the tar it came from), else its name; `bcd.*`
//! columns and the fields a JSON member was split into (`derived_fields` of the
//! metadata) are not members. Bytes: [`bcd_fields::member_bytes`] (integers as
//! decimal text, strings as UTF-8, binary as is).

use std::borrow::Cow;
use std::collections::HashSet;

use arrow_array::{Array, RecordBatch, StringArray};
use bcd::Dataset;
use bcd_converters::samples::{split_sample_name, VALUE_EXT_FIELD};
use bcd_fields::{member_bytes, FieldsError};

use crate::fields::{DatasetFields, FieldsIoError, ShardRows};

/// The metadata key of a column that came from a WebDataset member.
pub const MEMBER_EXT_METADATA: &str = "bcd.member_ext";
/// The extension of a value whose key names none (and which a `samples` ingest
/// takes as the value, storing no `bcd.value_ext`: the round trip is exact).
pub const DEFAULT_VALUE_EXT: &str = bcd_converters::samples::UNNAMED_VALUE_EXT;

/// A member of a sample: its name and bytes (the value's borrowed).
pub(crate) type SampleMember<'v> = (Vec<u8>, Cow<'v, [u8]>);

/// A field column exported as a member.
struct Member {
    /// Its position in the dataset schema.
    column: usize,
    extension: Vec<u8>,
}

/// Turns records into samples, reading each shard's fields once.
pub(crate) struct SampleMembers<'a> {
    dataset: &'a Dataset,
    fields: DatasetFields,
    members: Vec<Member>,
    value_ext: Option<usize>,
    /// The fields of the shard read last.
    shard: Option<(u64, ShardRows)>,
}

impl<'a> SampleMembers<'a> {
    pub(crate) fn new(dataset: &'a Dataset) -> Result<SampleMembers<'a>, FieldsIoError> {
        let fields = DatasetFields::load(dataset)?;
        let derived: HashSet<String> = match fields.metadata.get("derived_fields") {
            Some(serde_json::Value::Array(names)) => names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect(),
            _ => HashSet::new(),
        };
        let mut members = Vec::new();
        let mut value_ext = None;
        for (column, field) in fields.schema.fields().iter().enumerate() {
            if field.name() == VALUE_EXT_FIELD {
                value_ext = Some(column);
                continue;
            }
            if field.name().starts_with("bcd.") || derived.contains(field.name()) {
                continue;
            }
            let extension = field
                .metadata()
                .get(MEMBER_EXT_METADATA)
                .unwrap_or(field.name());
            if extension.is_empty() || extension.contains(['/', '\0']) {
                return Err(FieldsError::Unsupported(format!(
                    "field {:?}: {extension:?} cannot be a member's extension (choose the fields of a sample export with a new dataset, or export without samples)",
                    field.name()
                ))
                .into());
            }
            members.push(Member {
                column,
                extension: extension.as_bytes().to_vec(),
            });
        }
        Ok(SampleMembers {
            dataset,
            fields,
            members,
            value_ext,
            shard: None,
        })
    }

    /// Record `index`'s fields, as a row of its shard's batch (arrays shared,
    /// not copied).
    fn row(&mut self, index: usize) -> Result<(RecordBatch, usize), FieldsIoError> {
        let shard = self.dataset.value_location(index)?.shard;
        if self.shard.as_ref().is_none_or(|(s, _)| *s != shard) {
            let batches = self.fields.shard_batches(self.dataset, shard, None)?;
            self.shard = Some((shard, ShardRows::new(batches)));
        }
        let (_, rows) = self.shard.as_ref().expect("set above");
        let (batch, row) = rows.row(index - self.dataset.shard_first_record(shard) as usize);
        Ok((batch.clone(), row))
    }

    /// The members of record `index` (named `name`: the key, or the
    /// zero-padded index of a keyless record), sorted by extension: the value,
    /// then each non-null field.
    pub(crate) fn members<'v>(
        &mut self,
        index: usize,
        name: &[u8],
        value: &'v [u8],
    ) -> Result<Vec<SampleMember<'v>>, FieldsIoError> {
        let (batch, row) = self.row(index)?;
        let stored_ext = self.value_ext.and_then(|column| {
            let strings = batch
                .column(column)
                .as_any()
                .downcast_ref::<StringArray>()?;
            (!strings.is_null(row)).then(|| strings.value(row).as_bytes().to_vec())
        });
        let (base, extension): (&[u8], Vec<u8>) = match stored_ext {
            Some(extension) => (name, extension),
            None => match split_sample_name(name) {
                Some((base, extension)) => (base, extension.to_vec()),
                None => (name, DEFAULT_VALUE_EXT.as_bytes().to_vec()),
            },
        };
        let mut out = vec![(extension.clone(), Cow::Borrowed(value))];
        for member in &self.members {
            let Some(bytes) = member_bytes(batch.column(member.column).as_ref(), row) else {
                continue;
            };
            if member.extension == extension {
                return Err(FieldsError::Unsupported(format!(
                    "record {index}: field {:?} has the value's extension {:?}",
                    self.fields.schema.fields()[member.column].name(),
                    String::from_utf8_lossy(&extension)
                ))
                .into());
            }
            out.push((member.extension.clone(), Cow::Owned(bytes)));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out
            .into_iter()
            .map(|(extension, bytes)| {
                let mut full = base.to_vec();
                full.push(b'.');
                full.extend_from_slice(&extension);
                (full, bytes)
            })
            .collect())
    }
}
