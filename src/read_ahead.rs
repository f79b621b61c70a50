//! Reading ahead of the reads: a batch's values into the page cache
//! ([`Dataset::prefetch`]), and an epoch's shards from where their data files
//! come from ([`Dataset::shard_order`], [`Dataset::prefetch_shards`]: a cache of
//! a dataset in object storage fetches them in the background).

use crate::dataset::Dataset;
use crate::error::{Error, Result};

impl Dataset {
    /// Starts reading the stored values at `indices` from disk in the background,
    /// all at once, and returns without waiting; out-of-range indexes are ignored.
    ///
    /// For a batch of reads whose values may not be in the page cache (a sampler's
    /// next indices): the device gets every request at once instead of one page
    /// fault at a time, which is what a cold read waits on. Values already cached
    /// cost one system call each.
    pub fn prefetch(&self, indices: impl IntoIterator<Item = usize>) {
        for index in indices {
            if index < self.len() {
                if let Ok(location) = self.index.locate(index) {
                    location
                        .data
                        .will_need(location.value_offset as usize, location.stored.len());
                }
            }
        }
    }

    /// The shards holding the records at `indices`, each once, in the order the
    /// indices first reach them: the order in which a reader going through
    /// `indices` (an epoch) needs the shards' data files. Loads no shard. An
    /// index out of range is an [`Error::IndexOutOfRange`]; once every shard is
    /// reached, the rest of `indices` is only checked.
    pub fn shard_order(&self, indices: impl IntoIterator<Item = usize>) -> Result<Vec<u64>> {
        let shards = self.index.shards();
        let mut reached = vec![false; shards.len()];
        let mut order = Vec::new();
        let mut indices = indices.into_iter();
        for index in indices.by_ref() {
            self.check_index(index)?;
            // The last shard starting at or before `index`: empty shards start
            // where the next one does, so the one holding the record wins.
            let shard = shards
                .partition_point(|s| s.first <= index as u64)
                .saturating_sub(1);
            if !reached[shard] {
                reached[shard] = true;
                order.push(shard as u64);
                if order.len() == shards.len() {
                    break;
                }
            }
        }
        for index in indices {
            self.check_index(index)?;
        }
        Ok(order)
    }

    /// Tells where this dataset's data files come from that shards `shards`
    /// will be read next, in this order (see [`Dataset::shard_order`]): a cache of
    /// a dataset in object storage ([`crate::DataFiles::prefetch`]) fetches them
    /// ahead, in the background, a bounded number at once. With `wait`, returns
    /// once they are all fetched. Returns how many were not at hand yet: always 0
    /// for a dataset whose files are all in its directory, which has nothing to
    /// fetch.
    pub fn prefetch_shards(&self, shards: &[u64], wait: bool) -> Result<usize> {
        let Some(files) = &self.data_files else {
            return Ok(0);
        };
        if let Some(&shard) = shards.iter().find(|&&s| s >= self.shards()) {
            return Err(Error::InvalidOption(format!(
                "shard {shard} out of range for a dataset of {} shards",
                self.shards()
            )));
        }
        files
            .prefetch(shards, wait)
            .map_err(|e| Error::io("prefetch shards of", &self.dir, e))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::{Compression, CreateOptions, DataFiles};

    use super::*;

    /// A keyless dataset of one-byte records, one per shard (the size limit
    /// closes each), appended in commits of `counts[i]` records.
    fn dataset(dir: &std::path::Path, counts: &[usize]) -> Dataset {
        let options = CreateOptions {
            keyed: false,
            compression: Compression::None,
            max_shard_size: 1,
        };
        let mut dataset = Dataset::create(dir, options).unwrap();
        for &count in counts {
            let values = vec![[7u8]; count];
            dataset
                .extend_values(values.iter().map(|v| &v[..]))
                .unwrap();
        }
        dataset
    }

    #[test]
    fn shard_order_lists_each_shard_once_in_the_order_first_reached() {
        let dir = tempfile::tempdir().unwrap();
        // Max shard size 1: each one-byte record is a shard of its own.
        let dataset = dataset(dir.path(), &[4]);
        assert_eq!(dataset.shards(), 4);
        assert_eq!(dataset.shard_order([2, 2, 0, 3]).unwrap(), vec![2, 0, 3]);
        assert_eq!(dataset.shard_order([]).unwrap(), Vec::<u64>::new());
        // Every shard reached: the rest is still checked.
        let error = dataset.shard_order([3, 2, 1, 0, 1, 9]).unwrap_err();
        assert!(
            matches!(error, Error::IndexOutOfRange { index: 9, len: 4 }),
            "{error}"
        );
    }

    /// What a source of data files was asked to prefetch.
    #[derive(Debug, Default)]
    struct Recording(Mutex<Vec<(Vec<u64>, bool)>>);

    impl DataFiles for Recording {
        fn stat(&self, _id: u64) -> std::io::Result<(u64, u64)> {
            unreachable!("not opened")
        }
        fn open(&self, _id: u64) -> std::io::Result<std::fs::File> {
            unreachable!("not read")
        }
        fn prefetch(&self, shards: &[u64], wait: bool) -> std::io::Result<usize> {
            self.0.lock().unwrap().push((shards.to_vec(), wait));
            Ok(shards.len())
        }
    }

    #[test]
    fn prefetch_shards_reaches_the_source_of_the_data_files_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let local = dataset(dir.path(), &[3]);
        assert_eq!(local.prefetch_shards(&[2, 0], true).unwrap(), 0);

        // The same dataset with its data files from elsewhere (a cache).
        let source = Arc::new(Recording::default());
        let mut dataset = Dataset::open(dir.path()).unwrap();
        dataset.data_files = Some(source.clone());
        assert_eq!(dataset.prefetch_shards(&[2, 0], false).unwrap(), 2);
        assert_eq!(*source.0.lock().unwrap(), vec![(vec![2, 0], false)]);
        let error = dataset.prefetch_shards(&[1, 3], true).unwrap_err();
        assert!(
            error.to_string().contains("shard 3 out of range"),
            "{error}"
        );
        assert_eq!(source.0.lock().unwrap().len(), 1, "nothing asked");
    }
}
