//! Files of writers with a known bug, read as the writer meant them.
//!
//! parquet-cpp before Arrow C++ 3.0 (`created_by` "parquet-cpp version 1.5.1-SNAPSHOT"
//! and older) wrote every v2 data page with `is_compressed = false`, compressed
//! or not (ARROW-10353, fixed in Arrow 3.0; apache/arrow-testing keeps
//! `ARROW-17100.parquet` as the example). Arrow C++ (so pyarrow) decompresses the
//! v2 pages of such files whatever the flag says; the `parquet` crate believes the
//! flag, decodes compressed bytes as values, and fails ("eof decoding byte
//! array") or, for fixed-width values, would decode garbage. The page walk
//! ([`crate::parquet_pages::check_chunk`]) finds where each such flag is, and the
//! crate reads the file through [`FlagsSetTrue`], which shows those flags as
//! `true`: the one byte that holds each flag, nothing else.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use crate::random_access::RandomAccess;

/// Whether the writer named by `created_by` compressed v2 data pages whatever
/// their `is_compressed` flag says: application `parquet-cpp` before version
/// 2.0.0, the rule of Arrow C++ (`PARQUET_CPP_10353_FIXED_VERSION`; later
/// releases call themselves `parquet-cpp-arrow`).
pub fn v2_pages_always_compressed(created_by: Option<&str>) -> bool {
    let Some(created_by) = created_by else {
        return false;
    };
    let Some((application, version)) = created_by.split_once(" version") else {
        return false;
    };
    if application.trim() != "parquet-cpp" {
        return false;
    }
    // "1.5.1-SNAPSHOT (build abc)": below 2.0.0 when the major number is; a
    // version without one counts as 0, as Arrow C++ parses it.
    let major: u64 = version
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    major < 2
}

/// An input whose v2 page flags at the given offsets read as `true`.
pub struct FlagsSetTrue {
    inner: Arc<dyn RandomAccess>,
    /// Offsets of the bytes that hold an `is_compressed = false` field header.
    flags: Arc<BTreeSet<u64>>,
}

impl FlagsSetTrue {
    /// `inner` with the flags whose header bytes are at `flags` set to true.
    pub fn new(inner: Arc<dyn RandomAccess>, flags: impl IntoIterator<Item = u64>) -> Self {
        FlagsSetTrue {
            inner,
            flags: Arc::new(flags.into_iter().collect()),
        }
    }
}

/// A compact-protocol field header with the bool type `false` (2) turned `true`
/// (1); the field-id delta in the high nibble stays.
fn set_true(byte: u8) -> u8 {
    if byte & 0x0f == 2 {
        (byte & 0xf0) | 1
    } else {
        byte
    }
}

impl RandomAccess for FlagsSetTrue {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let bytes = self.inner.read_at(offset, len)?;
        let end = offset.saturating_add(len as u64);
        let mut flags = self.flags.range(offset..end).peekable();
        if flags.peek().is_none() {
            return Ok(bytes);
        }
        let mut patched = bytes.to_vec();
        for &at in flags {
            let i = (at - offset) as usize;
            patched[i] = set_true(patched[i]);
        }
        Ok(Bytes::from(patched))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_parquet_cpp_before_2_0_compresses_v2_pages_whatever_the_flag() {
        for (created_by, always) in [
            (Some("parquet-cpp version 1.5.1-SNAPSHOT"), true),
            (Some("parquet-cpp version 1.3.0"), true),
            (Some("parquet-cpp version 2.0.0"), false),
            (Some("parquet-cpp-arrow version 2.0.0"), false),
            (Some("parquet-cpp-arrow version 20.0.0"), false),
            (Some("parquet-mr version 1.12.3 (build abc)"), false),
            (Some("parquet-rs version 53.0.0"), false),
            (Some(""), false),
            (None, false),
        ] {
            assert_eq!(
                v2_pages_always_compressed(created_by),
                always,
                "{created_by:?}"
            );
        }
    }

    #[test]
    fn a_false_flag_reads_true_and_every_other_byte_is_unchanged() {
        struct Memory(Vec<u8>);
        impl RandomAccess for Memory {
            fn len(&self) -> u64 {
                self.0.len() as u64
            }
            fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
                Ok(Bytes::copy_from_slice(
                    &self.0[offset as usize..offset as usize + len],
                ))
            }
        }
        // Field 7, delta 1, bool false: 0x12; then bytes that are not flags.
        let input = FlagsSetTrue::new(Arc::new(Memory(vec![0xaa, 0x12, 0x12, 0x02])), [1, 3]);
        assert_eq!(&input.read_at(0, 4).unwrap()[..], [0xaa, 0x11, 0x12, 0x01]);
        assert_eq!(&input.read_at(2, 1).unwrap()[..], [0x12]);
        assert_eq!(&input.read_at(1, 1).unwrap()[..], [0x11]);
    }
}
