//! Values of `"compression": "lz4"` datasets: an LZ4 block (not a frame) behind a
//! 4-byte little-endian uncompressed size, as python-lz4's
//! `block.compress(value, mode="high_compression", store_size=True)` makes them.
//! Empty values are stored empty, with no block.

use crate::format::{
    DEFAULT_LZ4_HC_LEVEL, LZ4_EXPANSION_SLACK, LZ4_MAX_EXPANSION, LZ4_MAX_INPUT_SIZE,
    LZ4_SIZE_PREFIX,
};

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
    /// incompressible (JPEG, PNG, audio, video, already-compressed data): those are
    /// stored as literal-only LZ4 blocks, which every decoder reads, without paying
    /// for the high-compression search. The probe compresses up to four 8 KiB
    /// windows in fast mode; see [`is_incompressible`].
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
    if value.len() > LZ4_MAX_INPUT_SIZE {
        return Err(BlockError(format!(
            "value of {} bytes exceeds LZ4's input limit of {LZ4_MAX_INPUT_SIZE} bytes",
            value.len()
        )));
    }
    let mode = match mode {
        Lz4Mode::Adaptive(_) if is_incompressible(value) => {
            literal_block_into(value, out);
            return Ok(());
        }
        Lz4Mode::High(level) | Lz4Mode::Adaptive(level) => {
            lz4::block::CompressionMode::HIGHCOMPRESSION(level)
        }
        Lz4Mode::Fast(acceleration) => lz4::block::CompressionMode::FAST(acceleration),
    };
    let bound =
        lz4::block::compress_bound(value.len()).map_err(|e| BlockError(format!("lz4: {e}")))?;
    out.resize(LZ4_SIZE_PREFIX + bound, 0);
    let written = lz4::block::compress_to_buffer(value, Some(mode), true, out)
        .map_err(|e| BlockError(format!("lz4: {e}")))?;
    out.truncate(written);
    Ok(())
}

/// Values shorter than this are always compressed: the probe would not pay off.
const PROBE_MIN_LEN: usize = 16 << 10;
/// Size of each probed window.
const PROBE_WINDOW: usize = 8 << 10;
/// A probe that saves less than this fraction (1/32, about 3%) means incompressible.
const PROBE_MIN_SAVING_SHIFT: u32 = 5;

/// Whether `value` looks incompressible: up to four 8 KiB windows spread over it
/// (start, end and two between) compress in liblz4's fast mode to more than
/// 31/32 of their size. Short values (< 16 KiB) are never called incompressible.
pub fn is_incompressible(value: &[u8]) -> bool {
    if value.len() < PROBE_MIN_LEN {
        return false;
    }
    let last_start = value.len() - PROBE_WINDOW;
    let mut probed = 0usize;
    let mut compressed = 0usize;
    let mut buffer =
        vec![0u8; lz4::block::compress_bound(PROBE_WINDOW).unwrap_or(2 * PROBE_WINDOW)];
    for k in 0..4 {
        let start = last_start * k / 3;
        let window = &value[start..start + PROBE_WINDOW];
        match lz4::block::compress_to_buffer(
            window,
            Some(lz4::block::CompressionMode::FAST(1)),
            false,
            &mut buffer,
        ) {
            Ok(n) => compressed += n,
            Err(_) => return false,
        }
        probed += PROBE_WINDOW;
    }
    compressed > probed - (probed >> PROBE_MIN_SAVING_SHIFT)
}

/// Writes `value` as a stored value whose LZ4 block holds only literals: the size
/// prefix, one token, the literal-length bytes, the value. Valid LZ4 (a block's
/// last sequence is literals only) at 1 + 1/255 of the value's size.
pub fn literal_block_into(value: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(LZ4_SIZE_PREFIX + 2 + value.len() / 255 + value.len());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    let n = value.len();
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
    out.extend_from_slice(value);
}

/// Where the value's own bytes lie inside a stored value whose LZ4 block holds
/// only literals (what [`literal_block_into`] writes, and what liblz4 writes for
/// a value it cannot compress): one sequence, no match, its literals running to
/// the block's end and as long as the size prefix declares. Such a block decodes
/// to exactly those bytes, so a reader can hand them out without decoding.
/// `None` for any other stored value (compressed, empty, or malformed: decoding
/// reports the error); the empty stored value is the empty range.
pub fn literal_range(stored: &[u8]) -> Option<std::ops::Range<usize>> {
    if stored.is_empty() {
        return Some(0..0);
    }
    let (prefix, block) = stored.split_first_chunk::<LZ4_SIZE_PREFIX>()?;
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
    (literals == rest.len() && literals == declared).then(|| stored.len() - literals..stored.len())
}

/// Compresses every value into its stored form, spreading the work over up to
/// `threads` threads; the results are in input order. On failure returns the
/// position of a value that could not be compressed.
pub fn compress_many(
    values: &[&[u8]],
    mode: Lz4Mode,
    threads: usize,
) -> Result<Vec<Vec<u8>>, (usize, BlockError)> {
    let threads = threads.clamp(1, values.len().max(1));
    if threads == 1 {
        return values
            .iter()
            .enumerate()
            .map(|(i, value)| {
                let mut stored = Vec::new();
                compress_into(value, mode, &mut stored).map_err(|e| (i, e))?;
                Ok(stored)
            })
            .collect();
    }
    // Threads take the next value from a shared counter, so one large value does
    // not leave the others idle.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Vec<u8>> = vec![Vec::new(); values.len()];
    let done = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(value) = values.get(i) else { break };
                        let mut stored = Vec::new();
                        compress_into(value, mode, &mut stored).map_err(|e| (i, e))?;
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
        results[i] = stored;
    }
    Ok(results)
}

/// The uncompressed size a stored value declares, checked against what its
/// block could possibly produce, so a hostile prefix cannot cause a huge allocation.
pub fn declared_len(stored: &[u8]) -> Result<usize, BlockError> {
    if stored.is_empty() {
        return Ok(0);
    }
    let Some((prefix, block)) = stored.split_first_chunk::<LZ4_SIZE_PREFIX>() else {
        return Err(BlockError(format!(
            "{} bytes is too short for the {LZ4_SIZE_PREFIX}-byte size prefix",
            stored.len()
        )));
    };
    let declared = u32::from_le_bytes(*prefix) as u64;
    let possible = (block.len() as u64 * LZ4_MAX_EXPANSION + LZ4_EXPANSION_SLACK)
        .min(LZ4_MAX_INPUT_SIZE as u64);
    if declared > possible {
        return Err(BlockError(format!(
            "size prefix declares {declared} bytes, more than a {}-byte LZ4 block can hold",
            block.len()
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
        for (stored, value) in one.iter().zip(&values) {
            assert_eq!(&decompress(stored).unwrap(), value);
        }
    }

    #[test]
    fn literal_blocks_decode_with_lz4_flex_and_liblz4() {
        for n in [1usize, 14, 15, 16, 269, 270, 271, 524, 525, 100_000] {
            let value: Vec<u8> = (0..n).map(|i| (i * 7919 % 251) as u8).collect();
            let mut stored = Vec::new();
            literal_block_into(&value, &mut stored);
            assert_eq!(decompress(&stored).unwrap(), value, "liblz4, n={n}");
            // An independent decoder agrees.
            assert_eq!(
                lz4_flex::block::decompress_size_prepended(&stored).unwrap(),
                value,
                "lz4_flex, n={n}"
            );
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

    #[test]
    fn adaptive_mode_stores_noise_as_literals_and_compresses_text() {
        let mut state = 0x2545F4914F6CDD1Du64;
        let noise: Vec<u8> = (0..200_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        assert!(is_incompressible(&noise));
        let mut stored = Vec::new();
        compress_into(&noise, Lz4Mode::Adaptive(9), &mut stored).unwrap();
        let mut literal = Vec::new();
        literal_block_into(&noise, &mut literal);
        assert_eq!(stored, literal);
        assert_eq!(decompress(&stored).unwrap(), noise);

        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(5000);
        assert!(!is_incompressible(&text));
        let mut high = Vec::new();
        compress_into(&text, Lz4Mode::Adaptive(9), &mut stored).unwrap();
        compress_into(&text, Lz4Mode::High(9), &mut high).unwrap();
        assert_eq!(stored, high);
        assert!(
            !is_incompressible(&noise[..PROBE_MIN_LEN - 1]),
            "short values are always compressed"
        );
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
