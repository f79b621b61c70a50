//! A MosaicML Streaming (MDS) dataset's `index.json` and the columns of its
//! samples, as `streaming/base/format/mds/{writer,reader,encodings}.py` define
//! them (mosaicml-streaming 0.13.0; FORMAT.md, section 14): each shard's
//! entry (its columns, compression, files and hashes) checked before a byte of
//! the shard is read, and one sample split into its columns and each decoded
//! by its encoding into a [`Cell`].

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::sample_columns::{array_bytes, Cell, Kind};
use crate::sample_shards::{file_in, Codec, HashCheck, ShardFile};

/// What a scalar encoding stores: a NumPy dtype of a fixed size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dtype {
    /// NumPy's name (`uint8`, `float16`, ...).
    pub name: &'static str,
    /// Bytes per element.
    pub size: usize,
    /// The Arrow kind of one element.
    pub kind: Kind,
}

const fn dtype(name: &'static str, size: usize, kind: Kind) -> Dtype {
    Dtype { name, size, kind }
}

/// The value dtypes of MDS's `ndarray` encoding by their code (its
/// `_int2value_dtype`), which are also its scalar encodings' dtypes.
const NDARRAY_DTYPES: [(u8, Dtype); 11] = [
    (8, dtype("uint8", 1, Kind::UInt8)),
    (9, dtype("int8", 1, Kind::Int8)),
    (16, dtype("uint16", 2, Kind::UInt16)),
    (17, dtype("int16", 2, Kind::Int16)),
    (18, dtype("float16", 2, Kind::Float16)),
    (32, dtype("uint32", 4, Kind::UInt32)),
    (33, dtype("int32", 4, Kind::Int32)),
    (34, dtype("float32", 4, Kind::Float32)),
    (64, dtype("uint64", 8, Kind::UInt64)),
    (65, dtype("int64", 8, Kind::Int64)),
    (66, dtype("float64", 8, Kind::Float64)),
];

fn dtype_named(name: &str) -> Option<Dtype> {
    NDARRAY_DTYPES
        .iter()
        .map(|(_, d)| *d)
        .find(|d| d.name == name)
}

/// A column's MDS encoding.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Encoding {
    /// `bytes`.
    Bytes,
    /// `str`: UTF-8.
    Str,
    /// `int`: an int64, 8 bytes.
    Int,
    /// `uint8` ... `float64`: one value of the dtype.
    Scalar(Dtype),
    /// `str_int`: decimal digits.
    StrInt,
    /// `str_float`: Python's `str(float)`.
    StrFloat,
    /// `str_decimal`: Python's `str(Decimal)`, kept as text.
    StrDecimal,
    /// `json`: JSON text, kept as text.
    Json,
    /// An encoding whose bytes are kept as they are: `jpeg`, `png`, `pil`,
    /// `jpeg_array`, `jpegarray`, `list[pil]`, `list[jpeg]`, `list[png]`.
    Encoded,
    /// `ndarray`, `ndarray:DTYPE` or `ndarray:DTYPE:D1,D2,...`: what the
    /// encoding fixes; the rest is in each value's header.
    NdArray {
        dtype: Option<Dtype>,
        shape: Option<Vec<u64>>,
    },
    /// `pkl`: pickled Python objects, never unpickled.
    Pickle,
}

impl Encoding {
    /// The encoding MDS names `name`, or `None` for a name `MDSWriter` does not
    /// accept.
    pub(crate) fn parse(name: &str) -> Option<Encoding> {
        if let Some(config) = name.strip_prefix("ndarray") {
            return parse_ndarray(config);
        }
        Some(match name {
            "bytes" => Encoding::Bytes,
            "str" => Encoding::Str,
            "int" => Encoding::Int,
            "str_int" => Encoding::StrInt,
            "str_float" => Encoding::StrFloat,
            "str_decimal" => Encoding::StrDecimal,
            "json" => Encoding::Json,
            "pkl" => Encoding::Pickle,
            "jpeg" | "png" | "pil" | "jpeg_array" | "jpegarray" | "list[pil]" | "list[jpeg]"
            | "list[png]" => Encoding::Encoded,
            other => Encoding::Scalar(dtype_named(other)?),
        })
    }

    /// The size every value of the encoding has, if fixed (MDS's
    /// `get_mds_encoded_size`).
    pub(crate) fn fixed_size(&self) -> Option<u64> {
        match self {
            Encoding::Int => Some(8),
            Encoding::Scalar(d) => Some(d.size as u64),
            Encoding::NdArray {
                dtype: Some(d),
                shape: Some(shape),
            } => array_bytes(shape, d.size),
            _ => None,
        }
    }

    /// The Arrow kind of its field; `None` for `pkl`.
    pub(crate) fn kind(&self) -> Option<Kind> {
        Some(match self {
            Encoding::Bytes | Encoding::Encoded => Kind::Binary,
            Encoding::Str | Encoding::StrDecimal | Encoding::Json => Kind::Utf8,
            Encoding::Int | Encoding::StrInt => Kind::Int64,
            Encoding::StrFloat => Kind::Float64,
            Encoding::Scalar(d) => d.kind,
            Encoding::NdArray { .. } => Kind::Array,
            Encoding::Pickle => return None,
        })
    }

    /// Whether its values are bytes a record's value is made of (an image, an
    /// array, raw bytes), for choosing the value column.
    pub(crate) fn is_binary(&self) -> bool {
        matches!(
            self,
            Encoding::Bytes | Encoding::Encoded | Encoding::NdArray { .. }
        )
    }

    /// Decodes one value.
    pub(crate) fn cell<'a>(&self, bytes: &'a [u8]) -> Result<Cell<'a>, String> {
        let text =
            || std::str::from_utf8(bytes).map_err(|e| format!("the text is not UTF-8 ({e})"));
        Ok(match self {
            Encoding::Bytes | Encoding::Encoded | Encoding::Pickle => Cell::Bytes(bytes),
            Encoding::Str | Encoding::StrDecimal | Encoding::Json => Cell::Text(text()?),
            Encoding::Int => Cell::Int(i64::from_le_bytes(exact(bytes)?)),
            Encoding::Scalar(d) => scalar(*d, bytes)?,
            Encoding::StrInt => {
                let text = text()?;
                Cell::Int(
                    text.trim()
                        .parse()
                        .map_err(|_| format!("{text:?} is not an integer that fits in 64 bits"))?,
                )
            }
            Encoding::StrFloat => {
                let text = text()?;
                Cell::Float(
                    text.trim()
                        .parse()
                        .map_err(|_| format!("{text:?} is not a float"))?,
                )
            }
            Encoding::NdArray { dtype, shape } => ndarray(*dtype, shape.as_deref(), bytes)?,
        })
    }
}

fn exact<const N: usize>(bytes: &[u8]) -> Result<[u8; N], String> {
    bytes
        .try_into()
        .map_err(|_| format!("{} bytes, not {N}", bytes.len()))
}

/// One value of `d`, little-endian.
pub(crate) fn scalar(d: Dtype, bytes: &[u8]) -> Result<Cell<'_>, String> {
    if bytes.len() != d.size {
        return Err(format!(
            "{} bytes, not the {} of a {}",
            bytes.len(),
            d.size,
            d.name
        ));
    }
    Ok(match d.kind {
        Kind::UInt8 => Cell::UInt(u64::from(bytes[0])),
        Kind::UInt16 => Cell::UInt(u64::from(u16::from_le_bytes(exact(bytes)?))),
        Kind::UInt32 => Cell::UInt(u64::from(u32::from_le_bytes(exact(bytes)?))),
        Kind::UInt64 => Cell::UInt(u64::from_le_bytes(exact(bytes)?)),
        Kind::Int8 => Cell::Int(i64::from(bytes[0] as i8)),
        Kind::Int16 => Cell::Int(i64::from(i16::from_le_bytes(exact(bytes)?))),
        Kind::Int32 => Cell::Int(i64::from(i32::from_le_bytes(exact(bytes)?))),
        Kind::Int64 => Cell::Int(i64::from_le_bytes(exact(bytes)?)),
        Kind::Float16 => Cell::Half(u16::from_le_bytes(exact(bytes)?)),
        Kind::Float32 => Cell::Float(f64::from(f32::from_le_bytes(exact(bytes)?))),
        Kind::Float64 => Cell::Float(f64::from_le_bytes(exact(bytes)?)),
        other => return Err(format!("{other:?} is not a scalar")),
    })
}

/// `ndarray` after its name: empty, `:DTYPE` or `:DTYPE:D1,D2,...` (each
/// dimension at least 1, as MDS asserts).
fn parse_ndarray(config: &str) -> Option<Encoding> {
    if config.is_empty() {
        return Some(Encoding::NdArray {
            dtype: None,
            shape: None,
        });
    }
    let mut parts = config.strip_prefix(':')?.split(':');
    let dtype = dtype_named(parts.next()?)?;
    let shape = match parts.next() {
        None => None,
        Some(dims) => Some(
            dims.split(',')
                .map(|d| d.trim().parse::<u64>().ok().filter(|&d| d >= 1))
                .collect::<Option<Vec<_>>>()?,
        ),
    };
    if parts.next().is_some() {
        return None;
    }
    Some(Encoding::NdArray {
        dtype: Some(dtype),
        shape,
    })
}

/// An `ndarray` value: `[dtype code: 1]` unless the encoding fixes the dtype,
/// `[ndim << 2 | shape dtype code: 1] [shape: ndim values of 1 << code bytes]`
/// unless it fixes the shape, then the elements, which must be exactly what the
/// shape holds.
fn ndarray<'a>(
    fixed_dtype: Option<Dtype>,
    fixed_shape: Option<&[u64]>,
    bytes: &'a [u8],
) -> Result<Cell<'a>, String> {
    let mut at = 0;
    let mut take = |n: usize, what: &str| -> Result<&'a [u8], String> {
        let part = bytes
            .get(at..at + n)
            .ok_or_else(|| format!("the array ends inside its {what}"))?;
        at += n;
        Ok(part)
    };
    let dtype = match fixed_dtype {
        Some(d) => d,
        None => {
            let code = take(1, "dtype")?[0];
            NDARRAY_DTYPES
                .iter()
                .find(|(c, _)| *c == code)
                .map(|(_, d)| *d)
                .ok_or_else(|| format!("dtype code {code} is not one MDS writes"))?
        }
    };
    let shape = match fixed_shape {
        Some(shape) => shape.to_vec(),
        None => {
            let byte = take(1, "shape header")?[0];
            let (ndim, width) = (usize::from(byte >> 2), 1usize << (byte & 3));
            let raw = take(ndim * width, "shape")?;
            raw.chunks_exact(width)
                .map(|c| {
                    let mut le = [0u8; 8];
                    le[..width].copy_from_slice(c);
                    u64::from_le_bytes(le)
                })
                .collect()
        }
    };
    let data = &bytes[at..];
    let expected =
        array_bytes(&shape, dtype.size).ok_or_else(|| format!("the shape {shape:?} overflows"))?;
    if data.len() as u64 != expected {
        return Err(format!(
            "a {} array of shape {shape:?} holds {expected} bytes, not {}",
            dtype.name,
            data.len()
        ));
    }
    Ok(Cell::Array {
        dtype: dtype.name,
        shape,
        data,
    })
}

/// One column of an MDS shard.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Column {
    pub name: String,
    /// The encoding as the index names it.
    pub encoding_name: String,
    pub encoding: Encoding,
    /// Its fixed size, if any (`column_sizes`).
    pub size: Option<u32>,
}

/// Splits one sample into its columns' bytes: the sizes of the columns without
/// a fixed size first (`u32` each, in column order), then every column's
/// bytes in order, which must fill the sample exactly.
pub(crate) fn split_sample<'a>(
    columns: &[Column],
    sample: &'a [u8],
) -> Result<Vec<&'a [u8]>, String> {
    let variable = columns.iter().filter(|c| c.size.is_none()).count();
    let head = sample.get(..4 * variable).ok_or_else(|| {
        format!(
            "{} bytes cannot hold the sizes of {variable} columns",
            sample.len()
        )
    })?;
    let mut sizes = head
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    let mut at = 4 * variable;
    let mut parts = Vec::with_capacity(columns.len());
    for column in columns {
        let size = column
            .size
            .unwrap_or_else(|| sizes.next().expect("counted")) as usize;
        let part = sample.get(at..at + size).ok_or_else(|| {
            format!(
                "column {:?} of {size} bytes at byte {at} passes the sample's end ({} bytes)",
                column.name,
                sample.len()
            )
        })?;
        parts.push(part);
        at += size;
    }
    if at != sample.len() {
        return Err(format!(
            "the columns end at byte {at}, but the sample holds {} bytes",
            sample.len()
        ));
    }
    Ok(parts)
}

/// One shard as the index describes it.
#[derive(Debug)]
pub(crate) struct ShardEntry {
    /// Its number in the index, from 0.
    pub number: usize,
    pub columns: Vec<Column>,
    pub samples: u64,
    compression: Option<Codec>,
    raw: FileInfo,
    zip: Option<FileInfo>,
}

#[derive(Debug)]
struct FileInfo {
    basename: String,
    bytes: u64,
    hashes: Vec<(String, String)>,
}

impl ShardEntry {
    /// How to read the shard in `dir`: the compressed file, or, when only the
    /// decompressed one is there (a StreamingDataset cache keeps that alone),
    /// that one.
    pub(crate) fn file(&self, dir: &Path) -> ShardFile {
        let checks = |info: &FileInfo| {
            (info.hashes.iter())
                .map(|(a, h)| HashCheck::new(a, h).expect("algorithms checked when parsed"))
                .collect()
        };
        let raw_path = dir.join(&self.raw.basename);
        match &self.zip {
            Some(zip) if dir.join(&zip.basename).exists() || !raw_path.exists() => ShardFile {
                path: dir.join(&zip.basename),
                codec: self.compression,
                raw_len: self.raw.bytes,
                stored_hashes: checks(zip),
                raw_hashes: checks(&self.raw),
            },
            _ => ShardFile {
                path: raw_path,
                codec: None,
                raw_len: self.raw.bytes,
                stored_hashes: Vec::new(),
                raw_hashes: checks(&self.raw),
            },
        }
    }
}

/// Why an index is refused: where in it, and what.
pub(crate) struct IndexError {
    pub location: String,
    pub reason: String,
    /// A well-formed index asking for what bcd does not do (a compression it
    /// does not read), rather than a corrupt one.
    pub unsupported: bool,
}

fn bad(location: impl Into<String>, reason: impl Into<String>) -> IndexError {
    IndexError {
        location: location.into(),
        reason: reason.into(),
        unsupported: false,
    }
}

/// The shards of an MDS `index.json` (`{"version": 2, "shards": [...]}`), each
/// entry checked: version 2, format `mds`, columns with known encodings and
/// fixed sizes that agree with them, a known compression with its compressed
/// file, file names inside `dir`, hashes of known algorithms.
pub(crate) fn parse_index(index: &Value, dir: &Path) -> Result<Vec<ShardEntry>, IndexError> {
    let top = index
        .as_object()
        .ok_or_else(|| bad("the top level", "not a JSON object"))?;
    match top.get("version").and_then(Value::as_u64) {
        Some(2) => {}
        other => return Err(bad("\"version\"", format!("{other:?}, not 2"))),
    }
    let shards = (top.get("shards").and_then(Value::as_array))
        .ok_or_else(|| bad("\"shards\"", "missing or not a list"))?;
    (shards.iter().enumerate())
        .map(|(number, shard)| {
            shard_entry(number, shard, dir).map_err(|mut e| {
                e.location = format!("shard {number}: {}", e.location);
                e
            })
        })
        .collect()
}

fn shard_entry(number: usize, shard: &Value, dir: &Path) -> Result<ShardEntry, IndexError> {
    let shard = shard
        .as_object()
        .ok_or_else(|| bad("the entry", "not an object"))?;
    let field = |key: &str| shard.get(key).unwrap_or(&Value::Null);
    if field("version").as_u64() != Some(2) {
        return Err(bad("\"version\"", format!("{}, not 2", field("version"))));
    }
    match field("format").as_str() {
        Some("mds") => {}
        other => {
            return Err(IndexError {
                location: "\"format\"".into(),
                reason: format!("{other:?}: bcd reads MDS shards (\"mds\"), not this format"),
                unsupported: true,
            })
        }
    }
    let columns = columns(shard)?;
    let compression = match field("compression") {
        Value::Null => None,
        Value::String(name) => Some(Codec::from_name(name).ok_or_else(|| IndexError {
            location: "\"compression\"".into(),
            reason: format!(
                "{name:?}, which bcd does not read (it reads zstd, gz, bz2, br and snappy)"
            ),
            unsupported: true,
        })?),
        other => return Err(bad("\"compression\"", format!("{other}, not a string"))),
    };
    let raw = file_info(field("raw_data"), "raw_data", dir)?
        .ok_or_else(|| bad("\"raw_data\"", "missing"))?;
    let zip = file_info(field("zip_data"), "zip_data", dir)?;
    if compression.is_some() != zip.is_some() {
        return Err(bad(
            "\"zip_data\"",
            "a compressed shard needs its compressed file, and only a compressed one has one",
        ));
    }
    let samples =
        (field("samples").as_u64()).ok_or_else(|| bad("\"samples\"", "missing or not a count"))?;
    Ok(ShardEntry {
        number,
        columns,
        samples,
        compression,
        raw,
        zip,
    })
}

fn columns(shard: &Map<String, Value>) -> Result<Vec<Column>, IndexError> {
    let list = |key: &str| {
        (shard.get(key).and_then(Value::as_array))
            .ok_or_else(|| bad(format!("{key:?}"), "missing or not a list"))
    };
    let (names, encodings, sizes) = (
        list("column_names")?,
        list("column_encodings")?,
        list("column_sizes")?,
    );
    if names.len() != encodings.len() || names.len() != sizes.len() {
        return Err(bad(
            "the columns",
            format!(
                "{} names, {} encodings and {} sizes",
                names.len(),
                encodings.len(),
                sizes.len()
            ),
        ));
    }
    let mut columns: Vec<Column> = Vec::with_capacity(names.len());
    for (i, ((name, encoding), size)) in names.iter().zip(encodings).zip(sizes).enumerate() {
        let name = (name.as_str())
            .ok_or_else(|| bad(format!("column {i}"), "its name is not a string"))?;
        let location = || format!("column {name:?}");
        if columns.iter().any(|c| c.name == name) {
            return Err(bad(location(), "named twice"));
        }
        let encoding_name =
            (encoding.as_str()).ok_or_else(|| bad(location(), "its encoding is not a string"))?;
        let parsed = Encoding::parse(encoding_name).ok_or_else(|| IndexError {
            location: location(),
            reason: format!("encoding {encoding_name:?}, which is not one of MDS's"),
            unsupported: true,
        })?;
        let size = match size {
            Value::Null => None,
            size => Some(
                (size.as_u64().and_then(|s| u32::try_from(s).ok()))
                    .ok_or_else(|| bad(location(), format!("size {size} is not a u32")))?,
            ),
        };
        if size.map(u64::from) != parsed.fixed_size() {
            return Err(bad(
                location(),
                format!(
                    "size {size:?} does not match its encoding {encoding_name:?} (MDS gives {:?})",
                    parsed.fixed_size()
                ),
            ));
        }
        columns.push(Column {
            name: name.to_owned(),
            encoding_name: encoding_name.to_owned(),
            encoding: parsed,
            size,
        });
    }
    Ok(columns)
}

fn file_info(value: &Value, key: &str, dir: &Path) -> Result<Option<FileInfo>, IndexError> {
    let info = match value {
        Value::Null => return Ok(None),
        Value::Object(info) => info,
        other => return Err(bad(format!("{key:?}"), format!("{other}, not an object"))),
    };
    let location = || format!("{key:?}");
    let basename = (info.get("basename").and_then(Value::as_str))
        .ok_or_else(|| bad(location(), "no \"basename\""))?;
    let _: PathBuf = file_in(dir, basename).ok_or_else(|| {
        bad(
            location(),
            format!("{basename:?} is not a relative name inside the dataset's directory"),
        )
    })?;
    let bytes = (info.get("bytes").and_then(Value::as_u64))
        .ok_or_else(|| bad(location(), "no \"bytes\" count"))?;
    let mut hashes = Vec::new();
    match info.get("hashes") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (algorithm, digest) in map {
                let digest = (digest.as_str())
                    .ok_or_else(|| bad(location(), format!("its {algorithm} hash is not text")))?;
                if HashCheck::new(algorithm, digest).is_none() {
                    return Err(IndexError {
                        location: location(),
                        reason: format!(
                            "hash algorithm {algorithm:?}, which no MDS writer produces and bcd cannot check"
                        ),
                        unsupported: true,
                    });
                }
                hashes.push((algorithm.clone(), digest.to_owned()));
            }
        }
        Some(other) => return Err(bad(location(), format!("hashes {other}, not an object"))),
    }
    Ok(Some(FileInfo {
        basename: basename.to_owned(),
        bytes,
        hashes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_mds_names_with_their_fixed_sizes() {
        assert_eq!(Encoding::parse("int").unwrap().fixed_size(), Some(8));
        assert_eq!(Encoding::parse("float16").unwrap().fixed_size(), Some(2));
        assert_eq!(Encoding::parse("ndarray:int16").unwrap().fixed_size(), None);
        assert_eq!(
            Encoding::parse("ndarray:float32:2,3").unwrap().fixed_size(),
            Some(24)
        );
        for bad in [
            "ndarray:",
            "ndarray:int16:0",
            "ndarray:bool",
            "ndarray:int8:1:2",
            "list[str]",
            "float128",
            "",
        ] {
            assert_eq!(Encoding::parse(bad), None, "{bad}");
        }
        assert_eq!(Encoding::parse("pkl").unwrap().kind(), None);
    }

    #[test]
    fn scalars_and_text_decode_as_numpy_and_python_read_them() {
        let e = |name: &str| Encoding::parse(name).unwrap();
        assert_eq!(e("int8").cell(&[0xff]).unwrap(), Cell::Int(-1));
        assert_eq!(e("uint64").cell(&[0xff; 8]).unwrap(), Cell::UInt(u64::MAX));
        assert_eq!(e("float16").cell(&[0, 0x3c]).unwrap(), Cell::Half(0x3c00));
        assert_eq!(e("str_int").cell(b"-12").unwrap(), Cell::Int(-12));
        assert_eq!(e("str_float").cell(b"1e+300").unwrap(), Cell::Float(1e300));
        assert!(e("str_int").cell(b"99999999999999999999").is_err());
        assert!(e("str").cell(&[0xff]).is_err());
        assert!(e("int16").cell(&[1]).is_err());
    }

    #[test]
    fn an_ndarray_header_is_read_and_its_elements_must_fill_the_shape() {
        let dynamic = Encoding::parse("ndarray").unwrap();
        // int16 (17), 2 dims of uint8 sizes: [2, 1], then 4 bytes.
        let value = [17, (2 << 2), 2, 1, 1, 0, 2, 0];
        assert_eq!(
            dynamic.cell(&value).unwrap(),
            Cell::Array {
                dtype: "int16",
                shape: vec![2, 1],
                data: &[1, 0, 2, 0]
            }
        );
        assert!(dynamic.cell(&value[..7]).is_err());
        assert!(dynamic.cell(&[99, 4, 1, 0]).is_err());
        // A shape claiming 2^64 elements is refused by arithmetic, not allocation.
        let huge = [
            8,
            (2 << 2) | 3,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            128,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            128,
        ];
        assert!(dynamic.cell(&huge).is_err());
        let fixed = Encoding::parse("ndarray:uint8:2").unwrap();
        assert_eq!(
            fixed.cell(&[5, 6]).unwrap(),
            Cell::Array {
                dtype: "uint8",
                shape: vec![2],
                data: &[5, 6]
            }
        );
    }

    #[test]
    fn a_sample_splits_into_its_columns_exactly() {
        let column = |name: &str, encoding: &str, size: Option<u32>| Column {
            name: name.into(),
            encoding_name: encoding.into(),
            encoding: Encoding::parse(encoding).unwrap(),
            size,
        };
        let columns = [
            column("a", "bytes", None),
            column("n", "int8", Some(1)),
            column("s", "str", None),
        ];
        let sample = [2, 0, 0, 0, 1, 0, 0, 0, b'x', b'y', 7, b'z'];
        assert_eq!(
            split_sample(&columns, &sample).unwrap(),
            vec![&b"xy"[..], &[7][..], &b"z"[..]]
        );
        assert!(split_sample(&columns, &sample[..11]).is_err());
        let mut longer = sample.to_vec();
        longer.push(0);
        assert!(split_sample(&columns, &longer).is_err());
        assert!(split_sample(&columns, &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]).is_err());
    }
}
