//! Caffe's `Datum` protobuf, as `convert_imageset` writes one per LMDB entry:
//!
//! ```text
//! message Datum {
//!   optional int32 channels = 1;  optional int32 height = 2;  optional int32 width = 3;
//!   optional bytes data = 4;      // raw pixels (channel, height, width order), or the encoded image
//!   optional int32 label = 5;
//!   repeated float float_data = 6;
//!   optional bool encoded = 7 [default = false];  // data is a JPEG/PNG file's bytes
//! }
//! ```
//!
//! Read with the protobuf field reader of the `tf.train.Example` decoder
//! ([`crate::example`]): every length checked against the bytes that remain.
//! As protobuf parses, a field given twice keeps its last value, unknown
//! fields are skipped and `float_data` may be packed or not.

use bcd_fields::{FieldValue, Fields};

use crate::example::{fields, Field};

/// A Datum's image and its fields.
#[derive(Debug, PartialEq)]
pub struct Datum {
    /// The encoded image's bytes (`encoded`), the raw pixels, or, for a Datum
    /// holding `float_data` instead, those floats as little-endian float32.
    pub value: Vec<u8>,
    /// `label`, `channels`, `height`, `width`, `encoded`, and `dtype`
    /// (`"float32"`) for a `float_data` Datum.
    pub fields: Fields,
}

/// An `int32` read from a varint: protobuf writes a negative one as ten
/// bytes of its sign-extended 64 bits; the low 32 are the value.
fn int32(value: u64) -> i64 {
    i64::from(value as u32 as i32)
}

/// Decodes one Datum; the error says what is malformed.
pub fn decode(bytes: &[u8]) -> Result<Datum, String> {
    let (mut channels, mut height, mut width, mut label) = (0, 0, 0, 0);
    let mut encoded = false;
    let mut data: &[u8] = &[];
    let mut floats: Vec<u8> = Vec::new();
    for field in fields(bytes) {
        let (number, field) =
            field.map_err(|e| format!("not a valid caffe Datum: {}", malformed(&e)))?;
        match (number, field) {
            (1, Field::Varint(v)) => channels = int32(v),
            (2, Field::Varint(v)) => height = int32(v),
            (3, Field::Varint(v)) => width = int32(v),
            (4, Field::Bytes(b)) => data = b,
            (5, Field::Varint(v)) => label = int32(v),
            (6, Field::Fixed32(f)) => floats.extend_from_slice(&f.to_le_bytes()),
            (6, Field::Bytes(packed)) => {
                if packed.len() % 4 != 0 {
                    return Err("not a valid caffe Datum: packed float_data of a length not a multiple of 4".into());
                }
                floats.extend_from_slice(packed);
            }
            (7, Field::Varint(v)) => encoded = v != 0,
            (1..=7, _) => {
                return Err(format!(
                    "not a valid caffe Datum: field {number} has the wrong wire type"
                ))
            }
            _ => {}
        }
    }
    let mut out = Fields::new();
    out.push("label", FieldValue::Int64(label));
    out.push("channels", FieldValue::Int64(channels));
    out.push("height", FieldValue::Int64(height));
    out.push("width", FieldValue::Int64(width));
    out.push("encoded", FieldValue::Bool(encoded));
    let value = if data.is_empty() && !floats.is_empty() {
        out.push("dtype", FieldValue::String("float32".into()));
        floats
    } else {
        data.to_vec()
    };
    Ok(Datum { value, fields: out })
}

fn malformed(error: &crate::example::FeatureError) -> String {
    match error {
        crate::example::FeatureError::Malformed(what) => (*what).to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_datum_and_a_raw_one() {
        // channels 3, height 2, width 1, data "abcdef", label 7
        let raw = b"\x08\x03\x10\x02\x18\x01\x22\x06abcdef\x28\x07";
        let datum = decode(raw).unwrap();
        assert_eq!(datum.value, b"abcdef");
        assert_eq!(datum.fields.get("label"), Some(&FieldValue::Int64(7)));
        assert_eq!(datum.fields.get("encoded"), Some(&FieldValue::Bool(false)));
        // encoded, label -1 (ten-byte varint)
        let jpeg = b"\x22\x02\xff\xd8\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x38\x01";
        let datum = decode(jpeg).unwrap();
        assert_eq!(datum.value, b"\xff\xd8");
        assert_eq!(datum.fields.get("label"), Some(&FieldValue::Int64(-1)));
        assert_eq!(datum.fields.get("encoded"), Some(&FieldValue::Bool(true)));
    }

    #[test]
    fn float_data_packed_or_not() {
        let one = 1.0f32.to_le_bytes();
        let mut unpacked = vec![0x35];
        unpacked.extend(one);
        unpacked.push(0x35);
        unpacked.extend(one);
        let mut packed = vec![0x32, 8];
        packed.extend(one);
        packed.extend(one);
        for bytes in [unpacked, packed] {
            let datum = decode(&bytes).unwrap();
            assert_eq!(datum.value, [one, one].concat());
            assert_eq!(
                datum.fields.get("dtype"),
                Some(&FieldValue::String("float32".into()))
            );
        }
    }

    #[test]
    fn lengths_past_the_end_and_wrong_wire_types_are_refused() {
        assert!(decode(b"\x22\x7fab").unwrap_err().contains("past the end"));
        assert!(decode(b"\x22").unwrap_err().contains("truncated"));
        assert!(decode(b"\x2a\x01a")
            .unwrap_err()
            .contains("wrong wire type"));
    }
}
