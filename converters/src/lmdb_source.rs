//! LMDB environments as records: every entry of one database in key order,
//! keyed by its LMDB key, read through liblmdb read-only and without the
//! environment's lock file ([`crate::lmdb_env`]), so an ingest neither waits
//! for a writer nor makes one wait.
//!
//! The value is the entry's bytes as stored ([`LmdbValue::Raw`]), or decoded:
//! - [`LmdbValue::Pickle`]: the layouts `folder2lmdb`-style scripts write with
//!   `pickle.dumps`, read by [`crate::pickle`] (plain data only, never code):
//!   a `bytes` (the value); a tuple whose first `bytes` element is the value
//!   and whose other elements are fields (`label` in a pair, `item1`, `item2`,
//!   ... by position otherwise); or a dict of fields whose `value_column`
//!   entry (by default its only `bytes` entry) is the value. The scripts'
//!   bookkeeping entries `__keys__` (a list) and `__len__` (an int) are
//!   skipped and counted.
//! - [`LmdbValue::CaffeDatum`]: Caffe's `Datum` ([`crate::caffe_datum`]).
//!
//! Fields are typed as the other sources type them: `int` as Int64, `float`
//! as Float64, `str` as Utf8, `bytes` as Binary, `bool` as Boolean, `None` as
//! null, a list or tuple as a List, a dict as a Struct.

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use bcd_fields::{FieldValue, Fields};

use crate::lmdb_env::{show_key, LmdbReader};
use crate::pickle::{self, Value};
use crate::{
    caffe_datum, Fused, Origin, Record, RowAt, Skipped, Source, SourceError, MAX_VALUE_SIZE,
};

/// How an entry's value is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LmdbValue {
    /// The bytes as stored.
    #[default]
    Raw,
    /// A pickled `bytes`, `(bytes, label)` tuple or dict of fields.
    Pickle,
    /// A Caffe `Datum` protobuf.
    CaffeDatum,
}

impl LmdbValue {
    /// Its name, as options spell it.
    pub fn name(self) -> &'static str {
        match self {
            LmdbValue::Raw => "raw",
            LmdbValue::Pickle => "pickle",
            LmdbValue::CaffeDatum => "caffe-datum",
        }
    }
}

impl fmt::Display for LmdbValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LmdbValue {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [LmdbValue::Raw, LmdbValue::Pickle, LmdbValue::CaffeDatum]
            .into_iter()
            .find(|v| v.name() == text)
            .ok_or_else(|| format!("{text:?}: expected raw, pickle or caffe-datum"))
    }
}

/// How to read LMDB environments.
#[derive(Clone, Debug, Default)]
pub struct LmdbOptions {
    /// How values are read. Default: as stored.
    pub value: LmdbValue,
    /// The named database to read. Default: the unnamed (main) one; an
    /// environment whose main database names others is refused without it.
    pub db: Option<String>,
    /// With [`LmdbValue::Pickle`]: the dict entry holding the value.
    pub value_column: Option<String>,
}

/// Whether `path` is an LMDB environment: a directory holding `data.mdb`, or
/// a regular file whose first page carries LMDB's meta magic.
pub fn is_lmdb(path: &Path) -> bool {
    let Ok(metadata) = std::fs::metadata(path) else {
        return false;
    };
    if metadata.is_dir() {
        return path.join("data.mdb").is_file();
    }
    if !metadata.is_file() {
        return false;
    }
    let mut head = [0u8; crate::lmdb_meta::META_LEN];
    let read = std::fs::File::open(path).and_then(|file| {
        std::io::Read::read_exact(&mut std::io::Read::take(file, head.len() as u64), &mut head)
    });
    read.is_ok() && crate::lmdb_meta::parse(&head, 0).is_ok()
}

/// Reads LMDB environments, one after another.
pub struct LmdbSource {
    pending: VecDeque<PathBuf>,
    /// The environment being read, and its file's path (shared with its
    /// records' origins).
    current: Option<(LmdbReader, Arc<Path>)>,
    options: LmdbOptions,
    skipped: Skipped,
}

impl LmdbSource {
    /// Reads the environments `paths` (directories holding `data.mdb`, or data
    /// files), in order; each is opened and checked when reached.
    pub fn new(paths: &[PathBuf], options: LmdbOptions) -> Fused<LmdbSource> {
        Fused::new(LmdbSource {
            pending: paths.iter().cloned().collect(),
            current: None,
            options,
            skipped: Skipped::default(),
        })
    }

    fn next_record(&mut self) -> Option<Result<Record, SourceError>> {
        loop {
            if self.current.is_none() {
                let path = self.pending.pop_front()?;
                match LmdbReader::open(&path, self.options.db.as_deref()) {
                    Ok(reader) => {
                        let file = Arc::from(reader.file());
                        self.current = Some((reader, file));
                    }
                    Err(error) => return Some(Err(error)),
                }
            }
            let (reader, file) = self.current.as_mut().expect("opened above");
            let path = Arc::clone(file);
            let entry = match reader.next_entry() {
                Ok(Some(entry)) => entry,
                Ok(None) => {
                    self.current = None;
                    continue;
                }
                Err(error) => return Some(Err(error)),
            };
            let (key, bytes) = entry;
            let at = Entry { path: &path, key };
            match decode(&self.options, &at, bytes) {
                Ok(Some((value, fields))) => {
                    let record = Record {
                        key: key.to_vec(),
                        value,
                        origin: Origin::Row {
                            row: RowAt::Entry(show_key(key)),
                            file: path,
                        },
                        fields,
                    };
                    return Some(Ok(record));
                }
                Ok(None) => self.skipped.add("folder2lmdb index key"),
                Err(error) => return Some(Err(error)),
            }
        }
    }
}

/// Where an entry is, for messages.
struct Entry<'a> {
    path: &'a Path,
    key: &'a [u8],
}

impl Entry<'_> {
    fn invalid(&self, reason: String) -> SourceError {
        SourceError::Invalid {
            file: self.path.display().to_string(),
            location: show_key(self.key),
            reason,
        }
    }
}

/// An entry's value and fields, or `None` for an entry skipped.
fn decode(
    options: &LmdbOptions,
    at: &Entry<'_>,
    bytes: &[u8],
) -> Result<Option<(Vec<u8>, Fields)>, SourceError> {
    if bytes.len() as u64 > MAX_VALUE_SIZE {
        return Err(SourceError::TooLarge {
            file: at.path.display().to_string(),
            location: show_key(at.key),
            what: "the value".into(),
            size: bytes.len() as u64,
            limit: MAX_VALUE_SIZE,
        });
    }
    match options.value {
        LmdbValue::Raw => Ok(Some((bytes.to_vec(), Fields::new()))),
        LmdbValue::CaffeDatum => match caffe_datum::decode(bytes) {
            Ok(datum) => Ok(Some((datum.value, datum.fields))),
            Err(reason) => Err(at.invalid(format!(
                "{reason} (read values as stored with `lmdb_value` raw)"
            ))),
        },
        LmdbValue::Pickle => {
            let value = pickle::loads(bytes, pickle::Limits::for_len(bytes.len()))
                .map_err(|error| at.invalid(format!("the value as a pickle: {error}")))?;
            unpickled(options, at, value)
        }
    }
}

fn unpickled(
    options: &LmdbOptions,
    at: &Entry<'_>,
    value: Value,
) -> Result<Option<(Vec<u8>, Fields)>, SourceError> {
    if options.value_column.is_some() && !matches!(value, Value::Dict(_)) {
        return Err(at.invalid(format!(
            "`value_column` names a dict entry, and the pickled value is a {}",
            value.type_name()
        )));
    }
    match value {
        Value::Bytes(bytes) => Ok(Some((bytes, Fields::new()))),
        Value::List(_) if at.key == b"__keys__" => Ok(None),
        Value::Int(_) if at.key == b"__len__" => Ok(None),
        Value::Tuple(items) => tuple_record(at, items).map(Some),
        Value::Dict(entries) => dict_record(options, at, entries).map(Some),
        other => Err(at.invalid(format!(
            "the pickled value is a {}; a bytes, a tuple holding a bytes (the value) or a dict of fields is read",
            other.type_name()
        ))),
    }
}

fn tuple_record(at: &Entry<'_>, items: Vec<Value>) -> Result<(Vec<u8>, Fields), SourceError> {
    let Some(position) = items.iter().position(|v| matches!(v, Value::Bytes(_))) else {
        return Err(at.invalid(format!(
            "the pickled tuple of {} items holds no bytes to store as the value",
            items.len()
        )));
    };
    let pair = items.len() == 2;
    let mut fields = Fields::new();
    let mut value = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if i == position {
            let Value::Bytes(bytes) = item else {
                unreachable!("found above")
            };
            value = bytes;
            continue;
        }
        let name: Arc<str> = if pair {
            "label".into()
        } else {
            format!("item{i}").into()
        };
        fields.push(name, field(item));
    }
    Ok((value, fields))
}

fn dict_record(
    options: &LmdbOptions,
    at: &Entry<'_>,
    entries: Vec<(Value, Value)>,
) -> Result<(Vec<u8>, Fields), SourceError> {
    let mut named = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        match key {
            Value::Str(name) => named.push((name, value)),
            other => {
                return Err(at.invalid(format!(
                    "the pickled dict has a key of type {}; field names are str",
                    other.type_name()
                )))
            }
        }
    }
    let chosen = match &options.value_column {
        Some(column) => match named.iter().position(|(name, _)| name == column) {
            Some(i) if matches!(named[i].1, Value::Bytes(_)) => i,
            Some(i) => {
                return Err(at.invalid(format!(
                    "the dict entry {column:?} (`value_column`) is a {}, not bytes",
                    named[i].1.type_name()
                )))
            }
            None => {
                return Err(at.invalid(format!(
                    "the pickled dict has no entry {column:?} (`value_column`); its entries: {}",
                    names(&named)
                )))
            }
        },
        None => {
            let bytes: Vec<usize> = (0..named.len())
                .filter(|&i| matches!(named[i].1, Value::Bytes(_)))
                .collect();
            match bytes.as_slice() {
                [one] => *one,
                _ => {
                    return Err(at.invalid(format!(
                        "the pickled dict holds {} bytes entries; name the value's with `value_column` (its entries: {})",
                        bytes.len(),
                        names(&named)
                    )))
                }
            }
        }
    };
    let mut fields = Fields::new();
    let mut value = Vec::new();
    for (i, (name, item)) in named.into_iter().enumerate() {
        if i == chosen {
            let Value::Bytes(bytes) = item else {
                unreachable!("checked above")
            };
            value = bytes;
        } else {
            fields.push(name, field(item));
        }
    }
    Ok((value, fields))
}

fn names(named: &[(String, Value)]) -> String {
    named
        .iter()
        .map(|(name, _)| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A plain Python value as a field.
fn field(value: Value) -> FieldValue {
    match value {
        Value::None => FieldValue::Null,
        Value::Bool(b) => FieldValue::Bool(b),
        Value::Int(n) => FieldValue::Int64(n),
        Value::Float(f) => FieldValue::Float64(f),
        Value::Str(s) => FieldValue::String(s),
        Value::Bytes(b) => FieldValue::Binary(b),
        Value::List(items) | Value::Tuple(items) => {
            // A list of ints and floats is a list of floats, as pyarrow and
            // JSON readers type `[1, 2.5]`.
            let mixed = items.iter().any(|v| matches!(v, Value::Float(_)))
                && items.iter().any(|v| matches!(v, Value::Int(_)));
            FieldValue::List(
                items
                    .into_iter()
                    .map(|v| match v {
                        Value::Int(n) if mixed => FieldValue::Float64(n as f64),
                        other => field(other),
                    })
                    .collect(),
            )
        }
        Value::Dict(entries) => FieldValue::Struct(
            entries
                .into_iter()
                .map(|(key, value)| {
                    let name: Arc<str> = match key {
                        Value::Str(s) => s.into(),
                        other => format!("{other:?}").into(),
                    };
                    (name, field(value))
                })
                .collect(),
        ),
    }
}

impl Iterator for LmdbSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

impl Source for LmdbSource {
    fn keyed(&self) -> bool {
        true
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }
}
