//! The canonical encoding of a value, hashed for the HyperLogLog sketches
//! (FORMAT.md, "Fields": statistics). Equal values hash equally whatever the
//! width of their integer type, so sketches of shards of narrower integers
//! merge with those of wider ones.
//!
//! A value's hash is `xxh3_64_with_seed(payload, seed)`:
//!
//! | value | seed | payload |
//! | --- | --- | --- |
//! | integer, date, time, timestamp, duration | 1 | the value as `i128`, 16 bytes little-endian |
//! | float (32 or 64 bits) | 2 | the value as `f64`, its bits as 8 bytes little-endian; `-0.0` as `0.0`, every NaN as `0x7ff8000000000000` |
//! | boolean | 3 | one byte, 0 or 1 |
//! | string | 4 | its UTF-8 bytes |
//! | binary (any width) | 5 | its bytes |
//! | decimal (128 bits) | 6 | the unscaled value, 16 bytes little-endian |
//! | list, struct | 7 | the nested encoding below |
//!
//! Nested encoding, recursively: null `00`; integer `01` + 16 bytes; float
//! `02` + 8 bytes; boolean `03` + 1 byte; string `04` + u64 length + bytes;
//! binary `05` + u64 length + bytes; decimal `06` + 16 bytes; list `07` + u64
//! count + each element; struct `08` + u64 child count + for each child, u64
//! name length, name, value. All integers little-endian. A dictionary's value
//! is encoded as the value it points to.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{downcast_dictionary_array, Array};
use arrow_schema::DataType;

pub(crate) const SEED_INT: u64 = 1;
pub(crate) const SEED_FLOAT: u64 = 2;
pub(crate) const SEED_BOOL: u64 = 3;
pub(crate) const SEED_UTF8: u64 = 4;
pub(crate) const SEED_BINARY: u64 = 5;
pub(crate) const SEED_DECIMAL: u64 = 6;
pub(crate) const SEED_NESTED: u64 = 7;

/// The canonical bits of a float.
#[inline]
pub(crate) fn float_bits(v: f64) -> u64 {
    if v.is_nan() {
        0x7ff8_0000_0000_0000
    } else if v == 0.0 {
        0
    } else {
        v.to_bits()
    }
}

/// Whether values of `t` have a canonical encoding.
pub(crate) fn hashable(t: &DataType) -> bool {
    use DataType::*;
    match t {
        Boolean | Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView
        | FixedSizeBinary(_) | Float32 | Float64 | Decimal128(..) => true,
        _ if int_like(t) => true,
        List(f) | LargeList(f) | FixedSizeList(f, _) => hashable_nested(f.data_type()),
        Struct(fields) => fields.iter().all(|f| hashable_nested(f.data_type())),
        Dictionary(_, v) => hashable(v),
        _ => false,
    }
}

/// Whether values of `t` have a canonical encoding inside a list or struct,
/// where a `Null` element encodes as null (so a list of nulls hashes the same
/// whatever type its elements are widened to). A column of the `Null` type has
/// no values to hash and no sketch.
fn hashable_nested(t: &DataType) -> bool {
    t == &DataType::Null || hashable(t)
}

/// Whether `t` holds integers (min, max and hash as integers): the integer
/// types and dates, times, timestamps and durations.
pub(crate) fn int_like(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Int8 | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Date32
            | Date64
            | Time32(_)
            | Time64(_)
            | Timestamp(..)
            | Duration(_)
    )
}

/// Calls `$f` with the integer-like array `$a` of type `$t` downcast to its
/// primitive array; `$other` otherwise.
macro_rules! with_int_array {
    ($a:expr, $t:expr, |$arr:ident| $f:expr, $other:expr) => {{
        use arrow_array::cast::AsArray as _;
        use arrow_schema::DataType as D;
        match $t {
            D::Int8 => {
                let $arr = $a.as_primitive::<arrow_array::types::Int8Type>();
                $f
            }
            D::Int16 => {
                let $arr = $a.as_primitive::<arrow_array::types::Int16Type>();
                $f
            }
            D::Int32 => {
                let $arr = $a.as_primitive::<arrow_array::types::Int32Type>();
                $f
            }
            D::Int64 => {
                let $arr = $a.as_primitive::<arrow_array::types::Int64Type>();
                $f
            }
            D::UInt8 => {
                let $arr = $a.as_primitive::<arrow_array::types::UInt8Type>();
                $f
            }
            D::UInt16 => {
                let $arr = $a.as_primitive::<arrow_array::types::UInt16Type>();
                $f
            }
            D::UInt32 => {
                let $arr = $a.as_primitive::<arrow_array::types::UInt32Type>();
                $f
            }
            D::UInt64 => {
                let $arr = $a.as_primitive::<arrow_array::types::UInt64Type>();
                $f
            }
            D::Date32 => {
                let $arr = $a.as_primitive::<arrow_array::types::Date32Type>();
                $f
            }
            D::Date64 => {
                let $arr = $a.as_primitive::<arrow_array::types::Date64Type>();
                $f
            }
            D::Time32(arrow_schema::TimeUnit::Second) => {
                let $arr = $a.as_primitive::<arrow_array::types::Time32SecondType>();
                $f
            }
            D::Time32(_) => {
                let $arr = $a.as_primitive::<arrow_array::types::Time32MillisecondType>();
                $f
            }
            D::Time64(arrow_schema::TimeUnit::Microsecond) => {
                let $arr = $a.as_primitive::<arrow_array::types::Time64MicrosecondType>();
                $f
            }
            D::Time64(_) => {
                let $arr = $a.as_primitive::<arrow_array::types::Time64NanosecondType>();
                $f
            }
            D::Timestamp(arrow_schema::TimeUnit::Second, _) => {
                let $arr = $a.as_primitive::<arrow_array::types::TimestampSecondType>();
                $f
            }
            D::Timestamp(arrow_schema::TimeUnit::Millisecond, _) => {
                let $arr = $a.as_primitive::<arrow_array::types::TimestampMillisecondType>();
                $f
            }
            D::Timestamp(arrow_schema::TimeUnit::Microsecond, _) => {
                let $arr = $a.as_primitive::<arrow_array::types::TimestampMicrosecondType>();
                $f
            }
            D::Timestamp(arrow_schema::TimeUnit::Nanosecond, _) => {
                let $arr = $a.as_primitive::<arrow_array::types::TimestampNanosecondType>();
                $f
            }
            D::Duration(arrow_schema::TimeUnit::Second) => {
                let $arr = $a.as_primitive::<arrow_array::types::DurationSecondType>();
                $f
            }
            D::Duration(arrow_schema::TimeUnit::Millisecond) => {
                let $arr = $a.as_primitive::<arrow_array::types::DurationMillisecondType>();
                $f
            }
            D::Duration(arrow_schema::TimeUnit::Microsecond) => {
                let $arr = $a.as_primitive::<arrow_array::types::DurationMicrosecondType>();
                $f
            }
            D::Duration(arrow_schema::TimeUnit::Nanosecond) => {
                let $arr = $a.as_primitive::<arrow_array::types::DurationNanosecondType>();
                $f
            }
            _ => $other,
        }
    }};
}
pub(crate) use with_int_array;

/// Row `row` of an integer-like array, as `i128`.
pub(crate) fn int_at(array: &dyn Array, row: usize) -> Option<i128> {
    with_int_array!(
        array,
        array.data_type(),
        |a| Some(i128::from(a.value(row))),
        None
    )
}

/// Appends the nested encoding of row `row` of `array` (see the module doc).
/// Types that are not [`hashable`] encode as null.
pub(crate) fn encode_nested(array: &dyn Array, row: usize, out: &mut Vec<u8>) {
    use DataType::*;
    if array.is_null(row) {
        out.push(0);
        return;
    }
    let len_bytes = |n: usize, out: &mut Vec<u8>| out.extend_from_slice(&(n as u64).to_le_bytes());
    let t = array.data_type();
    match t {
        Boolean => out.extend_from_slice(&[3, u8::from(array.as_boolean().value(row))]),
        Float32 => {
            out.push(2);
            out.extend_from_slice(
                &float_bits(f64::from(array.as_primitive::<Float32Type>().value(row)))
                    .to_le_bytes(),
            );
        }
        Float64 => {
            out.push(2);
            out.extend_from_slice(
                &float_bits(array.as_primitive::<Float64Type>().value(row)).to_le_bytes(),
            );
        }
        Utf8 | LargeUtf8 | Utf8View => {
            let s = utf8_at(array, row).unwrap_or_default();
            out.push(4);
            len_bytes(s.len(), out);
            out.extend_from_slice(s.as_bytes());
        }
        Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => {
            let b = binary_at(array, row).unwrap_or_default();
            out.push(5);
            len_bytes(b.len(), out);
            out.extend_from_slice(b);
        }
        Decimal128(..) => {
            out.push(6);
            out.extend_from_slice(
                &array
                    .as_primitive::<Decimal128Type>()
                    .value(row)
                    .to_le_bytes(),
            );
        }
        List(_) | LargeList(_) | FixedSizeList(..) => {
            let values = list_at(array, row);
            out.push(7);
            match values {
                Some(values) => {
                    len_bytes(values.len(), out);
                    for i in 0..values.len() {
                        encode_nested(values.as_ref(), i, out);
                    }
                }
                None => len_bytes(0, out),
            }
        }
        Struct(fields) => {
            let s = array.as_struct();
            out.push(8);
            len_bytes(fields.len(), out);
            for (field, column) in fields.iter().zip(s.columns()) {
                len_bytes(field.name().len(), out);
                out.extend_from_slice(field.name().as_bytes());
                encode_nested(column.as_ref(), row, out);
            }
        }
        Dictionary(..) => {
            downcast_dictionary_array!(
                array => {
                    match array.key(row) {
                        Some(key) if key < array.values().len() => encode_nested(array.values().as_ref(), key, out),
                        _ => out.push(0),
                    }
                }
                _ => out.push(0)
            )
        }
        _ => match int_at(array, row) {
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            None => out.push(0),
        },
    }
}

/// Row `row` of a string array of any offset width.
pub(crate) fn utf8_at(array: &dyn Array, row: usize) -> Option<&str> {
    match array.data_type() {
        DataType::Utf8 => Some(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Some(array.as_string::<i64>().value(row)),
        DataType::Utf8View => Some(array.as_string_view().value(row)),
        _ => None,
    }
}

/// Row `row` of a binary array of any kind.
pub(crate) fn binary_at(array: &dyn Array, row: usize) -> Option<&[u8]> {
    match array.data_type() {
        DataType::Binary => Some(array.as_binary::<i32>().value(row)),
        DataType::LargeBinary => Some(array.as_binary::<i64>().value(row)),
        DataType::BinaryView => Some(array.as_binary_view().value(row)),
        DataType::FixedSizeBinary(_) => Some(array.as_fixed_size_binary().value(row)),
        _ => None,
    }
}

/// The elements of row `row` of a list array of any kind.
pub(crate) fn list_at(array: &dyn Array, row: usize) -> Option<arrow_array::ArrayRef> {
    match array.data_type() {
        DataType::List(_) => Some(array.as_list::<i32>().value(row)),
        DataType::LargeList(_) => Some(array.as_list::<i64>().value(row)),
        DataType::FixedSizeList(..) => Some(array.as_fixed_size_list().value(row)),
        DataType::ListView(_) => Some(array.as_list_view::<i32>().value(row)),
        DataType::LargeListView(_) => Some(array.as_list_view::<i64>().value(row)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int32Array, Int64Array, ListArray, StringArray, StructArray};
    use arrow_schema::Field;

    fn enc(a: &dyn Array, row: usize) -> Vec<u8> {
        let mut out = Vec::new();
        encode_nested(a, row, &mut out);
        out
    }

    #[test]
    fn integers_encode_the_same_at_any_width() {
        let a = Int32Array::from(vec![-5]);
        let b = Int64Array::from(vec![-5]);
        assert_eq!(enc(&a, 0), enc(&b, 0));
        let mut want = vec![1];
        want.extend_from_slice(&(-5i128).to_le_bytes());
        assert_eq!(enc(&a, 0), want);
    }

    #[test]
    fn nested_values_encode_as_documented() {
        let list =
            ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1), None])]);
        let mut want = vec![7];
        want.extend_from_slice(&2u64.to_le_bytes());
        want.push(1);
        want.extend_from_slice(&1i128.to_le_bytes());
        want.push(0);
        assert_eq!(enc(&list, 0), want);

        let s = StructArray::from(vec![(
            Arc::new(Field::new("k", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec!["ab"])) as ArrayRef,
        )]);
        let mut want = vec![8];
        want.extend_from_slice(&1u64.to_le_bytes());
        want.extend_from_slice(&1u64.to_le_bytes());
        want.push(b'k');
        want.push(4);
        want.extend_from_slice(&2u64.to_le_bytes());
        want.extend_from_slice(b"ab");
        assert_eq!(enc(&s, 0), want);
    }

    #[test]
    fn floats_are_canonical() {
        assert_eq!(float_bits(-0.0), float_bits(0.0));
        assert_eq!(float_bits(f64::NAN), float_bits(-f64::NAN));
        assert_ne!(float_bits(1.0), float_bits(-1.0));
    }
}
