//! The one batching policy of parallel compression: how many records and bytes
//! one round takes, for [`Dataset::extend`](crate::Dataset::extend), the ingest
//! pipeline and the Python package.

/// Records per parallel compression round and thread: with
/// [`BATCH_BYTES_PER_THREAD`], the one batching policy of [`Dataset::extend`],
/// the ingest pipeline and the Python package (see [`batch_limits`]).
pub const BATCH_RECORDS_PER_THREAD: usize = 256;
/// Bytes of keys and values per parallel compression round and thread.
pub const BATCH_BYTES_PER_THREAD: usize = 8 << 20;

/// The records and bytes one parallel compression round takes with `threads`
/// compression threads: enough to keep every thread busy, few enough to bound
/// memory (a batch is full at either limit, or holds one larger record).
pub fn batch_limits(threads: usize) -> (usize, usize) {
    let threads = threads.max(1);
    (
        BATCH_RECORDS_PER_THREAD.saturating_mul(threads),
        BATCH_BYTES_PER_THREAD.saturating_mul(threads),
    )
}

/// Records gathered for one parallel compression round (see [`batch_limits`]).
pub(super) struct Batch<T> {
    items: Vec<T>,
    bytes: usize,
    max_records: usize,
    max_bytes: usize,
}

impl<T> Batch<T> {
    pub(super) fn new(threads: usize) -> Self {
        let (max_records, max_bytes) = batch_limits(threads);
        Batch {
            items: Vec::new(),
            bytes: 0,
            max_records,
            max_bytes,
        }
    }

    /// Adds an item; true when the batch is full.
    pub(super) fn add(&mut self, bytes: usize, item: T) -> bool {
        self.items.push(item);
        self.bytes += bytes;
        self.items.len() >= self.max_records || self.bytes >= self.max_bytes
    }

    pub(super) fn take(&mut self) -> Vec<T> {
        self.bytes = 0;
        std::mem::take(&mut self.items)
    }
}
