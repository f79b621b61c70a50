//! Checking values against their content hashes: every value of a dataset
//! (`bcd verify --content`), or each value a reader returns
//! ([`Dataset::set_verify_content`]).

use super::{content_hash, hash_at};
use crate::error::{Error, Result};
use crate::format::CONTENT_HASH_SUFFIX;
use crate::Dataset;

impl Dataset {
    /// Checks what [`Dataset::verify`] checks, and every value against the
    /// content hash written with it (decoding each, on all cores:
    /// [`Dataset::set_threads`]), and returns what is wrong, in record order: a
    /// value whose bytes differ from what was written
    /// ([`Error::ContentMismatch`], naming the shard file and the record), one
    /// that does not decode, a shard without content hashes
    /// ([`Error::NoContentHashes`]) or with a damaged file. Empty when every
    /// value is as written.
    pub fn verify_content(&self) -> Vec<Error> {
        let mut problems = self.verify_structure();
        if !problems.is_empty() {
            return problems;
        }
        for shard in 0..self.shards() {
            let hashes = match self.content_hashes_of(shard) {
                Ok(hashes) => hashes,
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            };
            let first = self.shard_first_record(shard) as usize;
            let records = self.shard_records(shard) as usize;
            let found = self.map_values(first, records, |index, value| match value {
                Ok(value) => {
                    let expected = hash_at(&hashes, (index - first) as u64);
                    (content_hash(value) != expected).then(|| self.mismatch(shard, index))
                }
                Err(e) => Some(e),
            });
            problems.extend(found.into_iter().flatten());
        }
        problems
    }

    /// Checks each value read from now on against the content hash written
    /// with it, failing the read with [`Error::ContentMismatch`] when they
    /// differ: a flipped bit on disk is an error, not data. Every committed
    /// shard must have content hashes (else [`Error::NoContentHashes`], and
    /// nothing changes); shards committed later without them fail their reads.
    /// The cost is one XXH3-128 of each value returned (several GB/s per core)
    /// and 16 bytes of page cache per record the first time its shard is read.
    pub fn set_verify_content(&mut self, on: bool) -> Result<()> {
        if on {
            for shard in 0..self.shards() {
                self.content_hashes_of(shard)?;
            }
        }
        self.verify_content_on_read = on;
        Ok(())
    }

    /// Whether reads check values against their content hashes.
    pub fn verifies_content(&self) -> bool {
        self.verify_content_on_read
    }

    /// With [`Dataset::set_verify_content`] on, checks `value`, read at
    /// `index`, against its content hash.
    pub fn check_content(&self, index: usize, value: &[u8]) -> Result<()> {
        if !self.verify_content_on_read {
            return Ok(());
        }
        let shard = self.shard_of_record(index as u64);
        let found = &self.index.shards()[shard as usize];
        let hashes = match found.content_hashes.get() {
            Some(hashes) => hashes,
            None => {
                let loaded = self.content_hashes_of(shard)?;
                found.content_hashes.get_or_init(|| loaded)
            }
        };
        let local = index as u64 - found.first;
        if content_hash(value) != hash_at(hashes, local) {
            return Err(self.mismatch(shard, index));
        }
        Ok(())
    }

    fn mismatch(&self, shard: u64, index: usize) -> Error {
        Error::ContentMismatch {
            path: self.shard_data_path(shard),
            record: index as u64 - self.shard_first_record(shard),
            index: index as u64,
            hashes: self.sidecar_path(shard, CONTENT_HASH_SUFFIX),
        }
    }
}
