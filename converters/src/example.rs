//! Just enough protobuf to read `bytes_list` features of a `tf.train.Example`:
//!
//! ```text
//! Example  { Features features = 1; }
//! Features { map<string, Feature> feature = 1; }   // entries: { string key = 1; Feature value = 2; }
//! Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//! BytesList { repeated bytes value = 1; }
//! ```
//!
//! Every length is checked against the bytes that remain before it is used,
//! varints are at most 10 bytes, nesting is fixed (no recursion), and nothing is
//! allocated per field or per value: the one value returned is the only copy.

use std::fmt;

/// Why a feature could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeatureError {
    /// The record is not a well-formed protobuf message.
    Malformed(&'static str),
    /// The Example has no feature of that name.
    Missing(String),
    /// The feature is a float_list or int64_list.
    WrongKind(String, &'static str),
    /// The bytes_list does not hold exactly one value.
    NotOneValue(String, usize),
}

impl fmt::Display for FeatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeatureError::Malformed(what) => write!(f, "not a valid tf.train.Example: {what}"),
            FeatureError::Missing(name) => write!(f, "the Example has no feature {name:?}"),
            FeatureError::WrongKind(name, kind) => {
                let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                write!(f, "feature {name:?} is {article} {kind}, not a bytes_list")
            }
            FeatureError::NotOneValue(name, n) => {
                write!(
                    f,
                    "feature {name:?} holds {n} values; exactly one is needed"
                )
            }
        }
    }
}

/// One protobuf field: number and payload.
enum Field<'a> {
    Varint,
    Fixed,
    Bytes(&'a [u8]),
}

struct Fields<'a> {
    rest: &'a [u8],
}

fn varint(rest: &mut &[u8]) -> Result<u64, FeatureError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, tail) = rest
            .split_first()
            .ok_or(FeatureError::Malformed("truncated varint"))?;
        *rest = tail;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(FeatureError::Malformed("varint longer than 10 bytes"))
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Field<'a>), FeatureError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        Some(self.field())
    }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Result<(u64, Field<'a>), FeatureError> {
        let tag = varint(&mut self.rest)?;
        let number = tag >> 3;
        let field = match tag & 7 {
            0 => {
                varint(&mut self.rest)?;
                Field::Varint
            }
            1 | 5 => {
                let width = if tag & 7 == 1 { 8 } else { 4 };
                if self.rest.len() < width {
                    return Err(FeatureError::Malformed("truncated fixed-width field"));
                }
                self.rest = &self.rest[width..];
                Field::Fixed
            }
            2 => {
                let len = varint(&mut self.rest)?;
                if len > self.rest.len() as u64 {
                    return Err(FeatureError::Malformed(
                        "length-delimited field runs past the end",
                    ));
                }
                let (bytes, tail) = self.rest.split_at(len as usize);
                self.rest = tail;
                Field::Bytes(bytes)
            }
            _ => return Err(FeatureError::Malformed("unsupported wire type")),
        };
        Ok((number, field))
    }
}

fn fields(bytes: &[u8]) -> Fields<'_> {
    Fields { rest: bytes }
}

/// The single value of bytes feature `name` in a serialized Example.
pub fn bytes_feature(example: &[u8], name: &str) -> Result<Vec<u8>, FeatureError> {
    // Later occurrences of a map key win, as in protobuf.
    let mut found: Option<&[u8]> = None;
    for field in fields(example) {
        if let (1, Field::Bytes(features)) = field? {
            for entry in fields(features) {
                if let (1, Field::Bytes(entry)) = entry? {
                    let (mut key, mut value) = (None, None);
                    for part in fields(entry) {
                        match part? {
                            (1, Field::Bytes(k)) => key = Some(k),
                            (2, Field::Bytes(v)) => value = Some(v),
                            _ => {}
                        }
                    }
                    if key == Some(name.as_bytes()) {
                        found = Some(value.unwrap_or(&[]));
                    }
                }
            }
        }
    }
    let feature = found.ok_or_else(|| FeatureError::Missing(name.to_owned()))?;
    // Only the first value and the count are kept: a list of a million empty
    // values must not cost a million slices.
    let (mut first, mut count) = (None, 0usize);
    let mut kind = None;
    for part in fields(feature) {
        match part? {
            (1, Field::Bytes(list)) => {
                kind = Some("bytes_list");
                for value in fields(list) {
                    if let (1, Field::Bytes(v)) = value? {
                        first = first.or(Some(v));
                        count += 1;
                    }
                }
            }
            (2, _) => kind = Some("float_list"),
            (3, _) => kind = Some("int64_list"),
            _ => {}
        }
    }
    match kind {
        Some("bytes_list") => {}
        Some(other) => return Err(FeatureError::WrongKind(name.to_owned(), other)),
        _ => {
            return Err(FeatureError::WrongKind(
                name.to_owned(),
                "feature with no value list",
            ))
        }
    }
    match (first, count) {
        (Some(one), 1) => Ok(one.to_vec()),
        _ => Err(FeatureError::NotOneValue(name.to_owned(), count)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len_delimited(number: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3 | 2) as u8];
        let mut n = payload.len() as u64;
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
        out.extend_from_slice(payload);
        out
    }

    /// An Example with the given features (name, kind number, values).
    fn example(features: &[(&str, u64, &[&[u8]])]) -> Vec<u8> {
        let mut map = Vec::new();
        for (name, kind, values) in features {
            let mut list = Vec::new();
            for v in *values {
                list.extend(len_delimited(1, v));
            }
            let feature = len_delimited(*kind, &list);
            let mut entry = len_delimited(1, name.as_bytes());
            entry.extend(len_delimited(2, &feature));
            map.extend(len_delimited(1, &entry));
        }
        len_delimited(1, &map)
    }

    #[test]
    fn reads_a_bytes_feature() {
        let record = example(&[
            ("image/encoded", 1, &[b"\xff\xd8jpeg"]),
            ("image/filename", 1, &[b"a.jpg"]),
            ("label", 3, &[b"\x07"]),
        ]);
        assert_eq!(
            bytes_feature(&record, "image/encoded").unwrap(),
            b"\xff\xd8jpeg"
        );
        assert_eq!(bytes_feature(&record, "image/filename").unwrap(), b"a.jpg");
        assert_eq!(
            bytes_feature(&record, "label"),
            Err(FeatureError::WrongKind("label".into(), "int64_list"))
        );
        assert_eq!(
            bytes_feature(&record, "nope"),
            Err(FeatureError::Missing("nope".into()))
        );
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        let record = example(&[("x", 1, &[b"abc"])]);
        for cut in 0..record.len() {
            let _ = bytes_feature(&record[..cut], "x");
        }
        assert!(matches!(
            bytes_feature(&[0x0a, 0xff], "x"),
            Err(FeatureError::Malformed(_))
        ));
        let two = example(&[("x", 1, &[b"a", b"b"])]);
        assert_eq!(
            bytes_feature(&two, "x"),
            Err(FeatureError::NotOneValue("x".into(), 2))
        );
    }
}
