//! TFRecord frames and `tf.train.Example` messages that claim more than they hold
//! are refused without allocating for the claim. This test binary counts the
//! bytes each thread has allocated (a wrapping global allocator), so "without
//! allocating" is measured, not assumed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};

use bcd_converters::example::{bytes_feature, FeatureError};
use bcd_converters::tfrecord_source::{masked_crc32c, TfRecordOptions, TfRecordSource};
use bcd_converters::SourceError;

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // try_with: the allocator also runs while thread-locals are torn down.
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add_signed(delta);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the most this thread had allocated
/// during it beyond what it held before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(base));
    let result = f();
    (result, PEAK.with(Cell::get) - base)
}

const MIB: usize = 1 << 20;
const CLAIM: u64 = 3 << 30;

/// A frame header declaring `length` data bytes (with its valid checksum).
fn header(length: u64) -> Vec<u8> {
    let mut out = length.to_le_bytes().to_vec();
    out.extend_from_slice(&masked_crc32c(&length.to_le_bytes()).to_le_bytes());
    out
}

fn frame(data: &[u8]) -> Vec<u8> {
    let mut out = header(data.len() as u64);
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn read(path: &Path) -> Result<Vec<Vec<u8>>, SourceError> {
    TfRecordSource::new(&[path.to_owned()], TfRecordOptions::default())?
        .map(|r| r.map(|r| r.value))
        .collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn a_plain_frame_claiming_3_gib_in_a_small_file_is_refused_unallocated() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = frame(b"first");
    bytes.extend(header(CLAIM));
    bytes.extend_from_slice(b"0123456789");
    let path = write(dir.path(), "claims.tfrecord", &bytes);
    let (result, peak) = peak_of(|| read(&path));
    let error = result.unwrap_err().to_string();
    assert!(
        error.contains(
            "claims.tfrecord: record 1 at byte 21: truncated: 10 of 3221225472 data bytes"
        ),
        "{error}"
    );
    // The file's 1 MiB read buffer, and nothing for the claim.
    assert!(peak < 2 * MIB, "{peak} bytes allocated");
}

#[test]
fn a_gzip_frame_claiming_more_than_the_stream_can_hold_is_refused_unallocated() {
    let dir = tempfile::tempdir().unwrap();
    let mut plain = frame(b"first");
    plain.extend(header(CLAIM));
    plain.extend_from_slice(&[0; 1000]);
    let path = write(dir.path(), "claims.tfrecord.gz", &gzip(&plain));
    let (result, peak) = peak_of(|| read(&path));
    let error = result.unwrap_err().to_string();
    assert!(
        error.contains("record 1 at byte 21 of the decompressed stream")
            && error.contains(
                "claims 3221225472 data bytes, more than the rest of the compressed file can hold"
            ),
        "{error}"
    );
    assert!(peak < 4 * MIB, "{peak} bytes allocated");

    // A record that compresses well is still read, however small the file.
    let zeros = vec![0u8; 8 * MIB];
    let path = write(dir.path(), "zeros.tfrecord.gz", &gzip(&frame(&zeros)));
    assert!(std::fs::metadata(&path).unwrap().len() < 64 << 10);
    assert_eq!(read(&path).unwrap(), [zeros]);
}

#[test]
fn a_frame_missing_only_its_checksum_is_refused_before_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = frame(&[7; 1000]);
    bytes.truncate(bytes.len() - 2);
    let path = write(dir.path(), "cut.tfrecord", &bytes);
    let error = read(&path).unwrap_err().to_string();
    assert!(
        error.contains("record 0 at byte 0: truncated: 2 of the 4 checksum bytes"),
        "{error}"
    );
}

fn len_delimited(number: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3 | 2) as u8];
    let mut n = payload.len() as u64;
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(payload);
    out
}

/// An Example whose feature `name` is a bytes_list of `values`.
fn example(name: &str, values: &[&[u8]]) -> Vec<u8> {
    let list: Vec<u8> = values.iter().flat_map(|v| len_delimited(1, v)).collect();
    let mut entry = len_delimited(1, name.as_bytes());
    entry.extend(len_delimited(2, &len_delimited(1, &list)));
    len_delimited(1, &len_delimited(1, &entry))
}

#[test]
fn a_bytes_list_of_many_values_costs_no_memory_per_value() {
    // 500,000 empty values in 1 MB.
    let values = vec![&b""[..]; 500_000];
    let record = example("x", &values);
    let (result, peak) = peak_of(|| bytes_feature(&record, "x"));
    assert_eq!(result, Err(FeatureError::NotOneValue("x".into(), 500_000)));
    assert!(peak < 4096, "{peak} bytes allocated");
}

#[test]
fn nested_lengths_that_claim_more_than_the_message_holds_are_malformed() {
    let good = example("image", &[b"jpeg bytes"]);
    assert_eq!(bytes_feature(&good, "image").unwrap(), b"jpeg bytes");
    // Example{1: Features{1: entry{1: "image", 2: Feature{1: BytesList{1: value}}}}}:
    // the tags of its six length-delimited fields, each followed by a one-byte length.
    let tags = [0, 2, 4, 11, 13, 15];
    for at in tags {
        assert!(matches!(good[at], 0x0a | 0x12), "a tag at {at}");
        // 2^62 bytes, then one byte more than the rest of the message.
        for claim in [1u64 << 62, (good.len() - at - 1) as u64] {
            let mut bad = good[..at + 1].to_vec();
            let mut n = claim;
            while n >= 0x80 {
                bad.push((n as u8 & 0x7f) | 0x80);
                n >>= 7;
            }
            bad.push(n as u8);
            bad.extend_from_slice(&good[at + 2..]);
            let (result, peak) = peak_of(|| bytes_feature(&bad, "image"));
            assert!(
                matches!(result, Err(FeatureError::Malformed(_))),
                "field at {at} claiming {claim}: {result:?}"
            );
            assert!(peak < 4096, "{peak} bytes allocated");
        }
    }
}
