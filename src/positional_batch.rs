//! A batch of values read with positional reads (`pread`, nothing mapped; see
//! `unmapped.rs`) at about the cost of reading them through the mappings.
//!
//! Reading each value with a system call of its own into a vector of its own
//! and then decoding it cost a DataLoader epoch 4-24% against the mappings (LZ4
//! text), and values stored verbatim paid a second copy. Here a batch is read
//! in two steps, because a compressed value's length (which the caller needs
//! to size the batch's buffer) is in its stored bytes:
//!
//! 1. [`Dataset::plan_positional`] sorts the batch's values by shard and
//!    offset. Small values are read in runs of neighbours (gaps under
//!    [`GAP_MAX`], a run at most [`RUN_MAX`]) with one `pread` each into a
//!    buffer reused from batch to batch. A large value (at least
//!    [`DIRECT_MIN`] stored bytes) is not read yet: an uncompressed one's
//!    length is its stored length; of an LZ4 one only the size prefix and, if
//!    it is a literal-only block, the literal-length bytes are read (a few
//!    hundred bytes of 100 KB).
//! 2. [`Dataset::read_planned`] writes each value into its place in the
//!    caller's buffer: decoded from the run buffer, or, for a large value held
//!    verbatim (uncompressed, or a literal-only LZ4 block), read by `pread`
//!    straight into its place (one copy, out of the page cache, as through the
//!    mapping); a large compressed value's stored bytes are read into the
//!    caller's scratch vector and decoded.
//!
//! Every safety property of `unmapped.rs` holds: a file is read only if it is
//! the one the shard's mapping was made from (else the value is read through
//! the mapping), a short read is [`Error::CorruptShard`] naming the file and
//! the offset, and every length comes from the index (bounded by the mapping)
//! or from a size prefix bounded by its block's length.

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::lz4_block;
use crate::manifest::Compression;
use crate::reader::Location;

/// Values of at least this many stored bytes are read on their own, straight
/// into the caller's buffer when stored verbatim: their copy out of a run
/// buffer would cost more than a system call.
pub const DIRECT_MIN: usize = 32 << 10;
/// Neighbouring small values at most this far apart in their shard's file are
/// read with one system call (the bytes between them read and ignored).
pub const GAP_MAX: u64 = 64 << 10;
/// A run of neighbouring values read with one system call spans at most this
/// many bytes.
pub const RUN_MAX: u64 = 8 << 20;
/// A run buffer larger than this after a batch is freed rather than kept for
/// the next one.
pub const BUFFER_KEEP: usize = 16 << 20;

/// How one value of a planned batch is read.
#[derive(Clone, Copy, Debug)]
enum Plan {
    /// Through the shard's mapping ([`Dataset::read_into`]): its file cannot be
    /// read positionally.
    Mapped,
    /// Its stored bytes are in the run buffer at `at`; `index` is the record
    /// planned (a read of another at its position is refused).
    Buffered {
        at: usize,
        stored: usize,
        index: usize,
    },
    /// Its bytes lie verbatim at `skip` bytes into its stored bytes: read
    /// straight into the caller's buffer.
    Direct { skip: usize },
    /// A large compressed value: its stored bytes are read and decoded.
    Deferred,
}

/// The plan of one batch of positional reads and the buffer its small values
/// were read into; reuse one across batches (one per thread), so the buffer
/// is allocated once.
#[derive(Debug, Default)]
pub struct PositionalBatch {
    plans: Vec<Plan>,
    lens: Vec<usize>,
    /// The small values' runs, back to back. Its length only grows (new bytes
    /// zeroed once), so reusing it costs no clearing.
    buffer: Vec<u8>,
    head: Vec<u8>,
    /// How many runs the plan read.
    runs: usize,
    /// Whether the plan asked for the batch's pages ahead of its reads.
    read_ahead: bool,
    /// (shard, offset, position, stored length) of each value, sorted.
    order: Vec<(u64, u64, u32, u64)>,
}

impl PositionalBatch {
    /// An empty plan.
    pub fn new() -> Self {
        Self::default()
    }

    /// The planned values' lengths, in the order of the planned indices.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// How many of the planned values are read straight into the caller's
    /// buffer, and how many through the mappings: for tests and benchmarks.
    pub fn counts(&self) -> PlanCounts {
        let mut counts = PlanCounts {
            runs: self.runs,
            read_ahead: self.read_ahead,
            ..PlanCounts::default()
        };
        for plan in &self.plans {
            match plan {
                Plan::Mapped => counts.mapped += 1,
                Plan::Buffered { .. } => counts.buffered += 1,
                Plan::Direct { .. } => counts.direct += 1,
                Plan::Deferred => counts.deferred += 1,
            }
        }
        counts
    }

    /// Frees the run buffer if the last batch made it larger than
    /// [`BUFFER_KEEP`]: called between batches, it bounds what an idle reader
    /// holds.
    pub fn trim(&mut self) {
        if self.buffer.len() > BUFFER_KEEP {
            self.buffer = Vec::new();
        }
    }
}

/// How a planned batch's values are read ([`PositionalBatch::counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanCounts {
    /// Read through the mapping (the file cannot be read positionally).
    pub mapped: usize,
    /// Read in runs into the reused buffer, then decoded or copied.
    pub buffered: usize,
    /// Read straight into the caller's buffer.
    pub direct: usize,
    /// Large compressed values, read into scratch space and decoded.
    pub deferred: usize,
    /// System calls that read the buffered values: one per run of neighbours.
    pub runs: usize,
    /// Whether the batch's pages were asked for ahead of its reads
    /// ([`Dataset::plan_positional_ahead`], when they were not found cached).
    pub read_ahead: bool,
}

impl Dataset {
    /// Plans the positional reads of the values at `indices` into `batch` (see
    /// the module's notes), reading the small values and the large LZ4 values'
    /// headers; [`PositionalBatch::lens`] then gives each value's length, and
    /// [`Dataset::read_planned`] writes each one.
    pub fn plan_positional(&self, indices: &[usize], batch: &mut PositionalBatch) -> Result<()> {
        self.plan_positional_with(indices, batch, false)
    }

    /// [`Dataset::plan_positional`] of values that may not be in the page
    /// cache (a sparse view's), reading ahead as [`Dataset::prefetch`] does:
    /// unless a look at a few of them finds them cached, the pages of all
    /// of them are asked for at once before the first is read, so the disk
    /// sees the batch rather than one read at a time. The values are located
    /// once for both (a prefetch before the plan located each value again).
    pub fn plan_positional_ahead(
        &self,
        indices: &[usize],
        batch: &mut PositionalBatch,
    ) -> Result<()> {
        self.plan_positional_with(indices, batch, true)
    }

    fn plan_positional_with(
        &self,
        indices: &[usize],
        batch: &mut PositionalBatch,
        read_ahead: bool,
    ) -> Result<()> {
        let count = indices.len();
        if u32::try_from(count).is_err() {
            return Err(Error::InvalidOption(format!(
                "plan_positional: {count} values in one batch"
            )));
        }
        batch.plans.clear();
        batch.plans.resize(count, Plan::Mapped);
        batch.lens.clear();
        batch.lens.resize(count, 0);
        batch.order.clear();
        batch.runs = 0;
        batch.read_ahead = false;
        // Each value located once, for the order, the read-ahead and the reads.
        let mut locations = Vec::with_capacity(count);
        for (position, &index) in indices.iter().enumerate() {
            self.check_index(index)?;
            let location = self.index.locate(index)?;
            batch.order.push((
                location.shard_id,
                location.value_offset,
                position as u32,
                location.stored.len() as u64,
            ));
            locations.push(location);
        }
        batch.order.sort_unstable();
        if read_ahead && !self.all_cached(&locations) {
            crate::read_ahead::will_need(&locations);
            batch.read_ahead = true;
        }
        let mut used = 0usize;
        let mut next = 0;
        while next < count {
            let (shard, _, position, _) = batch.order[next];
            let index = indices[position as usize];
            let location = &locations[position as usize];
            let Some(file) = self.unmapped_file(location) else {
                batch.lens[position as usize] = self.value_len(index)?;
                next += 1;
                continue;
            };
            let stored = location.stored.len();
            if stored >= DIRECT_MIN {
                let (plan, len) = self.plan_large(index, location, &file, &mut batch.head)?;
                batch.plans[position as usize] = plan;
                batch.lens[position as usize] = len;
                next += 1;
                continue;
            }
            // A run of small neighbours of this shard, from this value on.
            let start = location.value_offset;
            let mut end = start + stored as u64;
            let mut last = next + 1;
            while let Some(&(other_shard, offset, _, other_stored)) = batch.order.get(last) {
                if other_shard != shard {
                    break;
                }
                let other_end = offset + other_stored;
                if other_stored >= DIRECT_MIN as u64
                    || offset.saturating_sub(end) > GAP_MAX
                    || other_end.max(end) - start > RUN_MAX
                {
                    break;
                }
                end = end.max(other_end);
                last += 1;
            }
            // Bounded: the run lies within the shard's mapped data (every value
            // located in it) and spans at most RUN_MAX bytes.
            let span = (end - start) as usize;
            let at = used;
            used += span;
            if batch.buffer.len() < used {
                batch.buffer.resize(used, 0);
            }
            batch.runs += 1;
            crate::unmapped::read_exact_at_or_corrupt(
                &file,
                &mut batch.buffer[at..used],
                start,
                &location.shard.path,
            )?;
            for &(_, offset, position, stored) in &batch.order[next..last] {
                let index = indices[position as usize];
                let stored = stored as usize;
                let from = at + (offset - start) as usize;
                let bytes = &batch.buffer[from..from + stored];
                batch.lens[position as usize] = match self.compression() {
                    Compression::None => stored,
                    Compression::Lz4 => lz4_block::declared_len(bytes)
                        .map_err(|e| Self::corrupt(index, &locations[position as usize], e))?,
                };
                batch.plans[position as usize] = Plan::Buffered {
                    at: from,
                    stored,
                    index,
                };
            }
            next = last;
        }
        Ok(())
    }

    /// The plan and length of a large value (at `location`, in `file`):
    /// uncompressed, read whole in place; LZ4, its header read into `head` to
    /// find its length and whether its bytes lie verbatim.
    fn plan_large(
        &self,
        index: usize,
        location: &Location<'_>,
        file: &std::fs::File,
        head: &mut Vec<u8>,
    ) -> Result<(Plan, usize)> {
        let stored = location.stored.len();
        match self.compression() {
            Compression::None => Ok((Plan::Direct { skip: 0 }, stored)),
            Compression::Lz4 => {
                head.clear();
                head.resize(lz4_block::literal_header_len(stored), 0);
                crate::unmapped::read_exact_at_or_corrupt(
                    file,
                    head,
                    location.value_offset,
                    &location.shard.path,
                )?;
                let len = lz4_block::declared_len_of(head, stored)
                    .map_err(|e| Self::corrupt(index, location, e))?;
                let plan = match lz4_block::literal_start(head, stored) {
                    Some(skip) => Plan::Direct { skip },
                    None => Plan::Deferred,
                };
                Ok((plan, len))
            }
        }
    }

    /// Writes the value at `position` of the batch planned in `batch` (for
    /// `indices`, the same slice [`Dataset::plan_positional`] was given) into
    /// `out`, exactly [`PositionalBatch::lens`]`[position]` bytes, checked as
    /// [`Dataset::read_into`] checks. `scratch` holds a large compressed value's
    /// stored bytes (reuse one per thread).
    pub fn read_planned(
        &self,
        batch: &PositionalBatch,
        indices: &[usize],
        position: usize,
        out: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let (Some(&index), Some(&plan), Some(&len)) = (
            indices.get(position),
            batch.plans.get(position),
            batch.lens.get(position),
        ) else {
            return Err(Error::InvalidOption(format!(
                "read_planned: position {position} of a batch of {} planned values",
                batch.plans.len()
            )));
        };
        if out.len() != len {
            return Err(Error::InvalidOption(format!(
                "read_planned: a buffer of {} bytes for a value of {len}",
                out.len()
            )));
        }
        self.check_index(index)?;
        if let Plan::Buffered {
            at,
            stored,
            index: planned,
        } = plan
        {
            // Not located again: the plan holds its bytes, and the record
            // is located only to name it in an error.
            let bytes = batch.buffer.get(at..at + stored);
            let Some(bytes) = bytes.filter(|_| planned == index) else {
                return Err(not_planned(index, position));
            };
            self.decode_stored_with(bytes, out, |e| match self.index.locate(index) {
                Ok(location) => Self::corrupt(index, &location, e),
                Err(error) => error,
            })?;
            return self.check_content(index, out);
        }
        let location = self.index.locate(index)?;
        match plan {
            Plan::Mapped => return self.read_into(index, out),
            Plan::Buffered { .. } => unreachable!("read above"),
            Plan::Direct { .. } | Plan::Deferred => {
                // A file closed since the plan whose path now holds another is
                // not read: the mapping holds the same bytes.
                let Some(file) = self.unmapped_file(&location) else {
                    return self.read_into(index, out);
                };
                let path = &location.shard.path;
                if let Plan::Direct { skip } = plan {
                    // Uncompressed (skip 0) or a literal-only block: the value
                    // is the stored bytes' tail.
                    if skip.checked_add(len) != Some(location.stored.len()) {
                        return Err(not_planned(index, position));
                    }
                    let offset = location.value_offset + skip as u64;
                    crate::unmapped::read_exact_at_or_corrupt(&file, out, offset, path)?;
                } else {
                    scratch.clear();
                    scratch.resize(location.stored.len(), 0);
                    let offset = location.value_offset;
                    crate::unmapped::read_exact_at_or_corrupt(&file, scratch, offset, path)?;
                    self.decode_stored(index, &location, scratch, out)?;
                }
            }
        }
        self.check_content(index, out)
    }
}

fn not_planned(index: usize, position: usize) -> Error {
    Error::InvalidOption(format!(
        "read_planned: record {index} is not the one planned at position {position}"
    ))
}
