//! LitData `optimize` output as records: a directory holding `index.json`
//! (`{"chunks": [...], "config": {...}}`) and its chunks (`chunk-R-N.bin`, or
//! `chunk-R-N.zstd.bin`), items in chunk order as the index lists the chunks
//! ([`crate::litdata_index`] parses the config and the leaves,
//! [`crate::litdata_chunks`] reads a chunk).
//!
//! Each item's leaves are named by flattening the pytree of `data_spec` (dict
//! keys and sequence positions joined by `.`; an item that is one leaf is
//! `item`). One leaf is the value, as its bytes are stored (an image's encoded
//! bytes, a string's UTF-8, an array's elements): by default the only leaf of
//! a binary format (bytes, an image, an array), or, with none, the only text
//! one. `key_column` names a leaf that keys the records (bytes, text or
//! `int`); without it they are keyless. The other leaves are typed fields; a
//! `pickle` leaf is never unpickled: selected as a field or the value, it is
//! refused. Several directories read as one must have the same leaves.
//!
//! Items that are dicts of JSON-like leaves only, LitData keeps as the rows of
//! an Arrow IPC footer ([`crate::litdata_footer`]): there the leaves are the
//! flattened columns (nested dicts' keys joined by `.` as above, a list one
//! leaf, typed as Arrow lists), with the keys only some items have (which
//! `data_spec` lacks and the index's `types` names) after those of
//! `data_spec`; the value is the only bytes leaf, else the only str one.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::litdata_chunks::Chunk;
use crate::litdata_footer::{FooterPlan, JsonKind};
use crate::litdata_index::{parse_config, split_item, Config, LeafFormat, Wrap};
use crate::sample_columns::Cell;
use crate::sample_plan::ColumnOptions;
use crate::sample_plan::{Layout, Part, Plan};
use crate::sample_shards::{file_in, read_index};
use crate::sample_source::{Opener, SampleSource, Shard};
use crate::table_rows::TableOptions;
use crate::{FieldSelection, Fused, SourceError};

/// The index file of a LitData directory.
pub const INDEX_NAME: &str = "index.json";

/// The metadata key under which a LitData source describes its leaves.
pub const METADATA_KEY: &str = "litdata";

/// Whether `dir` holds a LitData `index.json` (`chunks` and `config`).
pub fn is_litdata(dir: &Path) -> bool {
    let index = dir.join(INDEX_NAME);
    index.is_file()
        && read_index(&index).is_ok_and(|v| {
            v.get("chunks").is_some_and(Value::is_array)
                && v.get("config").is_some_and(Value::is_object)
        })
}

/// LitData leaves, splitting and decoding an item.
struct LitdataLayout(Vec<LeafFormat>);

impl Layout for LitdataLayout {
    fn split<'a>(&self, item: &'a [u8]) -> Result<Vec<&'a [u8]>, String> {
        split_item(self.0.len(), item)
    }

    fn decode<'a>(&self, leaf: usize, bytes: &'a [u8]) -> Result<Cell<'a>, String> {
        self.0[leaf].cell(bytes)
    }
}

/// A chunk to read, as its index lists it.
struct Pending {
    path: PathBuf,
    items: u64,
    bytes: u64,
    wrap: Wrap,
    footer: Option<Arc<FooterPlan>>,
}

/// Reads LitData directories: [`LitdataSource::open`] makes the
/// [`SampleSource`] of their items.
pub struct LitdataSource;

/// The plan's view of the leaves.
fn parts(config: &Config) -> Vec<Part> {
    if let Some(leaves) = &config.footer {
        return (leaves.iter())
            .map(|leaf| Part {
                name: leaf.name.clone(),
                described: leaf.described.clone(),
                kind: Some(leaf.kind.kind()),
                binary: leaf.kind == JsonKind::Bytes,
                text: leaf.kind == JsonKind::Str,
            })
            .collect();
    }
    (config.names.iter().zip(&config.formats))
        .map(|(name, (described, format))| Part {
            name: name.clone(),
            described: described.clone(),
            kind: format.kind(),
            binary: format.is_binary(),
            text: *format == LeafFormat::Text,
        })
        .collect()
}

/// Reads and checks one directory's index: its config and chunk list.
fn read_dir(dir: &Path) -> Result<(PathBuf, Config, Vec<Pending>), SourceError> {
    let index_path = dir.join(INDEX_NAME);
    let index = read_index(&index_path)?;
    let invalid = |location: String, reason: String| SourceError::Invalid {
        file: index_path.display().to_string(),
        location,
        reason,
    };
    let config = parse_config(index.get("config").unwrap_or(&Value::Null))
        .map_err(|(location, reason)| invalid(location, reason))?;
    let chunks = (index.get("chunks").and_then(Value::as_array))
        .ok_or_else(|| invalid("\"chunks\"".into(), "missing or not a list".into()))?;
    let mut pending = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let location = format!("chunk {i}");
        let name = (chunk.get("filename").and_then(Value::as_str))
            .ok_or_else(|| invalid(location.clone(), "no \"filename\"".into()))?;
        let path = file_in(dir, name).ok_or_else(|| {
            invalid(
                location.clone(),
                format!("{name:?} is not a relative name inside the directory"),
            )
        })?;
        let count = |key: &str| {
            (chunk.get(key).and_then(Value::as_u64))
                .ok_or_else(|| invalid(location.clone(), format!("no {key:?} count")))
        };
        pending.push(Pending {
            path,
            items: count("chunk_size")?,
            bytes: count("chunk_bytes")?,
            wrap: config.wrap,
            footer: None,
        });
    }
    Ok((index_path, config, pending))
}

impl LitdataSource {
    /// A source over the LitData directories `dirs`, read in order as one
    /// dataset. Every index is read and checked here; the chunks are opened
    /// when reached.
    pub fn open(
        dirs: &[PathBuf],
        options: &ColumnOptions,
    ) -> Result<Fused<SampleSource>, SourceError> {
        let mut pending = Vec::new();
        let mut first: Option<(PathBuf, Config)> = None;
        for dir in dirs {
            let (index_path, config, chunks) = read_dir(dir)?;
            match &first {
                None => first = Some((index_path, config)),
                Some((where_first, earlier)) => {
                    if earlier.names != config.names
                        || earlier.formats != config.formats
                        || earlier.footer != config.footer
                    {
                        return Err(SourceError::Invalid {
                            file: index_path.display().to_string(),
                            location: "\"config\"".into(),
                            reason: format!(
                                "its leaves differ from those of {}; ingest them separately",
                                where_first.display()
                            ),
                        });
                    }
                }
            }
            pending.extend(chunks);
        }
        let Some((index_path, config)) = first else {
            return Err(SourceError::Usage("no LitData directory to read".into()));
        };
        let parts = parts(&config);
        let plan = Plan::new(parts.clone(), options, &index_path, ("leaf", "leaves"))?;
        let leaves: serde_json::Map<_, _> = (parts.iter())
            .map(|part| (part.name.clone(), part.described.clone().into()))
            .collect();
        let footer = match &config.footer {
            Some(footer) => Some(Arc::new(footer_plan(&plan, footer, &index_path)?)),
            None => None,
        };
        for chunk in &mut pending {
            chunk.footer = footer.clone();
        }
        let mut metadata = serde_json::Map::new();
        let mut litdata = serde_json::json!({ "leaves": leaves });
        if footer.is_some() {
            litdata["rows"] = "arrow_footer".into();
        }
        metadata.insert(METADATA_KEY.into(), litdata);
        metadata.insert("value".into(), plan.value_metadata());
        let formats = config.formats.into_iter().map(|(_, f)| f).collect();
        let openers = pending
            .into_iter()
            .map(|p| Box::new(move || open(p)) as Opener);
        Ok(SampleSource::new(
            plan,
            Box::new(LitdataLayout(formats)),
            openers.collect(),
            metadata,
        ))
    }
}

/// What each footer chunk reads: the value must be text or bytes.
fn footer_plan(
    plan: &Plan,
    leaves: &[crate::litdata_footer::FooterLeaf],
    index_path: &Path,
) -> Result<FooterPlan, SourceError> {
    let value = &leaves[plan.value];
    if !matches!(value.kind, JsonKind::Str | JsonKind::Bytes) {
        return Err(SourceError::Usage(format!(
            "{}: leaf {:?} is {}; the value is a str or bytes leaf",
            index_path.display(),
            value.name,
            value.described
        )));
    }
    let fields = (plan.fields.iter())
        .map(|(i, _, _)| leaves[*i].name.clone())
        .collect();
    Ok(FooterPlan {
        leaves: (leaves.iter())
            .map(|leaf| (leaf.name.clone(), leaf.kind.arrow_type()))
            .collect(),
        options: TableOptions {
            value_column: value.name.clone(),
            key_column: plan.key.map(|k| leaves[k].name.clone()),
            skip_nulls: false,
            fields: FieldSelection::Only(fields),
        },
    })
}

/// Opens a chunk, checking its item count against its entry's.
fn open(next: Pending) -> Result<Box<dyn Shard>, SourceError> {
    let chunk = Chunk::open(next.path, next.bytes, next.wrap, next.footer)?;
    if chunk.items() != next.items {
        return Err(SourceError::Corrupt {
            file: chunk.path().display().to_string(),
            location: "the item count".into(),
            reason: format!(
                "the chunk holds {} items, its index entry says {}",
                chunk.items(),
                next.items
            ),
        });
    }
    Ok(Box::new(chunk))
}
