//! The SQL side: parsing one expression with `sqlparser`, and looking at its
//! syntax tree without recursing through it (a chain of thousands of ORs is
//! neither printed nor walked recursively).

use sqlparser::ast::{BinaryOperator, Expr, ObjectNamePart, UnaryOperator};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use super::PredicateError;

/// The deepest nesting of the parser (parentheses, NOT, function calls); chains
/// of AND and OR are flattened and do not count.
const RECURSION_LIMIT: usize = 64;

/// Parses `text` as one SQL expression.
pub(super) fn parse(text: &str) -> Result<Expr, PredicateError> {
    let syntax = |message: String| PredicateError::Syntax {
        expression: text.to_owned(),
        message,
    };
    let dialect = GenericDialect {};
    let mut parser = Parser::new(&dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .try_with_sql(text)
        .map_err(|e| syntax(e.to_string()))?;
    let expression = parser.parse_expr().map_err(|e| syntax(e.to_string()))?;
    let next = parser.next_token();
    if next.token != Token::EOF {
        return Err(syntax(format!(
            "unexpected {} after the expression (at {})",
            next.token, next.span.start
        )));
    }
    Ok(expression)
}

pub(super) fn unsupported(what: impl Into<String>) -> PredicateError {
    PredicateError::Unsupported(what.into())
}

/// A short name for an expression, without printing it (which recurses through
/// the whole tree).
pub(super) fn describe(expr: &Expr) -> String {
    match expr {
        Expr::Function(f) => format!("the function {}", f.name),
        Expr::BinaryOp { op, .. } => format!("the operator {op}"),
        Expr::UnaryOp { op, .. } => format!("the operator {op}"),
        Expr::Case { .. } => "CASE".into(),
        Expr::Cast { .. } => "CAST".into(),
        Expr::Subquery(_) | Expr::Exists { .. } => "a subquery".into(),
        Expr::Value(v) => format!("the literal {}", v.value),
        Expr::SimilarTo { .. } => "SIMILAR TO".into(),
        Expr::RLike { .. } => "RLIKE / REGEXP".into(),
        Expr::AnyOp { .. } | Expr::AllOp { .. } => "ANY / ALL".into(),
        Expr::IsDistinctFrom(..) | Expr::IsNotDistinctFrom(..) => "IS [NOT] DISTINCT FROM".into(),
        Expr::IsUnknown(_) | Expr::IsNotUnknown(_) => "IS [NOT] UNKNOWN".into(),
        Expr::Interval(_) => "INTERVAL".into(),
        Expr::Tuple(_) => "a tuple".into(),
        Expr::Array(_) => "an array literal".into(),
        Expr::Substring { .. } | Expr::Trim { .. } | Expr::Position { .. } => {
            "a string function".into()
        }
        Expr::TypedString(_) => "a typed literal".into(),
        Expr::Extract { .. } => "EXTRACT".into(),
        Expr::CompoundFieldAccess { .. } | Expr::JsonAccess { .. } => {
            "an element access ([] or ->)".into()
        }
        // Not printed: Debug and Display recurse through the whole tree.
        _ => "this kind of expression".into(),
    }
}

/// Whether `expr` is a value (a name, a literal, a function of a list) rather
/// than a condition, looking through parentheses.
pub(super) fn value_shaped(expr: &Expr) -> bool {
    let mut expr = expr;
    while let Expr::Nested(inner) = expr {
        expr = inner;
    }
    match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Value(_) => true,
        Expr::UnaryOp { op, .. } => *op != UnaryOperator::Not,
        Expr::Function(f) => function_name(f) != "array_has",
        _ => false,
    }
}

/// The operands of a chain of `op` (`a AND b AND (c AND d)`), in order, taken
/// apart without recursion: a chain of thousands stays flat.
pub(super) fn flatten(expr: Expr, op: &BinaryOperator) -> Vec<Expr> {
    let mut out = Vec::new();
    let mut stack = vec![expr];
    while let Some(expr) = stack.pop() {
        match expr {
            Expr::BinaryOp {
                left,
                op: found,
                right,
            } if &found == op => {
                stack.push(*right);
                stack.push(*left);
            }
            Expr::Nested(inner) if matches!(&*inner, Expr::BinaryOp { op: found, .. } if found == op) => {
                stack.push(*inner)
            }
            other => out.push(other),
        }
    }
    out
}

pub(super) fn function_name(function: &sqlparser::ast::Function) -> String {
    let name = function
        .name
        .0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => ident.value.clone(),
            ObjectNamePart::Function(f) => f.name.value.clone(),
        })
        .collect::<Vec<_>>()
        .join(".")
        .to_ascii_lowercase();
    match name.as_str() {
        "list_contains" | "array_contains" | "list_has" => "array_has".into(),
        _ => name,
    }
}
