//! What MosaicML MDS shards and LitData chunks share: a file that packs samples
//! behind an offset table, maybe compressed whole, maybe hashed, named by a
//! JSON index (`index.json`) beside it. Read by [`crate::mds_source`] and
//! [`crate::litdata_source`]; FORMAT.md, sections 12 and 13.
//!
//! The table, all integers little-endian `u32`: the sample count `n`, then `n +
//! 1` absolute byte offsets into the (decompressed) file; sample `i` is bytes
//! `offsets[i] .. offsets[i + 1]`. An MDS shard holds its writer's JSON
//! configuration between the table and `offsets[0]`.
//!
//! A shard is read once, front to back ([`ShardReader`]): a compressed one
//! through the hashes of the file as stored, its decompression and the hashes
//! of the decompressed bytes, so a hash is checked without a second read and
//! memory stays at one sample; an uncompressed one is mapped
//! ([`map_opened`]), each sample a slice of the mapping, hashed as it is
//! passed (no read into a zero-filled buffer, no copy out of a read buffer).
//! Every length is bounded before anything of that length is
//! set aside or sliced: the count by the file's length, each sample by the
//! offsets, and a compressed file's declared length grows buffers only as bytes
//! really arrive.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::compression::ZSTD_WINDOW_LOG_MAX;
pub(crate) use crate::regular_file::regular_error;
use crate::regular_file::{map_opened, open_regular, read_bounded};
/// Which columns or leaves become the value, the key and the fields: the
/// sample plan's input, named here too beside the shards' reader.
pub use crate::sample_plan::ColumnOptions;
pub(crate) use crate::shard_hashes::HashCheck;
use crate::shard_hashes::{mismatches, Hashing, Mismatch};
use crate::SourceError;

/// Largest `index.json` read (MDS or LitData): about 100,000 shards' entries.
pub const MAX_INDEX_SIZE: u64 = 64 << 20;

/// Largest (decompressed) shard: the offsets are `u32`.
pub const MAX_SHARD_SIZE: u64 = u32::MAX as u64;

/// Bytes set aside at once for a length the file declares but has not yet
/// shown (a compressed shard's samples grow past this as they arrive).
const RESERVE_STEP: u64 = 8 << 20;

/// Reads `index.json` (or another JSON file) of at most [`MAX_INDEX_SIZE`]
/// bytes, as a regular file only.
pub(crate) fn read_index(path: &Path) -> Result<serde_json::Value, SourceError> {
    let bytes = read_bounded(path, MAX_INDEX_SIZE, "the index")?;
    serde_json::from_slice(&bytes).map_err(|e| SourceError::Corrupt {
        file: path.display().to_string(),
        location: format!("line {} column {}", e.line(), e.column()),
        reason: format!("not valid JSON ({e})"),
    })
}

/// A file name an index gives, joined to the dataset's directory: relative,
/// and never out of it (MDS's `merge_index` writes `subdir/shard.00000.mds`).
pub(crate) fn file_in(dir: &Path, name: &str) -> Option<PathBuf> {
    let relative = Path::new(name);
    let plain = !name.is_empty()
        && relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    plain.then(|| dir.join(relative))
}

/// How a shard file is compressed, by the name an index gives
/// (`compression`: `zstd`, `zstd:7`, `gz`, `bz2`, `br`, `snappy`; a level after
/// the colon changes nothing for reading).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// zstd frames (MDS `zstd`, LitData `zstd`).
    Zstd,
    /// gzip (MDS `gz`).
    Gzip,
    /// bzip2 (MDS `bz2`).
    Bzip2,
    /// Brotli (MDS `br`).
    Brotli,
    /// Snappy's raw block format, as python-snappy's `compress` writes it (MDS
    /// `snappy`; it takes no level).
    Snappy,
}

impl Codec {
    /// The codec `name` names, or `None` for one this crate does not read.
    pub fn from_name(name: &str) -> Option<Codec> {
        let (family, level) = match name.split_once(':') {
            Some((family, level)) => (family, Some(level)),
            None => (name, None),
        };
        if let Some(level) = level {
            let digits = !level.is_empty() && level.bytes().all(|b| b.is_ascii_digit());
            if !digits || family == "snappy" {
                return None;
            }
        }
        Some(match family {
            "zstd" => Codec::Zstd,
            "gz" => Codec::Gzip,
            "bz2" => Codec::Bzip2,
            "br" => Codec::Brotli,
            "snappy" => Codec::Snappy,
            _ => return None,
        })
    }
}

/// The stored file, hashed as read.
type Stored = Hashing<File>;

/// Read-ahead of a stored file.
const READ_BUFFER: usize = 256 << 10;

/// The decompressed bytes of a shard file.
#[expect(
    clippy::large_enum_variant,
    reason = "a source holds one shard's decoder at a time: boxing a variant saves nothing"
)]
enum Decoder {
    Plain(BufReader<Stored>),
    Zstd(zstd::stream::read::Decoder<'static, BufReader<Stored>>),
    Gzip(flate2::read::MultiGzDecoder<BufReader<Stored>>),
    Bzip2(bzip2::read::MultiBzDecoder<BufReader<Stored>>),
    Brotli(brotli_decompressor::Decompressor<Stored>),
    /// Snappy's raw format is one block: decompressed whole (the file was read
    /// to its end, so its hashes are complete).
    Whole(io::Cursor<Vec<u8>>, Stored),
}

impl Decoder {
    fn new(codec: Option<Codec>, stored: Stored, raw_len: u64) -> io::Result<Decoder> {
        let buffered = |s| BufReader::with_capacity(READ_BUFFER, s);
        Ok(match codec {
            None => Decoder::Plain(buffered(stored)),
            Some(Codec::Zstd) => {
                let mut decoder = zstd::stream::read::Decoder::with_buffer(buffered(stored))?;
                decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
                Decoder::Zstd(decoder)
            }
            Some(Codec::Gzip) => Decoder::Gzip(flate2::read::MultiGzDecoder::new(buffered(stored))),
            Some(Codec::Bzip2) => {
                Decoder::Bzip2(bzip2::read::MultiBzDecoder::new(buffered(stored)))
            }
            Some(Codec::Brotli) => {
                Decoder::Brotli(brotli_decompressor::Decompressor::new(stored, READ_BUFFER))
            }
            Some(Codec::Snappy) => {
                let mut stored = stored;
                let mut compressed = Vec::new();
                stored.read_to_end(&mut compressed)?;
                let invalid = |e: snap::Error| io::Error::new(io::ErrorKind::InvalidData, e);
                let len = snap::raw::decompress_len(&compressed).map_err(invalid)?;
                // The block says its length: checked against the index's before
                // that much is set aside.
                if len as u64 != raw_len {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the snappy block holds {len} bytes, not the {raw_len} the index says"
                        ),
                    ));
                }
                let raw = snap::raw::Decoder::new()
                    .decompress_vec(&compressed)
                    .map_err(invalid)?;
                Decoder::Whole(io::Cursor::new(raw), stored)
            }
        })
    }

    /// Reads what is left of the stored file (so its hashes cover all of it)
    /// and returns the hash mismatches of the stored file.
    fn finish(self) -> io::Result<Vec<Mismatch>> {
        let mut stored = match self {
            Decoder::Plain(r) => r.into_inner(),
            Decoder::Zstd(r) => r.finish().into_inner(),
            Decoder::Gzip(r) => r.into_inner().into_inner(),
            Decoder::Bzip2(r) => r.into_inner().into_inner(),
            Decoder::Brotli(r) => r.into_inner(),
            Decoder::Whole(_, stored) => stored,
        };
        io::copy(&mut stored, &mut io::sink())?;
        Ok(stored.mismatches())
    }
}

impl Read for Decoder {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoder::Plain(r) => r.read(buf),
            Decoder::Zstd(r) => r.read(buf),
            Decoder::Gzip(r) => r.read(buf),
            Decoder::Bzip2(r) => r.read(buf),
            Decoder::Brotli(r) => r.read(buf),
            Decoder::Whole(r, _) => r.read(buf),
        }
    }
}

/// How to open one shard file, as its index describes it.
pub(crate) struct ShardFile {
    /// The file as stored.
    pub path: PathBuf,
    /// Its compression, if any.
    pub codec: Option<Codec>,
    /// The decompressed length the index declares (the file's own length when
    /// it is not compressed, which must agree).
    pub raw_len: u64,
    /// Hashes of the stored file.
    pub stored_hashes: Vec<HashCheck>,
    /// Hashes of the decompressed bytes (for an uncompressed file, of the file).
    pub raw_hashes: Vec<HashCheck>,
}

/// Where a shard's (decompressed) bytes come from.
#[expect(
    clippy::large_enum_variant,
    reason = "a source holds one shard's body at a time: boxing the decoder saves nothing"
)]
enum Body {
    /// A compressed file, decompressed as read, hashed on both sides.
    Stream(Hashing<Decoder>),
    /// An uncompressed file, mapped whole (its length checked against the
    /// index's first), with the hashes of the file, given each byte as it is
    /// passed.
    Mapped { map: Bytes, checks: Vec<HashCheck> },
}

/// One shard being read front to back: its offset table, then its samples.
pub(crate) struct ShardReader {
    path: PathBuf,
    body: Body,
    /// Decompressed bytes read so far.
    pos: u64,
    raw_len: u64,
    /// Sample boundaries, `n + 1` of them.
    offsets: Vec<u32>,
    next: usize,
}

impl ShardReader {
    /// Opens `shard`, reads its table and checks it: the count against the
    /// declared length, the offsets non-decreasing from the end of the table
    /// to exactly the declared length.
    pub(crate) fn open(shard: ShardFile) -> Result<ShardReader, SourceError> {
        let ShardFile {
            path,
            codec,
            raw_len,
            stored_hashes,
            raw_hashes,
        } = shard;
        let (file, len) = open_regular(&path).map_err(|e| regular_error(&path, e))?;
        if codec.is_none() && len != raw_len {
            return Err(SourceError::Corrupt {
                file: path.display().to_string(),
                location: "the file".into(),
                reason: format!("it holds {len} bytes, not the {raw_len} its index says"),
            });
        }
        if raw_len > MAX_SHARD_SIZE {
            return Err(SourceError::TooLarge {
                file: path.display().to_string(),
                location: "the index".into(),
                what: "the decompressed shard".into(),
                size: raw_len,
                limit: MAX_SHARD_SIZE,
            });
        }
        let body = match codec {
            None => {
                // An uncompressed file's hashes, stored and raw, are of the
                // same bytes.
                let mut checks = stored_hashes;
                checks.extend(raw_hashes);
                Body::Mapped {
                    map: map_opened(&path, &file, len)?,
                    checks,
                }
            }
            Some(_) => {
                let decoder = Decoder::new(codec, Hashing::new(file, stored_hashes), raw_len)
                    .map_err(|e| corrupt_io(&path, 0, e))?;
                Body::Stream(Hashing::new(decoder, raw_hashes))
            }
        };
        let mut reader = ShardReader {
            path,
            body,
            pos: 0,
            raw_len,
            offsets: Vec::new(),
            next: 0,
        };
        reader.read_table()?;
        Ok(reader)
    }

    fn corrupt(&self, location: String, reason: String) -> SourceError {
        SourceError::Corrupt {
            file: self.path.display().to_string(),
            location,
            reason,
        }
    }

    /// Exactly `len` bytes: a slice of the mapping, or read and grown as
    /// they arrive.
    fn read_bytes(&mut self, len: u64, what: &str) -> Result<Bytes, SourceError> {
        let at = self.pos;
        let bytes = match &mut self.body {
            Body::Mapped { map, checks } => passed(map, checks, at, len),
            Body::Stream(raw) => {
                let mut bytes = Vec::with_capacity(len.min(RESERVE_STEP) as usize);
                raw.take(len)
                    .read_to_end(&mut bytes)
                    .map_err(|e| corrupt_io(&self.path, at, e))?;
                Bytes::from(bytes)
            }
        };
        self.pos += bytes.len() as u64;
        if (bytes.len() as u64) < len {
            return Err(self.corrupt(
                format!("{what} at byte {at}"),
                format!("the file ends after {} of its {len} bytes", bytes.len()),
            ));
        }
        Ok(bytes)
    }

    fn read_table(&mut self) -> Result<(), SourceError> {
        let raw_len = self.raw_len;
        if raw_len < 4 {
            return Err(self.corrupt(
                "the sample count".into(),
                format!("the shard is {raw_len} bytes, too short for its table"),
            ));
        }
        let count = u32::from_le_bytes(
            self.read_bytes(4, "the sample count")?[..4]
                .try_into()
                .expect("4 bytes"),
        );
        let table_end = 4 + 4 * (u64::from(count) + 1);
        if table_end > raw_len {
            return Err(self.corrupt(
                "the sample count".into(),
                format!("{count} samples need a table of {table_end} bytes, more than the shard's {raw_len}"),
            ));
        }
        let table = self.read_bytes(table_end - 4, "the offset table")?;
        self.offsets = table
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        let first = u64::from(self.offsets[0]);
        if first < table_end {
            return Err(self.corrupt(
                "offset 0".into(),
                format!("{first} points into the offset table, which ends at byte {table_end}"),
            ));
        }
        for (i, pair) in self.offsets.windows(2).enumerate() {
            if pair[1] < pair[0] {
                return Err(self.corrupt(
                    format!("offset {}", i + 1),
                    format!("{} is before the offset before it ({})", pair[1], pair[0]),
                ));
            }
        }
        let last = u64::from(*self.offsets.last().expect("n + 1 offsets"));
        if last != raw_len {
            return Err(self.corrupt(
                format!("offset {count}"),
                format!("the last sample ends at byte {last}, but the shard holds {raw_len} bytes"),
            ));
        }
        // What lies between the table and the first sample (an MDS shard's
        // configuration) is skipped.
        self.skip(first - table_end)?;
        Ok(())
    }

    fn skip(&mut self, len: u64) -> Result<(), SourceError> {
        let at = self.pos;
        let skipped = match &mut self.body {
            Body::Mapped { map, checks } => passed(map, checks, at, len).len() as u64,
            Body::Stream(raw) => io::copy(&mut raw.take(len), &mut io::sink())
                .map_err(|e| corrupt_io(&self.path, at, e))?,
        };
        self.pos += skipped;
        if skipped < len {
            return Err(self.corrupt(
                format!("byte {at}"),
                "the file ends before its first sample".into(),
            ));
        }
        Ok(())
    }

    /// The shard's sample count.
    pub(crate) fn samples(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The file as stored, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The next sample: its number in the shard, its byte offset and its bytes;
    /// `None` after the last.
    pub(crate) fn next_sample(&mut self) -> Result<Option<(usize, u64, Bytes)>, SourceError> {
        let i = self.next;
        if i == self.samples() {
            return Ok(None);
        }
        let start = u64::from(self.offsets[i]);
        let end = u64::from(self.offsets[i + 1]);
        let bytes = self.read_bytes(end - start, &format!("sample {i}"))?;
        self.next += 1;
        Ok(Some((i, start, bytes)))
    }

    /// After the last sample: the decompressed stream must end there, and
    /// every hash the index gives must match.
    pub(crate) fn finish(self) -> Result<(), SourceError> {
        let at = self.pos;
        let ShardReader {
            path,
            body,
            raw_len,
            ..
        } = self;
        let (more, failed) = match body {
            Body::Mapped { map, mut checks } => (at < map.len() as u64, mismatches(&mut checks)),
            Body::Stream(mut raw) => {
                let mut extra = [0u8; 1];
                let n = raw.read(&mut extra).map_err(|e| corrupt_io(&path, at, e))?;
                let mut failed = raw.mismatches();
                let stored = raw.inner.finish().map_err(|source| SourceError::Io {
                    path: path.clone(),
                    source,
                })?;
                failed.extend(stored);
                (n > 0, failed)
            }
        };
        if more {
            return Err(SourceError::Corrupt {
                file: path.display().to_string(),
                location: format!("byte {at}"),
                reason: format!(
                    "the decompressed shard goes on past the {raw_len} bytes its index says"
                ),
            });
        }
        if let Some(mismatch) = failed.first() {
            return Err(SourceError::Corrupt {
                file: path.display().to_string(),
                location: format!("its {} hash", mismatch.algorithm),
                reason: format!(
                    "the index says {}, the bytes give {}",
                    mismatch.expected, mismatch.actual
                ),
            });
        }
        Ok(())
    }
}

impl crate::sample_source::Shard for ShardReader {
    fn finish(self: Box<Self>) -> Result<(), SourceError> {
        ShardReader::finish(*self)
    }
}

impl crate::sample_plan::Samples for ShardReader {
    fn next_sample(&mut self) -> Result<Option<(u64, u64, Bytes)>, SourceError> {
        Ok(ShardReader::next_sample(self)?.map(|(i, offset, bytes)| (i as u64, offset, bytes)))
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// The next `len` bytes of a mapped shard from byte `at` (fewer where the
/// mapping ends first), given to the shard's hash `checks`.
fn passed(map: &Bytes, checks: &mut [HashCheck], at: u64, len: u64) -> Bytes {
    // `at` never passes the mapping's end: every step stops at it.
    let end = at.saturating_add(len).min(map.len() as u64);
    let bytes = map.slice(at as usize..end as usize);
    for check in checks {
        check.update(&bytes);
    }
    bytes
}

/// A read error at decompressed byte `at`: corrupt data for a decoder's
/// complaint, an I/O error otherwise.
fn corrupt_io(path: &Path, at: u64, error: io::Error) -> SourceError {
    match error.kind() {
        io::ErrorKind::InvalidData
        | io::ErrorKind::InvalidInput
        | io::ErrorKind::UnexpectedEof
        | io::ErrorKind::Other => SourceError::Corrupt {
            file: path.display().to_string(),
            location: format!("decompressed byte {at}"),
            reason: error.to_string(),
        },
        _ => SourceError::Io {
            path: path.to_owned(),
            source: error,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A table of `samples`, then the samples.
    fn shard(samples: &[&[u8]], between: &[u8]) -> Vec<u8> {
        let n = samples.len() as u32;
        let mut offset = 4 + 4 * (n + 1) + between.len() as u32;
        let mut bytes = n.to_le_bytes().to_vec();
        bytes.extend(offset.to_le_bytes());
        for s in samples {
            offset += s.len() as u32;
            bytes.extend(offset.to_le_bytes());
        }
        bytes.extend(between);
        for s in samples {
            bytes.extend(*s);
        }
        bytes
    }

    fn read_all(file: ShardFile) -> Result<Vec<Vec<u8>>, SourceError> {
        let mut reader = ShardReader::open(file)?;
        let mut out = Vec::new();
        while let Some((_, _, bytes)) = reader.next_sample()? {
            out.push(bytes.to_vec());
        }
        reader.finish()?;
        Ok(out)
    }

    fn plain(path: &Path, len: u64) -> ShardFile {
        ShardFile {
            path: path.to_owned(),
            codec: None,
            raw_len: len,
            stored_hashes: Vec::new(),
            raw_hashes: Vec::new(),
        }
    }

    #[test]
    fn codec_names_are_the_writers_and_levels_are_digits() {
        assert_eq!(Codec::from_name("zstd"), Some(Codec::Zstd));
        assert_eq!(Codec::from_name("zstd:7"), Some(Codec::Zstd));
        assert_eq!(Codec::from_name("gz:9"), Some(Codec::Gzip));
        assert_eq!(Codec::from_name("bz2"), Some(Codec::Bzip2));
        assert_eq!(Codec::from_name("br:11"), Some(Codec::Brotli));
        assert_eq!(Codec::from_name("snappy"), Some(Codec::Snappy));
        for bad in ["snappy:1", "zstd:", "zstd:x", "lz4", "xz", ""] {
            assert_eq!(Codec::from_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn names_stay_in_the_directory() {
        let dir = Path::new("/d");
        assert_eq!(
            file_in(dir, "a/shard.00000.mds"),
            Some(dir.join("a/shard.00000.mds"))
        );
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "./x"] {
            assert_eq!(file_in(dir, bad), None, "{bad}");
        }
    }

    #[test]
    fn a_shard_reads_back_and_what_lies_between_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let bytes = shard(&[b"one", b"", b"three"], b"{\"config\":1}");
        std::fs::write(&path, &bytes).unwrap();
        let got = read_all(plain(&path, bytes.len() as u64)).unwrap();
        assert_eq!(got, vec![b"one".to_vec(), vec![], b"three".to_vec()]);
    }

    #[test]
    fn every_codec_decodes_and_hashes_are_checked_on_both_sides() {
        let dir = tempfile::tempdir().unwrap();
        let raw = shard(&[b"alpha", b"beta"], b"");
        let zstd = zstd::encode_all(&raw[..], 3).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        let gz = gz.finish().unwrap();
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        bz.write_all(&raw).unwrap();
        let bz = bz.finish().unwrap();
        let snappy = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        for (codec, stored) in [
            (Codec::Zstd, zstd),
            (Codec::Gzip, gz),
            (Codec::Bzip2, bz),
            (Codec::Snappy, snappy),
        ] {
            let path = dir.path().join(format!("{codec:?}"));
            std::fs::write(&path, &stored).unwrap();
            let md5_of = |b: &[u8]| {
                let mut c = HashCheck::new("md5", "").unwrap();
                c.update(b);
                c.hex()
            };
            let file = |stored_md5: &str, raw_md5: &str| ShardFile {
                path: path.clone(),
                codec: Some(codec),
                raw_len: raw.len() as u64,
                stored_hashes: vec![HashCheck::new("md5", stored_md5).unwrap()],
                raw_hashes: vec![HashCheck::new("md5", raw_md5).unwrap()],
            };
            let (good_stored, good_raw) = (md5_of(&stored), md5_of(&raw));
            let got = read_all(file(&good_stored, &good_raw)).unwrap();
            assert_eq!(got, vec![b"alpha".to_vec(), b"beta".to_vec()], "{codec:?}");
            for (bad_stored, bad_raw) in [(true, false), (false, true)] {
                let wrong = "0".repeat(32);
                let file = file(
                    if bad_stored { &wrong } else { &good_stored },
                    if bad_raw { &wrong } else { &good_raw },
                );
                let error = read_all(file).unwrap_err().to_string();
                assert!(
                    error.contains("md5 hash") && error.contains(&wrong),
                    "{error}"
                );
            }
        }
    }

    #[test]
    fn tables_that_claim_more_than_the_shard_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let good = shard(&[b"abc", b"de"], b"");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (u32::MAX.to_le_bytes().to_vec(), "samples need a table"),
            (good[..good.len() - 1].to_vec(), "holds"),
            (
                {
                    let mut b = good.clone();
                    b[8..12].copy_from_slice(&2u32.to_le_bytes());
                    b
                },
                "before the offset before it",
            ),
            (
                {
                    let mut b = good.clone();
                    b[4..8].copy_from_slice(&3u32.to_le_bytes());
                    b
                },
                "points into the offset table",
            ),
            (
                {
                    let mut b = good.clone();
                    b[12..16].copy_from_slice(&100u32.to_le_bytes());
                    b
                },
                "the last sample ends at byte 100",
            ),
        ];
        for (bytes, expected) in cases {
            std::fs::write(&path, &bytes).unwrap();
            // The index's length is the good one: a shorter file disagrees.
            let declared = if expected == "holds" {
                good.len()
            } else {
                bytes.len()
            };
            let error = read_all(plain(&path, declared as u64))
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{expected}: {error}");
            assert!(error.contains(&path.display().to_string()), "{error}");
        }
    }

    /// An uncompressed shard is mapped: cut anywhere (in its table, between
    /// the table and the samples, inside a sample) while its index still
    /// declares the whole length, it is refused before anything is mapped,
    /// naming the shard; declared at its cut length, what its table claims
    /// past the cut is refused as the table is read. Nothing is sliced out of
    /// the mapping past its end.
    #[test]
    fn a_truncated_mapped_shard_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard.00000.mds");
        let good = shard(&[b"first sample", b"second"], b"{\"config\":1}");
        for cut in [0, 3, 7, 12, 20, 30, good.len() - 7, good.len() - 1] {
            std::fs::write(&path, &good[..cut]).unwrap();
            let whole = read_all(plain(&path, good.len() as u64)).unwrap_err();
            let text = whole.to_string();
            assert!(
                text.contains(&path.display().to_string())
                    && text.contains(&format!("it holds {cut} bytes, not the {}", good.len())),
                "cut at {cut}: {text}"
            );
            let text = read_all(plain(&path, cut as u64)).unwrap_err().to_string();
            assert!(
                text.contains(&path.display().to_string()),
                "cut at {cut}: {text}"
            );
        }
    }

    #[test]
    fn a_mapped_shard_checks_its_hashes_over_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let bytes = shard(&[b"alpha", b"", b"gamma"], b"{\"config\":1}");
        std::fs::write(&path, &bytes).unwrap();
        let xxh64 = |b: &[u8]| format!("{:016x}", xxhash_rust::xxh64::xxh64(b, 0));
        let file = |stored: &str, raw: &str| ShardFile {
            stored_hashes: vec![HashCheck::new("xxh64", stored).unwrap()],
            raw_hashes: vec![HashCheck::new("sha1", raw).unwrap()],
            ..plain(&path, bytes.len() as u64)
        };
        let sha1 = {
            let mut c = HashCheck::new("sha1", "").unwrap();
            c.update(&bytes);
            c.hex()
        };
        let got = read_all(file(&xxh64(&bytes), &sha1)).unwrap();
        assert_eq!(got, vec![b"alpha".to_vec(), vec![], b"gamma".to_vec()]);
        // A hash of all but the last byte: refused, so the last is hashed.
        let short = xxh64(&bytes[..bytes.len() - 1]);
        let error = read_all(file(&short, &sha1)).unwrap_err().to_string();
        assert!(
            error.contains("xxh64 hash") && error.contains(&short),
            "{error}"
        );
        let error = read_all(file(&xxh64(&bytes), &"0".repeat(40)))
            .unwrap_err()
            .to_string();
        assert!(error.contains("sha1 hash"), "{error}");
    }

    #[test]
    fn a_compressed_shard_shorter_or_longer_than_declared_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let raw = shard(&[b"abc"], b"");
        std::fs::write(&path, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
        for declared in [raw.len() as u64 - 1, raw.len() as u64 + 1, u32::MAX as u64] {
            let file = ShardFile {
                path: path.clone(),
                codec: Some(Codec::Zstd),
                raw_len: declared,
                stored_hashes: Vec::new(),
                raw_hashes: Vec::new(),
            };
            assert!(read_all(file).is_err(), "{declared}");
        }
    }
}
