//! liblz4's compressors with a state kept per thread and reset the fast way.
//!
//! `LZ4_compress_HC` (what `lz4::block::compress_to_buffer` calls for the
//! high-compression modes) zeroes a fresh state of about 256 KiB, its hash and
//! chain tables, for every value; `LZ4_compress_fast` zeroes 16 KiB. For small
//! values that clearing is most of an ingest's CPU (profiled: 56-75% of a JSON
//! Lines ingest of 44-byte values went to `memset` under `LZ4_compress_HC`).
//! liblz4's `*_fastReset` entry points reuse a state instead: each value is
//! placed 64 KiB past the last one in the state's index space, so the entries
//! left by earlier values are out of reach of the match finder, and the tables
//! are cleared only when that space runs out (every 1 GiB of input). The
//! blocks are the same bytes the clearing functions write (tested below,
//! against `lz4::block`, value after value on one thread).
//!
//! The functions are part of liblz4's static-linking API (`lz4.h`, `lz4hc.h`
//! under `LZ4_STATIC_LINKING_ONLY`), compiled into the liblz4 that `lz4-sys`
//! builds and links; `lz4-sys` does not declare them, so they are declared here.

use std::cell::RefCell;
use std::os::raw::{c_char, c_int, c_void};

// Links the liblz4 that defines the functions below.
use lz4_sys as _;

extern "C" {
    fn LZ4_sizeofStateHC() -> c_int;
    fn LZ4_initStreamHC(buffer: *mut c_void, size: usize) -> *mut c_void;
    fn LZ4_compress_HC_extStateHC_fastReset(
        state: *mut c_void,
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        dst_capacity: c_int,
        level: c_int,
    ) -> c_int;
    fn LZ4_sizeofState() -> c_int;
    fn LZ4_initStream(buffer: *mut c_void, size: usize) -> *mut c_void;
    fn LZ4_compress_fast_extState_fastReset(
        state: *mut c_void,
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        dst_capacity: c_int,
        acceleration: c_int,
    ) -> c_int;
}

/// A liblz4 state: 8-byte aligned memory (what both state types require)
/// initialised once by liblz4.
struct State(Vec<u64>);

impl State {
    fn new(size: c_int, init: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void) -> State {
        let bytes = usize::try_from(size).expect("liblz4 reports a positive state size");
        let mut words = vec![0u64; bytes.div_ceil(8)];
        // SAFETY: the buffer holds `bytes` writable bytes, 8-byte aligned.
        let state = unsafe { init(words.as_mut_ptr().cast(), bytes) };
        assert!(!state.is_null(), "liblz4 refused an aligned state");
        State(words)
    }
}

thread_local! {
    static HIGH: RefCell<Option<State>> = const { RefCell::new(None) };
    static FAST: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Which liblz4 compressor.
#[derive(Clone, Copy)]
pub(crate) enum Search {
    /// High compression at this level.
    High(i32),
    /// Fast mode with this acceleration.
    Fast(i32),
}

/// Compresses `src` into `dst` as one LZ4 block (no size prefix), with this
/// thread's state; the block's length, or `None` when liblz4 refused (`src`
/// too large, or `dst` shorter than the block).
pub(crate) fn compress(src: &[u8], dst: &mut [u8], search: Search) -> Option<usize> {
    let src_size = c_int::try_from(src.len()).ok()?;
    let dst_capacity = c_int::try_from(dst.len()).unwrap_or(c_int::MAX);
    let (cell, size, init, run): (_, _, _, RunFn) = match search {
        // SAFETY (both sizes): plain queries of liblz4's constants.
        Search::High(_) => (
            &HIGH,
            unsafe { LZ4_sizeofStateHC() },
            LZ4_initStreamHC as InitFn,
            LZ4_compress_HC_extStateHC_fastReset,
        ),
        Search::Fast(_) => (
            &FAST,
            unsafe { LZ4_sizeofState() },
            LZ4_initStream as InitFn,
            LZ4_compress_fast_extState_fastReset,
        ),
    };
    let parameter = match search {
        Search::High(level) => level,
        Search::Fast(acceleration) => acceleration,
    };
    let written = cell.with(|cell| {
        let mut state = cell.borrow_mut();
        let state = state.get_or_insert_with(|| State::new(size, init));
        // SAFETY: the state was initialised by liblz4 and is used by this thread
        // alone; `src` and `dst` are valid for their lengths, which fit c_int.
        unsafe {
            run(
                state.0.as_mut_ptr().cast(),
                src.as_ptr().cast(),
                dst.as_mut_ptr().cast(),
                src_size,
                dst_capacity,
                parameter,
            )
        }
    });
    usize::try_from(written)
        .ok()
        .filter(|&n| n > 0 || src.is_empty())
}

type InitFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type RunFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_char, c_int, c_int, c_int) -> c_int;

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(src: &[u8], search: Search) -> Vec<u8> {
        let mode = match search {
            Search::High(level) => lz4::block::CompressionMode::HIGHCOMPRESSION(level),
            Search::Fast(acceleration) => lz4::block::CompressionMode::FAST(acceleration),
        };
        lz4::block::compress(src, Some(mode), false).unwrap()
    }

    fn ours(src: &[u8], search: Search) -> Vec<u8> {
        let mut dst = vec![0; lz4::block::compress_bound(src.len()).unwrap()];
        let n = compress(src, &mut dst, search).unwrap();
        dst.truncate(n);
        dst
    }

    /// Values of many sizes and kinds, one after the other on one thread: each
    /// block is the one a cleared state writes, and decodes to its value.
    #[test]
    fn a_reused_state_writes_the_blocks_a_cleared_one_writes() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let text = b"the quick brown fox jumps over the lazy dog; ".repeat(4000);
        let mut values: Vec<Vec<u8>> = Vec::new();
        for len in [
            1usize, 4, 12, 13, 15, 16, 64, 255, 270, 1000, 4096, 65_535, 65_536, 70_000, 150_000,
        ] {
            let start = (next() % 1000) as usize;
            values.push(text[start..start + len].to_vec());
            values.push((0..len).map(|_| next() as u8).collect());
            values.push(
                (0..len)
                    .map(|i| (i / 7) as u8 ^ (next() % 3) as u8)
                    .collect(),
            );
        }
        // The same value twice in a row: the second must not find the first.
        values.push(values[20].clone());
        for search in [
            Search::High(9),
            Search::High(3),
            Search::High(12),
            Search::Fast(1),
            Search::Fast(8),
        ] {
            for round in 0..2 {
                for (i, value) in values.iter().enumerate() {
                    let block = ours(value, search);
                    assert_eq!(block, reference(value, search), "value {i}, round {round}");
                    let decoded = lz4::block::decompress(&block, Some(value.len() as i32)).unwrap();
                    assert_eq!(&decoded, value);
                }
            }
        }
    }

    #[test]
    fn a_destination_too_small_is_refused() {
        let value = vec![7u8; 1000];
        let mut dst = vec![0; 3];
        assert_eq!(compress(&value, &mut dst, Search::High(9)), None);
        assert_eq!(compress(&value, &mut dst, Search::Fast(1)), None);
    }
}
