//! An extend's duplicate checks. A new key is looked up among the committed keys
//! (the dataset's index), the keys pushed earlier (the extend's key set) and the
//! batch; with [`Dedup::Content`](crate::Dedup::Content) a new value among every
//! earlier record's values (the content key set, committed and pushed, and the
//! batch). The sets hold fingerprints only: a hash that matches is confirmed
//! against the bytes on disk (for a value, its full 128-bit content hash first,
//! then its bytes), so no hash collision ever drops a record.

use hashbrown::HashTable;

use super::Extend;
use crate::content::{content_hashes, fingerprint, ContentHash};
use crate::error::Result;
use crate::lz4_block;
use crate::manifest::Compression;

/// The hashes of one new record, computed once for the checks, the write and the
/// commit's index: its key's index hash (0 when keyless) and, when the extend
/// keeps content hashes, its value's.
pub(super) struct Hashes {
    pub(super) key: u64,
    pub(super) content: Option<ContentHash>,
}

/// What a new record is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    New,
    /// Its key was seen before.
    DuplicateKey,
    /// Its value equals that of record `of` (a dataset index), whose key is `of_key`.
    DuplicateValue {
        of: u64,
        of_key: Vec<u8>,
    },
}

impl Extend<'_> {
    /// Each record's hashes, and what it is: new, or a duplicate of a committed
    /// record, one pushed earlier in this extend, or one earlier in `records`
    /// (the first occurrence is new).
    pub(super) fn classify<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        records: &[(K, V)],
    ) -> Result<(Vec<Hashes>, Vec<Verdict>)> {
        let keyed = self.dataset.keyed();
        let contents: Option<Vec<ContentHash>> = self.writer.keeps_content_hashes().then(|| {
            let values: Vec<&[u8]> = records.iter().map(|(_, v)| v.as_ref()).collect();
            content_hashes(&values, self.dataset.threads)
        });
        let dedup_values = self.values.is_some();
        let mut batch_keys: HashTable<(u64, usize)> =
            HashTable::with_capacity(if keyed { records.len() } else { 0 });
        let mut batch_values: HashTable<(u64, usize)> = HashTable::new();
        // The dataset index each kept record of the batch will have.
        let mut numbers = vec![0u64; if dedup_values { records.len() } else { 0 }];
        let mut next = self.dataset.len() as u64 + self.writer.records();
        let mut hashes = Vec::with_capacity(records.len());
        let mut verdicts = Vec::with_capacity(records.len());
        for (at, (key, value)) in records.iter().enumerate() {
            let (key, value) = (key.as_ref(), value.as_ref());
            let key_hash = match keyed {
                true => self.dataset.index.hash_key(key),
                false => 0,
            };
            let content = contents.as_ref().map(|c| c[at]);
            let key_seen = keyed
                && (batch_keys
                    .find(key_hash, |&(h, j)| {
                        h == key_hash && records[j].0.as_ref() == key
                    })
                    .is_some()
                    || self.key_seen(key_hash, key)?);
            let verdict = match (&content, key_seen) {
                (_, true) => Verdict::DuplicateKey,
                (Some(content), false) if dedup_values => {
                    let fp = fingerprint(content);
                    let contents = contents.as_deref().unwrap_or_default();
                    let earlier = batch_values.find(fp, |&(h, j)| {
                        h == fp && contents[j] == *content && records[j].1.as_ref() == value
                    });
                    match earlier {
                        Some(&(_, j)) => Verdict::DuplicateValue {
                            of: numbers[j],
                            of_key: records[j].0.as_ref().to_vec(),
                        },
                        None => match self.value_seen(fp, content, value)? {
                            Some((of, of_key)) => Verdict::DuplicateValue { of, of_key },
                            None => Verdict::New,
                        },
                    }
                }
                _ => Verdict::New,
            };
            if verdict == Verdict::New {
                if keyed {
                    batch_keys.insert_unique(key_hash, (key_hash, at), |&(h, _)| h);
                }
                if let (true, Some(content)) = (dedup_values, &content) {
                    let fp = fingerprint(content);
                    batch_values.insert_unique(fp, (fp, at), |&(h, _)| h);
                    numbers[at] = next;
                }
                next += 1;
            }
            hashes.push(Hashes {
                key: key_hash,
                content,
            });
            verdicts.push(verdict);
        }
        Ok((hashes, verdicts))
    }

    /// Whether `key` (whose index hash is `hash`) is committed or was pushed
    /// earlier in this extend (before the current batch).
    pub(super) fn key_seen(&mut self, hash: u64, key: &[u8]) -> Result<bool> {
        if self.dataset.index.position_hashed(hash, key).is_some() {
            return Ok(true);
        }
        let Some(keys) = &self.keys else {
            return Ok(false);
        };
        let mut found = Vec::new();
        keys.candidates(hash, &mut found)?;
        let base = self.dataset.len() as u64;
        for record in found {
            if self.writer.read_back(record - base)?.key == key {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The first earlier record (committed, or pushed before the current batch)
    /// whose value is `value`, whose content hash is `content` and its
    /// fingerprint `fp`: its dataset index and key.
    fn value_seen(
        &mut self,
        fp: u64,
        content: &ContentHash,
        value: &[u8],
    ) -> Result<Option<(u64, Vec<u8>)>> {
        let Some(values) = &self.values else {
            return Ok(None);
        };
        let mut found = Vec::new();
        values.candidates(fp, &mut found)?;
        found.sort_unstable();
        let base = self.dataset.len() as u64;
        for record in found {
            if record < base {
                if self.committed_content_hash(record)? != *content {
                    continue;
                }
                let index = record as usize;
                if *self.dataset.at(index)? == *value {
                    let key = match self.dataset.keyed() {
                        true => self.dataset.key_at(index)?.to_vec(),
                        false => Vec::new(),
                    };
                    return Ok(Some((record, key)));
                }
            } else {
                let local = record - base;
                if self.writer.read_back_content_hash(local)? != *content {
                    continue;
                }
                let back = self.writer.read_back(local)?;
                let same = match self.dataset.compression() {
                    Compression::None => back.stored == value,
                    Compression::Lz4 => {
                        lz4_block::decompress(&back.stored).map_err(|e| {
                            crate::Error::InvalidOption(format!(
                                "record {record} written by this extend does not decode: {}",
                                e.0
                            ))
                        })? == value
                    }
                };
                if same {
                    return Ok(Some((record, back.key)));
                }
            }
        }
        Ok(None)
    }

    /// The content hash of committed record `record`, from its shard's sidecar.
    fn committed_content_hash(&mut self, record: u64) -> Result<ContentHash> {
        let shard = self.dataset.shard_of_record(record);
        if !self.committed_hashes.contains_key(&shard) {
            let hashes = self.dataset.content_hashes_of(shard)?;
            self.committed_hashes.insert(shard, hashes);
        }
        let local = record - self.dataset.shard_first_record(shard);
        Ok(crate::content::hash_at(
            &self.committed_hashes[&shard],
            local,
        ))
    }
}
