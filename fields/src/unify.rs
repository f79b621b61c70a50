//! How two Arrow types unify (FORMAT.md, "Fields": schema rules): the one rule
//! the dataset schema, the builder, the types of dynamic values, the statistics
//! and the Parquet source's check across files share.

use std::sync::Arc;

use arrow_schema::{DataType, Field, FieldRef, Fields as ArrowFields};

use crate::error::FieldsError;

/// Two types that do not unify, found at `path` (the field's name, then
/// `.child` for a struct's child and `[]` for a list's elements).
#[derive(Clone, Debug, PartialEq)]
pub struct TypeConflict {
    /// Where: the field's name, then `.child` and `[]` down to the conflict.
    pub path: String,
    /// The type already there, as the messages show it (with an Arrow
    /// extension's name).
    pub existing: String,
    /// The type that does not unify with it.
    pub new: String,
}

impl TypeConflict {
    /// The error for a conflict with the dataset's schema.
    pub(crate) fn in_dataset(self) -> FieldsError {
        FieldsError::DatasetConflict {
            field: self.path,
            new: self.new,
            existing: self.existing,
        }
    }

    /// The error for a conflict with earlier records of a shard.
    pub(crate) fn in_record(self, origin: &str) -> FieldsError {
        FieldsError::RecordConflict {
            field: self.path,
            new: self.new,
            existing: self.existing,
            origin: origin.to_owned(),
        }
    }
}

/// The metadata key naming a field's Arrow extension type (`arrow.uuid`,
/// `arrow.json`, `arrow.fixed_shape_tensor`, ...): the storage type alone does
/// not say what the values mean.
pub(crate) const EXTENSION_NAME_KEY: &str = "ARROW:extension:name";
/// The metadata key of an extension type's parameters (a tensor's shape).
pub(crate) const EXTENSION_METADATA_KEY: &str = "ARROW:extension:metadata";

/// A field's type as messages show it: with its extension's name, if any.
fn described(field: &Field) -> String {
    match field.metadata().get(EXTENSION_NAME_KEY) {
        Some(name) => format!("{} (extension {name})", field.data_type()),
        None => field.data_type().to_string(),
    }
}

/// The unified field: `existing`'s name and metadata (with `new`'s keys it
/// lacks), the unified type, nullable if either is. An Arrow extension type
/// (its name and parameters) must be the same on both sides, or absent on both:
/// the same bytes under another extension mean something else.
pub(crate) fn unify_fields(
    existing: &FieldRef,
    new: &FieldRef,
    path: &str,
) -> std::result::Result<FieldRef, TypeConflict> {
    let extension = |f: &Field| {
        (
            f.metadata().get(EXTENSION_NAME_KEY).cloned(),
            f.metadata().get(EXTENSION_METADATA_KEY).cloned(),
        )
    };
    // A column of nulls so far (or here) has no meaning to keep: the other side's
    // extension, if any, is taken.
    let typed = |f: &Field| f.data_type() != &DataType::Null;
    if typed(existing) && typed(new) && extension(existing) != extension(new) {
        return Err(TypeConflict {
            path: path.to_owned(),
            existing: described(existing),
            new: described(new),
        });
    }
    let data_type = unify_types(existing.data_type(), new.data_type(), path)?;
    let nullable = existing.is_nullable() || new.is_nullable();
    let missing_metadata = new
        .metadata()
        .keys()
        .any(|k| !existing.metadata().contains_key(k));
    if &data_type == existing.data_type() && nullable == existing.is_nullable() && !missing_metadata
    {
        return Ok(existing.clone());
    }
    let mut metadata = existing.metadata().clone();
    for (k, v) in new.metadata().iter() {
        if !metadata.contains_key(k) {
            metadata.insert(k.clone(), v.clone());
        }
    }
    Ok(Arc::new(
        Field::new(existing.name(), data_type, nullable).with_metadata(metadata),
    ))
}

/// Bit width and signedness of an integer type.
fn integer(t: &DataType) -> Option<(u32, bool)> {
    use DataType::*;
    Some(match t {
        Int8 => (8, true),
        Int16 => (16, true),
        Int32 => (32, true),
        Int64 => (64, true),
        UInt8 => (8, false),
        UInt16 => (16, false),
        UInt32 => (32, false),
        UInt64 => (64, false),
        _ => return None,
    })
}

/// Unifies two types (FORMAT.md, "Fields": schema rules): equal types; Null
/// with anything; a narrower integer into a wider one (signed into signed,
/// unsigned into a wider unsigned or signed); lists, large lists and
/// fixed-size lists of one size by their elements, structs by their children's
/// names (new ones appended), recursively, nested extension types only with
/// themselves. `path` names the field in a conflict.
pub fn unify_types(
    existing: &DataType,
    new: &DataType,
    path: &str,
) -> std::result::Result<DataType, TypeConflict> {
    use DataType::*;
    if existing == new {
        return Ok(existing.clone());
    }
    let conflict = || TypeConflict {
        path: path.to_owned(),
        existing: existing.to_string(),
        new: new.to_string(),
    };
    match (existing, new) {
        (Null, t) | (t, Null) => Ok(t.clone()),
        (a, b) if integer(a).is_some() && integer(b).is_some() => {
            let (Some((wa, sa)), Some((wb, sb))) = (integer(a), integer(b)) else {
                return Err(conflict());
            };
            // The wider one holds every value of the narrower one: a signed
            // into a wider signed, an unsigned into a wider unsigned or signed.
            let fits = |(w1, s1): (u32, bool), (w2, s2): (u32, bool)| w1 < w2 && (s1 == s2 || s2);
            if fits((wa, sa), (wb, sb)) {
                Ok(b.clone())
            } else if fits((wb, sb), (wa, sa)) {
                Ok(a.clone())
            } else {
                Err(conflict())
            }
        }
        (List(a), List(b)) => Ok(List(unify_fields(a, b, &format!("{path}[]"))?)),
        (LargeList(a), LargeList(b)) => Ok(LargeList(unify_fields(a, b, &format!("{path}[]"))?)),
        (FixedSizeList(a, n), FixedSizeList(b, m)) if n == m => {
            Ok(FixedSizeList(unify_fields(a, b, &format!("{path}[]"))?, *n))
        }
        (Struct(a), Struct(b)) => {
            let mut children: Vec<FieldRef> = a.iter().cloned().collect();
            for child in b.iter() {
                match children.iter().position(|c| c.name() == child.name()) {
                    Some(i) => {
                        children[i] =
                            unify_fields(&children[i], child, &format!("{path}.{}", child.name()))?
                    }
                    None => children.push(child.clone()),
                }
            }
            Ok(Struct(ArrowFields::from(children)))
        }
        _ => Err(conflict()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use DataType::*;

    pub(crate) fn list(t: DataType) -> DataType {
        List(Arc::new(Field::new("item", t, true)))
    }

    pub(crate) fn strukt(children: &[(&str, DataType)]) -> DataType {
        Struct(
            children
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), true))
                .collect(),
        )
    }

    fn unify(a: &DataType, b: &DataType) -> std::result::Result<DataType, TypeConflict> {
        unify_types(a, b, "f")
    }

    #[test]
    fn integers_widen_in_either_order() {
        let cases = [
            (Int8, Int16, Some(Int16)),
            (Int32, Int64, Some(Int64)),
            (Int64, Int32, Some(Int64)),
            (UInt8, UInt64, Some(UInt64)),
            (UInt8, Int16, Some(Int16)),
            (UInt32, Int64, Some(Int64)),
            (Int64, UInt32, Some(Int64)),
            (UInt32, Int32, None),
            (Int8, UInt8, None),
            (Int8, UInt64, None),
            (UInt64, Int64, None),
            (Int64, Float64, None),
            (Float32, Float64, None),
        ];
        for (a, b, want) in cases {
            assert_eq!(unify(&a, &b).ok(), want, "{a} + {b}");
            assert_eq!(unify(&b, &a).ok(), unify(&a, &b).ok(), "{a} + {b} commutes");
        }
    }

    #[test]
    fn null_gives_way_to_anything() {
        assert_eq!(unify(&Null, &Utf8).unwrap(), Utf8);
        assert_eq!(unify(&list(Int64), &Null).unwrap(), list(Int64));
        assert_eq!(unify(&list(Null), &list(Int32)).unwrap(), list(Int32));
    }

    #[test]
    fn nested_types_unify_recursively() {
        assert_eq!(unify(&list(Int32), &list(Int64)).unwrap(), list(Int64));
        let a = strukt(&[("x", Int32), ("y", Utf8)]);
        let b = strukt(&[("z", Boolean), ("x", Int64)]);
        assert_eq!(
            unify(&a, &b).unwrap(),
            strukt(&[("x", Int64), ("y", Utf8), ("z", Boolean)])
        );
        // A list's element field keeps the dataset's name ("element" from Parquet).
        let parquet = List(Arc::new(Field::new("element", Int64, false)));
        assert_eq!(
            unify(&parquet, &list(Int32)).unwrap(),
            List(Arc::new(Field::new("element", Int64, true)))
        );
    }

    #[test]
    fn a_nested_conflict_names_its_path_and_both_types() {
        let a = strukt(&[("meta", strukt(&[("tags", list(Utf8))]))]);
        let b = strukt(&[("meta", strukt(&[("tags", list(Int64))]))]);
        let err = unify_types(&a, &b, "info").unwrap_err();
        assert_eq!(err.path, "info.meta.tags[]");
        assert_eq!(
            (err.existing, err.new),
            (Utf8.to_string(), Int64.to_string())
        );
    }

    #[test]
    fn fixed_size_lists_unify_by_their_elements_at_one_size() {
        let fixed = |t: DataType, n| FixedSizeList(Arc::new(Field::new("item", t, true)), n);
        assert_eq!(
            unify(&fixed(Int16, 3), &fixed(Int32, 3)).unwrap(),
            fixed(Int32, 3)
        );
        assert_eq!(
            unify(&fixed(Null, 3), &fixed(Utf8, 3)).unwrap(),
            fixed(Utf8, 3)
        );
        assert!(unify(&fixed(Int32, 3), &fixed(Int32, 4)).is_err());
        assert!(unify(&fixed(Int32, 3), &list(Int32)).is_err());
    }
}
