//! Bytes for the unit tests.

/// `n` bytes of xorshift noise from the state `seed` (not zero): nothing for
/// LZ4 to find.
pub(crate) fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}
