//! From `sqlparser`'s syntax tree to a typed tree of kernel calls: every name
//! resolved against the schema and every comparison given the types it is made
//! in, once, before any batch is read.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BinaryViewArray, BooleanArray, Decimal128Array, Float64Array,
    LargeBinaryArray, LargeStringArray, StringArray, StringViewArray,
};
use arrow_schema::{DataType, Schema};
use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, InTarget,
    ObjectNamePart, UnaryOperator, Value,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use super::PredicateError;

/// The deepest nesting of the parser (parentheses, NOT, function calls); chains
/// of AND and OR are flattened and do not count.
const RECURSION_LIMIT: usize = 64;

/// A typed predicate: what `eval.rs` runs.
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
    fn flipped(self) -> CmpOp {
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
    fn display(&self) -> String {
        std::iter::once(self.name.as_str())
            .chain(self.children.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// A literal of the expression.
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Null,
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl Lit {
    fn describe(&self) -> String {
        match self {
            Lit::Null => "NULL".into(),
            Lit::Int(i) => format!("the integer {i}"),
            Lit::Float(f) => format!("the number {f}"),
            Lit::Str(s) => format!("the text {s:?}"),
            Lit::Bool(b) => format!("{}", if *b { "TRUE" } else { "FALSE" }),
        }
    }
}

/// A value-producing side before it is coerced.
#[derive(Debug, Clone)]
enum Value_ {
    Column(ColumnPath, DataType),
    Cardinality(ColumnPath),
    Lit(Lit),
}

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

pub(super) struct Compiler<'a> {
    schema: &'a Schema,
    columns: &'a mut Vec<String>,
}

fn unsupported(what: impl Into<String>) -> PredicateError {
    PredicateError::Unsupported(what.into())
}

/// A short name for an expression, without printing it (which recurses through
/// the whole tree).
fn describe(expr: &Expr) -> String {
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
fn value_shaped(expr: &Expr) -> bool {
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
fn flatten(expr: Expr, op: &BinaryOperator) -> Vec<Expr> {
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

impl<'a> Compiler<'a> {
    pub(super) fn new(schema: &'a Schema, columns: &'a mut Vec<String>) -> Self {
        Compiler { schema, columns }
    }

    /// A boolean expression (taken apart as it is compiled: a tree of
    /// thousands of operands is never cloned, printed or dropped recursively).
    pub(super) fn predicate(&mut self, expr: Expr) -> Result<Node, PredicateError> {
        self.node(expr)
    }

    fn node(&mut self, expr: Expr) -> Result<Node, PredicateError> {
        match expr {
            Expr::Nested(inner) => self.node(*inner),
            Expr::BinaryOp {
                op: op @ (BinaryOperator::And | BinaryOperator::Or),
                left,
                right,
            } => {
                let is_and = op == BinaryOperator::And;
                let chain = flatten(
                    Expr::BinaryOp {
                        left,
                        op: op.clone(),
                        right,
                    },
                    &op,
                );
                let nodes = chain
                    .into_iter()
                    .map(|e| self.node(e))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(if is_and {
                    Node::And(nodes)
                } else {
                    Node::Or(nodes)
                })
            }
            Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Eq => CmpOp::Eq,
                    BinaryOperator::NotEq => CmpOp::NotEq,
                    BinaryOperator::Lt => CmpOp::Lt,
                    BinaryOperator::LtEq => CmpOp::LtEq,
                    BinaryOperator::Gt => CmpOp::Gt,
                    BinaryOperator::GtEq => CmpOp::GtEq,
                    other => return Err(unsupported(format!("the operator {other}"))),
                };
                let left = self.value(*left)?;
                let right = self.value(*right)?;
                self.compare(op, left, right)
            }
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => Ok(Node::Not(Box::new(self.node(*expr)?))),
            Expr::IsNull(expr) => self.is_null(*expr, false),
            Expr::IsNotNull(expr) => self.is_null(*expr, true),
            Expr::IsTrue(expr) => self.is(*expr, true, false),
            Expr::IsNotTrue(expr) => self.is(*expr, true, true),
            Expr::IsFalse(expr) => self.is(*expr, false, false),
            Expr::IsNotFalse(expr) => self.is(*expr, false, true),
            Expr::In {
                expr,
                target,
                negated,
                ..
            } => {
                let InTarget::List(list) = target else {
                    return Err(unsupported("IN over a subquery or a table"));
                };
                let value = self.value(*expr)?;
                let mut alternatives = Vec::with_capacity(list.len());
                for item in list {
                    let item = self.value(item)?;
                    if !matches!(item, Value_::Lit(_)) {
                        return Err(unsupported("IN over anything but a list of constants"));
                    }
                    alternatives.push(self.compare(CmpOp::Eq, value.clone(), item)?);
                }
                let any = Node::Or(alternatives);
                Ok(if negated {
                    Node::Not(Box::new(any))
                } else {
                    any
                })
            }
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let value = self.value(*expr)?;
                let low = self.value(*low)?;
                let high = self.value(*high)?;
                let both = Node::And(vec![
                    self.compare(CmpOp::GtEq, value.clone(), low)?,
                    self.compare(CmpOp::LtEq, value, high)?,
                ]);
                Ok(if negated {
                    Node::Not(Box::new(both))
                } else {
                    both
                })
            }
            Expr::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => self.like(*expr, *pattern, escape_char, negated, any, false),
            Expr::ILike {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => self.like(*expr, *pattern, escape_char, negated, any, true),
            Expr::Function(function) if function_name(&function) == "array_has" => {
                let [list, value] = self.arguments(&function, 2)?.try_into().expect("2");
                self.array_has(list, value)
            }
            expr @ (Expr::Identifier(_) | Expr::CompoundIdentifier(_)) => {
                match self.value(expr)? {
                    Value_::Column(column, data_type) => match value_type(&data_type) {
                        DataType::Boolean => Ok(Node::Bool(Operand::Column {
                            column,
                            cast: cast_from(&data_type, &DataType::Boolean),
                        })),
                        DataType::Null => Ok(Node::Const(None)),
                        other => Err(PredicateError::Type {
                            field: column.display(),
                            message: format!(
                                "is {other}, not a boolean: compare it with something (`{} = ...`)",
                                column.display()
                            ),
                        }),
                    },
                    _ => unreachable!("a name is a column"),
                }
            }
            Expr::Value(value) => match literal(&value.value)? {
                Lit::Bool(b) => Ok(Node::Const(Some(b))),
                Lit::Null => Ok(Node::Const(None)),
                other => Err(unsupported(format!(
                    "{} as a condition (a condition is TRUE or FALSE)",
                    other.describe()
                ))),
            },
            other => Err(unsupported(describe(&other))),
        }
    }

    /// The expression's function arguments, each an expression, exactly `n`.
    fn arguments(
        &mut self,
        function: &sqlparser::ast::Function,
        n: usize,
    ) -> Result<Vec<Expr>, PredicateError> {
        let name = function_name(function);
        let FunctionArguments::List(list) = &function.args else {
            return Err(unsupported(format!("{name} without arguments")));
        };
        if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
            return Err(unsupported(format!("{name} with DISTINCT or clauses")));
        }
        if function.filter.is_some() || function.over.is_some() {
            return Err(unsupported(format!("{name} with FILTER or OVER")));
        }
        let args: Vec<Expr> = list
            .args
            .iter()
            .map(|arg| match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e.clone()),
                _ => Err(unsupported(format!(
                    "a named or wildcard argument of {name}"
                ))),
            })
            .collect::<Result<_, _>>()?;
        if args.len() != n {
            return Err(unsupported(format!(
                "{name} with {} arguments (it takes {n})",
                args.len()
            )));
        }
        Ok(args)
    }

    fn is_null(&mut self, expr: Expr, negated: bool) -> Result<Node, PredicateError> {
        if !value_shaped(&expr) {
            return self.is_unknown(expr, negated);
        }
        match self.value(expr) {
            Ok(Value_::Lit(lit)) => Ok(Node::Const(Some((lit == Lit::Null) != negated))),
            Ok(Value_::Column(column, _)) => Ok(Node::IsNull {
                operand: Operand::Column { column, cast: None },
                negated,
            }),
            Ok(Value_::Cardinality(column)) => Ok(Node::IsNull {
                operand: Operand::Cardinality { column, cast: None },
                negated,
            }),
            Err(e) => Err(e),
        }
    }

    /// `(a = 1) IS [NOT] NULL`: whether the truth of a condition is unknown.
    fn is_unknown(&mut self, expr: Expr, negated: bool) -> Result<Node, PredicateError> {
        {
            {
                let node = self.node(expr)?;
                let unknown = Node::And(vec![
                    Node::Is {
                        node: Box::new(node.clone()),
                        value: true,
                        negated: true,
                    },
                    Node::Is {
                        node: Box::new(node),
                        value: false,
                        negated: true,
                    },
                ]);
                Ok(match negated {
                    false => unknown,
                    true => Node::Not(Box::new(unknown)),
                })
            }
        }
    }

    fn is(&mut self, expr: Expr, value: bool, negated: bool) -> Result<Node, PredicateError> {
        Ok(Node::Is {
            node: Box::new(self.node(expr)?),
            value,
            negated,
        })
    }

    fn like(
        &mut self,
        expr: Expr,
        pattern: Expr,
        escape: Option<Box<Expr>>,
        negated: bool,
        any: bool,
        insensitive: bool,
    ) -> Result<Node, PredicateError> {
        if any {
            return Err(unsupported("LIKE ANY"));
        }
        let escaped = match escape.map(|e| self.value(*e)) {
            None => false,
            Some(Ok(Value_::Lit(Lit::Str(s)))) if s == "\\" => true,
            Some(_) => return Err(unsupported("an ESCAPE character other than '\\'")),
        };
        let Value_::Lit(Lit::Str(mut text)) = self.value(pattern)? else {
            return Err(unsupported("a LIKE pattern that is not a text literal"));
        };
        if !escaped {
            // Without ESCAPE a backslash is itself (as in DuckDB and the SQL
            // standard); the kernels take it as an escape.
            text = text.replace('\\', "\\\\");
        }
        let (column, data_type) = match self.value(expr)? {
            Value_::Column(column, data_type) => (column, data_type),
            Value_::Lit(lit) => {
                return Err(unsupported(format!(
                    "LIKE on {} (LIKE tests a field)",
                    lit.describe()
                )))
            }
            Value_::Cardinality(column) => {
                return Err(PredicateError::Type {
                    field: column.display(),
                    message: "cardinality is a number; LIKE tests text".into(),
                })
            }
        };
        let pattern: ArrayRef = match value_type(&data_type) {
            DataType::Utf8 => Arc::new(StringArray::from(vec![text])),
            DataType::LargeUtf8 => Arc::new(LargeStringArray::from(vec![text])),
            DataType::Utf8View => Arc::new(StringViewArray::from(vec![text])),
            DataType::Null => return Ok(Node::Const(None)),
            other => {
                return Err(PredicateError::Type {
                    field: column.display(),
                    message: format!("is {other}; LIKE tests text"),
                })
            }
        };
        Ok(Node::Like {
            operand: Operand::Column { column, cast: None },
            pattern,
            negated,
            insensitive,
        })
    }

    fn array_has(&mut self, list: Expr, value: Expr) -> Result<Node, PredicateError> {
        let (column, data_type) = match self.value(list)? {
            Value_::Column(column, data_type) => (column, data_type),
            _ => return Err(unsupported("array_has over anything but a list field")),
        };
        let element = match &data_type {
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                f.data_type().clone()
            }
            DataType::Null => return Ok(Node::Const(None)),
            other => {
                return Err(PredicateError::Type {
                    field: column.display(),
                    message: format!("is {other}, not a list; array_has takes a list"),
                })
            }
        };
        let Value_::Lit(lit) = self.value(value)? else {
            return Err(unsupported("array_has with a value that is not a constant"));
        };
        let field = format!("{}[]", column.display());
        match coerce(&field, &element, &lit)? {
            None => Ok(Node::Const(None)),
            Some((cast, value)) => Ok(Node::ArrayHas {
                list: column,
                cast,
                value,
            }),
        }
    }

    /// A value: a column, a literal or a function of a column.
    fn value(&mut self, expr: Expr) -> Result<Value_, PredicateError> {
        match expr {
            Expr::Nested(inner) => self.value(*inner),
            Expr::Identifier(ident) => self.column(&[ident.value]),
            Expr::CompoundIdentifier(parts) => {
                let parts: Vec<String> = parts.into_iter().map(|i| i.value).collect();
                self.column(&parts)
            }
            Expr::Value(value) => Ok(Value_::Lit(literal(&value.value)?)),
            Expr::UnaryOp {
                op: op @ (UnaryOperator::Minus | UnaryOperator::Plus),
                expr,
            } => match self.value(*expr)? {
                Value_::Lit(Lit::Int(i)) if op == UnaryOperator::Minus => {
                    Ok(Value_::Lit(Lit::Int(-i)))
                }
                Value_::Lit(Lit::Float(f)) if op == UnaryOperator::Minus => {
                    Ok(Value_::Lit(Lit::Float(-f)))
                }
                lit @ Value_::Lit(Lit::Int(_) | Lit::Float(_)) => Ok(lit),
                _ => Err(unsupported(format!(
                    "the operator {op} on anything but a number"
                ))),
            },
            Expr::Function(function)
                if matches!(
                    function_name(&function).as_str(),
                    "cardinality" | "array_length" | "len"
                ) =>
            {
                let [list] = self.arguments(&function, 1)?.try_into().expect("1");
                match self.value(list)? {
                    Value_::Column(column, data_type) => match data_type {
                        DataType::List(_)
                        | DataType::LargeList(_)
                        | DataType::FixedSizeList(..) => Ok(Value_::Cardinality(column)),
                        DataType::Null => Ok(Value_::Lit(Lit::Null)),
                        other => Err(PredicateError::Type {
                            field: column.display(),
                            message: format!(
                                "is {other}, not a list; {} takes a list",
                                function_name(&function)
                            ),
                        }),
                    },
                    _ => Err(unsupported(format!(
                        "{} of anything but a list field",
                        function_name(&function)
                    ))),
                }
            }
            other => Err(unsupported(describe(&other))),
        }
    }

    /// The column a name (a dotted path) names: the longest prefix that is a
    /// top-level column (`json.caption` is a column of that name where there is
    /// one), then struct children.
    fn column(&mut self, parts: &[String]) -> Result<Value_, PredicateError> {
        for split in (1..=parts.len()).rev() {
            let name = parts[..split].join(".");
            let Some(field) = self.find(&name) else {
                continue;
            };
            let top = field.name().clone();
            let mut data_type = field.data_type().clone();
            let mut children = Vec::new();
            for child in &parts[split..] {
                let DataType::Struct(fields) = &data_type else {
                    return Err(PredicateError::Type {
                        field: std::iter::once(top.clone())
                            .chain(children.iter().cloned())
                            .collect::<Vec<_>>()
                            .join("."),
                        message: format!("is {data_type}, which has no child {child:?}"),
                    });
                };
                let Some(found) = fields.iter().find(|f| f.name() == child) else {
                    let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
                    return Err(PredicateError::UnknownField {
                        name: parts.join("."),
                        available: format!(
                            "{}'s children are {}",
                            std::iter::once(top.clone())
                                .chain(children.iter().cloned())
                                .collect::<Vec<_>>()
                                .join("."),
                            names.join(", ")
                        ),
                    });
                };
                data_type = found.data_type().clone();
                children.push(child.clone());
            }
            if !self.columns.contains(&top) {
                self.columns.push(top.clone());
            }
            return Ok(Value_::Column(
                ColumnPath {
                    name: top,
                    children,
                },
                data_type,
            ));
        }
        let names: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        Err(PredicateError::UnknownField {
            name: parts.join("."),
            available: if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            },
        })
    }

    /// A top-level field by its exact name, else by the one name that equals it
    /// ignoring case.
    fn find(&self, name: &str) -> Option<&arrow_schema::Field> {
        let fields = self.schema.fields();
        if let Some(found) = fields.iter().find(|f| f.name() == name) {
            return Some(found);
        }
        let mut folded = fields
            .iter()
            .filter(|f| f.name().eq_ignore_ascii_case(name));
        match (folded.next(), folded.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    }

    /// `left op right`, typed.
    fn compare(&mut self, op: CmpOp, left: Value_, right: Value_) -> Result<Node, PredicateError> {
        match (left, right) {
            (Value_::Lit(a), Value_::Lit(b)) => constant(op, &a, &b),
            (Value_::Lit(lit), other) => self.compare(op.flipped(), other, Value_::Lit(lit)),
            (side, Value_::Lit(lit)) => {
                let (field, data_type) = side_type(&side);
                match coerce(&field, &data_type, &lit)? {
                    None => Ok(Node::Const(None)),
                    Some((cast, value)) => Ok(Node::Compare {
                        op,
                        left: operand(side, cast),
                        right: Operand::Literal(value),
                    }),
                }
            }
            (a, b) => {
                let (a_name, a_type) = side_type(&a);
                let (b_name, b_type) = side_type(&b);
                let (a_value, b_value) = (value_type(&a_type), value_type(&b_type));
                if a_value == &DataType::Null || b_value == &DataType::Null {
                    return Ok(Node::Const(None));
                }
                let mismatch = || {
                    PredicateError::Type {
                    field: a_name.clone(),
                    message: format!(
                        "is {a_value}; it cannot be compared with field {b_name:?}, which is {b_value}"
                    ),
                }
                };
                if a_value.is_nested() || b_value.is_nested() {
                    return Err(nested(&a_name, a_value)
                        .unwrap_or_else(|| nested(&b_name, b_value).expect("one side is nested")));
                }
                let common = if a_value == b_value {
                    None
                } else if a_value.is_numeric() && b_value.is_numeric() {
                    Some(numeric_common(a_value, b_value))
                } else if is_string(a_value) && is_string(b_value) {
                    Some(DataType::LargeUtf8)
                } else if is_binary(a_value) && is_binary(b_value) {
                    Some(DataType::LargeBinary)
                } else {
                    return Err(mismatch());
                };
                let cast = |t: &DataType| common.as_ref().and_then(|c| cast_from(t, c));
                let (a_cast, b_cast) = (cast(&a_type), cast(&b_type));
                Ok(Node::Compare {
                    op,
                    left: operand(a, a_cast),
                    right: operand(b, b_cast),
                })
            }
        }
    }
}

fn function_name(function: &sqlparser::ast::Function) -> String {
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

fn side_type(side: &Value_) -> (String, DataType) {
    match side {
        Value_::Column(column, data_type) => (column.display(), data_type.clone()),
        Value_::Cardinality(column) => (
            format!("cardinality({})", column.display()),
            DataType::Int64,
        ),
        Value_::Lit(_) => unreachable!("a side with a type"),
    }
}

fn operand(side: Value_, cast: Option<DataType>) -> Operand {
    match side {
        Value_::Column(column, _) => Operand::Column { column, cast },
        Value_::Cardinality(column) => Operand::Cardinality { column, cast },
        Value_::Lit(_) => unreachable!("literals are coerced"),
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
fn cast_from(from: &DataType, to: &DataType) -> Option<DataType> {
    (value_type(from) != to).then(|| to.clone())
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

fn is_binary(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
    )
}

fn is_integer(t: &DataType) -> bool {
    t.is_integer()
}

fn is_float(t: &DataType) -> bool {
    t.is_floating()
}

fn is_decimal(t: &DataType) -> bool {
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
fn numeric_common(a: &DataType, b: &DataType) -> DataType {
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
fn nested(field: &str, t: &DataType) -> Option<PredicateError> {
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

fn literal(value: &Value) -> Result<Lit, PredicateError> {
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
fn constant(op: CmpOp, a: &Lit, b: &Lit) -> Result<Node, PredicateError> {
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
fn coerce(
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
