//! MosaicML Streaming (MDS) datasets as records: a directory holding
//! `index.json` and its shards (`shard.NNNNN.mds`, or compressed
//! `shard.NNNNN.mds.zstd`, `.gz`, `.bz2`, `.br`, `.snappy`), its samples in
//! index order, shard after shard ([`crate::mds_index`] parses the index and
//! the columns, [`crate::sample_shards`] reads a shard).
//!
//! One column is the value, as its bytes are stored (an image's encoded bytes,
//! a string's UTF-8, an array's elements); by default the only column of a
//! binary encoding (`bytes`, an image or list of images, `ndarray`), or, with
//! none, the only `str` column. `key_column` (a `str`, `bytes` or integer
//! column; integers as decimal text) keys the records; without it they are
//! keyless. The other columns are fields, typed by their encodings
//! ([`crate::sample_columns`]); a `pkl` column is never unpickled: selected as
//! a field or the value, it is refused. All shards, of every directory read,
//! must have the same columns.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::ArrayRef;

use crate::mds_index::{parse_index, split_sample, Column, Encoding, ShardEntry};
use crate::sample_columns::{row_fields, Cell, ColumnBuilder, Kind, MAX_FIELD_BYTES};
use crate::sample_shards::{read_index, ShardReader};
use crate::{FieldSelection, Fields, Fused, Origin, Record, Skipped, Source, SourceError};

/// The index file of an MDS (or LitData) directory.
pub const INDEX_NAME: &str = "index.json";

/// The metadata key under which an MDS source describes its columns.
pub const METADATA_KEY: &str = "mds";

/// Records read at once from a shard: their fields are built as one batch.
const BATCH_SAMPLES: usize = 256;
/// Sample bytes read at once (at least one sample).
const BATCH_BYTES: usize = 32 << 20;

/// Which columns an [`MdsSource`] reads.
#[derive(Clone, Debug, Default)]
pub struct MdsOptions {
    /// The column holding the values. Default: the only column of a binary
    /// encoding, else the only `str` column.
    pub value_column: Option<String>,
    /// The column holding the keys; without it the records are keyless.
    pub key_column: Option<String>,
    /// Which other columns become fields. Default: all of them.
    pub fields: FieldSelection,
}

/// Whether `dir` holds an MDS `index.json` (version 2 with a `shards` list).
pub fn is_mds(dir: &Path) -> bool {
    let index = dir.join(INDEX_NAME);
    index.is_file()
        && read_index(&index).is_ok_and(|v| {
            v.get("shards").is_some_and(serde_json::Value::is_array)
                && v.get("version").and_then(serde_json::Value::as_u64) == Some(2)
        })
}

/// What each column is for.
struct Plan {
    columns: Vec<Column>,
    value: usize,
    key: Option<usize>,
    /// The field columns: their column, kind, and whether an array's bytes are
    /// a field (false for the value's dtype and shape).
    fields: Vec<(usize, Kind, bool)>,
}

impl Plan {
    fn new(columns: &[Column], options: &MdsOptions, index: &Path) -> Result<Plan, SourceError> {
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        let find = |name: &str| {
            names.iter().position(|n| *n == name).ok_or_else(|| {
                SourceError::Usage(format!(
                    "{}: no column {name:?}; the columns are {names:?}",
                    index.display()
                ))
            })
        };
        let value = match &options.value_column {
            Some(name) => find(name)?,
            None => default_value(columns).ok_or_else(|| {
                SourceError::Usage(format!(
                    "{}: which column is the value? Give `value_column` (the columns are {})",
                    index.display(),
                    describe(columns)
                ))
            })?,
        };
        let key = options.key_column.as_deref().map(find).transpose()?;
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
        let refuse_pickle = |i: usize, role: &str| -> Result<(), SourceError> {
            if columns[i].encoding == Encoding::Pickle {
                return Err(SourceError::Usage(format!(
                    "{}: column {:?} is pickled Python objects (pkl), which bcd never unpickles; {role}",
                    index.display(),
                    columns[i].name
                )));
            }
            Ok(())
        };
        refuse_pickle(value, "choose another `value_column`")?;
        if let Some(key) = key {
            let usable = matches!(
                columns[key].encoding,
                Encoding::Str | Encoding::Bytes | Encoding::Int | Encoding::StrInt
            ) || matches!(&columns[key].encoding, Encoding::Scalar(d) if d.kind != Kind::Float16 && d.kind != Kind::Float32 && d.kind != Kind::Float64);
            if !usable {
                return Err(SourceError::Usage(format!(
                    "{}: key column {:?} is {:?}; a key column is str, bytes or an integer",
                    index.display(),
                    columns[key].name,
                    columns[key].encoding_name
                )));
            }
        }
        let mut fields = Vec::new();
        let value_kind = columns[value].encoding.kind().expect("not pkl");
        if value_kind == Kind::Array {
            fields.push((value, Kind::Array, false));
        }
        for (i, column) in columns.iter().enumerate() {
            if i == value || Some(i) == key || !options.fields.includes(&column.name) {
                continue;
            }
            refuse_pickle(
                i,
                "leave it out with `fields` (name the columns to keep, or none)",
            )?;
            fields.push((i, column.encoding.kind().expect("not pkl"), true));
        }
        let plan = Plan {
            columns: columns.to_vec(),
            value,
            key,
            fields,
        };
        plan.check_names(index)?;
        Ok(plan)
    }

    /// The field names must be unique (an array's `NAME.dtype` could meet a
    /// column of that name).
    fn check_names(&self, index: &Path) -> Result<(), SourceError> {
        let mut seen = std::collections::HashSet::new();
        for (i, kind, data) in &self.fields {
            for name in ColumnBuilder::field_names(&self.columns[*i].name, *kind, *data) {
                if !seen.insert(name.clone()) {
                    return Err(SourceError::Usage(format!(
                        "{}: two fields would be named {name:?}; leave one out with `fields`",
                        index.display()
                    )));
                }
            }
        }
        Ok(())
    }

    fn builders(&self) -> Vec<ColumnBuilder> {
        (self.fields.iter())
            .map(|(i, kind, data)| ColumnBuilder::new(&self.columns[*i].name, *kind, *data))
            .collect()
    }
}

/// The value column when none is given: the only binary one, else the only
/// `str` one.
fn default_value(columns: &[Column]) -> Option<usize> {
    let only = |pick: &dyn Fn(&Column) -> bool| {
        let mut found = columns.iter().enumerate().filter(|(_, c)| pick(c));
        match (found.next(), found.next()) {
            (Some((i, _)), None) => Some(Some(i)),
            (None, _) => None,
            _ => Some(None),
        }
    };
    match only(&|c| c.encoding.is_binary()) {
        Some(found) => found,
        None => only(&|c| c.encoding == Encoding::Str).flatten(),
    }
}

fn describe(columns: &[Column]) -> String {
    (columns.iter())
        .map(|c| format!("{} ({})", c.name, c.encoding_name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A shard to read: its directory and entry.
struct Pending {
    dir: PathBuf,
    entry: ShardEntry,
}

/// Streams the samples of MDS directories, in order.
pub struct MdsSource {
    plan: Plan,
    pending: VecDeque<Pending>,
    current: Option<ShardReader>,
    ready: VecDeque<Record>,
    skipped: Skipped,
    metadata: serde_json::Map<String, serde_json::Value>,
}

impl MdsSource {
    /// A source over the MDS directories `dirs`, read in order as one
    /// dataset. Every index is read and checked here, and every shard's columns
    /// against the first's; the shards are opened when reached.
    pub fn new(dirs: &[PathBuf], options: &MdsOptions) -> Result<Fused<MdsSource>, SourceError> {
        let mut pending = VecDeque::new();
        let mut first: Option<(PathBuf, Vec<Column>)> = None;
        for dir in dirs {
            let index_path = dir.join(INDEX_NAME);
            let index = read_index(&index_path)?;
            let entries = parse_index(&index, dir).map_err(|e| {
                let error = SourceError::Invalid {
                    file: index_path.display().to_string(),
                    location: e.location.clone(),
                    reason: e.reason.clone(),
                };
                if e.unsupported {
                    error
                } else {
                    SourceError::Corrupt {
                        file: index_path.display().to_string(),
                        location: e.location,
                        reason: e.reason,
                    }
                }
            })?;
            for entry in entries {
                match &first {
                    None => first = Some((index_path.clone(), entry.columns.clone())),
                    Some((where_first, columns)) if *columns != entry.columns => {
                        return Err(SourceError::Invalid {
                            file: index_path.display().to_string(),
                            location: format!("shard {}", entry.number),
                            reason: format!(
                                "its columns ({}) differ from those of {} ({}); ingest them separately",
                                describe(&entry.columns),
                                where_first.display(),
                                describe(columns)
                            ),
                        });
                    }
                    Some(_) => {}
                }
                pending.push_back(Pending {
                    dir: dir.clone(),
                    entry,
                });
            }
        }
        let (index_path, columns) = first.unwrap_or_else(|| {
            (
                dirs.first().map(|d| d.join(INDEX_NAME)).unwrap_or_default(),
                Vec::new(),
            )
        });
        let plan = if columns.is_empty() {
            // No shards: nothing to read, whatever the options.
            Plan {
                columns: Vec::new(),
                value: 0,
                key: None,
                fields: Vec::new(),
            }
        } else {
            Plan::new(&columns, options, &index_path)?
        };
        let mut metadata = serde_json::Map::new();
        if !plan.columns.is_empty() {
            let encodings: serde_json::Map<_, _> = (plan.columns.iter())
                .map(|c| (c.name.clone(), c.encoding_name.clone().into()))
                .collect();
            metadata.insert(
                METADATA_KEY.into(),
                serde_json::json!({ "columns": encodings }),
            );
            let mut value = serde_json::json!({ "column": plan.columns[plan.value].name });
            if let Some(key) = plan.key {
                value["key_column"] = plan.columns[key].name.clone().into();
            }
            metadata.insert("value".into(), value);
        }
        Ok(Fused::new(MdsSource {
            plan,
            pending,
            current: None,
            ready: VecDeque::new(),
            skipped: Skipped::default(),
            metadata,
        }))
    }

    /// Reads the next batch of samples into `ready`; false when every shard is
    /// read.
    fn fill(&mut self) -> Result<bool, SourceError> {
        loop {
            let Some(reader) = self.current.as_mut() else {
                let Some(next) = self.pending.pop_front() else {
                    return Ok(false);
                };
                let reader = ShardReader::open(next.entry.file(&next.dir))?;
                if reader.samples() as u64 != next.entry.samples {
                    return Err(SourceError::Corrupt {
                        file: reader.path().display().to_string(),
                        location: "the sample count".into(),
                        reason: format!(
                            "the shard holds {} samples, its index entry (shard {}) says {}",
                            reader.samples(),
                            next.entry.number,
                            next.entry.samples
                        ),
                    });
                }
                self.current = Some(reader);
                continue;
            };
            let mut builders = self.plan.builders();
            let mut records = Vec::new();
            let mut bytes = 0;
            let mut ended = false;
            while records.len() < BATCH_SAMPLES && bytes < BATCH_BYTES {
                let Some((i, offset, sample)) = reader.next_sample()? else {
                    ended = true;
                    break;
                };
                bytes += sample.len();
                let origin = Origin::Record {
                    file: reader.path().to_owned(),
                    record: i as u64,
                    offset,
                };
                let record = decode(&self.plan, &mut builders, &sample, origin)?;
                records.push(record);
            }
            if ended {
                self.current.take().expect("read above").finish()?;
            }
            if records.is_empty() {
                continue;
            }
            let columns: Vec<(Arc<str>, ArrayRef)> = builders
                .iter_mut()
                .flat_map(ColumnBuilder::finish)
                .collect();
            for (row, mut record) in records.into_iter().enumerate() {
                record.fields = row_fields(&columns, row);
                self.ready.push_back(record);
            }
            return Ok(true);
        }
    }
}

/// One sample as a record (without its fields, which the batch's arrays give),
/// its field cells pushed into `builders`.
fn decode(
    plan: &Plan,
    builders: &mut [ColumnBuilder],
    sample: &[u8],
    origin: Origin,
) -> Result<Record, SourceError> {
    let Origin::Record {
        file,
        record,
        offset,
    } = &origin
    else {
        unreachable!("made by the caller")
    };
    let corrupt = |reason: String| SourceError::Corrupt {
        file: file.display().to_string(),
        location: format!("sample {record} at byte {offset}"),
        reason,
    };
    let parts = split_sample(&plan.columns, sample).map_err(corrupt)?;
    let cell = |i: usize| -> Result<Cell<'_>, SourceError> {
        let column = &plan.columns[i];
        let cell = column.encoding.cell(parts[i]).map_err(|e| {
            corrupt(format!(
                "column {:?} ({}): {e}",
                column.name, column.encoding_name
            ))
        })?;
        if cell.byte_len() > MAX_FIELD_BYTES {
            return Err(SourceError::TooLarge {
                file: file.display().to_string(),
                location: format!("sample {record}, column {:?}", column.name),
                what: "a field".into(),
                size: cell.byte_len() as u64,
                limit: MAX_FIELD_BYTES as u64,
            });
        }
        Ok(cell)
    };
    let value_cell = plan.columns[plan.value]
        .encoding
        .cell(parts[plan.value])
        .map_err(|e| corrupt(format!("column {:?}: {e}", plan.columns[plan.value].name)))?;
    let value = match &value_cell {
        Cell::Array { data, .. } => data.to_vec(),
        _ => parts[plan.value].to_vec(),
    };
    let key = match plan.key {
        Some(i) => cell(i)?.key_bytes().expect("key kinds checked"),
        None => Vec::new(),
    };
    // Check every cell before pushing any, so a refused sample leaves the
    // builders as they were (the batch is dropped on an error anyway).
    let mut cells = Vec::with_capacity(plan.fields.len());
    for (i, _, data) in &plan.fields {
        cells.push(if *i == plan.value && !data {
            value_cell.clone()
        } else {
            cell(*i)?
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

impl Iterator for MdsSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(record) = self.ready.pop_front() {
                return Some(Ok(record));
            }
            match self.fill() {
                Ok(true) => continue,
                Ok(false) => return None,
                Err(error) => return Some(Err(error)),
            }
        }
    }
}

impl Source for MdsSource {
    fn keyed(&self) -> bool {
        self.plan.key.is_some()
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        self.metadata.clone()
    }
}
