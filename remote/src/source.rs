//! Objects as inputs of an ingest: streamed from start to end (tar, TFRecord), or
//! read by ranges (Parquet's footer, then the column chunks it reads), through the
//! blocking API the sources use.
//!
//! A stream that breaks mid-way is resumed by `object_store` with a ranged
//! request pinned to the object's ETag (retries with backoff); a ranged read is
//! pinned to the ETag seen when the input was listed, so an object replaced during
//! the ingest fails it instead of mixing two versions.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::ops::Range;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectStore};

use crate::error::{RemoteError, Result};
use crate::objects::RemoteObject;
use crate::store::{block_on, Remote};
use crate::uri::RemoteUri;

/// Splits the URI of an object into the remote of its parent prefix and its name.
pub fn split_object(uri: &RemoteUri) -> Result<(RemoteUri, String)> {
    let (parent, name) = match uri.prefix.rsplit_once('/') {
        Some((parent, name)) => (parent.to_owned(), name.to_owned()),
        None => (String::new(), uri.prefix.clone()),
    };
    if name.is_empty() {
        return Err(RemoteError::InvalidUri {
            uri: uri.to_string(),
            reason: "names a bucket, not an object".into(),
        });
    }
    Ok((
        RemoteUri {
            scheme: uri.scheme,
            bucket: uri.bucket.clone(),
            prefix: parent,
        },
        name,
    ))
}

impl Remote {
    /// [`Remote::list`], blocking.
    pub fn list_blocking(&self) -> Result<BTreeMap<String, RemoteObject>> {
        block_on(self.list())
    }

    /// Opens object `name` for reading from start to end.
    pub fn reader(&self, name: &str) -> Result<ObjectReader> {
        let uri = self.object_uri(name);
        let store = self.store()?;
        let result = block_on(store.get_opts(&self.path(name), GetOptions::default()))
            .map_err(|e| RemoteError::store(&uri, "read", e))?;
        Ok(ObjectReader {
            uri,
            stream: result.into_stream(),
            chunk: Bytes::new(),
        })
    }

    /// Bytes `range` of object `name`, which must still have ETag `e_tag` (when
    /// given): exactly those bytes, or an error.
    pub fn read_at(&self, name: &str, e_tag: Option<&str>, range: Range<u64>) -> Result<Bytes> {
        let uri = self.object_uri(name);
        let store = self.store()?;
        let options = GetOptions {
            if_match: e_tag.map(str::to_owned),
            range: Some(GetRange::Bounded(range.clone())),
            ..GetOptions::default()
        };
        let bytes = block_on(async {
            store
                .get_opts(&self.path(name), options)
                .await?
                .bytes()
                .await
        })
        .map_err(|e| match e {
            object_store::Error::Precondition { .. } => RemoteError::Corrupt {
                uri: uri.clone(),
                reason: "the object was replaced while being read".into(),
            },
            e => RemoteError::store(&uri, "read", e),
        })?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(RemoteError::Corrupt {
                uri,
                reason: format!("bytes {range:?} read as {} bytes", bytes.len()),
            });
        }
        Ok(bytes)
    }
}

/// An object read from start to end (see [`Remote::reader`]).
pub struct ObjectReader {
    uri: String,
    stream: BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match block_on(self.stream.next()) {
                None => return Ok(0),
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(e)) => {
                    return Err(io::Error::other(RemoteError::store(&self.uri, "read", e)))
                }
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        self.chunk = self.chunk.slice(n..);
        Ok(n)
    }
}
