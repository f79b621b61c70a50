//! Just enough protobuf to read the features of a `tf.train.Example`:
//!
//! ```text
//! Example  { Features features = 1; }
//! Features { map<string, Feature> feature = 1; }   // entries: { string key = 1; Feature value = 2; }
//! Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//! BytesList { repeated bytes value = 1; }
//! FloatList { repeated float value = 1 [packed = true]; }
//! Int64List { repeated int64 value = 1 [packed = true]; }
//! ```
//!
//! Every length is checked against the bytes that remain before it is used,
//! varints are at most 10 bytes, and nesting is fixed (no recursion).
//! [`bytes_feature`] allocates nothing per field or per value: the one value
//! returned is the only copy; [`shape`] (a prescan's view of a feature) allocates
//! nothing at all. Numbers may be packed or not, as protobuf allows; of a
//! feature named twice the last wins, and of a Feature with two value lists the
//! last kind wins (values of repeated lists of that kind add up), as protobuf
//! parses them.

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
pub(crate) enum Field<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64,
    Bytes(&'a [u8]),
}

pub(crate) struct Fields<'a> {
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
            0 => Field::Varint(varint(&mut self.rest)?),
            1 | 5 => {
                let width = if tag & 7 == 1 { 8 } else { 4 };
                if self.rest.len() < width {
                    return Err(FeatureError::Malformed("truncated fixed-width field"));
                }
                let (bytes, tail) = self.rest.split_at(width);
                self.rest = tail;
                match width {
                    4 => Field::Fixed32(u32::from_le_bytes(bytes.try_into().expect("4 bytes"))),
                    _ => Field::Fixed64,
                }
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

pub(crate) fn fields(bytes: &[u8]) -> Fields<'_> {
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

/// The kind of a feature's value list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `bytes_list`.
    Bytes,
    /// `float_list`.
    Float,
    /// `int64_list`.
    Int64,
}

impl Kind {
    /// The protobuf name: `bytes_list`, `float_list`, `int64_list`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bytes => "bytes_list",
            Kind::Float => "float_list",
            Kind::Int64 => "int64_list",
        }
    }
}

/// One feature of an Example: its name and its serialized `Feature`.
pub(crate) type NamedFeature<'a> = (&'a [u8], &'a [u8]);

/// The features of a serialized Example as (name, serialized `Feature`), in the
/// order of first appearance; a name given again takes the later `Feature`.
pub fn features(example: &[u8]) -> Result<Vec<NamedFeature<'_>>, FeatureError> {
    map_entries(example, 1)
}

/// The entries of the protobuf map held in field `field` of `message` (every
/// occurrence of the field: repeated map fields merge) as (key, serialized
/// value), in the order of first appearance; a key given again takes the later
/// value, as protobuf parses maps. `Example.features` and
/// `SequenceExample.feature_lists` are such maps.
pub(crate) fn map_entries(
    message: &[u8],
    field: u64,
) -> Result<Vec<NamedFeature<'_>>, FeatureError> {
    let mut found: Vec<NamedFeature<'_>> = Vec::new();
    let mut at: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for top in fields(message) {
        match top? {
            (number, Field::Bytes(map)) if number == field => {
                for entry in fields(map) {
                    if let (1, Field::Bytes(entry)) = entry? {
                        let (mut key, mut value): (&[u8], &[u8]) = (&[], &[]);
                        for part in fields(entry) {
                            match part? {
                                (1, Field::Bytes(k)) => key = k,
                                (2, Field::Bytes(v)) => value = v,
                                _ => {}
                            }
                        }
                        match at.get(key) {
                            Some(&i) => found[i].1 = value,
                            None => {
                                at.insert(key, found.len());
                                found.push((key, value));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

/// The value list a serialized `Feature` holds: the kind of the last list in it
/// (`None` for a Feature without one), and that list's bytes (the lists of that
/// kind after the last other one, as protobuf merges them).
fn value_lists(feature: &[u8]) -> Result<(Option<Kind>, Vec<&[u8]>), FeatureError> {
    let mut kind = None;
    let mut lists = Vec::new();
    for part in fields(feature) {
        let (this, list) = match part? {
            (1, Field::Bytes(list)) => (Kind::Bytes, list),
            (2, Field::Bytes(list)) => (Kind::Float, list),
            (3, Field::Bytes(list)) => (Kind::Int64, list),
            _ => continue,
        };
        if kind != Some(this) {
            lists.clear();
            kind = Some(this);
        }
        lists.push(list);
    }
    Ok((kind, lists))
}

/// What a prescan needs of a feature: the kind of its list, how many values it
/// holds and, for bytes, whether every value is UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// `None`: the Feature holds no value list.
    pub kind: Option<Kind>,
    /// Values in the list.
    pub count: u64,
    /// Whether every value is valid UTF-8 (bytes lists; true otherwise).
    pub utf8: bool,
}

/// The [`Shape`] of a serialized `Feature`, without copying or keeping a value.
pub fn shape(feature: &[u8]) -> Result<Shape, FeatureError> {
    let mut shape = Shape {
        kind: None,
        count: 0,
        utf8: true,
    };
    let reset = |shape: &mut Shape, kind| {
        if shape.kind != Some(kind) {
            *shape = Shape {
                kind: Some(kind),
                count: 0,
                utf8: true,
            };
        }
    };
    for part in fields(feature) {
        match part? {
            (1, Field::Bytes(list)) => {
                reset(&mut shape, Kind::Bytes);
                for value in fields(list) {
                    if let (1, Field::Bytes(v)) = value? {
                        shape.count += 1;
                        shape.utf8 &= std::str::from_utf8(v).is_ok();
                    }
                }
            }
            (2, Field::Bytes(list)) => {
                reset(&mut shape, Kind::Float);
                for value in fields(list) {
                    match value? {
                        (1, Field::Bytes(packed)) => {
                            if packed.len() % 4 != 0 {
                                return Err(FeatureError::Malformed(
                                    "packed floats whose length is not a multiple of 4",
                                ));
                            }
                            shape.count += packed.len() as u64 / 4;
                        }
                        (1, Field::Fixed32(_)) => shape.count += 1,
                        _ => {}
                    }
                }
            }
            (3, Field::Bytes(list)) => {
                reset(&mut shape, Kind::Int64);
                for value in fields(list) {
                    match value? {
                        (1, Field::Bytes(mut packed)) => {
                            while !packed.is_empty() {
                                varint(&mut packed)?;
                                shape.count += 1;
                            }
                        }
                        (1, Field::Varint(_)) => shape.count += 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(shape)
}

/// The values of a serialized `Feature`, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Values<'a> {
    /// A Feature without a value list.
    Empty,
    /// A `bytes_list`'s values (borrowed from the record).
    Bytes(Vec<&'a [u8]>),
    /// A `float_list`'s values.
    Float(Vec<f32>),
    /// An `int64_list`'s values.
    Int64(Vec<i64>),
}

/// Every value of a serialized `Feature`.
pub fn values(feature: &[u8]) -> Result<Values<'_>, FeatureError> {
    let (kind, lists) = value_lists(feature)?;
    let Some(kind) = kind else {
        return Ok(Values::Empty);
    };
    Ok(match kind {
        Kind::Bytes => {
            let mut out = Vec::new();
            for list in lists {
                for value in fields(list) {
                    if let (1, Field::Bytes(v)) = value? {
                        out.push(v);
                    }
                }
            }
            Values::Bytes(out)
        }
        Kind::Float => {
            let mut out = Vec::new();
            for list in lists {
                for value in fields(list) {
                    match value? {
                        (1, Field::Bytes(packed)) => {
                            if packed.len() % 4 != 0 {
                                return Err(FeatureError::Malformed(
                                    "packed floats whose length is not a multiple of 4",
                                ));
                            }
                            out.extend(
                                packed
                                    .chunks_exact(4)
                                    .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))),
                            );
                        }
                        (1, Field::Fixed32(bits)) => out.push(f32::from_bits(bits)),
                        _ => {}
                    }
                }
            }
            Values::Float(out)
        }
        Kind::Int64 => {
            let mut out = Vec::new();
            for list in lists {
                for value in fields(list) {
                    match value? {
                        (1, Field::Bytes(mut packed)) => {
                            while !packed.is_empty() {
                                out.push(varint(&mut packed)? as i64);
                            }
                        }
                        (1, Field::Varint(v)) => out.push(v as i64),
                        _ => {}
                    }
                }
            }
            Values::Int64(out)
        }
    })
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

    fn varint_bytes(mut n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    /// A Feature holding `lists` (kind number, list message bytes).
    fn feature(lists: &[(u64, Vec<u8>)]) -> Vec<u8> {
        lists
            .iter()
            .flat_map(|(kind, list)| len_delimited(*kind, list))
            .collect()
    }

    #[test]
    fn numbers_packed_or_not_and_the_last_kind_wins() {
        // int64_list: packed [1, -1], then unpacked 300 (a second list merges).
        let mut packed = varint_bytes(1);
        packed.extend(varint_bytes(u64::MAX)); // -1, ten bytes
        let mut unpacked = vec![0x08];
        unpacked.extend(varint_bytes(300));
        let ints = feature(&[(3, len_delimited(1, &packed)), (3, unpacked)]);
        assert_eq!(values(&ints), Ok(Values::Int64(vec![1, -1, 300])));
        let shape_of = shape(&ints).unwrap();
        assert_eq!((shape_of.kind, shape_of.count), (Some(Kind::Int64), 3));
        // float_list: unpacked fixed32 and packed.
        let mut floats = vec![0x0d];
        floats.extend(1.5f32.to_le_bytes());
        let mut two = Vec::new();
        two.extend((-2.0f32).to_le_bytes());
        two.extend(0.25f32.to_le_bytes());
        floats.extend(len_delimited(1, &two));
        let floats = feature(&[(2, floats)]);
        assert_eq!(values(&floats), Ok(Values::Float(vec![1.5, -2.0, 0.25])));
        assert_eq!(shape(&floats).unwrap().count, 3);
        // A bytes_list after an int64_list replaces it, as protobuf's oneof does.
        let mixed = feature(&[(3, vec![0x08, 0x05]), (1, len_delimited(1, b"\xff"))]);
        assert_eq!(values(&mixed), Ok(Values::Bytes(vec![&b"\xff"[..]])));
        assert_eq!(
            shape(&mixed),
            Ok(Shape {
                kind: Some(Kind::Bytes),
                count: 1,
                utf8: false
            })
        );
        assert_eq!(values(&[]), Ok(Values::Empty));
        // Packed floats of a length that is not a multiple of 4.
        let bad = feature(&[(2, len_delimited(1, &[0, 0, 0]))]);
        assert!(matches!(values(&bad), Err(FeatureError::Malformed(_))));
        assert!(matches!(shape(&bad), Err(FeatureError::Malformed(_))));
        for cut in 0..ints.len() {
            let _ = (values(&ints[..cut]), shape(&ints[..cut]));
        }
    }

    #[test]
    fn features_keep_first_appearance_order_and_the_last_value_of_a_name() {
        let record = example(&[
            ("b", 1, &[b"first"]),
            ("a", 1, &[b"x"]),
            ("b", 1, &[b"second"]),
        ]);
        let found = features(&record).unwrap();
        let names: Vec<&[u8]> = found.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, [&b"b"[..], b"a"]);
        assert_eq!(values(found[0].1), Ok(Values::Bytes(vec![&b"second"[..]])));
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
