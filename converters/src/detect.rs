//! Compression of an input, told by its magic bytes rather than its name: the one
//! place where the tar and TFRecord sources, and front ends estimating the bytes
//! to come, tell a plain stream from a gzip or zstd one, and where the decoders'
//! memory bounds are set.
//!
//! ```
//! use bcd_converters::detect::Compression;
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
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The first bytes of a gzip member (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// The first bytes of a zstd frame (RFC 8878).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Bytes [`Compression::sniff`] needs to tell every compression apart.
pub const SNIFF_BYTES: usize = 6;

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
    pub fn of_reader(reader: &mut impl BufRead) -> io::Result<Compression> {
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
pub fn unsupported_compression(prefix: &[u8]) -> Option<&'static str> {
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

/// Whether the regular file at `path` is gzip or zstd compressed (false for
/// anything that is not a regular file; see [`file_compression`]).
pub fn is_compressed_file(path: &Path) -> io::Result<bool> {
    Ok(file_compression(path)?.is_some_and(|c| c != Compression::None))
}

/// What a file holds by its first bytes, for a file whose name does not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// A tar header with a valid checksum.
    Tar,
    /// A TFRecord frame: a length and its valid masked CRC32C.
    TfRecord,
    /// Parquet's `PAR1` magic (a Parquet file is never compressed whole).
    Parquet,
}

/// Decompressed bytes [`file_content`] looks at: one tar header.
const CONTENT_BYTES: u64 = 512;

/// What the regular file at `path` holds, by its first bytes, decompressed when
/// it is gzip or zstd (TFX writes GZIP TFRecord shards named only `….gz`):
/// `None` for anything else, or for what is not a regular file (never opened, as
/// in [`file_compression`]). At most [`CONTENT_BYTES`] are decompressed; a
/// stream that fails to decode is judged by what decoded before the failure.
pub fn file_content(path: &Path) -> io::Result<Option<Content>> {
    if !std::fs::metadata(path)?.is_file() {
        return Ok(None);
    }
    let mut reader = io::BufReader::new(File::open(path)?);
    let compression = Compression::of_reader(&mut reader)?;
    if compression == Compression::None && reader.fill_buf()?.starts_with(b"PAR1") {
        return Ok(Some(Content::Parquet));
    }
    let mut head = Vec::new();
    // An error leaves in `head` what was read before it.
    let _ = compression
        .decoder(reader)?
        .take(CONTENT_BYTES)
        .read_to_end(&mut head);
    if head.len() >= 12
        && crate::tfrecord_source::masked_crc32c(&head[..8]).to_le_bytes() == head[8..12]
    {
        return Ok(Some(Content::TfRecord));
    }
    if let Ok(block) = <&[u8; 512]>::try_from(&head[..]) {
        if block.iter().any(|&b| b != 0) && crate::tar_reader::check_checksum(block).is_ok() {
            return Ok(Some(Content::Tar));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor, Write};

    #[test]
    fn content_is_told_by_its_first_bytes_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        let gzip = |bytes: &[u8]| {
            let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            out.write_all(bytes).unwrap();
            out.finish().unwrap()
        };
        let mut frame = 5u64.to_le_bytes().to_vec();
        frame.extend(crate::tfrecord_source::masked_crc32c(&frame).to_le_bytes());
        frame.extend(b"hello\0\0\0\0");
        let tar =
            std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tar/gnu.tar"))
                .unwrap();
        let cases: [(&str, Vec<u8>, Option<Content>); 8] = [
            ("a.gz", gzip(&frame), Some(Content::TfRecord)),
            ("b", frame.clone(), Some(Content::TfRecord)),
            ("c.gz", gzip(&tar), Some(Content::Tar)),
            (
                "d.zst",
                zstd::encode_all(&tar[..], 1).unwrap(),
                Some(Content::Tar),
            ),
            ("e", b"PAR1rest".to_vec(), Some(Content::Parquet)),
            ("f.gz", gzip(b"just some text"), None),
            ("g", vec![0; 1024], None),
            ("h.gz", gzip(&frame)[..12].to_vec(), None),
        ];
        for (name, bytes, expected) in cases {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(file_content(&path).unwrap(), expected, "{name}");
        }
    }

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
        assert!(is_compressed_file(&gz).unwrap());
        assert!(!is_compressed_file(&plain).unwrap());
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
