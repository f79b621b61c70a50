//! Predicates: SQL boolean expressions over a batch of fields, as views and
//! `--where` select records with them (`label = 'cat' AND width >= 256`,
//! `caption LIKE '%dog%'`, `label_index IN (3, 7)`, `score IS NOT NULL`).
//!
//! The text is parsed by `sqlparser` (no parser here) and compiled against a
//! schema into a small tree of Arrow compute kernels (`arrow-ord`'s
//! comparisons, `arrow-string`'s `LIKE`, `arrow-arith`'s three-valued logic;
//! no evaluator here): `compile.rs` checks every name and type once, so a
//! missing field or an impossible comparison is an error naming the field
//! before any record is read; `eval.rs` runs the kernels over each batch.
//!
//! What an expression may hold (anything else is refused, naming it):
//!
//! - fields by name (`label`, `"a field"`, a struct's child as `meta.score`,
//!   a column whose name has a dot as `json.caption` or `"json.caption"`);
//! - literals: integers, decimals, `'text'`, `TRUE`, `FALSE`, `NULL`;
//! - `=`, `<>` (`!=`), `<`, `<=`, `>`, `>=`, `[NOT] BETWEEN .. AND ..`,
//!   `[NOT] IN (constants)`, `[NOT] LIKE` / `ILIKE` (`%` and `_`, `\` escapes),
//!   `IS [NOT] NULL`, `IS [NOT] TRUE` / `FALSE`, `AND`, `OR`, `NOT`, parentheses,
//!   a boolean field alone;
//! - on lists: `array_has(tags, 'x')` (also `list_contains`, `array_contains`)
//!   and `cardinality(tags)` (also `array_length`, `len`), a number to compare.
//!
//! A record is selected when the expression is TRUE: SQL's three-valued logic,
//! where a comparison with a null is unknown and unknown is not selected.
//! Integers compare exactly at any width; a comparison involving a decimal
//! literal or a float field is made in 64-bit floating point. A text literal
//! compared with a date, time, timestamp or decimal field is read as that type.

mod coerce;
mod compile;
mod eval;
mod syntax;
mod tree;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_buffer::BooleanBuffer;
use arrow_schema::{ArrowError, Schema};

use tree::Node;

/// An expression compiled against a schema.
#[derive(Debug, Clone)]
pub struct Predicate {
    root: Node,
    /// Top-level columns it reads, in order of first use.
    columns: Vec<String>,
}

/// Why an expression cannot be compiled or evaluated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PredicateError {
    /// Not SQL, or not one expression.
    #[error("invalid expression {expression:?}: {message}")]
    Syntax {
        /// The text given.
        expression: String,
        /// What the parser said.
        message: String,
    },
    /// A name no column has.
    #[error("no field {name:?} (the fields: {available})")]
    UnknownField {
        /// The name.
        name: String,
        /// The names there are.
        available: String,
    },
    /// A field used where its type cannot be.
    #[error("field {field:?}: {message}")]
    Type {
        /// The field (a struct's child by its path).
        field: String,
        /// What cannot be done with it.
        message: String,
    },
    /// A construct outside what predicates support.
    #[error("{0} is not supported in a predicate (comparisons, [NOT] IN, BETWEEN, LIKE, ILIKE, IS [NOT] NULL, AND, OR, NOT, array_has and cardinality are)")]
    Unsupported(String),
    /// A kernel failed on a batch (a batch of another schema).
    #[error("evaluating the predicate: {context}")]
    Arrow {
        /// What was being done.
        context: String,
        /// Arrow's error.
        #[source]
        source: ArrowError,
    },
}

impl PredicateError {
    /// Whether the expression itself is wrong (the caller's usage), rather
    /// than the data it ran over.
    pub fn is_usage(&self) -> bool {
        !matches!(self, PredicateError::Arrow { .. })
    }
}

/// Longest expression compiled, in bytes.
pub const MAX_PREDICATE_BYTES: usize = 64 << 10;

impl Predicate {
    /// Parses `text` and compiles it against `schema`: every name resolved and
    /// every comparison typed, or an error naming the field.
    pub fn compile(text: &str, schema: &Schema) -> Result<Predicate, PredicateError> {
        if text.len() > MAX_PREDICATE_BYTES {
            return Err(PredicateError::Syntax {
                expression: format!("{}...", text.chars().take(64).collect::<String>()),
                message: format!("{} bytes, more than {MAX_PREDICATE_BYTES}", text.len()),
            });
        }
        let expression = syntax::parse(text)?;
        let mut columns = Vec::new();
        let root = compile::Compiler::new(schema, &mut columns).predicate(expression)?;
        Ok(Predicate { root, columns })
    }

    /// The top-level columns the predicate reads (a struct by its name), in
    /// order of first use: a caller need only provide those.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The predicate over `batch`, which must hold (at least) the columns
    /// [`Predicate::columns`] names with the types they were compiled with:
    /// true, false or null (unknown) per row.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, PredicateError> {
        eval::evaluate(&self.root, batch)
    }

    /// Which rows of `batch` the predicate selects (those where it is true):
    /// a bit per row, whose `set_indices` are the rows in order.
    pub fn selection(&self, batch: &RecordBatch) -> Result<BooleanBuffer, PredicateError> {
        let truth = self.evaluate(batch)?;
        let (values, nulls) = truth.into_parts();
        Ok(match nulls {
            Some(nulls) => &values & nulls.inner(),
            None => values,
        })
    }
}

#[cfg(test)]
mod tests;
