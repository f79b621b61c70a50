//! What a file holds, told by its first bytes (decompressed when they are gzip
//! or zstd), for a file whose name does not say: a tar, TFRecord or Parquet
//! file. The checks are the sources' own (a tar header checksum, a TFRecord
//! length CRC), so a file is recognised exactly when its source would read it.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::Path;

use crate::compression::Compression;

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
    use std::io::Write;

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
}
