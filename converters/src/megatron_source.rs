//! Megatron indexed datasets (`PREFIX.bin` + `PREFIX.idx`, see
//! [`crate::megatron_index`]) as records: one per sequence, keyless, the value
//! its tokens as the little-endian bytes of the dataset's dtype (the `.bin`'s
//! bytes as they are), the fields `document` (the document index) and `length`
//! (tokens), and `mode` in a multimodal dataset. The dtype and the document
//! count are the dataset's metadata (`megatron`), so an export can write the
//! files again byte for byte.
//!
//! The whole `.idx` is read (its size is real: the counts are checked against
//! it before anything depends on them) and every sequence is checked against
//! the `.bin`'s size before the first record; the `.bin` is read by bounded
//! positioned reads, one sequence at a time. Both files must be regular files.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bcd_fields::{FieldValue, Fields};

use crate::megatron_index::{check_header, IndexError, MegatronIndex, HEADER_LEN};
use crate::regular_file::{open_regular, read_exact_at, ReadRegularError};
use crate::{Fused, Origin, Record, Skipped, Source, SourceError, MAX_VALUE_SIZE};

/// The metadata key under which a Megatron source describes its dataset.
pub const METADATA_KEY: &str = "megatron";

/// The `.idx` and `.bin` of a dataset named by `PREFIX`, `PREFIX.idx` or
/// `PREFIX.bin`.
pub fn dataset_files(name: &Path) -> (PathBuf, PathBuf) {
    let raw = name.as_os_str().as_encoded_bytes();
    let prefix = if raw.ends_with(b".idx") || raw.ends_with(b".bin") {
        // Only the ASCII suffix goes; the rest keeps its bytes.
        crate::bytes_to_path(&raw[..raw.len() - 4])
    } else {
        name.to_path_buf()
    };
    let with = |suffix: &str| {
        let mut path = prefix.clone().into_os_string();
        path.push(suffix);
        PathBuf::from(path)
    };
    (with(".idx"), with(".bin"))
}

/// Reads Megatron indexed datasets, one after another.
pub struct MegatronSource {
    pending: std::collections::VecDeque<PathBuf>,
    current: Option<Open>,
    skipped: Skipped,
    metadata: serde_json::Map<String, serde_json::Value>,
    /// Document indices of the datasets read before, as Megatron's
    /// `IndexedDatasetBuilder.add_index` joins them: each later dataset's
    /// indices but its first 0, shifted by the sequences before it.
    documents_before: u64,
}

struct Open {
    /// Shared with its records' origins.
    bin_path: Arc<Path>,
    bin: File,
    index: MegatronIndex,
    next: usize,
    /// The document of the sequence `next`: the last document index at or
    /// before it.
    document: usize,
    /// Added to `document`: the documents of the datasets before this one.
    document_offset: u64,
}

fn io_error(path: &Path, error: ReadRegularError) -> SourceError {
    match error {
        ReadRegularError::Io(source) => SourceError::Io {
            path: path.to_path_buf(),
            source,
        },
        ReadRegularError::NotRegular(kind) => SourceError::Invalid {
            file: path.display().to_string(),
            location: "the file".into(),
            reason: format!("is {kind}, not a regular file; only regular files are read"),
        },
        ReadRegularError::TooLarge(size) => SourceError::TooLarge {
            file: path.display().to_string(),
            location: "the file".into(),
            what: "the file".into(),
            size,
            limit: MAX_VALUE_SIZE,
        },
    }
}

/// Opens and checks one dataset: both files, every count, pointer and length.
pub fn open_dataset(name: &Path) -> Result<(PathBuf, File, MegatronIndex), SourceError> {
    let (idx_path, bin_path) = dataset_files(name);
    let (idx, idx_len) = open_regular(&idx_path).map_err(|e| io_error(&idx_path, e))?;
    let (bin, bin_len) = open_regular(&bin_path).map_err(|e| io_error(&bin_path, e))?;
    let corrupt = |error: IndexError| SourceError::Corrupt {
        file: idx_path.display().to_string(),
        location: "the index".into(),
        reason: error.to_string(),
    };
    let read_error = |source| SourceError::Io {
        path: idx_path.clone(),
        source,
    };
    // The header first: counts that do not match the file's real size are
    // refused before anything of that size is set aside (a sparse file can
    // claim any size, so the header must agree with it too).
    let mut idx = idx.take(idx_len);
    let mut bytes = Vec::with_capacity(HEADER_LEN);
    (&mut idx)
        .take(HEADER_LEN as u64)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    check_header(&bytes, idx_len).map_err(corrupt)?;
    bytes.reserve_exact(idx_len as usize - bytes.len());
    idx.read_to_end(&mut bytes).map_err(read_error)?;
    let index = MegatronIndex::parse(bytes, bin_len).map_err(|error| {
        let file = match error {
            IndexError::BadSequence { .. } => {
                format!("{} (with {})", idx_path.display(), bin_path.display())
            }
            _ => idx_path.display().to_string(),
        };
        SourceError::Corrupt {
            file,
            location: "the index".into(),
            reason: error.to_string(),
        }
    })?;
    Ok((bin_path, bin, index))
}

impl MegatronSource {
    /// Reads the datasets named by `names` (each `PREFIX`, `PREFIX.idx` or
    /// `PREFIX.bin`), in order. Each is opened and checked when reached.
    pub fn new(names: &[PathBuf]) -> Fused<MegatronSource> {
        Fused::new(MegatronSource {
            pending: names.iter().cloned().collect(),
            current: None,
            skipped: Skipped::default(),
            metadata: serde_json::Map::new(),
            documents_before: 0,
        })
    }

    fn describe(&mut self, index: &MegatronIndex) -> Result<(), SourceError> {
        // Joined as add_index joins them: the later datasets' first 0 goes.
        let joined = match self.documents_before {
            0 => index.documents() as u64,
            before => before + (index.documents() as u64).saturating_sub(1),
        };
        let description = serde_json::json!({
            "dtype": index.dtype().name(),
            "document_count": joined,
            "multimodal": index.multimodal(),
        });
        // Several datasets in one ingest: they must agree, or an export could
        // not say which dtype the tokens have.
        if let Some(earlier) = self.metadata.get(METADATA_KEY) {
            if earlier["dtype"] != description["dtype"] {
                return Err(SourceError::Usage(format!(
                    "the Megatron datasets hold different dtypes ({} and {}); ingest them into separate datasets",
                    earlier["dtype"], description["dtype"]
                )));
            }
        }
        self.metadata.insert(METADATA_KEY.into(), description);
        Ok(())
    }

    fn next_record(&mut self) -> Option<Result<Record, SourceError>> {
        loop {
            if self.current.is_none() {
                let name = self.pending.pop_front()?;
                match open_dataset(&name) {
                    Ok((bin_path, bin, index)) => {
                        if let Err(error) = self.describe(&index) {
                            return Some(Err(error));
                        }
                        let document_offset = self.documents_before.saturating_sub(1);
                        self.documents_before = self.metadata[METADATA_KEY]["document_count"]
                            .as_u64()
                            .expect("described above");
                        self.current = Some(Open {
                            bin_path: Arc::from(bin_path),
                            bin,
                            index,
                            next: 0,
                            document: 0,
                            document_offset,
                        });
                    }
                    Err(error) => return Some(Err(error)),
                }
            }
            let open = self.current.as_mut().expect("opened above");
            if open.next == open.index.sequences() {
                self.current = None;
                continue;
            }
            return Some(open.read_next());
        }
    }
}

impl Open {
    fn read_next(&mut self) -> Result<Record, SourceError> {
        let sequence = self.next;
        self.next += 1;
        let index = &self.index;
        while self.document + 1 < index.documents()
            && index.document_start(self.document + 1) as u64 <= sequence as u64
        {
            self.document += 1;
        }
        let pointer = index.pointer(sequence);
        let length = index.length(sequence);
        // Checked against the .bin's size by the parse, so it fits in memory's
        // reach of that file; the store's value limit is the other bound.
        let size = length * index.dtype().size() as u64;
        let origin = Origin::Record {
            file: Arc::clone(&self.bin_path),
            record: sequence as u64,
            offset: pointer,
        };
        if size > MAX_VALUE_SIZE {
            return Err(SourceError::TooLarge {
                file: self.bin_path.display().to_string(),
                location: format!("sequence {sequence}"),
                what: "the sequence".into(),
                size,
                limit: MAX_VALUE_SIZE,
            });
        }
        let mut value = vec![0u8; size as usize];
        read_exact_at(&self.bin, &mut value, pointer).map_err(|source| {
            if source.kind() == std::io::ErrorKind::UnexpectedEof {
                SourceError::Corrupt {
                    file: self.bin_path.display().to_string(),
                    location: format!("sequence {sequence} at byte {pointer}"),
                    reason: "the file ended before the sequence (it shrank while read)".into(),
                }
            } else {
                SourceError::Io {
                    path: self.bin_path.to_path_buf(),
                    source,
                }
            }
        })?;
        let mut fields = Fields::new();
        let document = self.document as u64 + self.document_offset;
        fields.push("document", FieldValue::Int64(document as i64));
        fields.push("length", FieldValue::Int64(length as i64));
        if let Some(mode) = index.mode(sequence) {
            fields.push("mode", FieldValue::Int64(i64::from(mode)));
        }
        Ok(Record {
            key: Vec::new(),
            value,
            origin,
            fields,
        })
    }
}

impl Iterator for MegatronSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

impl Source for MegatronSource {
    fn keyed(&self) -> bool {
        false
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        self.metadata.clone()
    }
}
