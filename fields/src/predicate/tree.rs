//! The typed tree a predicate compiles to: what `eval.rs` runs.

use arrow_array::ArrayRef;
use arrow_schema::DataType;

/// A typed predicate.
#[derive(Debug, Clone)]
pub(super) enum Node {
    /// The same truth for every row (`None`: unknown).
    Const(Option<bool>),
    /// A boolean column as it is.
    Bool(Operand),
    /// A comparison, both sides of one type.
    Compare {
        op: CmpOp,
        left: Operand,
        right: Operand,
    },
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    IsNull {
        operand: Operand,
        negated: bool,
    },
    /// `IS [NOT] TRUE` / `IS [NOT] FALSE`: never unknown.
    Is {
        node: Box<Node>,
        value: bool,
        negated: bool,
    },
    Like {
        operand: Operand,
        /// The pattern, one value of the operand's value type.
        pattern: ArrayRef,
        negated: bool,
        insensitive: bool,
    },
    /// Whether a list holds `value` (one value of its elements' type, after
    /// `cast`).
    ArrayHas {
        list: ColumnPath,
        cast: Option<DataType>,
        value: ArrayRef,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

impl CmpOp {
    /// The operator with its sides swapped (`3 < x` is `x > 3`).
    pub(super) fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::LtEq => CmpOp::GtEq,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::GtEq => CmpOp::LtEq,
            other => other,
        }
    }
}

/// One side of a comparison.
#[derive(Debug, Clone)]
pub(super) enum Operand {
    /// A column (cast to another type before the comparison).
    Column {
        column: ColumnPath,
        cast: Option<DataType>,
    },
    /// A constant: an array of one value.
    Literal(ArrayRef),
    /// The number of elements of a list column, as Int64 (cast to another
    /// type before the comparison).
    Cardinality {
        column: ColumnPath,
        cast: Option<DataType>,
    },
}

/// A column of the batch, or a child of a struct column by its path.
#[derive(Debug, Clone)]
pub(super) struct ColumnPath {
    /// The top-level column.
    pub name: String,
    /// Struct children, outermost first.
    pub children: Vec<String>,
}

impl ColumnPath {
    pub(super) fn display(&self) -> String {
        std::iter::once(self.name.as_str())
            .chain(self.children.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(".")
    }
}
