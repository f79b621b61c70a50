//! Checks of a Parquet column chunk's page headers before the `parquet` crate
//! decodes it, and the batch size that keeps a decoded batch within a byte budget.
//!
//! The crate trusts a page header's `uncompressed_page_size` and reserves that
//! much before decompressing, and a dictionary page's `num_values` before decoding
//! it, so a 4 KB file can make it ask for gigabytes. This module walks the same
//! headers first (the crate reads a chunk's pages back to back from its start, as
//! here) and refuses a page that claims more than its compressed bytes can expand
//! to, more than [`MAX_PAGE_SIZE`], or more dictionary entries than its bytes can
//! hold. The walk reads only headers (a minimal Thrift compact-protocol reader,
//! every length bounded by the chunk), and of page data only the dictionary page
//! of a string or binary column whose rows are decoded as copies of their entry
//! (its longest entry bounds a row, [`crate::parquet_dictionary`]), once the
//! header before it is checked.

use std::io::{self, BufReader, Read};

use crate::parquet_dictionary::longest_entry;
use crate::random_access::{ParquetInput, SequentialReader};

use parquet::basic::{Compression, Type as PhysicalType};
use parquet::file::metadata::ColumnChunkMetaData;

/// Largest decoded page accepted (and so the largest value of a Parquet file).
pub const MAX_PAGE_SIZE: u64 = 512 << 20;
/// Decoded bytes of the projected columns a batch is sized to hold, at most.
pub const BATCH_BYTES: u64 = 64 << 20;
/// Rows a batch holds, at most, while they fit in [`BATCH_BYTES`].
pub const MAX_BATCH_ROWS: usize = 256;
/// Rows a batch of small rows holds, at most: more than [`MAX_BATCH_ROWS`] only
/// while they fit in [`SMALL_BATCH_BYTES`]. Each batch costs the decoder a fixed
/// amount per column (buffers, arrays), and the records' fields are joined from
/// their batches' columns: at 256 rows of a few dozen bytes that fixed cost was
/// about a sixth of the CPU of a Parquet ingest with three small field columns
/// (7% without them).
pub const MAX_SMALL_BATCH_ROWS: usize = 8192;
/// Decoded bytes of a batch of more than [`MAX_BATCH_ROWS`] rows, at most.
pub const SMALL_BATCH_BYTES: u64 = 4 << 20;
/// Deepest nesting of Thrift structs and lists in a page header (the crate's own
/// limit when skipping).
const MAX_DEPTH: u32 = 64;

/// What the walk of one column chunk found.
#[derive(Debug, Default, Clone)]
pub struct ChunkBytes {
    /// An upper bound on the decoded bytes one row of this column adds to a batch.
    pub per_row: u64,
    /// File offsets of the `is_compressed = false` flags of v2 data pages that are
    /// compressed all the same ([`Decoding::v2_always_compressed`]): the byte
    /// holding each flag, for [`crate::parquet_compat::FlagsSetTrue`].
    pub compressed_flags: Vec<u64>,
}

/// How a column of a chunk is decoded, which decides what one row can cost.
#[derive(Debug, Clone, Copy)]
pub struct Decoding {
    /// Rows of the row group.
    pub rows: u64,
    /// Whether dictionary-encoded values are copied out of the dictionary per row
    /// (plain binary arrays do; view arrays point into it).
    pub expands_dictionary: bool,
    /// Whether v2 data pages are compressed whatever their `is_compressed` flag
    /// says (parquet-cpp before Arrow 3.0 wrote `false` over compressed data:
    /// [`crate::parquet_compat::v2_pages_always_compressed`]).
    pub v2_always_compressed: bool,
}

/// A refused chunk: where (`page at byte N`) and why.
#[derive(Debug)]
pub struct PageError {
    /// Byte offset of the page header in the file.
    pub offset: u64,
    /// What is wrong.
    pub kind: PageErrorKind,
}

/// Why a page was refused.
#[derive(Debug)]
pub enum PageErrorKind {
    /// The header is malformed or its sizes cannot be right.
    Corrupt(String),
    /// The page decodes to more than [`MAX_PAGE_SIZE`] bytes.
    TooLarge(u64),
    /// Reading the file failed.
    Io(io::Error),
}

/// Largest output of `codec` from `n` compressed bytes, where the format bounds it.
fn max_expansion(codec: Compression, n: u64) -> Option<u64> {
    let ratio = match codec {
        // A copy of at most 64 bytes costs at least 3 bytes.
        Compression::SNAPPY => 22,
        // A 258-byte match costs at least 2 bits.
        Compression::GZIP(_) => 1032,
        // Each further byte of match length adds at most 255.
        Compression::LZ4 | Compression::LZ4_RAW => 256,
        // A block holds at most 128 KiB; the smallest (an RLE block) takes 4 bytes.
        Compression::ZSTD(_) => 32768,
        // Brotli's bound is too loose to help; MAX_PAGE_SIZE applies.
        _ => return None,
    };
    Some(n.saturating_mul(ratio))
}

/// The fewest encoded bytes one value of `physical` takes (in a dictionary page,
/// which is PLAIN-encoded), in eighths of a byte.
fn min_value_eighths(physical: PhysicalType, type_length: i32) -> u64 {
    match physical {
        PhysicalType::BOOLEAN => 1,
        PhysicalType::INT32 | PhysicalType::FLOAT => 32,
        PhysicalType::INT64 | PhysicalType::DOUBLE => 64,
        PhysicalType::INT96 => 96,
        // A 4-byte length prefix.
        PhysicalType::BYTE_ARRAY => 32,
        PhysicalType::FIXED_LEN_BYTE_ARRAY => (type_length.max(1) as u64) * 8,
    }
}

/// The decoded width of one value, for types whose values all have one width.
fn fixed_width(physical: PhysicalType, type_length: i32) -> Option<u64> {
    match physical {
        PhysicalType::BYTE_ARRAY => None,
        PhysicalType::FIXED_LEN_BYTE_ARRAY => Some(type_length.max(0) as u64),
        _ => Some(16),
    }
}

/// Walks the page headers of `column` (a chunk of `file`) and checks each page.
pub fn check_chunk(
    file: &ParquetInput,
    column: &ColumnChunkMetaData,
    decoding: Decoding,
) -> Result<ChunkBytes, PageError> {
    let (start, len) = column.byte_range();
    let physical = column.column_type();
    let type_length = column.column_descr().type_length();
    let codec = column.compression();
    let mut input = Input::new(file, start, start + len).map_err(|e| PageError {
        offset: start,
        kind: PageErrorKind::Io(e),
    })?;
    let mut per_row = fixed_width(physical, type_length).unwrap_or(0);
    if per_row > MAX_PAGE_SIZE {
        return Err(PageError {
            offset: start,
            kind: PageErrorKind::TooLarge(per_row),
        });
    }
    let mut values_seen = 0u64;
    let mut compressed_flags = Vec::new();
    while input.pos < input.end {
        let offset = input.pos;
        let error = |kind| PageError { offset, kind };
        let corrupt = |reason: String| error(PageErrorKind::Corrupt(reason));
        let header = PageHeader::read(&mut input).map_err(|e| match e {
            ReadError::Io(e) => error(PageErrorKind::Io(e)),
            ReadError::Bad(what) => corrupt(format!("malformed page header: {what}")),
        })?;
        let remaining = input.end - input.pos;
        let (compressed, uncompressed) = (header.compressed, header.uncompressed);
        if compressed < 0 || compressed as u64 > remaining || uncompressed < 0 {
            return Err(corrupt(format!(
                "the page claims {compressed} bytes ({uncompressed} uncompressed) but the column chunk has {remaining} left"
            )));
        }
        let (compressed, uncompressed) = (compressed as u64, uncompressed as u64);
        let mut is_compressed = header.is_compressed;
        if let (Some(flag), true) = (header.is_compressed_false_at, decoding.v2_always_compressed) {
            if codec != Compression::UNCOMPRESSED && header.page_type == 3 {
                is_compressed = true;
                compressed_flags.push(flag);
            }
        }
        // What the page decodes to: its claim, or the bytes themselves if stored plain.
        let decompresses = codec != Compression::UNCOMPRESSED && is_compressed;
        let decoded = if decompresses {
            uncompressed
        } else {
            compressed
        };
        if decompresses {
            let levels = header.levels_len;
            if levels > compressed || levels > uncompressed {
                return Err(corrupt(format!(
                    "the page's {levels} bytes of levels do not fit in its {compressed} bytes"
                )));
            }
            if let Some(most) = max_expansion(codec, compressed - levels) {
                if uncompressed - levels > most {
                    return Err(corrupt(format!(
                        "the page claims {uncompressed} bytes uncompressed, but {} {codec} bytes decompress to at most {most}",
                        compressed - levels
                    )));
                }
            }
        }
        if decoded > MAX_PAGE_SIZE {
            return Err(error(PageErrorKind::TooLarge(decoded)));
        }
        match header.page_type {
            // Dictionary page.
            2 => {
                let entries = header.num_values.unwrap_or(0);
                let eighths = min_value_eighths(physical, type_length);
                if entries < 0 || (entries as u64).saturating_mul(eighths) > decoded * 8 {
                    return Err(corrupt(format!(
                        "the dictionary page claims {entries} values in {decoded} bytes"
                    )));
                }
                if decoding.expands_dictionary && physical == PhysicalType::BYTE_ARRAY {
                    // Any row may repeat the longest entry (and adds an offset of
                    // at most 8 bytes): read from the chunk's first page (the one a
                    // page reader takes as the dictionary), else the whole page.
                    let longest = (offset == start)
                        .then(|| longest_entry(file, column, decoding.rows))
                        .flatten()
                        .map_or(decoded, |longest| longest.saturating_add(8));
                    per_row = per_row.max(longest);
                }
            }
            // Data pages, v1 and v2.
            0 | 3 => {
                let rows = match header.page_type {
                    0 => header.num_values.unwrap_or(0),
                    _ => header.num_rows.unwrap_or(0),
                };
                if rows < 0 {
                    return Err(corrupt(format!("the data page claims {rows} rows")));
                }
                values_seen += rows as u64;
                if values_seen > decoding.rows && column.column_descr().max_rep_level() == 0 {
                    return Err(corrupt(format!(
                        "the data pages hold {values_seen} values, more than the row group's {} rows",
                        decoding.rows
                    )));
                }
                if rows > 0 {
                    per_row = per_row.max(decoded.div_ceil(rows as u64));
                }
                // DELTA_BYTE_ARRAY builds each value from a prefix of the one
                // before: every row may be as long as all the page's bytes.
                if header.encoding == Some(DELTA_BYTE_ARRAY) {
                    per_row = per_row.max(decoded);
                }
            }
            // Index pages are skipped by the decoder.
            1 => {}
            other => return Err(corrupt(format!("unknown page type {other}"))),
        }
        input.skip(compressed).map_err(|e| match e {
            ReadError::Io(e) => error(PageErrorKind::Io(e)),
            ReadError::Bad(what) => corrupt(what.into()),
        })?;
    }
    Ok(ChunkBytes {
        per_row,
        compressed_flags,
    })
}

/// Rows per batch so that `per_row` bytes a row stay within [`BATCH_BYTES`]:
/// up to [`MAX_BATCH_ROWS`], or up to [`MAX_SMALL_BATCH_ROWS`] while they stay
/// within [`SMALL_BATCH_BYTES`]; at least one.
pub fn batch_rows(per_row: u64) -> usize {
    let per_row = per_row.max(1);
    let within_budget = (BATCH_BYTES / per_row).min(MAX_BATCH_ROWS as u64);
    let small = (SMALL_BATCH_BYTES / per_row).min(MAX_SMALL_BATCH_ROWS as u64);
    within_budget.max(small).max(1) as usize
}

enum ReadError {
    Io(io::Error),
    Bad(&'static str),
}

/// Sequential reads of header bytes within `pos..end` of a file.
struct Input {
    reader: BufReader<SequentialReader>,
    pos: u64,
    end: u64,
    /// Offset of the header byte of the struct field being read.
    field_at: u64,
}

impl Input {
    fn new(file: &ParquetInput, start: u64, end: u64) -> io::Result<Input> {
        Ok(Input {
            reader: BufReader::with_capacity(8 << 10, file.reader_at(start)),
            pos: start,
            end,
            field_at: start,
        })
    }

    fn byte(&mut self) -> Result<u8, ReadError> {
        if self.pos >= self.end {
            return Err(ReadError::Bad("it runs past the end of the column chunk"));
        }
        let mut byte = [0u8];
        match self.reader.read_exact(&mut byte) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(ReadError::Bad("it runs past the end of the file"))
            }
            Err(e) => return Err(ReadError::Io(e)),
        }
        self.pos += 1;
        Ok(byte[0])
    }

    fn skip(&mut self, n: u64) -> Result<(), ReadError> {
        if n > self.end - self.pos {
            return Err(ReadError::Bad(
                "a length runs past the end of the column chunk",
            ));
        }
        let step = i64::try_from(n).map_err(|_| ReadError::Bad("a length is too large"))?;
        self.reader.seek_relative(step).map_err(ReadError::Io)?;
        self.pos += n;
        Ok(())
    }

    /// An unsigned LEB128 varint of at most 10 bytes.
    fn varint(&mut self) -> Result<u64, ReadError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f).wrapping_shl(shift);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ReadError::Bad("a varint is longer than 10 bytes"))
    }

    /// A zigzag varint read as the crate reads an i32 (truncating).
    fn i32(&mut self) -> Result<i32, ReadError> {
        let v = self.varint()?;
        Ok(((v >> 1) as i64 ^ -((v & 1) as i64)) as i32)
    }

    /// Skips a value of compact type `kind` (the crate's `skip_till_depth`).
    fn skip_value(&mut self, kind: u8, depth: u32) -> Result<(), ReadError> {
        if depth >= MAX_DEPTH {
            return Err(ReadError::Bad("it nests too deeply"));
        }
        match kind {
            1 | 2 => {}
            3 => {
                self.byte()?;
            }
            4..=6 => {
                self.varint()?;
            }
            7 => self.skip(8)?,
            8 => {
                let len = self.varint()?;
                self.skip(len)?;
            }
            9 | 10 => {
                let header = self.byte()?;
                if header == 0 {
                    return Ok(());
                }
                let element = header & 0x0f;
                let mut size = u64::from(header >> 4);
                if size == 15 {
                    size = self.varint()?;
                }
                self.check_count(size)?;
                check_element(element)?;
                for _ in 0..size {
                    self.skip_value(element, depth + 1)?;
                }
            }
            11 => {
                let size = self.varint()?;
                self.check_count(size)?;
                if size > 0 {
                    let types = self.byte()?;
                    let (key, value) = (types >> 4, types & 0x0f);
                    check_element(key)?;
                    check_element(value)?;
                    for _ in 0..size {
                        self.skip_value(key, depth + 1)?;
                        self.skip_value(value, depth + 1)?;
                    }
                }
            }
            12 => self.each_field(depth + 1, |input, _, kind, depth| {
                input.skip_value(kind, depth)
            })?,
            13 => self.skip(16)?,
            _ => return Err(ReadError::Bad("an unknown field type")),
        }
        Ok(())
    }

    /// A collection cannot have more elements than bytes remain (and at most
    /// `i32::MAX`, as the crate requires).
    fn check_count(&self, size: u64) -> Result<(), ReadError> {
        if size > (self.end - self.pos) || size > i32::MAX as u64 {
            return Err(ReadError::Bad(
                "a collection claims more elements than bytes",
            ));
        }
        Ok(())
    }

    /// Calls `field(input, id, type, depth)` for each field of a struct, to its stop.
    fn each_field(
        &mut self,
        depth: u32,
        mut field: impl FnMut(&mut Input, i16, u8, u32) -> Result<(), ReadError>,
    ) -> Result<(), ReadError> {
        if depth >= MAX_DEPTH {
            return Err(ReadError::Bad("it nests too deeply"));
        }
        let mut last = 0i16;
        loop {
            let at = self.pos;
            let header = self.byte()?;
            let kind = header & 0x0f;
            if kind == 0 {
                return Ok(());
            }
            let delta = header >> 4;
            let id = if delta != 0 {
                last.checked_add(i16::from(delta))
                    .ok_or(ReadError::Bad("a field id overflows"))?
            } else {
                self.i32()? as i16
            };
            self.field_at = at;
            field(self, id, kind, depth)?;
            last = id;
        }
    }
}

fn check_element(kind: u8) -> Result<(), ReadError> {
    match kind {
        1..=13 => Ok(()),
        _ => Err(ReadError::Bad("an unknown element type")),
    }
}

/// The fields of a Parquet `PageHeader` this module needs.
#[derive(Debug, Default)]
struct PageHeader {
    page_type: i32,
    uncompressed: i32,
    compressed: i32,
    /// `num_values` of a v1 data page or a dictionary page, or of a v2 data page.
    num_values: Option<i32>,
    /// `num_rows` of a v2 data page.
    num_rows: Option<i32>,
    /// A data page's value encoding.
    encoding: Option<i32>,
    /// A v2 data page's level bytes, stored uncompressed before the values.
    levels_len: u64,
    /// False only for a v2 data page stored uncompressed.
    is_compressed: bool,
    /// Where the header byte of a v2 page's `is_compressed = false` is (in the
    /// compact protocol a bool field's value is that byte's type nibble: 2 for
    /// false, 1 for true).
    is_compressed_false_at: Option<u64>,
}

const I32: u8 = 5;
/// The `Encoding` number of DELTA_BYTE_ARRAY.
const DELTA_BYTE_ARRAY: i32 = 7;
const STRUCT: u8 = 12;

/// A known field of an unexpected type is refused rather than read as the crate
/// would (which ignores the type): what passes here is read alike by both.
fn expect(kind: u8, wanted: u8) -> Result<(), ReadError> {
    match kind == wanted {
        true => Ok(()),
        false => Err(ReadError::Bad("a field has an unexpected type")),
    }
}

impl PageHeader {
    fn read(input: &mut Input) -> Result<PageHeader, ReadError> {
        let mut header = PageHeader {
            is_compressed: true,
            page_type: -1,
            uncompressed: -1,
            compressed: -1,
            ..PageHeader::default()
        };
        let (mut v2_def, mut v2_rep) = (0i32, 0i32);
        input.each_field(0, |input, id, kind, depth| {
            match id {
                1..=3 => {
                    expect(kind, I32)?;
                    let value = input.i32()?;
                    match id {
                        1 => header.page_type = value,
                        2 => header.uncompressed = value,
                        _ => header.compressed = value,
                    }
                }
                // Data page v1 (5), dictionary page (7): num_values is field 1,
                // a v1 page's encoding field 2.
                5 | 7 => {
                    expect(kind, STRUCT)?;
                    input.each_field(depth + 1, |input, field, kind, depth| match field {
                        1 => {
                            expect(kind, I32)?;
                            header.num_values = Some(input.i32()?);
                            Ok(())
                        }
                        2 if id == 5 => {
                            expect(kind, I32)?;
                            header.encoding = Some(input.i32()?);
                            Ok(())
                        }
                        _ => input.skip_value(kind, depth),
                    })?;
                }
                8 => {
                    expect(kind, STRUCT)?;
                    input.each_field(depth + 1, |input, id, kind, depth| {
                        match id {
                            1 | 3..=6 => {
                                expect(kind, I32)?;
                                let value = input.i32()?;
                                match id {
                                    1 => header.num_values = Some(value),
                                    3 => header.num_rows = Some(value),
                                    4 => header.encoding = Some(value),
                                    5 => v2_def = value,
                                    _ => v2_rep = value,
                                }
                            }
                            7 => match kind {
                                1 => {
                                    header.is_compressed = true;
                                    header.is_compressed_false_at = None;
                                }
                                2 => {
                                    header.is_compressed = false;
                                    header.is_compressed_false_at = Some(input.field_at);
                                }
                                _ => return Err(ReadError::Bad("a field has an unexpected type")),
                            },
                            _ => input.skip_value(kind, depth)?,
                        }
                        Ok(())
                    })?;
                }
                _ => input.skip_value(kind, depth)?,
            }
            Ok(())
        })?;
        if header.page_type < 0 {
            return Err(ReadError::Bad("the page type is missing"));
        }
        if v2_def < 0 || v2_rep < 0 {
            return Err(ReadError::Bad("negative level lengths"));
        }
        header.levels_len = v2_def as u64 + v2_rep as u64;
        Ok(header)
    }
}
