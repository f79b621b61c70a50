//! The random numbers every order is made of, specified exactly so that the same
//! `(seed, epoch)` gives the same order in every process, on every machine and in
//! every version of this crate.
//!
//! - **Streams.** Each independent job (the bucket choices of one chunk of a
//!   shuffle, the Fisher–Yates of one bucket, the keys of one chunk of a weighted
//!   sample, ...) draws from its own generator, keyed by four integers: the seed,
//!   the epoch, a [`Purpose`] and an index (the chunk, bucket or block number):
//!
//!   ```text
//!   key = mix(mix(mix(mix(seed) ^ epoch) ^ purpose) ^ index)
//!   ```
//!
//!   where `mix(z)` is the output of SplitMix64 seeded with `z`
//!   ([`mix64`]). Jobs can therefore run on any number of threads, in any order,
//!   and give the same numbers.
//! - **Generator.** xoshiro256** (Blackman and Vigna, 2018), its four state words
//!   the first four outputs of SplitMix64 seeded with the key ([`Xoshiro256`]).
//!   SplitMix64's outputs are a bijection of its counter, so four consecutive ones
//!   are never all zero.
//! - **Bounded integers.** Lemire's multiply-and-reject method ("Fast random
//!   integer generation in an interval", 2019), which is exactly uniform:
//!   [`Xoshiro256::below`].
//! - **Reals.** `((x >> 11) + 0.5) / 2^53`: the 53 high bits, centred, so never
//!   0 or 1 ([`Xoshiro256::open01`]).
//!
//! Everything is integer arithmetic except [`ln`], which uses only IEEE-754
//! basic operations (correctly rounded on every conforming machine; Rust never
//! fuses them into FMA on its own) instead of the platform's `log`, whose last
//! bit may differ between C libraries.

/// The increment of SplitMix64 (2^64 / golden ratio).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 output function (Steele, Lea and Flood, 2014).
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The first output of SplitMix64 seeded with `z`: a bijective mix of 64 bits.
pub fn mix64(z: u64) -> u64 {
    finalize(z.wrapping_add(GOLDEN))
}

/// What a stream of random numbers is used for: part of its key, so that two
/// jobs never share numbers. The values are part of the specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Purpose {
    /// The bucket of each record of one chunk of a record shuffle.
    RecordBuckets = 1,
    /// The Fisher–Yates shuffle of one bucket of a record shuffle.
    RecordBucketShuffle = 2,
    /// The bucket of each block of one chunk of a block shuffle's block order.
    BlockBuckets = 3,
    /// The Fisher–Yates shuffle of one bucket of a block order.
    BlockBucketShuffle = 4,
    /// The Fisher–Yates shuffle of the records inside one block.
    WithinBlock = 5,
    /// The weighted-sampling key of each record of one chunk.
    WeightKeys = 6,
    /// Which classes get one record more in an equal-per-class allocation.
    AllocationRemainder = 7,
    /// The seed of a mixture's source (the index is the source): the seed of
    /// its passes, each pass's number the epoch.
    MixSource = 8,
    /// The crop box and flip of one record's image (its index is the record's):
    /// `bcd-images`' random crops.
    ImageCrop = 9,
    /// The offset of one record's clip (its index is the record's):
    /// `bcd-images`' random audio crops.
    AudioCrop = 10,
}

/// The key of the stream for `(seed, epoch, purpose, index)`.
pub fn stream_key(seed: u64, epoch: u64, purpose: Purpose, index: u64) -> u64 {
    mix64(mix64(mix64(mix64(seed) ^ epoch) ^ purpose as u64) ^ index)
}

/// xoshiro256** with the seeding described in the module documentation.
#[derive(Clone, Debug)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    /// The generator whose state is the first four outputs of SplitMix64 seeded
    /// with `key`.
    pub fn from_key(key: u64) -> Xoshiro256 {
        let mut state = key;
        let mut next = || {
            state = state.wrapping_add(GOLDEN);
            finalize(state)
        };
        Xoshiro256 {
            s: [next(), next(), next(), next()],
        }
    }

    /// The generator of stream `(seed, epoch, purpose, index)`.
    pub fn stream(seed: u64, epoch: u64, purpose: Purpose, index: u64) -> Xoshiro256 {
        Xoshiro256::from_key(stream_key(seed, epoch, purpose, index))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform integer in `0..bound` (`bound` > 0), by Lemire's method: the high
    /// word of `x * bound`, drawing again while the low word falls in the
    /// `2^64 mod bound` values that would bias it.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        let mut product = u128::from(self.next_u64()) * u128::from(bound);
        let mut low = product as u64;
        if low < bound {
            let threshold = bound.wrapping_neg() % bound;
            while low < threshold {
                product = u128::from(self.next_u64()) * u128::from(bound);
                low = product as u64;
            }
        }
        (product >> 64) as u64
    }

    /// A uniform real in the open interval (0, 1): `((x >> 11) + 0.5) / 2^53`.
    #[inline]
    pub fn open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// Shuffles `items` in place: Durstenfeld's Fisher–Yates, `i` from the last
    /// position down to 1 swapping with `below(i + 1)`.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// The natural logarithm of a positive, finite, normal `x`, computed with IEEE
/// basic operations only, so every machine gets the same bits: `x = m 2^e` with
/// `m` in `[sqrt(1/2), sqrt(2))`, and `ln m = 2 atanh(z)` with `z = (m-1)/(m+1)`
/// summed to the `z^23` term (`|z| < 0.172`: the first term left out is below
/// `2^-58` of the result). Accurate to a few units in the last place.
pub fn ln(x: f64) -> f64 {
    debug_assert!(x.is_finite() && x > 0.0 && x.is_normal());
    const LN_2: f64 = std::f64::consts::LN_2;
    const SQRT_2: f64 = std::f64::consts::SQRT_2;
    let bits = x.to_bits();
    let mut exponent = ((bits >> 52) & 0x7FF) as i64 - 1023;
    // The mantissa with the exponent of 1.0: in [1, 2).
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m >= SQRT_2 {
        m *= 0.5;
        exponent += 1;
    }
    let z = (m - 1.0) / (m + 1.0);
    let z2 = z * z;
    // Horner's rule over the odd powers: z (1 + z^2/3 + z^4/5 + ... + z^22/23).
    let mut sum = 1.0 / 23.0;
    let mut k = 21.0;
    while k >= 1.0 {
        sum = sum * z2 + 1.0 / k;
        k -= 2.0;
    }
    2.0 * z * sum + exponent as f64 * LN_2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_published_reference_values() {
        // The first outputs of SplitMix64 seeded with 1234567 (Vigna's splitmix64.c).
        let mut state = 1234567u64;
        let mut next = || {
            state = state.wrapping_add(GOLDEN);
            finalize(state)
        };
        assert_eq!(
            [next(), next(), next()],
            [
                6457827717110365317,
                3203168211198807973,
                9817491932198370423
            ]
        );
    }

    #[test]
    fn xoshiro256starstar_matches_the_reference_implementation() {
        // xoshiro256** with state [1, 2, 3, 4] (the first outputs of Vigna's
        // xoshiro256starstar.c from that state).
        let mut rng = Xoshiro256 { s: [1, 2, 3, 4] };
        let got: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
        assert_eq!(got, [11520, 0, 1509978240, 1215971899390074240]);
    }

    #[test]
    fn below_is_exactly_uniform_on_a_small_bound() {
        // Over many draws every value of 0..6 appears about equally often, and none
        // outside it.
        let mut rng = Xoshiro256::stream(7, 0, Purpose::RecordBuckets, 0);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[rng.below(6) as usize] += 1;
        }
        for count in counts {
            // 10,000 expected, standard deviation ~91: 5 sigma.
            assert!((9_545..=10_455).contains(&count), "{counts:?}");
        }
    }

    #[test]
    fn below_handles_the_extreme_bounds() {
        let mut rng = Xoshiro256::stream(1, 2, Purpose::WeightKeys, 3);
        for _ in 0..1000 {
            assert_eq!(rng.below(1), 0);
            assert!(rng.below(u64::MAX) < u64::MAX);
            assert!(rng.below((1 << 63) + 1) <= 1 << 63);
        }
    }

    #[test]
    fn open01_never_returns_zero_or_one() {
        let mut rng = Xoshiro256 { s: [0, 0, 0, 1] };
        for _ in 0..10_000 {
            let u = rng.open01();
            assert!(u > 0.0 && u < 1.0);
        }
    }

    #[test]
    fn ln_agrees_with_the_platform_logarithm() {
        let mut rng = Xoshiro256::stream(3, 3, Purpose::WeightKeys, 3);
        for _ in 0..100_000 {
            let x = rng.open01();
            let (ours, platform) = (ln(x), x.ln());
            assert!(
                (ours - platform).abs() <= 4.0 * f64::EPSILON * platform.abs().max(1.0),
                "ln({x}) = {ours}, platform {platform}"
            );
        }
        for x in [
            1.0,
            2.0,
            0.5,
            1e-300,
            1e300,
            std::f64::consts::E,
            1.0 - 1e-16,
        ] {
            assert!((ln(x) - x.ln()).abs() <= 4.0 * f64::EPSILON * x.ln().abs().max(1.0));
        }
    }

    #[test]
    fn streams_with_different_keys_differ() {
        let a = Xoshiro256::stream(0, 0, Purpose::RecordBuckets, 0).next_u64();
        let b = Xoshiro256::stream(0, 1, Purpose::RecordBuckets, 0).next_u64();
        let c = Xoshiro256::stream(0, 0, Purpose::RecordBucketShuffle, 0).next_u64();
        let d = Xoshiro256::stream(0, 0, Purpose::RecordBuckets, 1).next_u64();
        let e = Xoshiro256::stream(1, 0, Purpose::RecordBuckets, 0).next_u64();
        let all = [a, b, c, d, e];
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                assert_ne!(all[i], all[j]);
            }
        }
    }
}
