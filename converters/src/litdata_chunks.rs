//! One LitData chunk read front to back, item by item, in each of the
//! layouts `BinaryWriter` writes (FORMAT.md, section 15): the classic table
//! (plain, or the whole file one zstd stream: [`ShardReader`]), each item a
//! zstd frame behind the classic table (`compression_level="sample"`), or
//! zstd frames of consecutive items behind an `LDFZ01` header
//! (`compression_level="batch"`, [`Framed`]), or, in a dataset whose rows
//! LitData keeps as an Arrow IPC footer (`LDARW01`), that footer
//! ([`FooterChunk`]).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::compression::ZSTD_WINDOW_LOG_MAX;
use crate::litdata_footer::{FooterChunk, FooterPlan, ARROW_FOOTER_MAGIC};
use crate::litdata_index::Wrap;
use crate::regular_file::open_regular;
use crate::sample_shards::{regular_error, Codec, ShardFile, ShardReader};
use crate::{SourceError, MAX_VALUE_SIZE};

/// The first bytes of a framed (`batch`) chunk.
pub const FRAMED_MAGIC: &[u8; 8] = b"LDFZ01\0\0";
/// The framed header before the offsets: magic, version u16, flags u16, items
/// u32, items per frame u32, frames u32.
const FRAMED_PREFIX: u64 = 24;
/// One frame's entry: first item u32, items u32, offset u64, compressed u32,
/// decompressed u32.
const FRAME_ENTRY: u64 = 24;

/// Bytes set aside at once for a frame's declared size.
const RESERVE_STEP: u64 = 8 << 20;

/// One frame of a framed chunk.
struct Frame {
    first: u64,
    items: u64,
    offset: u64,
    compressed: u64,
    decompressed: u64,
}

/// A framed chunk: its logical offsets (into the concatenated items), its
/// frames, and the frame being read.
pub(crate) struct Framed {
    path: PathBuf,
    file: BufReader<File>,
    len: u64,
    pos: u64,
    offsets: Vec<u32>,
    frames: Vec<Frame>,
    frame: usize,
    /// The items of the current frame, decompressed, and the number of its
    /// first item.
    buffer: Bytes,
    buffer_first: u64,
    next: u64,
}

/// A chunk being read.
#[expect(
    clippy::large_enum_variant,
    reason = "a source holds one chunk at a time: boxing a variant saves nothing"
)]
pub(crate) enum Chunk {
    Classic {
        reader: ShardReader,
        /// Each item is a zstd frame of its own.
        per_item: bool,
    },
    Framed(Framed),
    Footer(FooterChunk),
}

fn corrupt(path: &Path, location: impl Into<String>, reason: impl Into<String>) -> SourceError {
    SourceError::Corrupt {
        file: path.display().to_string(),
        location: location.into(),
        reason: reason.into(),
    }
}

/// zstd-decompresses `compressed`, which must give exactly `expected` bytes
/// (or, with `None`, at most [`MAX_VALUE_SIZE`]); buffers grow as bytes
/// arrive, never to a declared size at once.
fn inflate(compressed: &[u8], expected: Option<u64>) -> std::io::Result<Vec<u8>> {
    let limit = expected.unwrap_or(MAX_VALUE_SIZE);
    let mut decoder = zstd::stream::read::Decoder::new(compressed)?;
    decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
    let mut out = Vec::with_capacity(limit.min(RESERVE_STEP) as usize);
    decoder.take(limit + 1).read_to_end(&mut out)?;
    let wrong = match expected {
        Some(n) => out.len() as u64 != n,
        None => out.len() as u64 > limit,
    };
    if wrong {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            match expected {
                Some(n) => format!(
                    "the zstd frame holds {} bytes, not the {n} declared",
                    out.len()
                ),
                None => format!("the zstd frame holds more than {limit} bytes"),
            },
        ));
    }
    Ok(out)
}

impl Chunk {
    /// Opens the chunk at `path` of `chunk_bytes` (as its index entry says)
    /// compressed as `wrap` says; with `footer`, a chunk of a dataset whose
    /// rows are Arrow footers, which it must end with.
    pub(crate) fn open(
        path: PathBuf,
        chunk_bytes: u64,
        wrap: Wrap,
        footer: Option<Arc<FooterPlan>>,
    ) -> Result<Chunk, SourceError> {
        if let Some(plan) = footer {
            return Ok(Chunk::Footer(FooterChunk::open(path, chunk_bytes, plan)?));
        }
        let shard = |codec| ShardFile {
            path: path.clone(),
            codec,
            raw_len: chunk_bytes,
            stored_hashes: Vec::new(),
            raw_hashes: Vec::new(),
        };
        if wrap == Wrap::Chunk {
            let reader = ShardReader::open(shard(Some(Codec::Zstd)))?;
            return Ok(Chunk::Classic {
                reader,
                per_item: false,
            });
        }
        let (mut file, len) = open_regular(&path).map_err(|e| regular_error(&path, e))?;
        let io = |source| SourceError::Io {
            path: path.clone(),
            source,
        };
        let mut head = [0u8; 8];
        let mut tail = [0u8; 8];
        if len >= 8 {
            file.read_exact(&mut head).map_err(io)?;
            file.seek(SeekFrom::Start(len - 8)).map_err(io)?;
            file.read_exact(&mut tail).map_err(io)?;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
        }
        if &head == FRAMED_MAGIC {
            return Ok(Chunk::Framed(Framed::open(path, file, len)?));
        }
        if &tail == ARROW_FOOTER_MAGIC {
            return Err(SourceError::Invalid {
                file: path.display().to_string(),
                location: "its end".into(),
                reason: "its rows are an Arrow IPC footer, but the index's \"types\" and \"data_format\" are not those of rows LitData keeps so; bcd reads footers only where the index says they are".into(),
            });
        }
        let reader = ShardReader::open(shard(None))?;
        Ok(Chunk::Classic {
            reader,
            per_item: wrap == Wrap::Sample,
        })
    }

    /// The chunk's item count.
    pub(crate) fn items(&self) -> u64 {
        match self {
            Chunk::Classic { reader, .. } => reader.samples() as u64,
            Chunk::Framed(framed) => framed.offsets.len() as u64 - 1,
            Chunk::Footer(footer) => footer.items(),
        }
    }

    /// The chunk's file.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Chunk::Classic { reader, .. } => reader.path(),
            Chunk::Framed(framed) => &framed.path,
            Chunk::Footer(footer) => footer.path(),
        }
    }

    /// The next item: its number, its byte offset (in the decompressed items)
    /// and its bytes; `None` after the last.
    pub(crate) fn next_item(&mut self) -> Result<Option<(u64, u64, Bytes)>, SourceError> {
        match self {
            Chunk::Classic { reader, per_item } => {
                let Some((i, offset, bytes)) = reader.next_sample()? else {
                    return Ok(None);
                };
                if !*per_item {
                    return Ok(Some((i as u64, offset, bytes)));
                }
                let item = inflate(&bytes, None).map_err(|e| {
                    corrupt(
                        reader.path(),
                        format!("item {i} at byte {offset}"),
                        e.to_string(),
                    )
                })?;
                Ok(Some((i as u64, offset, Bytes::from(item))))
            }
            Chunk::Framed(framed) => framed.next_item(),
            Chunk::Footer(footer) => Err(corrupt(
                footer.path(),
                "its rows",
                "an Arrow footer's rows are read as a table, not as items",
            )),
        }
    }

    /// After the last item: nothing may follow it.
    pub(crate) fn finish(self) -> Result<(), SourceError> {
        match self {
            Chunk::Classic { reader, .. } => reader.finish(),
            Chunk::Framed(framed) => framed.finish(),
            Chunk::Footer(footer) => footer.finish(),
        }
    }
}

impl crate::sample_source::Shard for Chunk {
    fn finish(self: Box<Self>) -> Result<(), SourceError> {
        Chunk::finish(*self)
    }

    fn read_records(&mut self) -> Option<Result<(Vec<crate::Record>, bool), SourceError>> {
        match self {
            Chunk::Footer(footer) => Some(footer.read_records()),
            _ => None,
        }
    }
}

impl crate::sample_plan::Samples for Chunk {
    fn next_sample(&mut self) -> Result<Option<(u64, u64, Bytes)>, SourceError> {
        self.next_item()
    }

    fn path(&self) -> &Path {
        Chunk::path(self)
    }
}

impl Framed {
    /// Reads and checks the header and tables: every count against the
    /// file's length before anything of that count is read, the offsets
    /// non-decreasing from 0, the frames covering the items in order, back to
    /// back after the tables, each inside the file and as long decompressed as
    /// its items.
    fn open(path: PathBuf, file: File, len: u64) -> Result<Framed, SourceError> {
        let mut file = BufReader::with_capacity(256 << 10, file);
        let mut read = |n: u64, what: &str| -> Result<Vec<u8>, SourceError> {
            let mut bytes = Vec::new();
            (&mut file)
                .take(n)
                .read_to_end(&mut bytes)
                .map_err(|source| SourceError::Io {
                    path: path.clone(),
                    source,
                })?;
            if (bytes.len() as u64) < n {
                return Err(corrupt(&path, what, "the file ends inside it"));
            }
            Ok(bytes)
        };
        let prefix = read(FRAMED_PREFIX, "the framed header")?;
        let u16_at = |i: usize| u16::from_le_bytes(prefix[i..i + 2].try_into().expect("2 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(prefix[i..i + 4].try_into().expect("4 bytes"));
        let (version, items, frame_count) =
            (u16_at(8), u64::from(u32_at(12)), u64::from(u32_at(20)));
        if version != 1 {
            return Err(corrupt(
                &path,
                "the framed header",
                format!("version {version}, not 1"),
            ));
        }
        let tables = FRAMED_PREFIX + 4 * (items + 1) + FRAME_ENTRY * frame_count;
        if items == 0 || frame_count == 0 || tables > len {
            return Err(corrupt(
                &path,
                "the framed header",
                format!("{items} items in {frame_count} frames do not fit in {len} bytes"),
            ));
        }
        let offsets: Vec<u32> = read(4 * (items + 1), "the offsets")?
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        if offsets[0] != 0 || offsets.windows(2).any(|w| w[1] < w[0]) {
            return Err(corrupt(&path, "the offsets", "they do not rise from 0"));
        }
        let table = read(FRAME_ENTRY * frame_count, "the frame table")?;
        let mut frames = Vec::with_capacity(frame_count as usize);
        let (mut next_item, mut next_offset) = (0u64, tables);
        for (i, entry) in table.chunks_exact(FRAME_ENTRY as usize).enumerate() {
            let u32_at =
                |j: usize| u64::from(u32::from_le_bytes(entry[j..j + 4].try_into().expect("4")));
            let frame = Frame {
                first: u32_at(0),
                items: u32_at(4),
                offset: u64::from_le_bytes(entry[8..16].try_into().expect("8 bytes")),
                compressed: u32_at(16),
                decompressed: u32_at(20),
            };
            let end_item = frame.first + frame.items;
            let problem = if frame.first != next_item || frame.items == 0 || end_item > items {
                Some(format!(
                    "items {} to {end_item} do not follow item {next_item}",
                    frame.first
                ))
            } else if frame.offset != next_offset || frame.offset + frame.compressed > len {
                Some(format!(
                    "its {} bytes at byte {} are not the next ones of the file ({next_offset} of {len})",
                    frame.compressed, frame.offset
                ))
            } else if frame.decompressed
                != u64::from(offsets[end_item as usize] - offsets[frame.first as usize])
            {
                Some(format!(
                    "{} bytes decompressed are not its items' length",
                    frame.decompressed
                ))
            } else {
                None
            };
            if let Some(reason) = problem {
                return Err(corrupt(&path, format!("frame {i}"), reason));
            }
            next_item = end_item;
            next_offset = frame.offset + frame.compressed;
            frames.push(frame);
        }
        if next_item != items {
            return Err(corrupt(
                &path,
                "the frame table",
                format!("its frames hold {next_item} of {items} items"),
            ));
        }
        Ok(Framed {
            path,
            file,
            len,
            pos: tables,
            offsets,
            frames,
            frame: 0,
            buffer: Bytes::new(),
            buffer_first: 0,
            next: 0,
        })
    }

    fn next_item(&mut self) -> Result<Option<(u64, u64, Bytes)>, SourceError> {
        let i = self.next;
        if i + 1 == self.offsets.len() as u64 {
            return Ok(None);
        }
        let buffered = self.frame > 0 && i < self.buffer_first + self.frames[self.frame - 1].items;
        if !buffered {
            let frame = &self.frames[self.frame];
            let mut compressed = Vec::with_capacity(frame.compressed as usize);
            (&mut self.file)
                .take(frame.compressed)
                .read_to_end(&mut compressed)
                .map_err(|source| SourceError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            let location = format!("frame {} at byte {}", self.frame, frame.offset);
            if (compressed.len() as u64) < frame.compressed {
                return Err(corrupt(&self.path, location, "the file ends inside it"));
            }
            self.buffer = inflate(&compressed, Some(frame.decompressed))
                .map_err(|e| corrupt(&self.path, location, e.to_string()))?
                .into();
            self.pos += frame.compressed;
            self.buffer_first = frame.first;
            self.frame += 1;
        }
        let base = self.offsets[self.buffer_first as usize];
        let (start, end) = (self.offsets[i as usize], self.offsets[i as usize + 1]);
        // A slice of the frame, not a copy.
        let item = self
            .buffer
            .slice((start - base) as usize..(end - base) as usize);
        self.next += 1;
        Ok(Some((i, u64::from(start), item)))
    }

    fn finish(self) -> Result<(), SourceError> {
        if self.pos != self.len {
            return Err(corrupt(
                &self.path,
                format!("byte {}", self.pos),
                format!("{} bytes follow the last frame", self.len - self.pos),
            ));
        }
        Ok(())
    }
}
