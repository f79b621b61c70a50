//! Which Arrow type a dynamic value has, and which types a file may hold.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields as ArrowFields};

use crate::unify::{unify_types, TypeConflict};
use crate::value::FieldValue;

/// How deeply types may nest (lists in structs in lists ...) in a file this
/// crate reads; what it writes is as deep as its sources' values.
pub const MAX_TYPE_DEPTH: usize = 32;

/// The Arrow type of a value (FORMAT.md, "Fields": dynamic values): a list's
/// elements unify (a conflict names `path[]`), a struct's children keep their
/// order, every nested field is nullable.
pub(crate) fn value_type(value: &FieldValue, path: &str) -> Result<DataType, TypeConflict> {
    Ok(match value {
        FieldValue::Null => DataType::Null,
        FieldValue::Bool(_) => DataType::Boolean,
        FieldValue::Int64(_) => DataType::Int64,
        FieldValue::Float32(_) => DataType::Float32,
        FieldValue::Float64(_) => DataType::Float64,
        FieldValue::String(_) => DataType::Utf8,
        FieldValue::Binary(_) => DataType::Binary,
        FieldValue::List(items) => {
            let item_path = format!("{path}[]");
            let mut item_type = DataType::Null;
            for item in items {
                let t = value_type(item, &item_path)?;
                if t != item_type {
                    item_type = unify_types(&item_type, &t, &item_path)?;
                }
            }
            DataType::List(Arc::new(Field::new("item", item_type, true)))
        }
        FieldValue::Struct(children) => {
            let mut fields: Vec<Field> = Vec::with_capacity(children.len());
            for (name, child) in children {
                let child_path = format!("{path}.{name}");
                let t = value_type(child, &child_path)?;
                match fields.iter_mut().find(|f| f.name() == &**name) {
                    // A name given twice unifies (the builder reads the first).
                    Some(f) => {
                        let u = unify_types(f.data_type(), &t, &child_path)?;
                        *f = Field::new(name.as_ref(), u, true);
                    }
                    None => fields.push(Field::new(name.as_ref(), t, true)),
                }
            }
            DataType::Struct(ArrowFields::from(fields))
        }
        FieldValue::Arrow(array, _) => array.data_type().clone(),
    })
}

/// Whether this crate reads and writes columns of type `t`: any Arrow type
/// but unions, nested at most [`MAX_TYPE_DEPTH`] deep. (Arrow's IPC reader
/// trusts a union's buffers to be long enough, and no source produces one.)
pub(crate) fn check_supported(t: &DataType) -> Result<(), String> {
    fn walk(t: &DataType, depth: usize) -> Result<(), String> {
        if depth > MAX_TYPE_DEPTH {
            return Err(format!("types nest more than {MAX_TYPE_DEPTH} deep"));
        }
        match t {
            DataType::Union(..) => Err(format!("type {t} is not supported (unions are not)")),
            DataType::FixedSizeList(_, n) | DataType::FixedSizeBinary(n) if *n < 0 => {
                Err(format!("type {t} has a negative size"))
            }
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => walk(f.data_type(), depth + 1),
            DataType::Decimal32(p, _)
            | DataType::Decimal64(p, _)
            | DataType::Decimal128(p, _)
            | DataType::Decimal256(p, _)
                if *p == 0 =>
            {
                Err(format!("type {t} has no digits"))
            }
            DataType::Struct(fields) => fields
                .iter()
                .try_for_each(|f| walk(f.data_type(), depth + 1)),
            DataType::RunEndEncoded(a, b) => {
                walk(a.data_type(), depth + 1)?;
                walk(b.data_type(), depth + 1)
            }
            DataType::Dictionary(k, v) => {
                if !k.is_dictionary_key_type() {
                    return Err(format!("type {t} has keys that are not integers"));
                }
                walk(v, depth + 1)
            }
            _ => Ok(()),
        }
    }
    walk(t, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(t: DataType) -> DataType {
        DataType::List(Arc::new(Field::new("item", t, true)))
    }

    #[test]
    fn dynamic_values_have_the_documented_types() {
        use FieldValue::*;
        let cases = [
            (Null, DataType::Null),
            (Bool(true), DataType::Boolean),
            (Int64(1), DataType::Int64),
            (Float32(1.0), DataType::Float32),
            (Float64(1.0), DataType::Float64),
            (String("a".into()), DataType::Utf8),
            (Binary(vec![1]), DataType::Binary),
            (List(vec![]), list(DataType::Null)),
            (List(vec![Null, Int64(3)]), list(DataType::Int64)),
            (
                List(vec![List(vec![]), List(vec![Bool(false)])]),
                list(list(DataType::Boolean)),
            ),
            (
                Struct(vec![("a".into(), Int64(1)), ("b".into(), Null)]),
                DataType::Struct(
                    vec![
                        Field::new("a", DataType::Int64, true),
                        Field::new("b", DataType::Null, true),
                    ]
                    .into(),
                ),
            ),
        ];
        for (value, want) in cases {
            assert_eq!(value_type(&value, "f").unwrap(), want, "{value:?}");
        }
    }

    #[test]
    fn a_mixed_list_is_a_conflict_naming_the_elements() {
        let v = FieldValue::List(vec![FieldValue::Int64(1), FieldValue::Float64(2.0)]);
        let err = value_type(&v, "scores").unwrap_err();
        assert_eq!(
            (err.path.as_str(), err.existing, err.new),
            (
                "scores[]",
                DataType::Int64.to_string(),
                DataType::Float64.to_string()
            )
        );
    }

    #[test]
    fn unions_and_deep_nesting_are_refused() {
        let mut t = DataType::Int8;
        for _ in 0..MAX_TYPE_DEPTH {
            t = list(t);
        }
        assert!(check_supported(&t).is_ok());
        assert!(check_supported(&list(t)).is_err());
        let union = DataType::Union(
            arrow_schema::UnionFields::try_new(
                vec![0],
                vec![Field::new("a", DataType::Int8, true)],
            )
            .unwrap(),
            arrow_schema::UnionMode::Sparse,
        );
        assert!(check_supported(&list(union)).is_err());
        let negative =
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Null, true)), -1);
        assert!(check_supported(&negative).is_err());
        assert!(check_supported(&DataType::FixedSizeBinary(-4)).is_err());
    }
}
