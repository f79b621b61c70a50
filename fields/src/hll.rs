//! HyperLogLog with 2^14 registers: the distinct-value estimate of a column's
//! statistics, mergeable across shards (FORMAT.md, "Fields": statistics).

use base64::Engine as _;

/// Index bits: 2^14 = 16384 registers, a standard error of 1.04 / 128 = 0.81%.
pub const HLL_PRECISION: u32 = 14;
/// The number of registers (one byte each in the statistics).
pub const HLL_REGISTERS: usize = 1 << HLL_PRECISION;
/// The largest register value: 64 - 14 hash bits left, plus one.
const MAX_RANK: u8 = (64 - HLL_PRECISION + 1) as u8;

/// A HyperLogLog sketch over 64-bit hashes (xxh3-64 of a value's canonical
/// encoding): register `h >> 50` (the top 14 bits) keeps the largest rank seen,
/// the rank being the number of leading zeros of the other 50 bits
/// (`h << 14`), plus one (51 when they are all zero).
#[derive(Clone, PartialEq, Eq)]
pub struct HyperLogLog {
    registers: Box<[u8; HLL_REGISTERS]>,
}

impl std::fmt::Debug for HyperLogLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HyperLogLog(~{})", self.estimate())
    }
}

impl Default for HyperLogLog {
    fn default() -> Self {
        HyperLogLog::new()
    }
}

impl HyperLogLog {
    /// An empty sketch.
    pub fn new() -> HyperLogLog {
        HyperLogLog {
            registers: Box::new([0; HLL_REGISTERS]),
        }
    }

    /// Adds a value by its 64-bit hash.
    #[inline]
    pub fn add_hash(&mut self, hash: u64) {
        let index = (hash >> (64 - HLL_PRECISION)) as usize;
        let rest = hash << HLL_PRECISION;
        // Without branches (a hash's register and rank are random): 50 bits
        // all zero have 64 leading zeros, ranked MAX_RANK.
        let rank = (rest.leading_zeros() as u8 + 1).min(MAX_RANK);
        let r = &mut self.registers[index];
        *r = (*r).max(rank);
    }

    /// The sketch of the union of both sketches' values (register-wise max).
    pub fn merge(&mut self, other: &HyperLogLog) {
        for (a, b) in self.registers.iter_mut().zip(other.registers.iter()) {
            *a = (*a).max(*b);
        }
    }

    /// The estimated number of distinct values: the standard estimator
    /// `alpha m^2 / sum(2^-register)` with `alpha = 0.7213 / (1 + 1.079 / m)`,
    /// or, when that is at most `2.5 m` and some registers are zero, linear
    /// counting `m ln(m / zeros)`. Rounded to the nearest integer.
    pub fn estimate(&self) -> u64 {
        let m = HLL_REGISTERS as f64;
        let mut sum = 0.0f64;
        let mut zeros = 0usize;
        for &r in self.registers.iter() {
            sum += f64::from(-(i32::from(r))).exp2();
            zeros += usize::from(r == 0);
        }
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let raw = alpha * m * m / sum;
        let e = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        e.round() as u64
    }

    /// The registers as base64 (standard alphabet, padded): 16384 bytes, one
    /// per register, in index order.
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.registers[..])
    }

    /// Reads [`HyperLogLog::to_base64`]'s text: exactly 16384 bytes, each at
    /// most 51. The error says what is wrong.
    pub fn from_base64(text: &str) -> Result<HyperLogLog, String> {
        // 16384 bytes are 21848 base64 characters; refuse longer text unread.
        if text.len() > HLL_REGISTERS.div_ceil(3) * 4 {
            return Err(format!(
                "is {} characters, not the base64 of {HLL_REGISTERS} bytes",
                text.len()
            ));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("is not base64: {e}"))?;
        let registers: Box<[u8; HLL_REGISTERS]> = bytes
            .into_boxed_slice()
            .try_into()
            .map_err(|b: Box<[u8]>| format!("has {} registers, not {HLL_REGISTERS}", b.len()))?;
        if let Some(r) = registers.iter().find(|&&r| r > MAX_RANK) {
            return Err(format!("has a register of {r}, above {MAX_RANK}"));
        }
        Ok(HyperLogLog { registers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xxhash_rust::xxh3::xxh3_64_with_seed;

    fn sketch(values: std::ops::Range<u64>) -> HyperLogLog {
        let mut h = HyperLogLog::new();
        for v in values {
            h.add_hash(xxh3_64_with_seed(&i128::from(v).to_le_bytes(), 1));
        }
        h
    }

    fn relative_error(h: &HyperLogLog, n: u64) -> f64 {
        (h.estimate() as f64 - n as f64).abs() / n as f64
    }

    #[test]
    fn estimates_within_two_percent_from_a_thousand_to_a_million() {
        // Three disjoint value sets per size, so the bound is not one lucky draw.
        for (n, start) in [1_000u64, 10_000, 100_000, 1_000_000]
            .into_iter()
            .flat_map(|n| [(n, 0), (n, 1 << 40), (n, 7 << 50)])
        {
            let h = sketch(start..start + n);
            let err = relative_error(&h, n);
            eprintln!(
                "{n} distinct: estimate {} ({:+.3}%)",
                h.estimate(),
                (h.estimate() as f64 / n as f64 - 1.0) * 100.0
            );
            assert!(
                err < 0.02,
                "{n} distinct values estimated {} ({:.2}% off)",
                h.estimate(),
                err * 100.0
            );
        }
    }

    #[test]
    fn merged_shards_estimate_their_union() {
        for n in [1_000u64, 10_000, 100_000, 1_000_000] {
            // Four shards with overlapping values: the union is 0..n.
            let quarter = n / 4;
            let mut merged = HyperLogLog::new();
            for s in 0..4 {
                merged.merge(&sketch(
                    (s * quarter).saturating_sub(quarter / 2)..((s + 1) * quarter).min(n),
                ));
            }
            assert_eq!(merged, sketch(0..n), "merging is the sketch of the union");
            assert!(relative_error(&merged, n) < 0.02);
        }
    }

    #[test]
    fn a_register_keeps_the_largest_rank_of_its_hashes() {
        let mut h = HyperLogLog::new();
        // Register 5: the 50 low bits' leading zeros plus one, ranks 1, 50
        // and 10 (smaller: 50 is kept).
        h.add_hash((5 << 50) | (1 << 49));
        h.add_hash((5 << 50) | 1);
        h.add_hash((5 << 50) | (1 << 40));
        // Register 16383: all 50 low bits zero, the largest rank.
        h.add_hash(u64::MAX << 50);
        // Register 0: rank 2 then 1.
        h.add_hash(1 << 48);
        h.add_hash(1 << 49);
        let mut want = [0u8; HLL_REGISTERS];
        want[5] = 50;
        want[HLL_REGISTERS - 1] = MAX_RANK;
        want[0] = 2;
        assert_eq!(&h.registers[..], &want[..]);
    }

    #[test]
    fn repeated_values_count_once() {
        let mut h = HyperLogLog::new();
        for _ in 0..10 {
            for v in 0..500u64 {
                h.add_hash(xxh3_64_with_seed(&v.to_le_bytes(), 0));
            }
        }
        let once = sketch(0..500);
        let mut twice = once.clone();
        twice.merge(&once);
        assert_eq!(twice, once);
        assert!((495..=505).contains(&h.estimate()), "{}", h.estimate());
        assert_eq!(HyperLogLog::new().estimate(), 0);
    }

    #[test]
    fn the_base64_round_trips_and_refuses_damage() {
        let h = sketch(0..5000);
        let text = h.to_base64();
        assert_eq!(text.len(), 21848);
        assert_eq!(HyperLogLog::from_base64(&text).unwrap(), h);
        assert!(HyperLogLog::from_base64(&text[..text.len() - 4]).is_err());
        assert!(HyperLogLog::from_base64(&format!("{text}AAAA")).is_err());
        let mut bytes = vec![0u8; HLL_REGISTERS];
        bytes[7] = 52;
        let bad = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert_eq!(
            HyperLogLog::from_base64(&bad).unwrap_err(),
            "has a register of 52, above 51"
        );
        // The all-zero hash has the largest rank.
        let mut h = HyperLogLog::new();
        h.add_hash(0);
        assert_eq!(h.registers[0], 51);
    }
}
