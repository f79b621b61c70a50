//! Literals and types: how a field is compared with a literal or another field
//! (the casts and the literal's Arrow value), and comparisons of constants.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BinaryViewArray, BooleanArray, Decimal128Array, Float64Array,
    LargeBinaryArray, LargeStringArray, StringArray, StringViewArray,
};
use arrow_schema::DataType;
use sqlparser::ast::Value;

use super::syntax::unsupported;
use super::tree::{CmpOp, Node};
use super::PredicateError;

/// A literal of the expression.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Lit {
    Null,
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl Lit {
    pub(super) fn describe(&self) -> String {
        match self {
            Lit::Null => "NULL".into(),
            Lit::Int(i) => format!("the integer {i}"),
            Lit::Float(f) => format!("the number {f}"),
            Lit::Str(s) => format!("the text {s:?}"),
            Lit::Bool(true) => "TRUE".into(),
            Lit::Bool(false) => "FALSE".into(),
        }
    }
}

/// The type of a dictionary's values, or the type itself.
pub(super) fn value_type(data_type: &DataType) -> &DataType {
    match data_type {
        DataType::Dictionary(_, values) => values,
        other => other,
    }
}

/// A cast from `from` to `to`, unless a comparison can take `from` as it is
/// (the same type, or a dictionary of it).
pub(super) fn cast_from(from: &DataType, to: &DataType) -> Option<DataType> {
    (value_type(from) != to).then(|| to.clone())
}

pub(super) fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

pub(super) fn is_binary(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
    )
}

pub(super) fn is_integer(t: &DataType) -> bool {
    t.is_integer()
}

pub(super) fn is_float(t: &DataType) -> bool {
    t.is_floating()
}

pub(super) fn is_decimal(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
    )
}

/// Integers exactly (Int64, or a decimal of 38 digits where an unsigned 64-bit
/// integer meets a signed one), anything with a float in Float64.
pub(super) fn numeric_common(a: &DataType, b: &DataType) -> DataType {
    if is_integer(a) && is_integer(b) {
        if *a == DataType::UInt64 || *b == DataType::UInt64 {
            DataType::Decimal128(38, 0)
        } else {
            DataType::Int64
        }
    } else {
        DataType::Float64
    }
}

/// The message for a nested field compared as a value.
pub(super) fn nested(field: &str, t: &DataType) -> Option<PredicateError> {
    let hint = match t {
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            "; test its elements with array_has(FIELD, value) or its length with cardinality(FIELD)"
        }
        DataType::Struct(_) => "; compare one of its children (FIELD.child)",
        _ if t.is_nested() => "",
        _ => return None,
    };
    Some(PredicateError::Type {
        field: field.to_owned(),
        message: format!(
            "is {t}, which cannot be compared as a whole{}",
            hint.replace("FIELD", field)
        ),
    })
}

pub(super) fn literal(value: &Value) -> Result<Lit, PredicateError> {
    Ok(match value {
        Value::Null => Lit::Null,
        Value::Boolean(b) => Lit::Bool(*b),
        Value::SingleQuotedString(s) => Lit::Str(s.clone()),
        Value::Number(text, _) => {
            if text.contains(['.', 'e', 'E']) {
                Lit::Float(
                    text.parse()
                        .map_err(|_| unsupported(format!("the number {text}")))?,
                )
            } else {
                match text.parse::<i128>() {
                    Ok(i) if i <= u64::MAX as i128 => Lit::Int(i),
                    _ => Lit::Float(
                        text.parse()
                            .map_err(|_| unsupported(format!("the number {text}")))?,
                    ),
                }
            }
        }
        other => return Err(unsupported(format!("the literal {other}"))),
    })
}

/// The truth of a comparison of two constants.
pub(super) fn constant(op: CmpOp, a: &Lit, b: &Lit) -> Result<Node, PredicateError> {
    use std::cmp::Ordering;
    let order = match (a, b) {
        (Lit::Null, _) | (_, Lit::Null) => return Ok(Node::Const(None)),
        (Lit::Int(x), Lit::Int(y)) => x.cmp(y),
        (Lit::Int(_) | Lit::Float(_), Lit::Int(_) | Lit::Float(_)) => {
            let f = |l: &Lit| match l {
                Lit::Int(i) => *i as f64,
                Lit::Float(f) => *f,
                _ => unreachable!(),
            };
            f(a).partial_cmp(&f(b)).unwrap_or(Ordering::Less)
        }
        (Lit::Str(x), Lit::Str(y)) => x.cmp(y),
        (Lit::Bool(x), Lit::Bool(y)) => x.cmp(y),
        _ => {
            return Err(unsupported(format!(
                "comparing {} with {}",
                a.describe(),
                b.describe()
            )))
        }
    };
    let truth = match op {
        CmpOp::Eq => order == Ordering::Equal,
        CmpOp::NotEq => order != Ordering::Equal,
        CmpOp::Lt => order == Ordering::Less,
        CmpOp::LtEq => order != Ordering::Greater,
        CmpOp::Gt => order == Ordering::Greater,
        CmpOp::GtEq => order != Ordering::Less,
    };
    Ok(Node::Const(Some(truth)))
}

/// How a field of type `data_type` is compared with `lit`: the cast of the
/// field (if any) and the literal as one value of the type compared in; `None`
/// when the comparison is unknown for every row (a NULL, a field of nulls).
#[allow(clippy::type_complexity)]
pub(super) fn coerce(
    field: &str,
    data_type: &DataType,
    lit: &Lit,
) -> Result<Option<(Option<DataType>, ArrayRef)>, PredicateError> {
    let value = value_type(data_type);
    let mismatch = || PredicateError::Type {
        field: field.to_owned(),
        message: format!("is {value}; it cannot be compared with {}", lit.describe()),
    };
    if let Some(error) = nested(field, value) {
        return Err(error);
    }
    let with = |target: DataType, literal: ArrayRef| Some((cast_from(data_type, &target), literal));
    Ok(match lit {
        Lit::Null => None,
        _ if *value == DataType::Null => None,
        Lit::Int(i) if is_integer(value) => match integer(*i, value) {
            Some(literal) => Some((None, literal)),
            None if i64::try_from(*i).is_ok() && *value != DataType::UInt64 => with(
                DataType::Int64,
                integer(*i, &DataType::Int64).expect("fits"),
            ),
            None => with(DataType::Decimal128(38, 0), decimal(*i)),
        },
        Lit::Int(_) | Lit::Float(_)
            if is_integer(value) || is_float(value) || is_decimal(value) =>
        {
            let number = match lit {
                Lit::Int(i) => *i as f64,
                Lit::Float(f) => *f,
                _ => unreachable!(),
            };
            match (lit, is_decimal(value)) {
                // An integer against a decimal: exactly, in the field's type.
                (Lit::Int(i), true) => {
                    let cast = arrow_cast::cast(&decimal(*i), value)
                        .ok()
                        .filter(|a| a.null_count() == 0);
                    match cast {
                        Some(literal) => Some((None, literal)),
                        None => with(
                            DataType::Float64,
                            Arc::new(Float64Array::from(vec![number])),
                        ),
                    }
                }
                _ => with(
                    DataType::Float64,
                    Arc::new(Float64Array::from(vec![number])),
                ),
            }
        }
        Lit::Str(s) if is_string(value) => Some((None, string(s, value))),
        Lit::Str(s) if is_binary(value) => match value {
            DataType::LargeBinary => Some((
                None,
                Arc::new(LargeBinaryArray::from_vec(vec![s.as_bytes()])) as ArrayRef,
            )),
            DataType::BinaryView => Some((
                None,
                Arc::new(BinaryViewArray::from_iter_values([s.as_bytes()])) as ArrayRef,
            )),
            DataType::Binary => Some((
                None,
                Arc::new(BinaryArray::from_vec(vec![s.as_bytes()])) as ArrayRef,
            )),
            // Fixed-size values compared as bytes of any length.
            _ => with(
                DataType::Binary,
                Arc::new(BinaryArray::from_vec(vec![s.as_bytes()])),
            ),
        },
        Lit::Str(s) if value.is_temporal() || is_decimal(value) => {
            let options = arrow_cast::CastOptions {
                safe: false,
                ..Default::default()
            };
            let text: ArrayRef = Arc::new(StringArray::from(vec![s.as_str()]));
            match arrow_cast::cast_with_options(&text, value, &options) {
                Ok(literal) => Some((None, literal)),
                Err(_) => {
                    return Err(PredicateError::Type {
                        field: field.to_owned(),
                        message: format!("is {value}; {s:?} cannot be read as one"),
                    })
                }
            }
        }
        Lit::Bool(b) if *value == DataType::Boolean => {
            Some((None, Arc::new(BooleanArray::from(vec![*b])) as ArrayRef))
        }
        _ => return Err(mismatch()),
    })
}

/// `i` as one value of integer type `t`, if it fits.
fn integer(i: i128, t: &DataType) -> Option<ArrayRef> {
    use arrow_array::*;
    Some(match t {
        DataType::Int8 => Arc::new(Int8Array::from(vec![i8::try_from(i).ok()?])),
        DataType::Int16 => Arc::new(Int16Array::from(vec![i16::try_from(i).ok()?])),
        DataType::Int32 => Arc::new(Int32Array::from(vec![i32::try_from(i).ok()?])),
        DataType::Int64 => Arc::new(Int64Array::from(vec![i64::try_from(i).ok()?])),
        DataType::UInt8 => Arc::new(UInt8Array::from(vec![u8::try_from(i).ok()?])),
        DataType::UInt16 => Arc::new(UInt16Array::from(vec![u16::try_from(i).ok()?])),
        DataType::UInt32 => Arc::new(UInt32Array::from(vec![u32::try_from(i).ok()?])),
        DataType::UInt64 => Arc::new(UInt64Array::from(vec![u64::try_from(i).ok()?])),
        _ => return None,
    })
}

fn decimal(i: i128) -> ArrayRef {
    Arc::new(
        Decimal128Array::from(vec![i])
            .with_precision_and_scale(38, 0)
            .expect("38 digits hold every 64-bit integer"),
    )
}

fn string(s: &str, t: &DataType) -> ArrayRef {
    match t {
        DataType::LargeUtf8 => Arc::new(LargeStringArray::from(vec![s])),
        DataType::Utf8View => Arc::new(StringViewArray::from(vec![s])),
        _ => Arc::new(StringArray::from(vec![s])),
    }
}
