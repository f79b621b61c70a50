//! Values of `"compression": "lz4"` datasets: an LZ4 block (not a frame) behind a
//! 4-byte little-endian uncompressed size, as python-lz4's
//! `block.compress(value, mode="high_compression", store_size=True)` makes them.
//! Empty values are stored empty, with no block.

use crate::format::{
    DEFAULT_LZ4_HC_LEVEL, LZ4_EXPANSION_SLACK, LZ4_MAX_EXPANSION, LZ4_MAX_INPUT_SIZE,
    LZ4_SIZE_PREFIX,
};

mod probe;
mod state;
pub use probe::is_incompressible;
use state::Search;

/// How values are compressed when written. Any mode produces blocks that every
/// LZ4 decoder, including the reference's, reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lz4Mode {
    /// liblz4's high-compression mode at this level (1..=12). Level 9 is what the
    /// reference uses and gives byte-identical output.
    High(i32),
    /// liblz4's fast mode with this acceleration (1 = best ratio of the fast modes).
    Fast(i32),
    /// High compression at this level, except for values that a quick probe finds
    /// incompressible (JPEG, PNG, audio, video, already-compressed data, random
    /// token ids), of any size: those are stored as literal-only LZ4 blocks, which
    /// every decoder reads (and this project's readers hand out in place),
    /// without paying for the high-compression search. The probe compresses the
    /// value, or four 8 KiB windows of a longer one, in fast mode; see
    /// [`is_incompressible`]. Never stores more than the literal-only block.
    Adaptive(i32),
}

impl Default for Lz4Mode {
    /// High compression at level 9, as the reference.
    fn default() -> Self {
        Lz4Mode::High(DEFAULT_LZ4_HC_LEVEL)
    }
}

/// Why a stored value is not a valid LZ4 value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockError(pub String);

/// Compresses `value` into `out` (cleared first) in the stored form: size prefix
/// then block, or nothing for an empty value.
///
/// Fails only for values over [`LZ4_MAX_INPUT_SIZE`] bytes.
pub fn compress_into(value: &[u8], mode: Lz4Mode, out: &mut Vec<u8>) -> Result<(), BlockError> {
    out.clear();
    if value.is_empty() {
        return Ok(());
    }
    check_input(value)?;
    // The probe uses `out` as its scratch space: it is overwritten below.
    if matches!(mode, Lz4Mode::Adaptive(_)) && probe::is_incompressible_with(value, out) {
        literal_block_into(value, out);
        return Ok(());
    }
    search_into(value, mode, out)
}

fn check_input(value: &[u8]) -> Result<(), BlockError> {
    if value.len() > LZ4_MAX_INPUT_SIZE {
        return Err(BlockError(format!(
            "value of {} bytes exceeds LZ4's input limit of {LZ4_MAX_INPUT_SIZE} bytes",
            value.len()
        )));
    }
    Ok(())
}

/// The LZ4 search of `mode` over a non-empty `value` (no probe), its stored
/// form into `out`.
fn search_into(value: &[u8], mode: Lz4Mode, out: &mut Vec<u8>) -> Result<(), BlockError> {
    let bound = stored_bound(value)?;
    out.clear();
    out.resize(bound, 0);
    let len = search_block(value, mode, out)?;
    out.truncate(len);
    // The adaptive mode never stores more than the literal-only block: when the
    // search found too little to pay for its sequences, the literals are smaller
    // and are read in place.
    if matches!(mode, Lz4Mode::Adaptive(_)) && out.len() >= literal_block_len(value.len()) {
        literal_block_into(value, out);
    }
    Ok(())
}

/// What [`search_into`] stores, made in `scratch` (grown to the bound of the
/// largest value yet, and neither shrunk nor zeroed again between values) and
/// returned in a vector of its own size: a batch's values then hold their
/// stored bytes only, not each the bound of its value, zero-filled, fresh from
/// the allocator.
fn search_exact(value: &[u8], mode: Lz4Mode, scratch: &mut Vec<u8>) -> Result<Vec<u8>, BlockError> {
    let bound = stored_bound(value)?;
    if scratch.len() < bound {
        scratch.resize(bound, 0);
    }
    let len = search_block(value, mode, &mut scratch[..bound])?;
    if matches!(mode, Lz4Mode::Adaptive(_)) && len >= literal_block_len(value.len()) {
        let mut out = Vec::new();
        literal_block_into(value, &mut out);
        return Ok(out);
    }
    Ok(scratch[..len].to_vec())
}

/// The most a search can store for `value`: the size prefix and liblz4's bound.
fn stored_bound(value: &[u8]) -> Result<usize, BlockError> {
    let bound =
        lz4::block::compress_bound(value.len()).map_err(|e| BlockError(format!("lz4: {e}")))?;
    Ok(LZ4_SIZE_PREFIX + bound)
}

/// The size prefix and the LZ4 block of `mode`'s search over `value` into
/// `out` (of at least [`stored_bound`] bytes); returns the bytes written.
fn search_block(value: &[u8], mode: Lz4Mode, out: &mut [u8]) -> Result<usize, BlockError> {
    let search = match mode {
        Lz4Mode::High(level) | Lz4Mode::Adaptive(level) => Search::High(level),
        Lz4Mode::Fast(acceleration) => Search::Fast(acceleration),
    };
    let size = u32::try_from(value.len()).map_err(|_| {
        BlockError(format!(
            "lz4: a value of {} bytes has no size prefix",
            value.len()
        ))
    })?;
    out[..LZ4_SIZE_PREFIX].copy_from_slice(&size.to_le_bytes());
    let block = state::compress(value, &mut out[LZ4_SIZE_PREFIX..], search).ok_or_else(|| {
        BlockError(format!(
            "lz4: liblz4 did not compress a value of {} bytes",
            value.len()
        ))
    })?;
    Ok(LZ4_SIZE_PREFIX + block)
}

/// Size of the stored value [`literal_block_into`] writes for a value of `n`
/// bytes: the size prefix, the token, `(n - 15) / 255 + 1` literal-length
/// bytes when `n >= 15`, the value.
pub fn literal_block_len(n: usize) -> usize {
    let length_bytes = if n >= 15 { (n - 15) / 255 + 1 } else { 0 };
    LZ4_SIZE_PREFIX + 1 + length_bytes + n
}

/// Writes `value` as a stored value whose LZ4 block holds only literals: the size
/// prefix, one token, the literal-length bytes, the value. Valid LZ4 (a block's
/// last sequence is literals only) at 1 + 1/255 of the value's size.
pub fn literal_block_into(value: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(literal_block_len(value.len()));
    literal_header_into(value.len(), out);
    out.extend_from_slice(value);
}

/// Appends to `out` what comes before the value in its literal-only stored
/// form (what [`literal_block_into`] writes, less the value): the size prefix,
/// the token and the literal-length bytes of a value of `n` bytes.
pub fn literal_header_into(n: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
    if n < 15 {
        out.push((n as u8) << 4);
    } else {
        out.push(0xF0);
        let mut rest = n - 15;
        while rest >= 255 {
            out.push(255);
            rest -= 255;
        }
        out.push(rest as u8);
    }
}

/// Where the value's own bytes lie inside a stored value whose LZ4 block holds
/// only literals (what [`literal_block_into`] writes, and what liblz4 writes for
/// a value it cannot compress): one sequence, no match, its literals running to
/// the block's end and as long as the size prefix declares. Such a block decodes
/// to exactly those bytes, so a reader can hand them out without decoding.
/// `None` for any other stored value (compressed, empty, or malformed: decoding
/// reports the error); the empty stored value is the empty range.
pub fn literal_range(stored: &[u8]) -> Option<std::ops::Range<usize>> {
    literal_start(stored, stored.len()).map(|start| start..stored.len())
}

/// Where the value's own bytes begin in a stored value of `stored_len` bytes
/// whose first bytes are `head` (all of it, or a prefix), as
/// [`literal_range`] finds them: `Some` only for a literal-only block whose
/// token and literal-length bytes all lie within `head`, so a reader can read
/// the value's bytes alone from the rest of the file. `None` for any other
/// stored value, or when `head` ends before the literal length does (a reader
/// then reads the whole stored value and decodes it). The empty stored value
/// starts at 0.
pub fn literal_start(head: &[u8], stored_len: usize) -> Option<usize> {
    if stored_len == 0 {
        return Some(0);
    }
    let head = head.get(..stored_len.min(head.len()))?;
    let (prefix, block) = head.split_first_chunk::<LZ4_SIZE_PREFIX>()?;
    let declared = u32::from_le_bytes(*prefix) as usize;
    let (&token, mut rest) = block.split_first()?;
    // A match length in the token would mean a match follows the literals.
    if token & 0x0F != 0 {
        return None;
    }
    let mut literals = (token >> 4) as usize;
    if literals == 15 {
        loop {
            let (&byte, tail) = rest.split_first()?;
            rest = tail;
            literals = literals.checked_add(byte as usize)?;
            if byte != 255 {
                break;
            }
        }
    }
    let start = head.len() - rest.len();
    (literals == stored_len - start && literals == declared).then_some(start)
}

/// How many leading bytes of a stored value of `stored_len` bytes hold, if it
/// is a literal-only block, its size prefix, token and literal-length bytes:
/// what [`literal_start`] needs to see.
pub fn literal_header_len(stored_len: usize) -> usize {
    (LZ4_SIZE_PREFIX + 2 + stored_len / 255).min(stored_len)
}

/// The stored form of one value, as [`compress_many`] made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Encoded {
    /// The whole stored value (size prefix and LZ4 block; empty for the empty
    /// value).
    Stored(Vec<u8>),
    /// A literal-only block: these bytes ([`literal_header_into`]), then the
    /// value itself, which is not copied.
    LiteralHeader(Vec<u8>),
}

impl Encoded {
    /// The stored value as two parts, written one after the other.
    pub fn parts<'a>(&'a self, value: &'a [u8]) -> [&'a [u8]; 2] {
        match self {
            Encoded::Stored(stored) => [stored, &[]],
            Encoded::LiteralHeader(header) => [header, value],
        }
    }

    /// The stored value in one vector (copying the value of a literal block).
    pub fn into_stored(self, value: &[u8]) -> Vec<u8> {
        match self {
            Encoded::Stored(stored) => stored,
            Encoded::LiteralHeader(mut header) => {
                header.extend_from_slice(value);
                header
            }
        }
    }
}

/// Encodes every value in its stored form, the results in input order, as
/// [`compress_into`] would (the same bytes), in two steps: on the calling
/// thread, the empty values and, in the adaptive mode, the probe, whose
/// incompressible values become [`Encoded::LiteralHeader`]s (nothing copied);
/// then the LZ4 search of the rest, spread over up to `threads` threads (none
/// started for fewer than two values). A batch of incompressible values thus
/// costs a probe each and no thread. On failure returns the position of a value
/// that could not be compressed.
pub fn compress_many(
    values: &[&[u8]],
    mode: Lz4Mode,
    threads: usize,
) -> Result<Vec<Encoded>, (usize, BlockError)> {
    let mut encoded = Vec::with_capacity(values.len());
    let mut pending = Vec::new();
    let mut scratch = Vec::new();
    for (i, value) in values.iter().enumerate() {
        if value.is_empty() {
            encoded.push(Encoded::Stored(Vec::new()));
            continue;
        }
        check_input(value).map_err(|e| (i, e))?;
        if matches!(mode, Lz4Mode::Adaptive(_))
            && probe::is_incompressible_with(value, &mut scratch)
        {
            let mut header = Vec::new();
            literal_header_into(value.len(), &mut header);
            encoded.push(Encoded::LiteralHeader(header));
        } else {
            encoded.push(Encoded::Stored(Vec::new()));
            pending.push(i);
        }
    }
    let threads = threads.clamp(1, pending.len().max(1));
    if threads == 1 {
        let mut searched = Vec::new();
        for &i in &pending {
            let stored = search_exact(values[i], mode, &mut searched).map_err(|e| (i, e))?;
            encoded[i] = Encoded::Stored(stored);
        }
        return Ok(encoded);
    }
    // Threads take the next value from a shared counter, so one large value does
    // not leave the others idle.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    let mut searched = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&i) = pending.get(k) else { break };
                        let stored =
                            search_exact(values[i], mode, &mut searched).map_err(|e| (i, e))?;
                        out.push((i, stored));
                    }
                    Ok::<_, (usize, BlockError)>(out)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    for (i, stored) in done.into_iter().flatten() {
        encoded[i] = Encoded::Stored(stored);
    }
    Ok(encoded)
}

/// The uncompressed size a stored value declares, checked against what its
/// block could possibly produce, so a hostile prefix cannot cause a huge allocation.
pub fn declared_len(stored: &[u8]) -> Result<usize, BlockError> {
    declared_len_of(stored, stored.len())
}

/// [`declared_len`] of a stored value of `stored_len` bytes whose first bytes
/// are `head` (at least its size prefix): the bound on the declared size
/// depends only on the block's length.
pub fn declared_len_of(head: &[u8], stored_len: usize) -> Result<usize, BlockError> {
    if stored_len == 0 {
        return Ok(0);
    }
    let Some((prefix, _)) = head
        .get(..stored_len.min(head.len()))
        .and_then(|head| head.split_first_chunk::<LZ4_SIZE_PREFIX>())
    else {
        return Err(BlockError(format!(
            "{stored_len} bytes is too short for the {LZ4_SIZE_PREFIX}-byte size prefix"
        )));
    };
    let block_len = (stored_len - LZ4_SIZE_PREFIX) as u64;
    let declared = u32::from_le_bytes(*prefix) as u64;
    let possible =
        (block_len * LZ4_MAX_EXPANSION + LZ4_EXPANSION_SLACK).min(LZ4_MAX_INPUT_SIZE as u64);
    if declared > possible {
        return Err(BlockError(format!(
            "size prefix declares {declared} bytes, more than a {block_len}-byte LZ4 block can hold"
        )));
    }
    Ok(declared as usize)
}

/// Decompresses a stored value into `out`, which must be exactly
/// [`declared_len`] bytes long.
pub fn decompress_to_slice(stored: &[u8], out: &mut [u8]) -> Result<(), BlockError> {
    let declared = declared_len(stored)?;
    if out.len() != declared {
        return Err(BlockError(format!(
            "output of {} bytes for a value that declares {declared}",
            out.len()
        )));
    }
    if declared == 0 && stored.is_empty() {
        return Ok(());
    }
    let block = &stored[LZ4_SIZE_PREFIX..];
    // liblz4's LZ4_decompress_safe: made for untrusted input (it never reads or
    // writes outside the two buffers), and about twice as fast as lz4_flex's safe
    // decoder on small values, which dominated reading them.
    let capacity = i32::try_from(declared)
        .map_err(|_| BlockError(format!("declared size {declared} is too large")))?;
    let produced = lz4::block::decompress_to_buffer(block, Some(capacity), out)
        .map_err(|e| BlockError(format!("corrupt LZ4 block: {e}")))?;
    if produced != declared {
        return Err(BlockError(format!(
            "LZ4 block decodes to {produced} bytes but its prefix declares {declared}"
        )));
    }
    Ok(())
}

/// Decompresses a stored value into `out[..n]`, growing `out` when it is too short
/// (never shrinking it, so a reused buffer stops allocating), and returns `n`.
pub fn decompress_into(stored: &[u8], out: &mut Vec<u8>) -> Result<usize, BlockError> {
    let declared = declared_len(stored)?;
    if out.len() < declared {
        out.resize(declared, 0);
    }
    decompress_to_slice(stored, &mut out[..declared])?;
    Ok(declared)
}

/// Decompresses a stored value into a new vector.
pub fn decompress(stored: &[u8]) -> Result<Vec<u8>, BlockError> {
    let mut out = Vec::new();
    let n = decompress_into(stored, &mut out)?;
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_empty_values_empty() {
        let mut stored = Vec::new();
        compress_into(b"", Lz4Mode::default(), &mut stored).unwrap();
        assert!(stored.is_empty());
        assert_eq!(decompress(&stored).unwrap(), b"");

        let value = b"hello hello hello hello hello".repeat(40);
        for mode in [Lz4Mode::default(), Lz4Mode::High(12), Lz4Mode::Fast(1)] {
            compress_into(&value, mode, &mut stored).unwrap();
            assert_eq!(&stored[..4], &(value.len() as u32).to_le_bytes());
            assert!(stored.len() < value.len());
            assert_eq!(decompress(&stored).unwrap(), value);
        }
    }

    #[test]
    fn compress_many_keeps_input_order_with_any_thread_count() {
        let values: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; i as usize * 37]).collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let one = compress_many(&refs, Lz4Mode::default(), 1).unwrap();
        for threads in [2, 3, 8, 100] {
            assert_eq!(
                compress_many(&refs, Lz4Mode::default(), threads).unwrap(),
                one
            );
        }
        for (encoded, value) in one.into_iter().zip(&values) {
            assert_eq!(&decompress(&encoded.into_stored(value)).unwrap(), value);
        }
    }

    #[test]
    fn compress_many_stores_what_compress_into_stores_in_every_mode() {
        // Noise, text, runs, tiny and empty values, mixed.
        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(3000);
        let noise = noise(300_000);
        let values: Vec<&[u8]> = (0..60usize)
            .map(|i| match i % 5 {
                0 => &noise[i * 1000..i * 1000 + 100 * i],
                1 => &text[i..i * 900],
                2 => &noise[..i],
                3 => &[],
                _ => &text[..i * 2000],
            })
            .collect();
        for mode in [Lz4Mode::Adaptive(5), Lz4Mode::High(9), Lz4Mode::Fast(1)] {
            for threads in [1, 2, 7] {
                let encoded = compress_many(&values, mode, threads).unwrap();
                let mut literal_headers = 0;
                for (i, (encoded, value)) in encoded.into_iter().zip(&values).enumerate() {
                    let mut stored = Vec::new();
                    compress_into(value, mode, &mut stored).unwrap();
                    let [head, tail] = encoded.parts(value);
                    assert_eq!([head, tail].concat(), stored, "{mode:?}, value {i}");
                    if let Encoded::LiteralHeader(header) = &encoded {
                        assert_eq!(header.len(), literal_block_len(value.len()) - value.len());
                        literal_headers += 1;
                    }
                    assert_eq!(encoded.into_stored(value), stored);
                }
                let adaptive = matches!(mode, Lz4Mode::Adaptive(_));
                assert_eq!(literal_headers > 0, adaptive, "{mode:?}");
            }
        }
    }

    #[test]
    fn literal_range_finds_the_value_in_literal_blocks_only() {
        for n in [0usize, 1, 14, 15, 16, 269, 270, 271, 524, 525, 100_000] {
            let value: Vec<u8> = (0..n).map(|i| (i * 7919 % 251) as u8).collect();
            let mut stored = Vec::new();
            if n > 0 {
                literal_block_into(&value, &mut stored);
            }
            let range = literal_range(&stored).unwrap_or_else(|| panic!("n={n}"));
            assert_eq!(&stored[range], &value[..], "n={n}");
        }
        // A compressed block is not one; nor is a literal block cut short, one
        // with trailing bytes, or one whose prefix declares another size.
        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(50);
        let mut stored = Vec::new();
        compress_into(&text, Lz4Mode::default(), &mut stored).unwrap();
        assert_eq!(literal_range(&stored), None);
        let value = vec![7u8; 300];
        literal_block_into(&value, &mut stored);
        assert_eq!(literal_range(&stored[..stored.len() - 1]), None);
        let mut longer = stored.clone();
        longer.push(0);
        assert_eq!(literal_range(&longer), None);
        let mut other_size = stored.clone();
        other_size[..4].copy_from_slice(&301u32.to_le_bytes());
        assert_eq!(literal_range(&other_size), None);
        // Only the prefix, or a prefix and the first length byte.
        assert_eq!(literal_range(&stored[..4]), None);
        assert_eq!(literal_range(&stored[..6]), None);
    }

    proptest::proptest! {
        /// Whatever bytes a shard holds, a range `literal_range` gives is what
        /// both liblz4 and lz4_flex decode the stored value to.
        #[test]
        fn literal_range_agrees_with_the_decoders(
            value in proptest::collection::vec(proptest::num::u8::ANY, 0..700),
            cut in 0usize..8,
            flip in proptest::option::of((0usize..16, proptest::num::u8::ANY)),
        ) {
            let mut stored = Vec::new();
            literal_block_into(&value, &mut stored);
            if let Some((at, byte)) = flip {
                if at < stored.len() {
                    stored[at] = byte;
                }
            }
            stored.truncate(stored.len().saturating_sub(cut));
            if let Some(range) = literal_range(&stored) {
                let decoded = decompress(&stored).unwrap();
                proptest::prop_assert_eq!(&decoded[..], &stored[range]);
                if !stored.is_empty() {
                    proptest::prop_assert_eq!(
                        lz4_flex::block::decompress_size_prepended(&stored).unwrap(),
                        decoded
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// Read from a prefix of the stored value (what a positional reader
        /// reads first), `literal_start` agrees with `literal_range` on the
        /// whole value, finds it whenever the prefix is `literal_header_len`
        /// long, and `declared_len_of` agrees with `declared_len`.
        #[test]
        fn literal_start_of_a_prefix_agrees_with_the_whole_value(
            len in 0usize..3000,
            compressible in proptest::bool::ANY,
            cut in 0usize..8,
            flip in proptest::option::of((0usize..16, proptest::num::u8::ANY)),
            head in 0usize..40,
        ) {
            let value: Vec<u8> = if compressible {
                b"abcabcabd".iter().copied().cycle().take(len).collect()
            } else {
                noise(len)
            };
            let mut stored = Vec::new();
            if compressible {
                compress_into(&value, Lz4Mode::default(), &mut stored).unwrap();
            } else {
                literal_block_into(&value, &mut stored);
            }
            if let Some((at, byte)) = flip {
                if at < stored.len() {
                    stored[at] = byte;
                }
            }
            stored.truncate(stored.len().saturating_sub(cut));
            let whole = literal_range(&stored).map(|range| range.start);
            let needed = literal_header_len(stored.len());
            for h in [head.min(stored.len()), needed, stored.len()] {
                let start = literal_start(&stored[..h], stored.len());
                proptest::prop_assert!(start.is_none() || start == whole, "h={} {:?} {:?}", h, start, whole);
                if h >= needed {
                    proptest::prop_assert_eq!(start, whole);
                }
                if h >= LZ4_SIZE_PREFIX.min(stored.len()) {
                    proptest::prop_assert_eq!(
                        declared_len_of(&stored[..h], stored.len()),
                        declared_len(&stored)
                    );
                }
            }
        }
    }

    /// Bytes of xorshift noise: nothing for LZ4 to find.
    fn noise(n: usize) -> Vec<u8> {
        crate::test_bytes::noise(n, 0x2545F4914F6CDD1D)
    }

    #[test]
    fn adaptive_mode_stores_noise_as_literals_and_compresses_text_at_every_size() {
        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(5000);
        let (mut stored, mut literal, mut high) = (Vec::new(), Vec::new(), Vec::new());
        for n in [1usize, 14, 15, 100, 4096, 16 << 10, 100_000, 200_000] {
            let noise = noise(n);
            assert!(is_incompressible(&noise), "n={n}");
            compress_into(&noise, Lz4Mode::Adaptive(9), &mut stored).unwrap();
            literal_block_into(&noise, &mut literal);
            assert_eq!(stored, literal, "noise, n={n}");
            assert_eq!(decompress(&stored).unwrap(), noise);

            let text = &text[..n.min(text.len())];
            if n >= 100 {
                assert!(!is_incompressible(text), "n={n}");
                compress_into(text, Lz4Mode::Adaptive(9), &mut stored).unwrap();
                compress_into(text, Lz4Mode::High(9), &mut high).unwrap();
                assert_eq!(stored, high, "text, n={n}");
            }
        }
    }

    #[test]
    fn literal_block_len_is_the_written_size() {
        let mut stored = Vec::new();
        for n in [
            0usize, 1, 14, 15, 16, 269, 270, 271, 524, 525, 65_535, 65_536,
        ] {
            literal_block_into(&vec![1u8; n], &mut stored);
            assert_eq!(literal_block_len(n), stored.len(), "n={n}");
        }
    }

    #[test]
    fn literal_blocks_at_the_length_byte_boundaries_and_large_round_trip() {
        // 15 is the first length that needs length bytes, 15 + 255 = 270 the
        // first that needs two, 65_535 + the 64 KiB window of LZ4 matches, and
        // 16 MiB one larger than any probe.
        let mut stored = Vec::new();
        for n in [
            1usize,
            14,
            15,
            16,
            254,
            255,
            256,
            269,
            270,
            271,
            65_535,
            65_536,
            65_537,
            65_550,
            (1 << 20) + 3,
            16 << 20,
        ] {
            let value = noise(n);
            literal_block_into(&value, &mut stored);
            assert_eq!(literal_range(&stored), Some(stored.len() - n..stored.len()));
            assert_eq!(decompress(&stored).unwrap(), value, "liblz4, n={n}");
            assert_eq!(
                lz4_flex::block::decompress_size_prepended(&stored).unwrap(),
                value,
                "lz4_flex, n={n}"
            );
            // The adaptive mode writes the same block for it.
            let mut adaptive = Vec::new();
            compress_into(&value, Lz4Mode::Adaptive(5), &mut adaptive).unwrap();
            assert!(adaptive == stored, "adaptive, n={n}");
        }
        // The empty value is stored empty in every mode.
        compress_into(b"", Lz4Mode::Adaptive(5), &mut stored).unwrap();
        assert!(stored.is_empty());
    }

    /// Values made of pieces: noise, runs of one byte, repeats of a short
    /// phrase; so both sides of the probe's decision are drawn.
    fn pieces() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..3000),
            (any::<u8>(), 0usize..3000).prop_map(|(b, n)| vec![b; n]),
            (proptest::collection::vec(any::<u8>(), 1..40), 1usize..200)
                .prop_map(|(phrase, n)| phrase.repeat(n)),
        ];
        proptest::collection::vec(piece, 0..30).prop_map(|pieces| pieces.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// Whatever the value, the adaptive mode's stored value decodes to it
        /// with liblz4 and lz4_flex, and is never larger than its literal-only
        /// block.
        #[test]
        fn adaptive_blocks_round_trip_and_never_exceed_the_literal_bound(
            value in pieces(),
            level in 1i32..=12,
        ) {
            let mut stored = Vec::new();
            compress_into(&value, Lz4Mode::Adaptive(level), &mut stored).unwrap();
            if value.is_empty() {
                proptest::prop_assert!(stored.is_empty());
            } else {
                proptest::prop_assert!(stored.len() <= literal_block_len(value.len()));
                proptest::prop_assert_eq!(&decompress(&stored).unwrap(), &value);
                proptest::prop_assert_eq!(
                    &lz4_flex::block::decompress_size_prepended(&stored).unwrap(),
                    &value
                );
                if is_incompressible(&value) {
                    proptest::prop_assert_eq!(
                        literal_range(&stored),
                        Some(stored.len() - value.len()..stored.len())
                    );
                }
            }
        }
    }

    #[test]
    fn hostile_size_prefix_is_rejected_before_allocating() {
        let mut stored = u32::MAX.to_le_bytes().to_vec();
        stored.extend_from_slice(&[0x10, b'x']);
        let err = declared_len(&stored).unwrap_err();
        assert!(
            err.0.contains("more than a 2-byte LZ4 block can hold"),
            "{err:?}"
        );
    }

    #[test]
    fn wrong_declared_size_is_an_error() {
        let mut stored = Vec::new();
        compress_into(&[7u8; 100], Lz4Mode::default(), &mut stored).unwrap();
        stored[..4].copy_from_slice(&99u32.to_le_bytes());
        assert!(decompress(&stored).is_err());
        stored[..4].copy_from_slice(&101u32.to_le_bytes());
        assert!(decompress(&stored).is_err());
        assert!(decompress(&[1, 0]).is_err());
    }
}
