//! Compression of an input, told by its magic bytes rather than its name: the one
//! place where the tar, TFRecord and JSON Lines sources, and front ends
//! estimating the bytes to come, tell a plain stream from a gzip or zstd one,
//! and where the decoders' memory bounds are set.
//!
//! ```
//! use bcd_converters::compression::Compression;
//!
//! assert_eq!(Compression::sniff(&[0x1f, 0x8b, 0x08, 0x00]), Compression::Gzip);
//! assert_eq!(Compression::sniff(&[0x28, 0xb5, 0x2f, 0xfd]), Compression::Zstd);
//! assert_eq!(Compression::sniff(b"ustar"), Compression::None);
//! ```

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::Path;

/// Largest zstd window accepted, as a power of two: 2^27 = 128 MiB, zstd's own
/// default limit (enough for `zstd --long` and `--ultra -22`). A frame that needs
/// more is an error instead of that much memory.
pub(crate) const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The first bytes of a gzip member (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// The first bytes of a zstd frame (RFC 8878).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Bytes [`Compression::sniff`] needs to tell every compression apart.
pub(crate) const SNIFF_BYTES: usize = 6;

/// How a stream is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed (or compressed in a way this crate does not read; see
    /// [`unsupported_compression`]).
    None,
    /// gzip, possibly several members one after another.
    Gzip,
    /// zstd, possibly several frames one after another.
    Zstd,
}

impl Compression {
    /// The compression whose magic bytes `prefix` starts with.
    pub fn sniff(prefix: &[u8]) -> Compression {
        if prefix.starts_with(&GZIP_MAGIC) {
            Compression::Gzip
        } else if prefix.starts_with(&ZSTD_MAGIC) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    /// The compression of what `reader` holds, from the bytes it has buffered
    /// (filling its buffer if it is empty); nothing is consumed.
    pub(crate) fn of_reader(reader: &mut impl BufRead) -> io::Result<Compression> {
        Ok(Compression::sniff(reader.fill_buf()?))
    }

    /// The lower-case name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// A reader of the decompressed bytes of `reader`, which must be positioned
    /// at the start of the compressed stream. Memory is bounded: the zstd decoder
    /// refuses frames whose window is over 2^[`ZSTD_WINDOW_LOG_MAX`] bytes; gzip's
    /// window is 32 KiB and flate2 bounds its header's name and comment to 64 KiB.
    pub fn decoder<R: BufRead + Send + 'static>(
        self,
        reader: R,
    ) -> io::Result<Box<dyn Read + Send>> {
        Ok(match self {
            Compression::None => Box::new(reader),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(reader)),
            Compression::Zstd => {
                let mut decoder = zstd::stream::read::Decoder::with_buffer(reader)?;
                decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
                Box::new(decoder)
            }
        })
    }
}

/// The name of a compression `prefix` starts with that this crate does not read
/// (`"bzip2"`, `"xz"`), so that a source can say so instead of reporting the
/// compressed bytes as corrupt.
pub(crate) fn unsupported_compression(prefix: &[u8]) -> Option<&'static str> {
    if prefix.starts_with(b"BZh") {
        Some("bzip2")
    } else if prefix.starts_with(&[0xfd, b'7', b'z', b'X', b'Z']) {
        Some("xz")
    } else {
        None
    }
}

/// The compression of the regular file at `path`, from its first bytes; `None`
/// when `path` is not a regular file (stdin, a FIFO, a device), which is then
/// neither opened nor read, so that a pipe is not blocked on nor its bytes taken.
pub fn file_compression(path: &Path) -> io::Result<Option<Compression>> {
    if !std::fs::metadata(path)?.is_file() {
        return Ok(None);
    }
    let mut prefix = Vec::with_capacity(SNIFF_BYTES);
    File::open(path)?
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut prefix)?;
    Ok(Some(Compression::sniff(&prefix)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor, Write};

    #[test]
    fn magic_bytes_tell_the_compression_and_short_prefixes_are_plain() {
        assert_eq!(Compression::sniff(&[0x1f, 0x8b]), Compression::Gzip);
        assert_eq!(Compression::sniff(&[0x1f]), Compression::None);
        assert_eq!(Compression::sniff(&[0x28, 0xb5, 0x2f]), Compression::None);
        assert_eq!(Compression::sniff(b""), Compression::None);
        assert_eq!(unsupported_compression(b"BZh91AY"), Some("bzip2"));
        assert_eq!(unsupported_compression(b"\xfd7zXZ\0"), Some("xz"));
        assert_eq!(unsupported_compression(&[0x1f, 0x8b]), None);
    }

    #[test]
    fn decoders_round_trip_and_sniffing_consumes_nothing() {
        let plain = b"hello, hello, hello".repeat(100);
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(&plain).unwrap();
        let gzip = gzip.finish().unwrap();
        let zstd = zstd::encode_all(&plain[..], 3).unwrap();
        for (bytes, expected) in [
            (plain.clone(), Compression::None),
            (gzip, Compression::Gzip),
            (zstd, Compression::Zstd),
        ] {
            let mut reader = BufReader::new(Cursor::new(bytes));
            let compression = Compression::of_reader(&mut reader).unwrap();
            assert_eq!(compression, expected);
            let mut out = Vec::new();
            compression
                .decoder(reader)
                .unwrap()
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, plain, "{}", expected.name());
        }
    }

    #[test]
    fn a_zstd_window_over_the_limit_is_refused() {
        // A frame header declaring a 2^(ZSTD_WINDOW_LOG_MAX + 1)-byte window.
        let exponent = (ZSTD_WINDOW_LOG_MAX + 1 - 10) as u8;
        let frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, exponent << 3, 0, 0, 0];
        let reader = BufReader::new(Cursor::new(frame));
        let mut out = Vec::new();
        let result = Compression::Zstd
            .decoder(reader)
            .and_then(|mut d| d.read_to_end(&mut out));
        assert!(result.is_err(), "{result:?}");
    }

    #[cfg(unix)]
    #[test]
    fn files_are_sniffed_and_special_files_are_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let gz = dir.path().join("a.bin");
        std::fs::write(&gz, [0x1f, 0x8b, 8, 0]).unwrap();
        let plain = dir.path().join("b.tar");
        std::fs::write(&plain, b"x").unwrap();
        assert_eq!(file_compression(&gz).unwrap(), Some(Compression::Gzip));
        assert_eq!(file_compression(&plain).unwrap(), Some(Compression::None));
        // Opening a FIFO for reading would block until a writer came.
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(file_compression(&fifo).unwrap(), None);
        assert!(file_compression(&dir.path().join("missing")).is_err());
    }
}
