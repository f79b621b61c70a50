//! Running a compiled predicate over a batch: each node one kernel call over
//! whole columns (comparisons of `arrow-ord`, `LIKE` of `arrow-string`, the
//! three-valued AND, OR and NOT of `arrow-arith`).

use std::sync::Arc;

use arrow_arith::boolean::{and_kleene, not, or_kleene};
use arrow_array::cast::AsArray;
use arrow_array::{
    make_array, Array, ArrayRef, BooleanArray, Int64Array, OffsetSizeTrait, RecordBatch, Scalar,
};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_schema::{ArrowError, DataType};

use super::tree::{CmpOp, ColumnPath, Node, Operand};
use super::PredicateError;

fn arrow(context: &str) -> impl FnOnce(ArrowError) -> PredicateError + '_ {
    move |source| PredicateError::Arrow {
        context: context.to_owned(),
        source,
    }
}

pub(super) fn evaluate(node: &Node, batch: &RecordBatch) -> Result<BooleanArray, PredicateError> {
    let rows = batch.num_rows();
    Ok(match node {
        Node::Const(None) => BooleanArray::new_null(rows),
        Node::Const(Some(b)) => BooleanArray::new(
            match b {
                true => BooleanBuffer::new_set(rows),
                false => BooleanBuffer::new_unset(rows),
            },
            None,
        ),
        Node::Bool(operand) => {
            let (array, _) = datum(operand, batch)?;
            array.as_boolean_opt().cloned().ok_or_else(|| {
                arrow("reading a boolean column")(ArrowError::SchemaError(format!(
                    "a column of {} where a boolean was compiled",
                    array.data_type()
                )))
            })?
        }
        Node::Compare { op, left, right } => {
            let (l, l_scalar) = datum(left, batch)?;
            let (r, r_scalar) = datum(right, batch)?;
            let kernel = match op {
                CmpOp::Eq => arrow_ord::cmp::eq,
                CmpOp::NotEq => arrow_ord::cmp::neq,
                CmpOp::Lt => arrow_ord::cmp::lt,
                CmpOp::LtEq => arrow_ord::cmp::lt_eq,
                CmpOp::Gt => arrow_ord::cmp::gt,
                CmpOp::GtEq => arrow_ord::cmp::gt_eq,
            };
            let result = match (l_scalar, r_scalar) {
                (false, true) => kernel(&l, &Scalar::new(r)),
                (true, false) => kernel(&Scalar::new(l), &r),
                _ => kernel(&l, &r),
            };
            result.map_err(arrow("comparing"))?
        }
        Node::And(nodes) => fold(nodes, batch, and_kleene, false)?,
        Node::Or(nodes) => fold(nodes, batch, or_kleene, true)?,
        Node::Not(node) => not(&evaluate(node, batch)?).map_err(arrow("NOT"))?,
        Node::IsNull { operand, negated } => {
            let (array, _) = datum(operand, batch)?;
            let valid = match array.logical_nulls() {
                Some(nulls) => nulls.inner().clone(),
                None => BooleanBuffer::new_set(rows),
            };
            BooleanArray::new(if *negated { valid } else { !&valid }, None)
        }
        Node::Is {
            node,
            value,
            negated,
        } => {
            let truth = evaluate(node, batch)?;
            let (values, nulls) = truth.into_parts();
            let matching = if *value { values } else { !&values };
            let known = match nulls {
                Some(nulls) => &matching & nulls.inner(),
                None => matching,
            };
            BooleanArray::new(if *negated { !&known } else { known }, None)
        }
        Node::Like {
            operand,
            pattern,
            negated,
            insensitive,
        } => {
            let (array, _) = datum(operand, batch)?;
            let kernel = match (negated, insensitive) {
                (false, false) => arrow_string::like::like,
                (false, true) => arrow_string::like::ilike,
                (true, false) => arrow_string::like::nlike,
                (true, true) => arrow_string::like::nilike,
            };
            kernel(&array, &Scalar::new(pattern.clone())).map_err(arrow("LIKE"))?
        }
        Node::ArrayHas { list, cast, value } => {
            let array = column(list, batch)?;
            array_has(&array, cast.as_ref(), value)?
        }
    })
}

/// AND or OR of every node, stopping once no row can change (all false for
/// AND, all true for OR).
fn fold(
    nodes: &[Node],
    batch: &RecordBatch,
    kernel: fn(&BooleanArray, &BooleanArray) -> Result<BooleanArray, ArrowError>,
    settled_by: bool,
) -> Result<BooleanArray, PredicateError> {
    let mut result: Option<BooleanArray> = None;
    for node in nodes {
        let next = evaluate(node, batch)?;
        let joined = match result {
            None => next,
            Some(so_far) => kernel(&so_far, &next).map_err(arrow("AND / OR"))?,
        };
        let settled = joined.null_count() == 0
            && match settled_by {
                true => joined.true_count() == joined.len(),
                false => joined.true_count() == 0,
            };
        if settled {
            return Ok(joined);
        }
        result = Some(joined);
    }
    Ok(result.unwrap_or_else(|| {
        // An empty AND is true, an empty OR (IN ()) false.
        let rows = batch.num_rows();
        BooleanArray::new(
            match settled_by {
                true => BooleanBuffer::new_unset(rows),
                false => BooleanBuffer::new_set(rows),
            },
            None,
        )
    }))
}

/// An operand's values, and whether it is one value for every row.
fn datum(operand: &Operand, batch: &RecordBatch) -> Result<(ArrayRef, bool), PredicateError> {
    match operand {
        Operand::Literal(value) => Ok((value.clone(), true)),
        Operand::Column { column: path, cast } => {
            let array = column(path, batch)?;
            Ok((cast_to(array, cast.as_ref())?, false))
        }
        Operand::Cardinality { column: path, cast } => {
            let array = column(path, batch)?;
            let lengths = cardinality(&array)?;
            Ok((cast_to(lengths, cast.as_ref())?, false))
        }
    }
}

fn cast_to(array: ArrayRef, to: Option<&DataType>) -> Result<ArrayRef, PredicateError> {
    match to {
        None => Ok(array),
        Some(to) => arrow_cast::cast(&array, to).map_err(arrow("converting a column")),
    }
}

/// The column at `path`: a top-level column of the batch, or a child of a
/// struct column, null where the struct is.
fn column(path: &ColumnPath, batch: &RecordBatch) -> Result<ArrayRef, PredicateError> {
    let missing = |name: &str| {
        arrow("reading a column")(ArrowError::SchemaError(format!(
            "the batch has no column {name:?}"
        )))
    };
    let mut array = batch
        .column_by_name(&path.name)
        .ok_or_else(|| missing(&path.name))?
        .clone();
    for child in &path.children {
        let parent = array.as_struct_opt().ok_or_else(|| missing(child))?;
        let found = parent
            .column_by_name(child)
            .ok_or_else(|| missing(child))?
            .clone();
        array = match NullBuffer::union(parent.nulls(), found.nulls()) {
            Some(nulls) if parent.nulls().is_some() => {
                let data = found
                    .to_data()
                    .into_builder()
                    .nulls(Some(nulls))
                    .build()
                    .map_err(arrow("reading a struct's child"))?;
                make_array(data)
            }
            _ => found,
        };
    }
    Ok(array)
}

/// The element ranges of a list column, row by row (`None` where the list is
/// null), and its values.
/// Each row's element range of a list column (`None` where the list is null).
type ListRows = Vec<Option<(usize, usize)>>;

fn list_rows(array: &ArrayRef) -> Result<(ArrayRef, ListRows), PredicateError> {
    fn ranges<O: OffsetSizeTrait>(
        list: &arrow_array::GenericListArray<O>,
    ) -> Vec<Option<(usize, usize)>> {
        let offsets = list.value_offsets();
        (0..list.len())
            .map(|i| {
                list.is_valid(i)
                    .then(|| (offsets[i].as_usize(), offsets[i + 1].as_usize()))
            })
            .collect()
    }
    if let Some(list) = array.as_list_opt::<i32>() {
        return Ok((list.values().clone(), ranges(list)));
    }
    if let Some(list) = array.as_list_opt::<i64>() {
        return Ok((list.values().clone(), ranges(list)));
    }
    if let Some(list) = array.as_fixed_size_list_opt() {
        let size = list.value_length() as usize;
        let rows = (0..list.len())
            .map(|i| list.is_valid(i).then(|| (i * size, (i + 1) * size)))
            .collect();
        return Ok((list.values().clone(), rows));
    }
    Err(arrow("reading a list")(ArrowError::SchemaError(format!(
        "a column of {} where a list was compiled",
        array.data_type()
    ))))
}

/// The number of elements of each list (null where the list is).
fn cardinality(array: &ArrayRef) -> Result<ArrayRef, PredicateError> {
    let (_, rows) = list_rows(array)?;
    Ok(Arc::new(Int64Array::from_iter(
        rows.into_iter()
            .map(|r| r.map(|(start, end)| (end - start) as i64)),
    )))
}

/// Whether each list holds `value`: true if an element equals it, null where
/// the list is null, else false.
fn array_has(
    array: &ArrayRef,
    cast: Option<&DataType>,
    value: &ArrayRef,
) -> Result<BooleanArray, PredicateError> {
    let (values, rows) = list_rows(array)?;
    let values = cast_to(values, cast)?;
    let equal =
        arrow_ord::cmp::eq(&values, &Scalar::new(value.clone())).map_err(arrow("array_has"))?;
    let (equal, nulls) = equal.into_parts();
    let hits = match nulls {
        Some(nulls) => &equal & nulls.inner(),
        None => equal,
    };
    Ok(rows
        .into_iter()
        .map(|row| row.map(|(start, end)| hits.slice(start, end - start).count_set_bits() > 0))
        .collect())
}
