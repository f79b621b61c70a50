//! Reading what this project keeps beside the shards: per-shard sidecars and
//! per-commit files (FORMAT.md, "Fields"). Their content is opaque here; the
//! fingerprints that tie a sidecar to its shard are computed here.

use std::io::Read;

use crate::error::{Error, Result};
use crate::fingerprint::ShardFingerprint;
use crate::format::{commit_file_path, parse_commit_file_name, sidecar_path};
use crate::mapping::{open_regular, Mapping};
use crate::{Dataset, ShardData};

impl Dataset {
    /// Records in shard `shard` (0 past the last shard).
    pub fn shard_records(&self, shard: u64) -> u64 {
        let shards = self.index.shards();
        let Some(at) = usize::try_from(shard).ok().filter(|&s| s < shards.len()) else {
            return 0;
        };
        let end = shards
            .get(at + 1)
            .map_or(self.len() as u64, |next| next.first);
        end - shards[at].first
    }

    /// Dataset index of shard `shard`'s first record (the record count past the
    /// last shard).
    pub fn shard_first_record(&self, shard: u64) -> u64 {
        usize::try_from(shard)
            .ok()
            .and_then(|s| self.index.shards().get(s))
            .map_or(self.len() as u64, |s| s.first)
    }

    /// The fingerprint of committed shard `shard`, from its files (its `.idx` is
    /// read whole and its data file's edges; both are loaded as reads load them,
    /// except that the edges of a data file not loaded yet are read alone when
    /// its [`crate::DataFiles`] source reads ranges).
    pub fn shard_fingerprint(&self, shard: u64) -> Result<ShardFingerprint> {
        let found = usize::try_from(shard)
            .ok()
            .and_then(|s| self.index.shards().get(s))
            .ok_or_else(|| {
                Error::InvalidOption(format!(
                    "shard {shard} out of range for a dataset of {} shards",
                    self.shards()
                ))
            })?;
        let sizes = found.sizes()?;
        let records = self.shard_records(shard);
        let ranges = crate::fingerprint::edge_ranges(found.data_len());
        if let Some(edges) = found.data_ranges(&ranges)? {
            let edges: Vec<&[u8]> = edges.iter().map(Vec::as_slice).collect();
            return Ok(ShardFingerprint::of_edges(
                records,
                found.data_len(),
                &edges,
                sizes,
            ));
        }
        let data = found.data()?;
        Ok(ShardFingerprint::of(records, data, sizes))
    }

    /// Path of shard `shard`'s sidecar with `suffix` (`{shard:06}.{suffix}`).
    pub fn sidecar_path(&self, shard: u64, suffix: &str) -> std::path::PathBuf {
        sidecar_path(&self.dir, shard, suffix)
    }

    /// Shard `shard`'s sidecar with `suffix`, mapped (or read when small), or
    /// `None` if there is none. Anything but a regular file is an error naming it.
    pub fn map_sidecar(&self, shard: u64, suffix: &str) -> Result<Option<ShardData>> {
        let path = self.sidecar_path(shard, suffix);
        let (file, metadata) = match open_regular(&path) {
            Ok(opened) => opened,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let mapping =
            Mapping::load(file, metadata.len()).map_err(|e| Error::io("read", &path, e))?;
        Ok(Some(ShardData(std::sync::Arc::new(mapping))))
    }

    /// The shard counts of the commit files present for this state or earlier
    /// ones (`commit.M.json` with `M <= shards()`), newest first.
    pub fn commit_files(&self) -> Result<Vec<u64>> {
        let shards = self.shards();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| Error::io("list", &self.dir, e))?;
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list", &self.dir, e))?;
            if let Some(n) = entry.file_name().to_str().and_then(parse_commit_file_name) {
                if n <= shards {
                    found.push(n);
                }
            }
        }
        found.sort_unstable_by(|a, b| b.cmp(a));
        Ok(found)
    }

    /// The bytes of the commit file of the state with `shards` shards, or `None`
    /// if there is none. A file larger than `limit` bytes is an error naming it,
    /// before anything is read.
    pub fn read_commit_file(&self, shards: u64, limit: u64) -> Result<Option<Vec<u8>>> {
        let path = commit_file_path(&self.dir, shards);
        let (file, metadata) = match open_regular(&path) {
            Ok(opened) => opened,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        if metadata.len() > limit {
            return Err(Error::TooLarge {
                what: "commit file",
                size: metadata.len(),
                limit,
            });
        }
        let mut bytes = Vec::with_capacity(metadata.len() as usize);
        file.take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", &path, e))?;
        if bytes.len() as u64 > limit {
            return Err(Error::TooLarge {
                what: "commit file",
                size: bytes.len() as u64,
                limit,
            });
        }
        Ok(Some(bytes))
    }
}
