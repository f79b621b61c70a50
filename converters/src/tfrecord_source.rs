//! TFRecord files (plain or GZIP-compressed), as TensorFlow writes them. Each
//! record is framed as
//!
//! ```text
//! u64 length (LE) | u32 masked CRC32C of the length bytes | data | u32 masked CRC32C of data
//! ```
//!
//! Both checksums are verified. By default a record's value is its serialized
//! bytes; with [`TfRecordOptions::feature`] it is one `bytes_list` feature of the
//! `tf.train.Example` the record holds, and [`TfRecordOptions::key_feature`] keys
//! records by another. The other features become fields
//! ([`TfRecordOptions::fields`]), typed by a prescan of every file (see
//! [`crate::tfrecord_fields`]). A `tf.train.SequenceExample`'s context features
//! are read as an Example's features (the same wire shape), and its feature
//! lists become list fields ([`crate::sequence_example`]).
//!
//! Limits: a record is at most [`MAX_RECORD_SIZE`] bytes. A declared length is
//! checked before anything is allocated for it: in a plain file against the bytes
//! that remain, in a GZIP file against what the remaining compressed bytes can
//! decompress to (deflate expands at most [`DEFLATE_MAX_RATIO`]-fold).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::compression::Compression;
use crate::example::{self, FeatureError};
use crate::field_options::FieldSelection;
use crate::sequence_example;
use crate::tfrecord_fields::{prescan, record_fields, FeatureField};
use crate::{Fields, Fused, LazyInput, Origin, Record, Skipped, Source, SourceError};

/// Largest record accepted: one value of the store is at most 4 GiB.
pub(crate) const MAX_RECORD_SIZE: u64 = crate::MAX_VALUE_SIZE;
/// Deflate's largest expansion: a 258-byte match costs at least 2 bits.
pub(crate) const DEFLATE_MAX_RATIO: u64 = 1032;
/// Read-ahead of the compressed file, and allowance for what the decoder holds.
const GZIP_BUFFER: u64 = 1 << 20;
/// Memory reserved up front for a record whose length cannot be checked against
/// the file (GZIP, a pipe): more grows as data actually arrives.
const UNCHECKED_RESERVE: u64 = 16 << 20;
const MASK_DELTA: u32 = 0xa282_ead8;

/// What a [`TfRecordSource`] extracts from each record.
#[derive(Clone, Debug, Default)]
pub struct TfRecordOptions {
    /// Store this `bytes_list` feature of each `tf.train.Example` instead of the
    /// whole serialized record (e.g. `image/encoded`).
    pub feature: Option<String>,
    /// Key each record by this `bytes_list` feature (e.g. `image/filename`);
    /// without it the source is keyless.
    pub key_feature: Option<String>,
    /// Which other features become fields. Default (`None`): all of them when
    /// `feature` is given; none when the value is the whole record, which holds
    /// them already. Any fields cost a prescan: every file is read twice.
    pub fields: Option<FieldSelection>,
}

/// TensorFlow's masked CRC32C.
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Counts the bytes read from the compressed file under a GZIP decoder.
struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

struct OpenFile {
    /// Shared with its records' origins.
    path: Arc<Path>,
    reader: Box<dyn Read + Send>,
    /// The file's size, if it is a regular file (not a pipe).
    file_len: Option<u64>,
    /// Bytes of the file a GZIP decoder has read so far.
    compressed_read: Arc<AtomicU64>,
    /// Records read so far from this file.
    record: u64,
    /// Byte offset (in the decompressed stream) of the next record.
    offset: u64,
    gzip: bool,
}

/// A file, or an input opened on demand.
#[derive(Clone)]
enum Input {
    Path(PathBuf),
    Lazy(LazyInput),
}

impl Input {
    /// The name records' origins and messages show.
    fn name(&self) -> PathBuf {
        match self {
            Input::Path(path) => path.clone(),
            Input::Lazy(input) => PathBuf::from(&input.name),
        }
    }
}

/// Streams the records of TFRecord files, in order.
pub struct TfRecordSource {
    pending: VecDeque<Input>,
    current: Option<OpenFile>,
    options: TfRecordOptions,
    skipped: Skipped,
    /// Every input, for the prescan.
    inputs: Vec<Input>,
    /// The features taken as fields.
    selection: FieldSelection,
    /// Their columns, once the prescan (run by the first `next`) has decided them.
    columns: Option<Vec<FeatureField>>,
}

impl TfRecordSource {
    /// A source over `paths`, read in the order given. Every file must exist.
    /// When fields are asked for, the first call to `next` prescans every file.
    pub fn new(
        paths: &[PathBuf],
        options: TfRecordOptions,
    ) -> Result<Fused<TfRecordSource>, SourceError> {
        let (selection, columns) = Self::selection(&options)?;
        for path in paths {
            std::fs::metadata(path).map_err(|source| SourceError::Io {
                path: path.clone(),
                source,
            })?;
        }
        Ok(Fused::new(TfRecordSource {
            pending: paths.iter().cloned().map(Input::Path).collect(),
            current: None,
            options,
            skipped: Skipped::default(),
            inputs: paths.iter().cloned().map(Input::Path).collect(),
            selection,
            columns,
        }))
    }

    /// A source over inputs opened one after another as they are reached (objects
    /// in a store, streamed), in order. A declared record length is checked
    /// against each input's `len` as against a file's size. Fields, when asked
    /// for, cost a prescan that opens every input once more.
    pub fn from_inputs(
        inputs: Vec<LazyInput>,
        options: TfRecordOptions,
    ) -> Result<Fused<TfRecordSource>, SourceError> {
        let (selection, columns) = Self::selection(&options)?;
        let inputs: Vec<Input> = inputs.into_iter().map(Input::Lazy).collect();
        Ok(Fused::new(TfRecordSource {
            pending: inputs.iter().cloned().collect(),
            current: None,
            options,
            skipped: Skipped::default(),
            inputs,
            selection,
            columns,
        }))
    }

    /// The features taken as fields, and their columns when that is none.
    fn selection(
        options: &TfRecordOptions,
    ) -> Result<(FieldSelection, Option<Vec<FeatureField>>), SourceError> {
        let selection = match &options.fields {
            Some(selection) => selection.clone(),
            None if options.feature.is_some() => FieldSelection::All,
            None => FieldSelection::None,
        };
        let mut taken = Vec::new();
        if let Some(feature) = &options.feature {
            taken.push((feature.as_str(), "value feature"));
        }
        if let Some(key) = &options.key_feature {
            taken.push((key.as_str(), "key feature"));
        }
        selection.refuse(&taken)?;
        let columns = selection.is_none().then(Vec::new);
        Ok((selection, columns))
    }

    /// Decides the field columns from every record of every input.
    fn prescan(&self) -> Result<Vec<FeatureField>, SourceError> {
        let skip: Vec<&str> = [&self.options.feature, &self.options.key_feature]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        for input in &self.inputs {
            if let Input::Path(path) = input {
                let regular = std::fs::metadata(path).map_err(|source| SourceError::Io {
                    path: path.clone(),
                    source,
                })?;
                if !regular.is_file() {
                    return Err(SourceError::Usage(format!(
                        "{}: not a regular file; taking features as fields reads every file twice (a prescan decides each feature's type), so pass the files themselves, or `fields` none",
                        path.display()
                    )));
                }
            }
        }
        let names: Vec<PathBuf> = self.inputs.iter().map(Input::name).collect();
        prescan(&names, &self.selection, &skip, |at, each| {
            scan_input(self.inputs[at].clone(), each)
        })
    }

    fn open(input: Input) -> Result<OpenFile, SourceError> {
        let (path, raw, file_len): (PathBuf, Box<dyn Read + Send>, Option<u64>) = match input {
            Input::Path(path) => {
                let io_error = |source| SourceError::Io {
                    path: path.clone(),
                    source,
                };
                let file = File::open(&path).map_err(io_error)?;
                let metadata = file.metadata().map_err(io_error)?;
                let file_len = metadata.is_file().then_some(metadata.len());
                (path, Box::new(file), file_len)
            }
            Input::Lazy(input) => {
                let path = PathBuf::from(&input.name);
                let raw = (input.open)().map_err(|source| SourceError::Io {
                    path: path.clone(),
                    source,
                })?;
                (path, raw, input.len)
            }
        };
        let io_error = |source| SourceError::Io {
            path: path.clone(),
            source,
        };
        let compressed_read = Arc::new(AtomicU64::new(0));
        let counted = Counted {
            inner: raw,
            count: compressed_read.clone(),
        };
        let mut reader = BufReader::with_capacity(GZIP_BUFFER as usize, counted);
        // TensorFlow writes plain and GZIP files only: anything else is read as
        // plain (a zstd magic then fails the length checksum), since the length
        // bound below relies on deflate's largest expansion. A plain file whose
        // first record is 0x8b1f bytes long (modulo 2^16) also starts with the
        // gzip magic: its valid length checksum tells it apart.
        let gzip = Compression::of_reader(&mut reader).map_err(io_error)? == Compression::Gzip
            && !starts_with_a_frame(reader.buffer());
        let reader: Box<dyn Read + Send> = match gzip {
            true => Box::new(BufReader::new(
                Compression::Gzip.decoder(reader).map_err(io_error)?,
            )),
            false => Box::new(reader),
        };
        Ok(OpenFile {
            path: Arc::from(path),
            reader,
            file_len,
            compressed_read,
            record: 0,
            offset: 0,
            gzip,
        })
    }

    /// Reads the next framed record of the current file; `None` at its clean end.
    fn read_frame(file: &mut OpenFile) -> Result<Option<Vec<u8>>, SourceError> {
        let corrupt = |file: &OpenFile, reason: String| SourceError::Corrupt {
            file: file.path.display().to_string(),
            location: format!(
                "record {} at byte {}{}",
                file.record,
                file.offset,
                if file.gzip {
                    " of the decompressed stream"
                } else {
                    ""
                }
            ),
            reason,
        };
        let mut header = [0u8; 12];
        match read_full(&mut file.reader, &mut header) {
            Ok(0) => return Ok(None),
            Ok(12) => {}
            Ok(n) => {
                return Err(corrupt(
                    file,
                    format!("truncated: {n} of the 12 header bytes"),
                ))
            }
            Err(e) => return Err(corrupt(file, e.to_string())),
        }
        let length = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        let length_crc = u32::from_le_bytes(header[8..].try_into().expect("4 bytes"));
        if masked_crc32c(&header[..8]) != length_crc {
            return Err(corrupt(file, "length checksum mismatch".into()));
        }
        if length > MAX_RECORD_SIZE {
            return Err(corrupt(
                file,
                format!("record of {length} bytes exceeds the 4 GiB limit"),
            ));
        }
        // The data and its checksum must fit in what the file still holds.
        let needed = length + 4;
        let reserve = match (file.file_len, file.gzip) {
            (Some(file_len), false) => {
                let remaining = file_len.saturating_sub(file.offset + 12);
                // Refused before reading: the same messages a read to the end gives.
                if remaining < length {
                    return Err(corrupt(
                        file,
                        format!("truncated: {remaining} of {length} data bytes"),
                    ));
                }
                if needed > remaining {
                    return Err(corrupt(
                        file,
                        format!("truncated: {} of the 4 checksum bytes", remaining - length),
                    ));
                }
                length
            }
            (Some(file_len), true) => {
                let read = file.compressed_read.load(Ordering::Relaxed);
                let left = file_len.saturating_sub(read) + GZIP_BUFFER;
                let most = left.saturating_mul(DEFLATE_MAX_RATIO) + GZIP_BUFFER;
                if needed > most {
                    return Err(corrupt(
                        file,
                        format!("truncated: the record claims {length} data bytes, more than the rest of the compressed file can hold"),
                    ));
                }
                length.min(UNCHECKED_RESERVE)
            }
            (None, _) => length.min(UNCHECKED_RESERVE),
        };
        // Grow as data arrives rather than trusting the length for the allocation.
        let mut data = Vec::with_capacity(reserve as usize);
        let got = (&mut file.reader)
            .take(length)
            .read_to_end(&mut data)
            .map_err(|e| corrupt(file, e.to_string()))?;
        if got as u64 != length {
            return Err(corrupt(
                file,
                format!("truncated: {got} of {length} data bytes"),
            ));
        }
        let mut footer = [0u8; 4];
        match read_full(&mut file.reader, &mut footer) {
            Ok(4) => {}
            Ok(n) => {
                return Err(corrupt(
                    file,
                    format!("truncated: {n} of the 4 checksum bytes"),
                ))
            }
            Err(e) => return Err(corrupt(file, e.to_string())),
        }
        if masked_crc32c(&data) != u32::from_le_bytes(footer) {
            return Err(corrupt(file, "data checksum mismatch".into()));
        }
        Ok(Some(data))
    }

    fn to_record(&self, file: &OpenFile, data: Vec<u8>) -> Result<Record, SourceError> {
        let fields = match self.columns.as_deref() {
            Some(columns) if !columns.is_empty() => {
                record_fields(columns, &data).map_err(|reason| SourceError::Invalid {
                    file: file.path.display().to_string(),
                    location: format!("record {} at byte {}", file.record, file.offset),
                    reason,
                })?
            }
            _ => Fields::new(),
        };
        let origin = Origin::Record {
            file: Arc::clone(&file.path),
            record: file.record,
            offset: file.offset,
        };
        let bad = |error: FeatureError| {
            SourceError::Invalid {
            file: file.path.display().to_string(),
            location: format!("record {} at byte {}", file.record, file.offset),
            reason: match &error {
                FeatureError::Missing(name) if sequence_example::has_list(&data, name) => format!(
                    "{name:?} is a feature list of this SequenceExample; the value and key are taken from its context features (the feature lists become fields)"
                ),
                _ => error.to_string(),
            },
        }
        };
        let key = match &self.options.key_feature {
            Some(name) => example::bytes_feature(&data, name).map_err(bad)?,
            None => Vec::new(),
        };
        let value = match &self.options.feature {
            Some(name) => example::bytes_feature(&data, name).map_err(bad)?,
            None => data,
        };
        Ok(Record {
            key,
            value,
            origin,
            fields,
        })
    }
}

/// Called with a record's number, frame offset and bytes.
type RecordVisitor<'a> = dyn FnMut(u64, u64, &[u8]) -> Result<(), SourceError> + 'a;

/// Reads every record of a TFRecord input, calling `each` with its number,
/// frame offset and bytes; stops at the first error.
fn scan_input(input: Input, each: &mut RecordVisitor<'_>) -> Result<(), SourceError> {
    let mut file = TfRecordSource::open(input)?;
    while let Some(data) = TfRecordSource::read_frame(&mut file)? {
        each(file.record, file.offset, &data)?;
        file.record += 1;
        file.offset += 16 + data.len() as u64;
    }
    Ok(())
}

/// Whether `prefix` starts with a TFRecord length and its valid masked checksum
/// (a gzip header matches by chance once in 2^32).
fn starts_with_a_frame(prefix: &[u8]) -> bool {
    prefix.len() >= 12 && masked_crc32c(&prefix[..8]).to_le_bytes() == prefix[8..12]
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

impl Iterator for TfRecordSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.columns.is_none() {
            match self.prescan() {
                Ok(columns) => self.columns = Some(columns),
                Err(error) => return Some(Err(error)),
            }
        }
        loop {
            let mut file = match self.current.take() {
                Some(file) => file,
                None => match Self::open(self.pending.pop_front()?) {
                    Ok(file) => file,
                    Err(error) => return Some(Err(error)),
                },
            };
            match Self::read_frame(&mut file) {
                Ok(None) => continue, // next file
                Ok(Some(data)) => {
                    let frame = 16 + data.len() as u64;
                    let record = self.to_record(&file, data);
                    file.record += 1;
                    file.offset += frame;
                    self.current = Some(file);
                    return Some(record);
                }
                Err(error) => return Some(Err(error)),
            }
        }
    }
}

impl Source for TfRecordSource {
    fn keyed(&self) -> bool {
        self.options.key_feature.is_some()
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames `data` as TensorFlow does.
    pub(crate) fn frame(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let length = (data.len() as u64).to_le_bytes();
        out.extend_from_slice(&length);
        out.extend_from_slice(&masked_crc32c(&length).to_le_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
        out
    }

    #[test]
    fn masked_crc_matches_tensorflow() {
        // TensorFlow's crc32c_test: Mask(Value("foo")) and the unmask round trip.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        let crc = crc32c::crc32c(b"foo");
        assert_eq!(
            masked_crc32c(b"foo"),
            crc.rotate_right(15).wrapping_add(MASK_DELTA)
        );
        assert_ne!(masked_crc32c(b"foo"), crc);
    }

    #[test]
    fn reads_records_and_reports_corruption_with_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tfrecord");
        let mut bytes = frame(b"first");
        bytes.extend(frame(b""));
        bytes.extend(frame(b"third record"));
        std::fs::write(&path, &bytes).unwrap();
        let values: Vec<Vec<u8>> =
            TfRecordSource::new(std::slice::from_ref(&path), TfRecordOptions::default())
                .unwrap()
                .map(|r| r.unwrap().value)
                .collect();
        assert_eq!(values, [&b"first"[..], b"", b"third record"]);

        let mut broken = bytes.clone();
        broken[16 + 5 + 16 + 12 + 3] ^= 1; // a data byte of record 2
        std::fs::write(&path, &broken).unwrap();
        let err = TfRecordSource::new(std::slice::from_ref(&path), TfRecordOptions::default())
            .unwrap()
            .find_map(Result::err)
            .unwrap()
            .to_string();
        assert!(
            err.contains("record 2 at byte 37") && err.contains("data checksum"),
            "{err}"
        );

        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let err = TfRecordSource::new(&[path], TfRecordOptions::default())
            .unwrap()
            .find_map(Result::err)
            .unwrap()
            .to_string();
        assert!(
            err.contains("truncated") && err.contains("record 2"),
            "{err}"
        );
    }

    #[test]
    fn a_plain_file_that_starts_with_the_gzip_magic_is_read_as_plain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tfrecord");
        // A first record of 0x8b1f bytes: its length begins 1f 8b.
        let data = vec![7u8; 0x8b1f];
        let bytes = frame(&data);
        assert_eq!(bytes[..2], [0x1f, 0x8b]);
        std::fs::write(&path, bytes).unwrap();
        let values: Vec<Vec<u8>> = TfRecordSource::new(&[path], TfRecordOptions::default())
            .unwrap()
            .map(|r| r.unwrap().value)
            .collect();
        assert_eq!(values, [data]);
    }

    #[test]
    fn a_huge_declared_length_is_refused_without_allocating() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("evil.tfrecord");
        let length = (1u64 << 62).to_le_bytes();
        let mut bytes = length.to_vec();
        bytes.extend_from_slice(&masked_crc32c(&length).to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        let err = TfRecordSource::new(&[path], TfRecordOptions::default())
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("exceeds the 4 GiB limit"), "{err}");
    }
}
