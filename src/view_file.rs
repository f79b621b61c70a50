//! The view file (FORMAT.md, "Views"): a named list of record indices of one
//! dataset, with the expression that chose them and the state of the dataset it
//! was evaluated over. Decoded here from bytes (a mapped local file, or an object
//! read whole), checked against itself before anything is used; written in
//! `views.rs`.

use std::sync::Arc;

use xxhash_rust::xxh3::Xxh3;

use crate::fingerprint::ShardFingerprint;
use crate::format::{
    MAX_VIEW_EXPRESSION, VIEW_HEADER_LEN, VIEW_MAGIC, VIEW_NARROW_MAX_RECORDS, VIEW_VERSION,
};

/// Header flag: indices are 8 bytes wide.
const FLAG_WIDE: u32 = 1;
/// Header flag: the view records an expression (else it was made from a list of
/// indices).
const FLAG_EXPRESSION: u32 = 2;
/// Where the checksum sits in the header.
const CHECKSUM_AT: usize = 80;

/// The state of a dataset a view was evaluated over: its first `records`
/// records, which `shards` shards hold, the last of them with fingerprint
/// `last_shard` (`None` when `shards` is 0). A dataset the view is read with
/// must hold that state as a prefix (datasets only grow); anything else is
/// another dataset, or this one rewritten, and the view is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewBinding {
    /// Records the view was evaluated over (indices are below it).
    pub records: u64,
    /// Shards holding them.
    pub shards: u64,
    /// The fingerprint of shard `shards - 1`.
    pub last_shard: Option<ShardFingerprint>,
}

impl ViewBinding {
    /// Why a dataset of `len` records in `shards` shards, whose shard `s` starts
    /// at record `first_record(s)` (its record count for `s == shards`) and has
    /// fingerprint `fingerprint(s)`, does not hold this state; `None` when it does.
    pub fn mismatch<E>(
        &self,
        len: u64,
        shards: u64,
        first_record: impl Fn(u64) -> u64,
        fingerprint: impl FnOnce(u64) -> Result<ShardFingerprint, E>,
    ) -> Result<Option<String>, E> {
        if len < self.records || shards < self.shards {
            return Ok(Some(format!(
                "it was evaluated over {} records in {} shards, and the dataset has {len} records in {shards} shards",
                self.records, self.shards
            )));
        }
        if first_record(self.shards) != self.records {
            return Ok(Some(format!(
                "it was evaluated over the {} records of shards 0..{}, which now hold {}",
                self.records,
                self.shards,
                first_record(self.shards)
            )));
        }
        let Some(expected) = self.last_shard else {
            return Ok(None);
        };
        let found = fingerprint(self.shards - 1)?;
        Ok((found != expected).then(|| {
            format!(
                "shard {} is not the one it was evaluated over (its fingerprint differs)",
                self.shards - 1
            )
        }))
    }
}

/// The record indices of a view, in increasing order, each once: 4 bytes each
/// (8 when the view was evaluated over more than 2^32 records), little-endian, in
/// a mapped view file or in memory. Cheap to clone.
#[derive(Clone)]
pub struct ViewIndices {
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    /// Where the indices start in `bytes`.
    start: usize,
    len: usize,
    wide: bool,
}

impl std::fmt::Debug for ViewIndices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewIndices")
            .field("len", &self.len)
            .field("wide", &self.wide)
            .finish()
    }
}

impl ViewIndices {
    /// Number of records in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes per index (4 or 8).
    pub fn width(&self) -> usize {
        if self.wide {
            8
        } else {
            4
        }
    }

    /// The indices' bytes, little-endian, [`ViewIndices::width`] each.
    pub fn as_bytes(&self) -> &[u8] {
        let bytes: &[u8] = (*self.bytes).as_ref();
        &bytes[self.start..self.start + self.len * self.width()]
    }

    /// The dataset index of the view's record `position`, if it is in range.
    pub fn get(&self, position: usize) -> Option<u64> {
        if position >= self.len {
            return None;
        }
        let bytes = self.as_bytes();
        Some(match self.wide {
            true => {
                let at = position * 8;
                u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
            }
            false => {
                let at = position * 4;
                u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as u64
            }
        })
    }

    /// The dataset indices, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        let width = self.width();
        let wide = self.wide;
        self.as_bytes()
            .chunks_exact(width)
            .map(move |b| match wide {
                true => u64::from_le_bytes(b.try_into().expect("8 bytes")),
                false => u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64,
            })
    }

    /// The view position of dataset record `index`, if the view holds it
    /// (a binary search).
    pub fn position_of(&self, index: u64) -> Option<usize> {
        let (mut low, mut high) = (0, self.len);
        while low < high {
            let middle = low + (high - low) / 2;
            match self.get(middle).expect("in range").cmp(&index) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Some(middle),
            }
        }
        None
    }
}

/// Builds the indices of a view evaluated over `records` records: pushed in
/// increasing order, stored as the file stores them (4 bytes each, 8 past 2^32
/// records), so a view costs the same in memory while it is built.
#[derive(Debug)]
pub struct ViewRecords {
    bytes: Vec<u8>,
    wide: bool,
    records: u64,
    last: Option<u64>,
}

/// Why indices cannot make a view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViewRecordsError {
    /// An index at or past the records the view is over.
    #[error("index {index} out of range for a dataset of {records} records")]
    OutOfRange {
        /// The index.
        index: u64,
        /// Records of the dataset.
        records: u64,
    },
    /// Indices pushed out of order, or twice.
    #[error("index {index} after {previous}: a view's records are pushed in increasing order, each once")]
    NotIncreasing {
        /// The index.
        index: u64,
        /// The index before it.
        previous: u64,
    },
}

impl ViewRecords {
    /// An empty list for a view over `records` records.
    pub fn new(records: u64) -> ViewRecords {
        ViewRecords {
            bytes: Vec::new(),
            wide: records > VIEW_NARROW_MAX_RECORDS,
            records,
            last: None,
        }
    }

    /// The list of `indices` (any order, repeats counted once) of a view over
    /// `records` records.
    pub fn from_unsorted(
        records: u64,
        mut indices: Vec<u64>,
    ) -> Result<ViewRecords, ViewRecordsError> {
        indices.sort_unstable();
        indices.dedup();
        let mut list = ViewRecords::new(records);
        list.reserve(indices.len());
        for index in indices {
            list.push(index)?;
        }
        Ok(list)
    }

    /// Room for `additional` more indices.
    pub fn reserve(&mut self, additional: usize) {
        let width = if self.wide { 8 } else { 4 };
        self.bytes.reserve(additional.saturating_mul(width));
    }

    /// Appends `index`, which must be above the last one pushed and below the
    /// record count.
    pub fn push(&mut self, index: u64) -> Result<(), ViewRecordsError> {
        if index >= self.records {
            return Err(ViewRecordsError::OutOfRange {
                index,
                records: self.records,
            });
        }
        if let Some(previous) = self.last.filter(|&p| p >= index) {
            return Err(ViewRecordsError::NotIncreasing { index, previous });
        }
        match self.wide {
            true => self.bytes.extend_from_slice(&index.to_le_bytes()),
            false => self.bytes.extend_from_slice(&(index as u32).to_le_bytes()),
        }
        self.last = Some(index);
        Ok(())
    }

    /// The records of `view` over a dataset that now holds `records` records (at
    /// least the view's), to push the records appended since after them.
    pub fn extending(view: &ViewIndices, records: u64) -> ViewRecords {
        let mut list = ViewRecords::new(records);
        match (view.wide, list.wide) {
            (a, b) if a == b => list.bytes.extend_from_slice(view.as_bytes()),
            _ => {
                list.reserve(view.len());
                for index in view.iter() {
                    list.bytes.extend_from_slice(&index.to_le_bytes());
                }
            }
        }
        list.last = view.get(view.len().wrapping_sub(1));
        list
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.bytes.len() / if self.wide { 8 } else { 4 }
    }

    /// Whether none were pushed.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The record count the view is over.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The indices, as a view's.
    pub fn finish(self) -> ViewIndices {
        let len = self.len();
        ViewIndices {
            bytes: Arc::new(self.bytes),
            start: 0,
            len,
            wide: self.wide,
        }
    }
}

/// A view: its records, the expression that chose them (`None` for a view made
/// from a list of indices), and the dataset state it was evaluated over.
#[derive(Clone, Debug)]
pub struct View {
    /// The expression, as given.
    pub expression: Option<String>,
    /// The dataset state it was evaluated over.
    pub binding: ViewBinding,
    /// Its records.
    pub indices: ViewIndices,
}

/// Why bytes are not a view file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ViewFileError(pub String);

impl View {
    /// The view file's bytes (FORMAT.md, "Views"), in pieces to write in order.
    pub fn encode(&self) -> Vec<u8> {
        let expression = self.expression.as_deref().unwrap_or("").as_bytes();
        let mut header = header(self, expression.len());
        let padding = pad8(expression.len()) - expression.len();
        let mut hasher = Xxh3::new();
        hasher.update(&header);
        hasher.update(expression);
        hasher.update(&[0u8; 8][..padding]);
        hasher.update(self.indices.as_bytes());
        header[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&hasher.digest().to_le_bytes());
        let mut out = Vec::with_capacity(
            header.len() + pad8(expression.len()) + self.indices.as_bytes().len(),
        );
        out.extend_from_slice(&header);
        out.extend_from_slice(expression);
        out.extend_from_slice(&[0u8; 8][..padding]);
        out.extend_from_slice(self.indices.as_bytes());
        out
    }

    /// Decodes a view file, checking it against itself: the magic, the version,
    /// known flags, an index width that fits the record count, an expression of
    /// at most [`MAX_VIEW_EXPRESSION`] bytes of UTF-8, a length that is exactly
    /// the header, the expression and the indices, the checksum, and indices
    /// strictly increasing below the record count. The bytes are kept, not
    /// copied: a mapped file costs nothing until read.
    pub fn decode(bytes: Arc<dyn AsRef<[u8]> + Send + Sync>) -> Result<View, ViewFileError> {
        let data: &[u8] = (*bytes).as_ref();
        let bad = |reason: String| Err(ViewFileError(reason));
        if data.len() < VIEW_HEADER_LEN {
            return bad(format!(
                "{} bytes, shorter than a view file's {VIEW_HEADER_LEN}-byte header",
                data.len()
            ));
        }
        if &data[..8] != VIEW_MAGIC {
            return bad("not a view file (no BCDVIEW1 magic)".into());
        }
        let u32_at = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8"));
        let version = u32_at(8);
        if version != VIEW_VERSION {
            return bad(format!(
                "version {version}, but this build reads version {VIEW_VERSION}"
            ));
        }
        let flags = u32_at(12);
        if flags & !(FLAG_WIDE | FLAG_EXPRESSION) != 0 {
            return bad(format!("unknown flags {flags:#x}"));
        }
        let (records, shards, selected, expression_len) =
            (u64_at(16), u64_at(24), u64_at(32), u64_at(40));
        let wide = flags & FLAG_WIDE != 0;
        if wide != (records > VIEW_NARROW_MAX_RECORDS) {
            return bad(format!(
                "{}-byte indices for a view over {records} records (8 bytes exactly past 2^32 records)",
                if wide { 8 } else { 4 }
            ));
        }
        if expression_len > MAX_VIEW_EXPRESSION as u64 {
            return bad(format!(
                "an expression of {expression_len} bytes, more than the {MAX_VIEW_EXPRESSION} a view file holds"
            ));
        }
        let has_expression = flags & FLAG_EXPRESSION != 0;
        if !has_expression && expression_len != 0 {
            return bad("an expression, but the flag saying it has one is clear".into());
        }
        if selected > records {
            return bad(format!("{selected} records selected out of {records}"));
        }
        let width: u64 = if wide { 8 } else { 4 };
        let start = VIEW_HEADER_LEN as u64 + pad8(expression_len as usize) as u64;
        // selected <= records < 2^64 and width <= 8: checked, not assumed.
        let expected = selected
            .checked_mul(width)
            .and_then(|n| n.checked_add(start));
        if expected != Some(data.len() as u64) {
            return bad(format!(
                "{} bytes, but its header makes it {} ({selected} records of {width} bytes after a {expression_len}-byte expression)",
                data.len(),
                expected.map_or("more than 2^64".to_owned(), |n| n.to_string())
            ));
        }
        if data[88..96] != [0; 8] {
            return bad("reserved header bytes are not zero".into());
        }
        let fingerprint = ShardFingerprint {
            records: u64_at(48),
            data_len: u64_at(56),
            index_xxh3: u64_at(64),
            edges_xxh3: u64_at(72),
        };
        let last_shard = match shards {
            0 if fingerprint != ShardFingerprint::default() => {
                return bad("a last shard's fingerprint, but no shards".into())
            }
            0 => None,
            _ => Some(fingerprint),
        };
        let stored = u64_at(CHECKSUM_AT);
        let mut hasher = Xxh3::new();
        hasher.update(&data[..CHECKSUM_AT]);
        hasher.update(&[0u8; 8]);
        hasher.update(&data[CHECKSUM_AT + 8..start as usize]);
        // The indices hashed and their order checked in one pass, a block at a
        // time, so each block is read from memory once (a view of 10^7 records
        // is 40 MB).
        let increasing = hash_and_check_order(&mut hasher, &data[start as usize..], wide);
        if hasher.digest() != stored {
            return bad("checksum mismatch: the file is damaged".into());
        }
        let text = &data[VIEW_HEADER_LEN..VIEW_HEADER_LEN + expression_len as usize];
        let expression = match (has_expression, std::str::from_utf8(text)) {
            (false, _) => None,
            (true, Ok(text)) => Some(text.to_owned()),
            (true, Err(e)) => return bad(format!("the expression is not UTF-8: {e}")),
        };
        if data[VIEW_HEADER_LEN + expression_len as usize..start as usize]
            .iter()
            .any(|&b| b != 0)
        {
            return bad("padding after the expression is not zero".into());
        }
        let indices = ViewIndices {
            bytes: bytes.clone(),
            start: start as usize,
            len: selected as usize,
            wide,
        };
        if let Some(reason) = out_of_order(&indices, increasing, records) {
            return bad(reason);
        }
        Ok(View {
            expression,
            binding: ViewBinding {
                records,
                shards,
                last_shard,
            },
            indices,
        })
    }
}

/// Bytes of indices hashed and checked at a time: a multiple of 8, small
/// enough to stay in the core's cache between the two.
const SCAN_BLOCK: usize = 64 << 10;

/// Feeds the indices' bytes to `hasher` and returns whether the indices
/// strictly increase, block by block.
fn hash_and_check_order(hasher: &mut Xxh3, bytes: &[u8], wide: bool) -> bool {
    let width = if wide { 8 } else { 4 };
    let mut ok = true;
    let mut last: Option<u64> = None;
    for block in bytes.chunks(SCAN_BLOCK) {
        hasher.update(block);
        let (first, end) = match wide {
            true => (first_and_last::<8>(block), increasing_u64(block)),
            false => (first_and_last::<4>(block), increasing_u32(block)),
        };
        ok &= end;
        if let Some((first, block_last)) = first {
            ok &= last.is_none_or(|last| last < first);
            last = Some(block_last);
        }
    }
    debug_assert!(bytes.len().is_multiple_of(width));
    ok
}

/// The first and last of the little-endian `W`-byte integers of `block`.
fn first_and_last<const W: usize>(block: &[u8]) -> Option<(u64, u64)> {
    let value = |b: &[u8]| {
        let mut word = [0u8; 8];
        word[..W].copy_from_slice(b);
        u64::from_le_bytes(word)
    };
    let first = block.get(..W)?;
    Some((value(first), value(&block[block.len() - W..])))
}

/// Whether the u32s of `block` strictly increase (each pair compared, without
/// an early exit, so the loop vectorises).
fn increasing_u32(block: &[u8]) -> bool {
    let Some(rest) = block.get(4..) else {
        return true;
    };
    let mut ok = true;
    for (a, b) in block.chunks_exact(4).zip(rest.chunks_exact(4)) {
        ok &= u32::from_le_bytes(a.try_into().expect("4"))
            < u32::from_le_bytes(b.try_into().expect("4"));
    }
    ok
}

/// Whether the u64s of `block` strictly increase.
fn increasing_u64(block: &[u8]) -> bool {
    let Some(rest) = block.get(8..) else {
        return true;
    };
    let mut ok = true;
    for (a, b) in block.chunks_exact(8).zip(rest.chunks_exact(8)) {
        ok &= u64::from_le_bytes(a.try_into().expect("8"))
            < u64::from_le_bytes(b.try_into().expect("8"));
    }
    ok
}

/// Why `indices` (`increasing` or not, as [`hash_and_check_order`] found)
/// are not strictly increasing below `records`, if they are not.
fn out_of_order(indices: &ViewIndices, increasing: bool, records: u64) -> Option<String> {
    if !increasing {
        let at = (1..indices.len())
            .find(|&i| indices.get(i) <= indices.get(i - 1))
            .unwrap_or(0);
        return Some(format!(
            "index {} at position {at} does not follow {} in increasing order",
            indices.get(at).unwrap_or(0),
            indices.get(at.wrapping_sub(1)).unwrap_or(0)
        ));
    }
    match indices.get(indices.len().wrapping_sub(1)) {
        Some(last) if last >= records => Some(format!(
            "index {last} at position {} is past the {records} records the view is over",
            indices.len() - 1
        )),
        _ => None,
    }
}

fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

fn header(view: &View, expression_len: usize) -> Vec<u8> {
    let mut header = Vec::with_capacity(VIEW_HEADER_LEN);
    header.extend_from_slice(VIEW_MAGIC);
    header.extend_from_slice(&VIEW_VERSION.to_le_bytes());
    let mut flags = 0;
    if view.indices.wide {
        flags |= FLAG_WIDE;
    }
    if view.expression.is_some() {
        flags |= FLAG_EXPRESSION;
    }
    header.extend_from_slice(&flags.to_le_bytes());
    let binding = &view.binding;
    for n in [
        binding.records,
        binding.shards,
        view.indices.len() as u64,
        expression_len as u64,
    ] {
        header.extend_from_slice(&n.to_le_bytes());
    }
    let f = binding.last_shard.unwrap_or_default();
    for n in [f.records, f.data_len, f.index_xxh3, f.edges_xxh3] {
        header.extend_from_slice(&n.to_le_bytes());
    }
    header.extend_from_slice(&[0; 16]); // checksum, reserved
    debug_assert_eq!(header.len(), VIEW_HEADER_LEN);
    header
}

#[cfg(test)]
mod tests;
