//! [`SampleSource`]: the source MDS and LitData directories are both read
//! through. It opens their shards (chunks) in turn, each with the check its
//! format makes of it, and reads each in batches by the [`Plan`] (value, key,
//! fields) and the format's [`Layout`].

use std::collections::VecDeque;

use crate::sample_plan::{Layout, Plan, Samples};
use crate::{Fused, Record, Skipped, Source, SourceError};

/// A shard being read: its samples, then the checks of its end.
pub(crate) trait Shard: Samples + Send {
    /// After the last sample: whatever the format checks at the end (nothing
    /// after it, its hashes).
    fn finish(self: Box<Self>) -> Result<(), SourceError>;

    /// For a shard whose rows are an Arrow table (a LitData Arrow footer),
    /// its next batch of records, whole, and whether it ended; `None` for a
    /// shard of samples, which the plan splits and decodes.
    fn read_records(&mut self) -> Option<Result<(Vec<Record>, bool), SourceError>> {
        None
    }
}

/// Opens one shard, checked against its index entry.
pub(crate) type Opener = Box<dyn FnOnce() -> Result<Box<dyn Shard>, SourceError> + Send>;

/// Streams the samples of a directory's shards (of several directories read
/// as one), in order, as records. Made by
/// [`MdsSource::open`](crate::mds_source::MdsSource::open) and
/// [`LitdataSource::open`](crate::litdata_source::LitdataSource::open).
pub struct SampleSource {
    plan: Plan,
    layout: Box<dyn Layout + Send>,
    pending: VecDeque<Opener>,
    current: Option<Box<dyn Shard>>,
    ready: VecDeque<Record>,
    skipped: Skipped,
    metadata: serde_json::Map<String, serde_json::Value>,
}

impl SampleSource {
    pub(crate) fn new(
        plan: Plan,
        layout: Box<dyn Layout + Send>,
        pending: VecDeque<Opener>,
        metadata: serde_json::Map<String, serde_json::Value>,
    ) -> Fused<SampleSource> {
        Fused::new(SampleSource {
            plan,
            layout,
            pending,
            current: None,
            ready: VecDeque::new(),
            skipped: Skipped::default(),
            metadata,
        })
    }

    /// Reads the next batch of samples into `ready`; false when every shard is
    /// read.
    fn fill(&mut self) -> Result<bool, SourceError> {
        loop {
            let Some(shard) = self.current.as_mut() else {
                let Some(open) = self.pending.pop_front() else {
                    return Ok(false);
                };
                self.current = Some(open()?);
                continue;
            };
            let (records, ended) = match shard.read_records() {
                Some(read) => read?,
                None => self.plan.read_batch(self.layout.as_ref(), shard.as_mut())?,
            };
            if ended {
                self.current.take().expect("read above").finish()?;
            }
            if records.is_empty() {
                continue;
            }
            self.ready.extend(records);
            return Ok(true);
        }
    }
}

impl Iterator for SampleSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(record) = self.ready.pop_front() {
                return Some(Ok(record));
            }
            match self.fill() {
                Ok(true) => continue,
                Ok(false) => return None,
                Err(error) => return Some(Err(error)),
            }
        }
    }
}

impl Source for SampleSource {
    fn keyed(&self) -> bool {
        self.plan.key.is_some()
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        self.metadata.clone()
    }
}
