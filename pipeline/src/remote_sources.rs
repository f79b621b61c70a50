//! The inputs of sources in object storage, for the formats' remote openers:
//! objects streamed one after another ([`streamed_inputs`], with brace ranges:
//! tar / WebDataset shards, TFRecord and JSON Lines files), and Parquet files,
//! prefixes and patterns read by ranges ([`parquet_inputs`]: footer, then the
//! column chunks). Objects are listed up front (one listing per prefix), so a
//! missing one fails before anything is read.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use bcd_converters::random_access::{ParquetInput, RandomAccess};
use bcd_converters::{LazyInput, SourceError};
use bcd_remote::{split_object, Location, Remote, RemoteObject, RemoteUri};

/// Listings of the prefixes seen so far, and a client per prefix.
#[derive(Default)]
struct Listings {
    prefixes: HashMap<RemoteUri, (Arc<Remote>, BTreeMap<String, RemoteObject>)>,
}

impl Listings {
    fn get(
        &mut self,
        prefix: &RemoteUri,
    ) -> Result<&(Arc<Remote>, BTreeMap<String, RemoteObject>), SourceError> {
        if !self.prefixes.contains_key(prefix) {
            let remote = Arc::new(Remote::new(prefix.clone()).map_err(remote_error)?);
            let objects = remote.list_blocking().map_err(remote_error)?;
            self.prefixes.insert(prefix.clone(), (remote, objects));
        }
        Ok(&self.prefixes[prefix])
    }

    /// The object at `uri`, which must exist.
    fn object(&mut self, uri: &RemoteUri) -> Result<(Arc<Remote>, RemoteObject), SourceError> {
        let (parent, name) = split_object(uri).map_err(remote_error)?;
        let (remote, objects) = self.get(&parent)?;
        match objects.get(&name) {
            Some(object) => Ok((remote.clone(), object.clone())),
            None => Err(SourceError::Io {
                path: PathBuf::from(uri.to_string()),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such object"),
            }),
        }
    }
}

/// A store error as a source error naming the URI (its message does).
fn remote_error(error: bcd_remote::RemoteError) -> SourceError {
    match error {
        bcd_remote::RemoteError::UnsupportedScheme { .. }
        | bcd_remote::RemoteError::InvalidUri { .. } => SourceError::Usage(error.to_string()),
        error => SourceError::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(error),
        },
    }
}

/// The remote URI of a name that parsed as one.
fn parse(text: &str) -> Result<RemoteUri, SourceError> {
    match Location::parse(text.as_ref()).map_err(remote_error)? {
        Location::Remote(uri) => Ok(uri),
        Location::Local(_) => Err(SourceError::Usage(format!(
            "{text}: sources of one ingest are all local or all in object storage"
        ))),
    }
}

/// Brace-expanded object URIs of the names.
fn expand(names: &[String]) -> Result<Vec<RemoteUri>, SourceError> {
    let mut uris = Vec::new();
    for name in names {
        for expanded in bcd_converters::brace::expand(name).map_err(SourceError::Usage)? {
            uris.push(parse(&expanded)?);
        }
    }
    Ok(uris)
}

/// The objects the names mean (brace patterns expanded), each to be streamed
/// when the source reaches it; every one must exist.
pub(crate) fn streamed_inputs(names: &[String]) -> Result<Vec<LazyInput>, SourceError> {
    let mut listings = Listings::default();
    expand(names)?
        .iter()
        .map(|uri| {
            let (remote, object) = listings.object(uri)?;
            let name = object.name.clone();
            Ok(LazyInput {
                name: uri.to_string(),
                len: Some(object.size),
                open: Arc::new(move || {
                    remote
                        .reader(&name)
                        .map(|reader| Box::new(reader) as Box<dyn std::io::Read + Send>)
                        .map_err(std::io::Error::other)
                }),
            })
        })
        .collect()
}

/// The Parquet objects the names mean (see [`parquet_objects`]), each read by
/// ranges pinned to the version listed, with its URI.
pub(crate) fn parquet_inputs(
    names: &[String],
) -> Result<Vec<(PathBuf, ParquetInput)>, SourceError> {
    let mut listings = Listings::default();
    let mut inputs = Vec::new();
    for name in names {
        for (remote, object, uri) in parquet_objects(&mut listings, name)? {
            let access = ObjectAccess {
                remote,
                name: object.name.clone(),
                size: object.size,
                e_tag: object.e_tag.clone(),
            };
            inputs.push((PathBuf::from(uri), ParquetInput(Arc::new(access))));
        }
    }
    Ok(inputs)
}

/// The Parquet objects a name means: an object, every `*.parquet` object directly
/// under a prefix (a name ending in `/`, or one that is no object), or the objects
/// whose names match a `*`/`?`/`[...]` pattern in the last part; sorted by name.
fn parquet_objects(
    listings: &mut Listings,
    text: &str,
) -> Result<Vec<(Arc<Remote>, RemoteObject, String)>, SourceError> {
    let (base, pattern) = match text.rsplit_once('/') {
        Some((base, last)) if last.contains(['*', '?', '[']) => (base, Some(last)),
        _ => (text, None),
    };
    let matcher = match pattern {
        Some(pattern) => Some(
            globset::Glob::new(pattern)
                .map_err(|e| SourceError::Usage(format!("bad pattern {pattern:?}: {e}")))?
                .compile_matcher(),
        ),
        None => None,
    };
    let uri = parse(base)?;
    if matcher.is_none() && !text.ends_with('/') {
        // An object, if there is one by that name.
        if let Ok((parent, name)) = split_object(&uri) {
            let (remote, objects) = listings.get(&parent)?;
            if let Some(object) = objects.get(&name) {
                return Ok(vec![(remote.clone(), object.clone(), uri.to_string())]);
            }
        }
    }
    let (remote, objects) = listings.get(&uri)?;
    let found: Vec<_> = objects
        .values()
        .filter(|o| match &matcher {
            Some(glob) => glob.is_match(&o.name),
            None => o.name.ends_with(".parquet"),
        })
        .map(|o| (remote.clone(), o.clone(), uri.object(&o.name)))
        .collect();
    if found.is_empty() {
        return Err(SourceError::Usage(format!(
            "{text}: no Parquet objects found"
        )));
    }
    Ok(found)
}

/// An object read by ranges, pinned to the ETag it was listed with.
struct ObjectAccess {
    remote: Arc<Remote>,
    name: String,
    size: u64,
    e_tag: Option<String>,
}

impl RandomAccess for ObjectAccess {
    fn len(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<bytes::Bytes> {
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= self.size)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "bytes {offset}..{} are past the end of the {}-byte object",
                        offset.saturating_add(len as u64),
                        self.size
                    ),
                )
            })?;
        if len == 0 {
            return Ok(bytes::Bytes::new());
        }
        self.remote
            .read_at(&self.name, self.e_tag.as_deref(), offset..end)
            .map_err(std::io::Error::other)
    }
}
