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

use crate::mds_index::{parse_index, split_sample, Column, Encoding, ShardEntry};
use crate::sample_columns::Cell;
use crate::sample_plan::ColumnOptions;
use crate::sample_plan::{describe, Layout, Part, Plan};
use crate::sample_shards::{read_index, ShardReader};
use crate::sample_source::{Opener, SampleSource, Shard};
use crate::{Fused, SourceError};

/// The index file of an MDS (or LitData) directory.
pub const INDEX_NAME: &str = "index.json";

/// The metadata key under which an MDS source describes its columns.
pub const METADATA_KEY: &str = "mds";

/// Whether `dir` holds an MDS `index.json` (version 2 with a `shards` list).
pub fn is_mds(dir: &Path) -> bool {
    let index = dir.join(INDEX_NAME);
    index.is_file()
        && read_index(&index).is_ok_and(|v| {
            v.get("shards").is_some_and(serde_json::Value::is_array)
                && v.get("version").and_then(serde_json::Value::as_u64) == Some(2)
        })
}

/// The plan's view of MDS columns.
fn parts(columns: &[Column]) -> Vec<Part> {
    (columns.iter())
        .map(|c| Part {
            name: c.name.clone(),
            described: c.encoding_name.clone(),
            kind: c.encoding.kind(),
            binary: c.encoding.is_binary(),
            text: c.encoding == Encoding::Str,
        })
        .collect()
}

fn describe_columns(columns: &[Column]) -> String {
    describe(&parts(columns))
}

/// MDS columns, splitting and decoding a sample.
struct MdsLayout(Vec<Column>);

impl Layout for MdsLayout {
    fn split<'a>(&self, sample: &'a [u8]) -> Result<Vec<&'a [u8]>, String> {
        split_sample(&self.0, sample)
    }

    fn decode<'a>(&self, part: usize, bytes: &'a [u8]) -> Result<Cell<'a>, String> {
        self.0[part].encoding.cell(bytes)
    }
}

/// A shard to read: its directory and entry.
struct Pending {
    dir: PathBuf,
    entry: ShardEntry,
}

/// Reads MDS directories: [`MdsSource::open`] makes the [`SampleSource`] of
/// their samples.
pub struct MdsSource;

impl MdsSource {
    /// A source over the MDS directories `dirs`, read in order as one
    /// dataset. Every index is read and checked here, and every shard's columns
    /// against the first's; the shards are opened when reached.
    pub fn open(
        dirs: &[PathBuf],
        options: &ColumnOptions,
    ) -> Result<Fused<SampleSource>, SourceError> {
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
                                describe_columns(&entry.columns),
                                where_first.display(),
                                describe_columns(columns)
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
        let plan = match columns.is_empty() {
            // No shards: nothing to read, whatever the options.
            true => Plan::empty(),
            false => Plan::new(parts(&columns), options, &index_path, ("column", "columns"))?,
        };
        let mut metadata = serde_json::Map::new();
        if !columns.is_empty() {
            let encodings: serde_json::Map<_, _> = (columns.iter())
                .map(|c| (c.name.clone(), c.encoding_name.clone().into()))
                .collect();
            metadata.insert(
                METADATA_KEY.into(),
                serde_json::json!({ "columns": encodings }),
            );
            metadata.insert("value".into(), plan.value_metadata());
        }
        let openers = pending
            .into_iter()
            .map(|p| Box::new(move || open(p)) as Opener);
        Ok(SampleSource::new(
            plan,
            Box::new(MdsLayout(columns)),
            openers.collect(),
            metadata,
        ))
    }
}

/// Opens a shard, checking its sample count against its entry's.
fn open(next: Pending) -> Result<Box<dyn Shard>, SourceError> {
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
    Ok(Box::new(reader))
}
