//! Reading ahead of the reads: a batch's values into the page cache
//! ([`Dataset::prefetch`]), and an epoch's shards from where their data files
//! come from ([`Dataset::shard_order`], [`Dataset::prefetch_shards`]: a cache of
//! a dataset in object storage fetches them in the background).

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::mapping::Mapping;
use crate::reader::Location;

/// The granularity values are merged into runs at: the smallest page size
/// (memmap2 aligns each call to the system's own).
const PAGE: usize = 4096;

/// Values of a batch whose pages are looked up before asking for the batch.
const PROBES: usize = 8;

impl Dataset {
    /// Whether a batch of values at `locations` is taken to be in the page
    /// cache: the first page of each of up to [`PROBES`] values spread over it
    /// is (a batch of a partly cached dataset is then read as it would be
    /// without the read-ahead). A probe costs about half a request.
    pub(crate) fn all_cached(&self, locations: &[Location<'_>]) -> bool {
        let step = locations.len().div_ceil(PROBES).max(1);
        (locations.iter().step_by(step))
            .filter(|location| !location.stored.is_empty())
            .all(|location| self.cached(location))
    }

    /// Whether the first page of the value at `location` is in the page
    /// cache: `mincore` where it tells this process the truth
    /// ([`crate::shard::Shard::page_cache_visible`]); elsewhere (a dataset the
    /// process neither owns nor may write, where `mincore` says every page is
    /// cached) a one-byte read that must not wait for the disk
    /// (`RWF_NOWAIT`), which finds the page missing or reads it (`RWF_NOWAIT`
    /// does not forbid I/O: a probe of a missing page starts reading it, and
    /// on a fast device may find it read, so cached). Where neither
    /// can tell, the page is taken to be missing: reading ahead a cached batch
    /// costs requests, not reading ahead a cold one costs a disk wait a value.
    fn cached(&self, location: &Location<'_>) -> bool {
        let offset = location.value_offset as usize;
        if location.shard.page_cache_visible() {
            return location.data.cached(offset);
        }
        match self.unmapped_file(location) {
            Some(file) => {
                let mut byte = [0u8; 1];
                let tried = crate::unmapped::read_at_nowait(&file, &mut byte, offset as u64);
                tried == crate::unmapped::NoWait::Read
            }
            // Not read positionally (a file read into memory says so itself).
            None => location.data.cached(offset),
        }
    }

    /// Starts reading the stored values at `indices` from disk in the background,
    /// all at once, and returns without waiting; out-of-range indexes are ignored.
    ///
    /// For a batch of reads whose values may not be in the page cache: the device
    /// gets every request at once instead of one page fault at a time, which is
    /// what a cold read waits on, and only the pages the values lie on, where a
    /// page fault on a mapping also reads the pages around the faulting one (128
    /// KiB by default, 64 times what a scattered 2 KB value needs). The values'
    /// pages are merged into runs (per shard, sorted, touching or overlapping
    /// runs joined), one system call each: a batch of consecutive records costs
    /// one call, a scattered one about one a value. A batch whose values are
    /// cached already (by a look at a few of them) asks for nothing.
    ///
    /// Worth it for large values, and for small ones read sparsely (a small view
    /// of a large dataset). Not for small values of a dense epoch: there the
    /// pages a fault reads around hold the next values of the epoch, and reading
    /// only the requested pages makes many small reads of what one large read
    /// fetched (a cold shuffled epoch of 2 KB values ran 2-4x slower).
    pub fn prefetch(&self, indices: impl IntoIterator<Item = usize>) {
        let locations: Vec<_> = indices
            .into_iter()
            .filter(|&index| index < self.len())
            .filter_map(|index| self.index.locate(index).ok())
            .collect();
        if !self.all_cached(&locations) {
            will_need(&locations);
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

/// Asks for the pages of the stored values at `locations` at once, in runs
/// (per shard, sorted, touching or overlapping runs joined), one request a
/// run.
pub(crate) fn will_need(locations: &[Location<'_>]) {
    let runs = locations.iter().map(|location| {
        let offset = location.value_offset as usize;
        let end = offset + location.stored.len();
        Run::of_bytes(location.shard_id, offset, end, location.data)
    });
    for run in merge(runs.collect()) {
        run.file.will_need(run.start, run.end - run.start);
    }
}

/// Pages `start..end` (page-aligned, within the file) of shard `shard`'s data
/// file `file`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Run<F> {
    shard: u64,
    start: usize,
    end: usize,
    file: F,
}

impl<'a> Run<&'a Mapping> {
    /// The pages holding bytes `start..end` of `file`, shard `shard`'s.
    fn of_bytes(shard: u64, start: usize, end: usize, file: &'a Mapping) -> Self {
        Run::pages(shard, start, end, file.len(), file)
    }
}

impl<F> Run<F> {
    /// The pages holding bytes `start..end` of a file of `len` bytes (none for
    /// no bytes).
    fn pages(shard: u64, start: usize, end: usize, len: usize, file: F) -> Self {
        let first = start / PAGE * PAGE;
        Run {
            shard,
            start: first,
            end: if end > start {
                end.div_ceil(PAGE).saturating_mul(PAGE).min(len)
            } else {
                first
            },
            file,
        }
    }
}

/// `runs` sorted by shard and start, the empty ones dropped and those that touch
/// or overlap joined.
fn merge<F: Copy>(mut runs: Vec<Run<F>>) -> Vec<Run<F>> {
    runs.retain(|run| run.end > run.start);
    runs.sort_unstable_by_key(|run| (run.shard, run.start));
    let mut merged: Vec<Run<F>> = Vec::with_capacity(runs.len());
    for run in runs {
        match merged.last_mut() {
            Some(last) if last.shard == run.shard && run.start <= last.end => {
                last.end = last.end.max(run.end);
            }
            _ => merged.push(run),
        }
    }
    merged
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
    fn merged_runs_cover_exactly_the_pages_of_the_values_one_run_per_stretch() {
        use std::collections::BTreeSet;
        // Random values (shard, offset, len) over three files of odd lengths,
        // against a model: the set of pages any value touches.
        let lens = [3 * PAGE + 100, 40 * PAGE, 7];
        let noise = crate::test_bytes::noise(4 * 3 * 400, 0x9e37_79b9_7f4a_7c15);
        for case in 0..400 {
            let draws = &noise[case * 12..case * 12 + 12];
            let mut runs = Vec::new();
            let mut model = BTreeSet::new();
            for draw in draws.chunks(3) {
                let shard = u64::from(draw[0] % 3);
                let len = lens[shard as usize];
                let offset = (usize::from(draw[1]) * 97 + case) % len;
                let end = (offset + usize::from(draw[2]) * 61).min(len);
                runs.push(Run::pages(shard, offset, end, len, ()));
                for page in offset / PAGE..end.div_ceil(PAGE) {
                    if end > offset {
                        model.insert((shard, page));
                    }
                }
            }
            let merged = merge(runs);
            let covered: BTreeSet<_> = merged
                .iter()
                .flat_map(|run| (run.start / PAGE..run.end.div_ceil(PAGE)).map(|p| (run.shard, p)))
                .collect();
            assert_eq!(covered, model, "case {case}: {merged:?}");
            for pair in merged.windows(2) {
                // Sorted, and apart: touching runs were joined.
                assert!(
                    pair[0].shard < pair[1].shard || pair[0].end < pair[1].start,
                    "case {case}: {merged:?}"
                );
            }
            for run in &merged {
                assert!(run.start % PAGE == 0 && run.end <= lens[run.shard as usize]);
            }
        }
    }

    #[test]
    fn consecutive_values_make_one_run_and_a_file_end_is_not_passed() {
        let runs = (0..10).map(|i| Run::pages(4, i * 2048, i * 2048 + 2048, 20_000, ()));
        assert_eq!(
            merge(runs.collect()),
            vec![Run {
                shard: 4,
                start: 0,
                end: 20_000,
                file: ()
            }]
        );
        // An empty value has no page; the same pages in two shards stay two runs.
        let runs = vec![
            Run::pages(1, 5000, 5000, 9000, ()),
            Run::pages(2, 0, 10, 9000, ()),
            Run::pages(0, 0, 10, 9000, ()),
        ];
        let merged = merge(runs);
        assert_eq!(merged.iter().map(|r| r.shard).collect::<Vec<_>>(), [0, 2]);
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

    /// Drops `path`'s pages from the page cache (written back first).
    #[cfg(target_os = "linux")]
    fn drop_pages(path: &std::path::Path) {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).unwrap();
        file.sync_all().unwrap();
        // SAFETY: a plain call on an open descriptor.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }

    /// Where `mincore` would not tell the truth (a dataset the process neither
    /// owns nor may write), the probe reads a byte without waiting instead: it
    /// finds the pages of a read shard cached, and says a page of a dropped one
    /// is cached only once it has read it.
    ///
    /// `RWF_NOWAIT` does not forbid I/O: a probe of a missing page starts
    /// reading it (and a few pages after it), and on a fast device the read may
    /// be done before the probe looks, about one time in ten here. So what is
    /// checked after a drop is that every page the probe said cached is cached
    /// by `mincore`'s word: a probe that says cached without reading fails.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_probe_reads_without_waiting_where_mincore_would_not_tell() {
        let dir = tempfile::tempdir().unwrap();
        let options = CreateOptions {
            keyed: false,
            compression: Compression::None,
            max_shard_size: 1 << 30,
        };
        let values: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 4096]).collect();
        let mut dataset = Dataset::create(dir.path(), options).unwrap();
        dataset
            .extend_values(values.iter().map(|v| &v[..]))
            .unwrap();
        drop(dataset);
        let owner = Dataset::open(dir.path()).unwrap();
        let hidden = Dataset::open(dir.path()).unwrap();
        hidden.index.shards()[0]
            .page_cache_visible
            .set(false)
            .unwrap();
        assert!(
            owner.index.shards()[0].page_cache_visible(),
            "the test owns its files"
        );
        // As many values as a batch probes: every one of them is probed.
        let indices: Vec<usize> = (0..40).step_by(5).collect();
        assert_eq!(indices.len(), PROBES);
        let cached = |dataset: &Dataset| -> bool {
            let locations: Vec<_> = (indices.iter())
                .map(|&i| dataset.index.locate(i).unwrap())
                .collect();
            dataset.all_cached(&locations)
        };
        // What mincore says of each value's first page (it reads nothing).
        let resident = || -> Vec<bool> {
            (indices.iter())
                .map(|&i| owner.cached(&owner.index.locate(i).unwrap()))
                .collect()
        };
        // A page being read (by a read-ahead of the writer's or the kernel's)
        // is dropped once it is read: drop until mincore sees none of them.
        let path = owner.shard_data_path(0);
        let dropped = (0..100).any(|_| {
            drop_pages(&path);
            resident().iter().all(|&cached| !cached)
        });
        if dropped {
            assert!(!cached(&owner), "dropped: mincore finds them missing");
            if cached(&hidden) {
                assert!(
                    resident().iter().all(|&cached| cached),
                    "dropped: the probe said cached pages it had not read"
                );
            }
        } else {
            // Where the pages cannot be dropped (tmpfs keeps them), both must
            // say cached.
            assert!(cached(&owner), "undroppable: mincore finds them cached");
            assert!(cached(&hidden), "undroppable: the probe finds them cached");
        }
        for &index in &indices {
            assert_eq!(&*owner.at(index).unwrap(), &values[index][..]);
        }
        assert!(cached(&owner));
        assert!(cached(&hidden), "read: the probe by read finds them");
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
