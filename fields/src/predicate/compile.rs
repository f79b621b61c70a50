//! From `sqlparser`'s syntax tree to a typed tree of kernel calls
//! (`tree.rs`): every name resolved against the schema and every comparison
//! given the types it is made in (`coerce.rs`), once, before any batch is read.

use std::sync::Arc;

use arrow_array::{ArrayRef, LargeStringArray, StringArray, StringViewArray};
use arrow_schema::{DataType, Schema};
use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, InTarget, UnaryOperator,
};

use super::coerce::{
    cast_from, coerce, constant, is_binary, is_string, literal, nested, numeric_common, value_type,
    Lit,
};
use super::syntax::{describe, flatten, function_name, unsupported, value_shaped};
use super::tree::{CmpOp, ColumnPath, Node, Operand};
use super::PredicateError;

/// A value-producing side before it is coerced.
#[derive(Debug, Clone)]
enum Value_ {
    Column(ColumnPath, DataType),
    Cardinality(ColumnPath),
    Lit(Lit),
}

pub(super) struct Compiler<'a> {
    schema: &'a Schema,
    columns: &'a mut Vec<String>,
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
