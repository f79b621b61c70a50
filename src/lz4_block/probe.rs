//! Whether a value is worth compressing: the probe of [`Lz4Mode::Adaptive`]
//! (`super::Lz4Mode`), which stores the values it finds incompressible as
//! literal-only blocks instead of running the high-compression search over
//! them (JPEG, PNG, audio, video, already-compressed data, random token ids).
//!
//! The probe compresses with liblz4's fast mode, which on data it cannot
//! compress gives up quickly (it skips ahead further after each miss), so
//! looking costs a small fraction of the search it saves. It decides by what
//! LZ4 itself finds, not by a statistic of the bytes: a value LZ4 can shorten
//! by 1/32 or more in fast mode is compressed, whatever its byte histogram.
//!
//! Steps, each on the value alone (the decision does not depend on other
//! values, threads or batches, so the output does not either):
//! 1. a *glance* at [`GLANCE`] bytes from the middle of a value at least twice
//!    that long: saving 1/8 or more there settles it as compressible, so text,
//!    tables and other clearly compressible values pay only for the glance;
//! 2. otherwise the *probe*: the whole value when it is at most
//!    [`PROBE_WHOLE_MAX`] bytes, else [`PROBE_WINDOWS`] windows of
//!    [`PROBE_WINDOW`] bytes spread over it (start, end and between); the value
//!    is incompressible when they save less than 1/32 of their size.
//!
//! What a wrong call costs is bounded: a value called incompressible saved less
//! than 1/32 in the probed bytes under fast mode, so storing it literally costs
//! at most that, plus whatever more the high-compression search would have
//! found (measured on the corpora of BENCHMARKS.md's "Migrations" section).

/// Bytes glanced at first, from the middle of the value.
pub const GLANCE: usize = 1 << 10;
/// A glance that saves at least 1/2^3 = 1/8 of its bytes settles the value as
/// compressible.
const GLANCE_SAVING_SHIFT: u32 = 3;
/// Values up to this size are probed whole.
pub const PROBE_WHOLE_MAX: usize = 32 << 10;
/// Size of each probed window of a longer value.
pub const PROBE_WINDOW: usize = 8 << 10;
/// Number of windows probed in a longer value.
pub const PROBE_WINDOWS: usize = 4;
/// A probe that saves less than 1/2^5 = 1/32 (about 3%) of its bytes means
/// incompressible.
const PROBE_MIN_SAVING_SHIFT: u32 = 5;

/// The scratch buffer [`is_incompressible_with`] needs for a value of `n`
/// bytes: the bound of what liblz4 writes for the most it compresses at once.
fn scratch_len(n: usize) -> usize {
    let most = n.min(PROBE_WHOLE_MAX);
    // LZ4_compressBound(n) = n + n/255 + 16.
    most + most / 255 + 16
}

/// Bytes `window` takes in liblz4's fast mode (acceleration 1), or `None` if
/// liblz4 refused (never for windows this small and a buffer this large).
fn fast_len(window: &[u8], scratch: &mut [u8]) -> Option<usize> {
    super::state::compress(window, scratch, super::state::Search::Fast(1))
}

/// Whether `value` looks incompressible to LZ4 (see the module's steps).
pub fn is_incompressible(value: &[u8]) -> bool {
    is_incompressible_with(value, &mut Vec::new())
}

/// [`is_incompressible`] with a caller's buffer as scratch (its contents are
/// overwritten), so the encoder probes without allocating.
pub fn is_incompressible_with(value: &[u8], scratch: &mut Vec<u8>) -> bool {
    let n = value.len();
    if scratch.len() < scratch_len(n) {
        scratch.resize(scratch_len(n), 0);
    }
    if n >= 2 * GLANCE {
        let start = (n - GLANCE) / 2;
        match fast_len(&value[start..start + GLANCE], scratch) {
            Some(len) if len <= GLANCE - (GLANCE >> GLANCE_SAVING_SHIFT) => return false,
            Some(_) => {}
            None => return false,
        }
    }
    let (probed, compressed) = if n <= PROBE_WHOLE_MAX {
        match fast_len(value, scratch) {
            Some(len) => (n, len),
            None => return false,
        }
    } else {
        let last_start = n - PROBE_WINDOW;
        let mut compressed = 0;
        for k in 0..PROBE_WINDOWS {
            let start = last_start * k / (PROBE_WINDOWS - 1);
            match fast_len(&value[start..start + PROBE_WINDOW], scratch) {
                Some(len) => compressed += len,
                None => return false,
            }
        }
        (PROBE_WINDOWS * PROBE_WINDOW, compressed)
    };
    compressed > probed - (probed >> PROBE_MIN_SAVING_SHIFT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of xorshift noise: nothing for LZ4 to find.
    fn noise(n: usize, seed: u64) -> Vec<u8> {
        crate::test_bytes::noise(n, seed | 1)
    }

    /// `n` uint16 token ids, uniform in GPT-2's vocabulary, as little-endian
    /// bytes: what a Megatron `.bin` of random tokens holds.
    fn random_tokens(n: usize, seed: u64) -> Vec<u8> {
        noise(2 * n, seed)
            .chunks_exact(2)
            .flat_map(|pair| (u16::from_le_bytes([pair[0], pair[1]]) % 50257).to_le_bytes())
            .collect()
    }

    #[test]
    fn noise_and_random_tokens_are_incompressible_at_every_size() {
        for n in [0usize, 1, 12, 13, 100, 1000, 2047, 2048, 5000, 32 << 10] {
            assert!(is_incompressible(&noise(n, n as u64)), "noise, n={n}");
        }
        for n in [(32 << 10) + 1, 100_000, 1 << 20] {
            assert!(is_incompressible(&noise(n, n as u64)), "noise, n={n}");
        }
        for tokens in [64usize, 1000, 4096, 100_000] {
            assert!(
                is_incompressible(&random_tokens(tokens, 7)),
                "tokens={tokens}"
            );
        }
    }

    #[test]
    fn text_and_repetitive_values_are_compressible_at_every_size() {
        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(5000);
        for n in [100usize, 1000, 2048, 5000, 40_000, text.len()] {
            assert!(!is_incompressible(&text[..n]), "text, n={n}");
        }
        assert!(!is_incompressible(&vec![0u8; 300]));
        // Tokens that repeat (a real token stream has repeated n-grams).
        let phrase = random_tokens(40, 3);
        assert!(!is_incompressible(&phrase.repeat(50)));
    }

    #[test]
    fn a_compressible_part_anywhere_in_a_whole_probed_value_is_seen() {
        // The glance at the middle sees noise; the whole probe sees the text
        // that makes up half of the value, which saves far more than 1/32.
        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(200);
        let mut value = text[..8000].to_vec();
        value.extend(noise(8000, 5));
        assert!(!is_incompressible(&value));
        let mut value = noise(8000, 5);
        value.extend_from_slice(&text[..8000]);
        assert!(!is_incompressible(&value));
    }

    #[test]
    fn the_glance_and_the_windows_stay_inside_the_value() {
        // Every boundary of the steps: no slice out of range, a decision each.
        for n in [
            2 * GLANCE - 1,
            2 * GLANCE,
            PROBE_WHOLE_MAX,
            PROBE_WHOLE_MAX + 1,
            PROBE_WINDOW * PROBE_WINDOWS + 1,
        ] {
            let mut scratch = Vec::new();
            assert!(is_incompressible_with(&noise(n, 9), &mut scratch), "n={n}");
            assert!(scratch.len() >= scratch_len(n));
        }
    }
}
