//! Content hashes for a dataset's committed shards that have none (`bcd
//! dedup-index`): one pass over their values, each shard's file written under
//! a temporary name, fsynced and read back, then renamed into place, under the
//! writer lock. A kill leaves every shard with complete hashes or none (and a
//! temporary that the next writer or `gc` removes); a re-run does the rest.

use super::{content_hash, ContentHash};
use crate::commit::WriterLock;
use crate::error::{Error, Result};
use crate::format::{CONTENT_HASH_SIZE, CONTENT_HASH_SUFFIX, CONTENT_HASH_TMP_PREFIX};
use crate::manifest::Manifest;
use crate::Dataset;

/// What [`Dataset::build_content_hashes`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContentIndexSummary {
    /// Shards given content hashes.
    pub shards_built: u64,
    /// Shards that had them already (their length checked).
    pub shards_present: u64,
    /// Records hashed.
    pub records: u64,
    /// Bytes of values hashed (uncompressed).
    pub bytes: u64,
}

impl Dataset {
    /// Gives every committed shard without content hashes its file
    /// (`NNNNNN.xxh128`, FORMAT.md section 7), reading its values once on all
    /// cores ([`Dataset::set_threads`]), so that extends and merges with
    /// [`Dedup::Content`](crate::Dedup::Content) check against every record and
    /// `verify --content` covers it; from then on every extend keeps them. Takes
    /// the writer lock. A shard's existing file is kept (its length checked).
    pub fn build_content_hashes(&mut self) -> Result<ContentIndexSummary> {
        if self.data_files.is_some() {
            return Err(Error::InvalidOption(format!(
                "{} is a read-only mirror of a dataset elsewhere (object storage): build the content hashes of the dataset itself",
                self.dir.display()
            )));
        }
        let _lock = WriterLock::acquire(&self.dir)?;
        let manifest = Manifest::read(&self.dir)?;
        self.apply_manifest(manifest)?;
        self.remove_stale_files()?;
        let mut summary = ContentIndexSummary::default();
        let storage = self.storage.clone();
        for shard in 0..self.shards() {
            if self.map_sidecar(shard, CONTENT_HASH_SUFFIX)?.is_some() {
                self.content_hashes_of(shard)?;
                summary.shards_present += 1;
                continue;
            }
            let (hashes, bytes) = self.hash_shard(shard)?;
            let path = self.sidecar_path(shard, CONTENT_HASH_SUFFIX);
            let temporary = self
                .dir
                .join(format!("{CONTENT_HASH_TMP_PREFIX}{shard:06}"));
            let written = crate::extend::write_read_back(storage.as_ref(), &temporary, &hashes)
                .and_then(|()| {
                    storage
                        .rename(&temporary, &path)
                        .map_err(|e| Error::io("rename", &temporary, e))
                });
            if let Err(e) = written {
                let _ = storage.remove(&temporary);
                return Err(e);
            }
            summary.shards_built += 1;
            summary.records += self.shard_records(shard);
            summary.bytes += bytes;
        }
        if summary.shards_built > 0 {
            storage
                .sync_dir(&self.dir)
                .map_err(|e| Error::io("fsync directory", &self.dir, e))?;
        }
        Ok(summary)
    }

    /// The content hashes of shard `shard`'s values, computed on all cores, and
    /// the bytes hashed.
    fn hash_shard(&self, shard: u64) -> Result<(Vec<u8>, u64)> {
        let first = self.shard_first_record(shard) as usize;
        let records = self.shard_records(shard) as usize;
        let hashed: Vec<Result<(ContentHash, u64)>> =
            self.map_values(first, records, |_, value| {
                value.map(|v| (content_hash(v), v.len() as u64))
            });
        let mut hashes = Vec::with_capacity(records * CONTENT_HASH_SIZE);
        let mut bytes = 0;
        for result in hashed {
            let (hash, len) = result?;
            hashes.extend_from_slice(&hash);
            bytes += len;
        }
        Ok((hashes, bytes))
    }

    /// `f(index, value)` for the records `first..first + count` (a value that
    /// cannot be read is given as its error), on up to [`Dataset::set_threads`]
    /// threads, in record order. Values are read without the check of
    /// [`Dataset::set_verify_content`].
    pub(crate) fn map_values<T: Send>(
        &self,
        first: usize,
        count: usize,
        f: impl Fn(usize, Result<&[u8]>) -> T + Sync,
    ) -> Vec<T> {
        let threads = self.threads.clamp(1, count.max(1));
        let chunk = count.div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..count)
                .step_by(chunk)
                .map(|start| {
                    let f = &f;
                    scope.spawn(move || {
                        let mut buffer = Vec::new();
                        (first + start..first + (start + chunk).min(count))
                            .map(|index| f(index, self.read_value(index, &mut buffer)))
                            .collect::<Vec<T>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }
}
