//! A Python pickle reader that builds plain data and never runs code: `None`,
//! `bool`, `int` (64-bit), `float`, `str`, `bytes` (and `bytearray`), `list`,
//! `tuple` and `dict`, from any protocol's binary opcodes (protocols 1 to 5)
//! and the text opcodes of numbers, `str` and the memo (protocol 0). The one
//! call it knows is `_codecs.encode(str, "latin1")`, how Python 3 pickles
//! `bytes` at protocols 0 to 2; it is read as the bytes, not called. Any other
//! global, class, reduction, persistent id or out-of-band buffer is refused,
//! naming the opcode and its byte offset.
//!
//! Bounds: every length the pickle declares is checked against the bytes that
//! remain before anything is allocated, so the objects built hold at most as
//! many bytes as the pickle; containers share memo entries by reference while
//! the pickle is read (as Python's objects do), and the plain tree made at the
//! end, where a shared object is copied, is bounded by
//! [`Limits::max_output`] bytes and [`Limits::max_depth`] levels (a
//! container that holds itself is too deep).
//!
//! serde-pickle was the crate to use, and is not: it turns unknown classes
//! into empty dicts (data lost without an error) and copies a memo entry on
//! every use, so a small pickle can ask for exponential memory.

use std::collections::HashMap;
use std::fmt;

/// A plain Python value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An `int` that fits 64 bits.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// `bytes` or `bytearray`.
    Bytes(Vec<u8>),
    /// A `list`.
    List(Vec<Value>),
    /// A `tuple`.
    Tuple(Vec<Value>),
    /// A `dict`, its entries in insertion order (a key given twice keeps its
    /// first place and its last value, as in Python).
    Dict(Vec<(Value, Value)>),
}

impl Value {
    /// What it is, as Python names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
        }
    }
}

/// Why a pickle was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickleError {
    /// Byte offset of the opcode.
    pub offset: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for PickleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pickle byte {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for PickleError {}

/// Bounds of [`loads`].
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Bytes of the plain value made (strings and bytes, plus 16 per item).
    pub max_output: usize,
    /// Nesting of containers.
    pub max_depth: usize,
}

impl Limits {
    /// The default for a pickle of `len` bytes: twice its size plus 1 MiB, 64
    /// levels.
    pub fn for_len(len: usize) -> Limits {
        Limits {
            max_output: len.saturating_mul(2).saturating_add(1 << 20),
            max_depth: 64,
        }
    }
}

/// A value while the pickle is read: containers are nodes of an arena, so a
/// memo entry and the stack share one object, as in Python.
#[derive(Clone, Debug)]
enum Item {
    Scalar(Value),
    /// `bytes` still in the input, `(start, len)`: copied once, when the
    /// plain value is made (a memo entry or the stack share it for free).
    InputBytes(usize, usize),
    Node(usize),
    /// `_codecs.encode`, waiting for its REDUCE.
    CodecsEncode,
}

#[derive(Debug)]
enum Node {
    List(Vec<Item>),
    Tuple(Vec<Item>),
    Dict(Vec<(Item, Item)>),
}

struct Machine<'a> {
    input: &'a [u8],
    at: usize,
    op_at: usize,
    stack: Vec<Item>,
    marks: Vec<usize>,
    memo: HashMap<u64, Item>,
    nodes: Vec<Node>,
}

/// Reads one pickle: `bytes` must hold it whole (bytes after its STOP are
/// refused).
pub fn loads(bytes: &[u8], limits: Limits) -> Result<Value, PickleError> {
    let mut machine = Machine {
        input: bytes,
        at: 0,
        op_at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        nodes: Vec::new(),
    };
    let top = machine.run()?;
    if machine.at != bytes.len() {
        return Err(PickleError {
            offset: machine.at,
            reason: format!("{} bytes after the STOP opcode", bytes.len() - machine.at),
        });
    }
    let mut budget = limits.max_output;
    machine.plain(&top, 0, limits.max_depth, &mut budget)
}

impl<'a> Machine<'a> {
    fn fail<T>(&self, reason: impl Into<String>) -> Result<T, PickleError> {
        Err(PickleError {
            offset: self.op_at,
            reason: reason.into(),
        })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        if self.input.len() - self.at < n {
            return self.fail(format!(
                "declares {n} bytes, {} remain; the pickle is truncated",
                self.input.len() - self.at
            ));
        }
        let bytes = &self.input[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    /// A length read as `u64`, checked against what remains.
    fn length(&mut self, len: u64) -> Result<&'a [u8], PickleError> {
        match usize::try_from(len) {
            Ok(n) => self.take(n),
            Err(_) => self.fail(format!("declares {len} bytes; the pickle is truncated")),
        }
    }

    fn line(&mut self) -> Result<&'a [u8], PickleError> {
        let rest = &self.input[self.at..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return self.fail("a text argument without its newline; the pickle is truncated");
        };
        self.at += end + 1;
        Ok(&rest[..end])
    }

    fn pop(&mut self) -> Result<Item, PickleError> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return self.fail("pops past a MARK");
        }
        match self.stack.pop() {
            Some(item) => Ok(item),
            None => self.fail("pops an empty stack"),
        }
    }

    fn pop_mark(&mut self) -> Result<Vec<Item>, PickleError> {
        let Some(mark) = self.marks.pop() else {
            return self.fail("no MARK to pop to");
        };
        Ok(self.stack.split_off(mark))
    }

    fn push_node(&mut self, node: Node) {
        self.nodes.push(node);
        self.stack.push(Item::Node(self.nodes.len() - 1));
    }

    fn str_value(&self, bytes: &[u8]) -> Result<Item, PickleError> {
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(Item::Scalar(Value::Str(s.to_owned()))),
            Err(_) => self.fail("a str that is not UTF-8"),
        }
    }

    fn int_text(&self, text: &[u8]) -> Result<Value, PickleError> {
        let text = std::str::from_utf8(text).unwrap_or("");
        let digits = text.strip_suffix('L').unwrap_or(text);
        match digits {
            "00" => return Ok(Value::Bool(false)),
            "01" => return Ok(Value::Bool(true)),
            _ => {}
        }
        match digits.parse::<i64>() {
            Ok(n) => Ok(Value::Int(n)),
            Err(_) => self.fail(format!(
                "the integer {:?} is not a 64-bit integer",
                text.chars().take(40).collect::<String>()
            )),
        }
    }

    fn long(&self, bytes: &[u8]) -> Result<Value, PickleError> {
        if bytes.len() > 8 {
            return self.fail(format!("an integer of {} bytes does not fit 64 bits", bytes.len()));
        }
        if bytes.is_empty() {
            return Ok(Value::Int(0));
        }
        let fill = if bytes[bytes.len() - 1] & 0x80 != 0 { 0xff } else { 0 };
        let mut full = [fill; 8];
        full[..bytes.len()].copy_from_slice(bytes);
        Ok(Value::Int(i64::from_le_bytes(full)))
    }

    fn memo_key(&self, text: &[u8]) -> Result<u64, PickleError> {
        match std::str::from_utf8(text).ok().and_then(|t| t.parse().ok()) {
            Some(key) => Ok(key),
            None => self.fail("a memo key that is not a number"),
        }
    }

    fn put(&mut self, key: u64) -> Result<(), PickleError> {
        let Some(top) = self.stack.last().cloned() else {
            return self.fail("memoizes an empty stack");
        };
        self.memo.insert(key, top);
        Ok(())
    }

    fn get(&mut self, key: u64) -> Result<(), PickleError> {
        match self.memo.get(&key) {
            Some(item) => {
                self.stack.push(item.clone());
                Ok(())
            }
            None => self.fail(format!("memo entry {key} was never stored")),
        }
    }

    fn container(&mut self, what: &str) -> Result<usize, PickleError> {
        match self.stack.last() {
            Some(Item::Node(n)) if self.marks.last().is_none_or(|&m| m < self.stack.len()) => {
                Ok(*n)
            }
            _ => self.fail(format!("{what} without a container under it")),
        }
    }

    fn append(&mut self, items: Vec<Item>) -> Result<(), PickleError> {
        let n = self.container("APPEND")?;
        match &mut self.nodes[n] {
            Node::List(list) => {
                list.extend(items);
                Ok(())
            }
            _ => self.fail("APPEND to something other than a list"),
        }
    }

    fn set_items(&mut self, items: Vec<Item>) -> Result<(), PickleError> {
        if items.len() % 2 != 0 {
            return self.fail("SETITEMS with an odd number of items");
        }
        let n = self.container("SETITEM")?;
        let Node::Dict(dict) = &mut self.nodes[n] else {
            return self.fail("SETITEM on something other than a dict");
        };
        let mut items = items.into_iter();
        while let (Some(key), Some(value)) = (items.next(), items.next()) {
            dict.push((key, value));
        }
        Ok(())
    }

    fn refuse(&self, name: &str) -> Result<(), PickleError> {
        self.fail(format!(
            "opcode {name} builds an object by running code; only plain data (None, bool, int, float, str, bytes, list, tuple, dict) is read"
        ))
    }

    fn global(&mut self, module: &[u8], name: &[u8]) -> Result<(), PickleError> {
        if module == b"_codecs" && name == b"encode" {
            self.stack.push(Item::CodecsEncode);
            return Ok(());
        }
        self.fail(format!(
            "the pickle names {}.{}; only plain data is read (no classes, functions or other globals)",
            module.escape_ascii(),
            name.escape_ascii()
        ))
    }

    fn reduce(&mut self) -> Result<(), PickleError> {
        let args = self.pop()?;
        let callable = self.pop()?;
        if !matches!(callable, Item::CodecsEncode) {
            return self.refuse("REDUCE");
        }
        let args = match args {
            Item::Node(n) => match &self.nodes[n] {
                Node::Tuple(items) => items.clone(),
                _ => return self.fail("_codecs.encode called without an argument tuple"),
            },
            _ => return self.fail("_codecs.encode called without an argument tuple"),
        };
        match args.as_slice() {
            [Item::Scalar(Value::Str(text)), Item::Scalar(Value::Str(encoding))]
                if encoding == "latin1" || encoding == "latin-1" =>
            {
                let mut bytes = Vec::with_capacity(text.len());
                for c in text.chars() {
                    match u8::try_from(u32::from(c)) {
                        Ok(b) => bytes.push(b),
                        Err(_) => return self.fail("_codecs.encode of a character past latin-1"),
                    }
                }
                self.stack.push(Item::Scalar(Value::Bytes(bytes)));
                Ok(())
            }
            [Item::Scalar(Value::Str(_))] => {
                // encode(str) with the default UTF-8, as protocol 0 writes an
                // empty bytes.
                let Item::Scalar(Value::Str(text)) = &args[0] else {
                    unreachable!()
                };
                self.stack
                    .push(Item::Scalar(Value::Bytes(text.as_bytes().to_vec())));
                Ok(())
            }
            _ => self.fail("_codecs.encode with arguments other than (str, \"latin1\")"),
        }
    }

    fn run(&mut self) -> Result<Item, PickleError> {
        loop {
            self.op_at = self.at;
            let [op] = match self.fixed::<1>() {
                Ok(op) => op,
                Err(_) => return self.fail("the pickle ends without a STOP opcode"),
            };
            match op {
                0x80 => {
                    let [protocol] = self.fixed::<1>()?;
                    if protocol > 5 {
                        return self.fail(format!("pickle protocol {protocol}; 0 to 5 are read"));
                    }
                }
                0x95 => {
                    // FRAME: a hint of the next frame's length; the bytes follow.
                    self.fixed::<8>()?;
                }
                b'.' => {
                    let top = self.pop()?;
                    if !self.stack.is_empty() || !self.marks.is_empty() {
                        return self.fail("STOP with more than one object on the stack");
                    }
                    return Ok(top);
                }
                b'(' => self.marks.push(self.stack.len()),
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let Some(top) = self.stack.last().cloned() else {
                        return self.fail("DUP of an empty stack");
                    };
                    self.stack.push(top);
                }
                b'N' => self.stack.push(Item::Scalar(Value::None)),
                0x88 => self.stack.push(Item::Scalar(Value::Bool(true))),
                0x89 => self.stack.push(Item::Scalar(Value::Bool(false))),
                b'J' => {
                    let n = i32::from_le_bytes(self.fixed()?);
                    self.stack.push(Item::Scalar(Value::Int(n.into())));
                }
                b'K' => {
                    let [n] = self.fixed::<1>()?;
                    self.stack.push(Item::Scalar(Value::Int(n.into())));
                }
                b'M' => {
                    let n = u16::from_le_bytes(self.fixed()?);
                    self.stack.push(Item::Scalar(Value::Int(n.into())));
                }
                0x8a => {
                    let [len] = self.fixed::<1>()?;
                    let bytes = self.take(len.into())?;
                    let value = self.long(bytes)?;
                    self.stack.push(Item::Scalar(value));
                }
                0x8b => {
                    let len = i32::from_le_bytes(self.fixed()?);
                    if len < 0 {
                        return self.fail("LONG4 with a negative length");
                    }
                    let bytes = self.length(len as u64)?;
                    let value = self.long(bytes)?;
                    self.stack.push(Item::Scalar(value));
                }
                b'I' | b'L' => {
                    let text = self.line()?;
                    let value = self.int_text(text)?;
                    self.stack.push(Item::Scalar(value));
                }
                b'F' => {
                    let text = self.line()?;
                    match std::str::from_utf8(text).ok().and_then(|t| t.parse::<f64>().ok()) {
                        Some(f) => self.stack.push(Item::Scalar(Value::Float(f))),
                        None => return self.fail("a FLOAT that is not a number"),
                    }
                }
                b'G' => {
                    let f = f64::from_be_bytes(self.fixed()?);
                    self.stack.push(Item::Scalar(Value::Float(f)));
                }
                b'V' => {
                    let text = self.line()?;
                    let decoded = self.raw_unicode_escape(text)?;
                    self.stack.push(Item::Scalar(Value::Str(decoded)));
                }
                // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
                b'X' | 0x8c | 0x8d => {
                    let len = match op {
                        b'X' => u64::from(u32::from_le_bytes(self.fixed()?)),
                        0x8c => u64::from(self.fixed::<1>()?[0]),
                        _ => u64::from_le_bytes(self.fixed()?),
                    };
                    let bytes = self.length(len)?;
                    let item = self.str_value(bytes)?;
                    self.stack.push(item);
                }
                // BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8, and Python 2's
                // BINSTRING and SHORT_BINSTRING (its str: bytes)
                b'B' | b'C' | 0x8e | 0x96 | b'T' | b'U' => {
                    let len = match op {
                        b'B' | b'T' => u64::from(u32::from_le_bytes(self.fixed()?)),
                        b'C' | b'U' => u64::from(self.fixed::<1>()?[0]),
                        _ => u64::from_le_bytes(self.fixed()?),
                    };
                    if op == b'T' && len > i32::MAX as u64 {
                        return self.fail("BINSTRING with a negative length");
                    }
                    let start = self.at;
                    let bytes = self.length(len)?;
                    self.stack.push(Item::InputBytes(start, bytes.len()));
                }
                b')' => self.push_node(Node::Tuple(Vec::new())),
                b't' => {
                    let items = self.pop_mark()?;
                    self.push_node(Node::Tuple(items));
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    if self.stack.len() < n
                        || self.marks.last().is_some_and(|&m| m > self.stack.len() - n)
                    {
                        return self.fail("TUPLE of items the stack does not hold");
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.push_node(Node::Tuple(items));
                }
                b']' => self.push_node(Node::List(Vec::new())),
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push_node(Node::List(items));
                }
                b'a' => {
                    let item = self.pop()?;
                    self.append(vec![item])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.append(items)?;
                }
                b'}' => self.push_node(Node::Dict(Vec::new())),
                b'd' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return self.fail("DICT with an odd number of items");
                    }
                    let mut pairs = Vec::with_capacity(items.len() / 2);
                    let mut items = items.into_iter();
                    while let (Some(k), Some(v)) = (items.next(), items.next()) {
                        pairs.push((k, v));
                    }
                    self.push_node(Node::Dict(pairs));
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    self.set_items(vec![key, value])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?;
                }
                b'p' => {
                    let text = self.line()?;
                    let key = self.memo_key(text)?;
                    self.put(key)?;
                }
                b'q' => {
                    let [key] = self.fixed::<1>()?;
                    self.put(key.into())?;
                }
                b'r' => {
                    let key = u32::from_le_bytes(self.fixed()?);
                    self.put(key.into())?;
                }
                0x94 => {
                    let key = self.memo.len() as u64;
                    self.put(key)?;
                }
                b'g' => {
                    let text = self.line()?;
                    let key = self.memo_key(text)?;
                    self.get(key)?;
                }
                b'h' => {
                    let [key] = self.fixed::<1>()?;
                    self.get(key.into())?;
                }
                b'j' => {
                    let key = u32::from_le_bytes(self.fixed()?);
                    self.get(key.into())?;
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.global(module, name)?;
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module, name) {
                        (Item::Scalar(Value::Str(m)), Item::Scalar(Value::Str(n))) => {
                            self.global(m.as_bytes(), n.as_bytes())?
                        }
                        _ => return self.fail("STACK_GLOBAL of names that are not str"),
                    }
                }
                b'R' => self.reduce()?,
                b'S' => return self.fail("protocol 0's quoted STRING (Python 2's str) is not read"),
                b'i' => self.refuse("INST")?,
                b'o' => self.refuse("OBJ")?,
                0x81 => self.refuse("NEWOBJ")?,
                0x92 => self.refuse("NEWOBJ_EX")?,
                b'b' => self.refuse("BUILD")?,
                b'P' | b'Q' => return self.fail("a persistent id refers to an object outside the pickle"),
                0x82..=0x84 => return self.fail("an extension code refers to a registered class"),
                0x8f | 0x90 | 0x91 => return self.fail("a set; only None, bool, int, float, str, bytes, list, tuple and dict are read"),
                0x97 | 0x98 => return self.fail("an out-of-band buffer refers to data outside the pickle"),
                other => return self.fail(format!("unknown opcode {other:#04x}")),
            }
        }
    }

    /// Python's raw-unicode-escape: `\uXXXX` and `\UXXXXXXXX`, other bytes
    /// as latin-1 code points.
    fn raw_unicode_escape(&self, text: &[u8]) -> Result<String, PickleError> {
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            let width = match (text[i], text.get(i + 1)) {
                (b'\\', Some(b'u')) => 4,
                (b'\\', Some(b'U')) => 8,
                _ => 0,
            };
            if width == 0 {
                out.push(char::from(text[i]));
                i += 1;
                continue;
            }
            let digits = text.get(i + 2..i + 2 + width);
            let code = digits
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| u32::from_str_radix(d, 16).ok())
                .and_then(char::from_u32);
            match code {
                Some(c) => out.push(c),
                None => return self.fail("a UNICODE argument with a bad \\u escape"),
            }
            i += 2 + width;
        }
        Ok(out)
    }

    /// The plain tree of `item`, copying shared objects within the budget.
    fn plain(
        &self,
        item: &Item,
        depth: usize,
        max_depth: usize,
        budget: &mut usize,
    ) -> Result<Value, PickleError> {
        let over = |this: &Self| {
            this.fail(
                "the objects built would exceed the memory bound (shared objects copied too often)",
            )
        };
        let mut charge = |n: usize, this: &Self| -> Result<(), PickleError> {
            *budget = match budget.checked_sub(n.saturating_add(16)) {
                Some(left) => left,
                None => return over(this),
            };
            Ok(())
        };
        match item {
            Item::Scalar(value) => {
                let len = match value {
                    Value::Str(s) => s.len(),
                    Value::Bytes(b) => b.len(),
                    _ => 0,
                };
                charge(len, self)?;
                Ok(value.clone())
            }
            Item::InputBytes(start, len) => {
                charge(*len, self)?;
                Ok(Value::Bytes(self.input[*start..*start + len].to_vec()))
            }
            Item::CodecsEncode => self.fail("_codecs.encode left uncalled"),
            Item::Node(n) => {
                if depth >= max_depth {
                    return self.fail(format!(
                        "containers nested deeper than {max_depth} levels (or holding themselves)"
                    ));
                }
                charge(0, self)?;
                let items =
                    |list: &[Item], budget: &mut usize| -> Result<Vec<Value>, PickleError> {
                        list.iter()
                            .map(|i| self.plain(i, depth + 1, max_depth, budget))
                            .collect()
                    };
                Ok(match &self.nodes[*n] {
                    Node::List(list) => Value::List(items(list, budget)?),
                    Node::Tuple(list) => Value::Tuple(items(list, budget)?),
                    Node::Dict(pairs) => {
                        let mut out: Vec<(Value, Value)> = Vec::with_capacity(pairs.len());
                        for (k, v) in pairs {
                            let key = self.plain(k, depth + 1, max_depth, budget)?;
                            let value = self.plain(v, depth + 1, max_depth, budget)?;
                            match out.iter_mut().find(|(existing, _)| *existing == key) {
                                Some(slot) => slot.1 = value,
                                None => out.push((key, value)),
                            }
                        }
                        Value::Dict(out)
                    }
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(bytes: &[u8]) -> Result<Value, PickleError> {
        loads(bytes, Limits::for_len(bytes.len()))
    }

    #[test]
    fn protocol_4_tuple_of_bytes_and_int() {
        // pickle.dumps((b"ab", 3), protocol=4)
        let p = b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00C\x02ab\x94K\x03\x86\x94.";
        assert_eq!(
            load(p).unwrap(),
            Value::Tuple(vec![Value::Bytes(b"ab".to_vec()), Value::Int(3)])
        );
    }

    #[test]
    fn protocol_2_bytes_through_codecs_encode() {
        // pickle.dumps(b"\xff", protocol=2)
        let p = b"\x80\x02c_codecs\nencode\nq\x00X\x02\x00\x00\x00\xc3\xbfq\x01X\x06\x00\x00\x00latin1q\x02\x86q\x03Rq\x04.";
        assert_eq!(load(p).unwrap(), Value::Bytes(vec![0xff]));
    }

    #[test]
    fn globals_and_object_building_are_refused() {
        // pickle.dumps(os.system) at protocol 2: GLOBAL posix system.
        let p = b"\x80\x02cposix\nsystem\nq\x00.";
        let error = load(p).unwrap_err();
        assert!(error.reason.contains("posix.system"), "{error}");
        assert_eq!(error.offset, 2);
        for p in [&b"(i__main__\nX\nq\x00."[..], b"\x80\x02N}b.", b"\x80\x02NNR."] {
            let error = load(p).unwrap_err();
            assert!(
                error.reason.contains("running code") || error.reason.contains("only plain"),
                "{error}"
            );
        }
    }

    #[test]
    fn declared_lengths_past_the_end_are_refused_unallocated() {
        // BINBYTES8 of 2^62 bytes, BINUNICODE of 4 GiB.
        let p = b"\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x40.";
        assert!(load(p).unwrap_err().reason.contains("truncated"));
        let p = b"\x80\x04X\xff\xff\xff\xff.";
        assert!(load(p).unwrap_err().reason.contains("truncated"));
    }

    #[test]
    fn shared_objects_are_bounded_when_copied() {
        // x0 = [b"A"*1000]; x1 = [x0, x0]; ... 30 levels: a billion copies.
        let mut p = b"\x80\x04]\x94B\xe8\x03\x00\x00".to_vec();
        p.extend(std::iter::repeat_n(b'A', 1000));
        p.push(b'a');
        for level in 0..30u32 {
            p.extend(b"0]\x94(h");
            p.push(level as u8);
            p.push(b'h');
            p.push(level as u8);
            p.push(b'e');
        }
        p.push(b'.');
        let error = load(&p).unwrap_err();
        assert!(error.reason.contains("memory bound"), "{error}");
    }

    #[test]
    fn a_list_holding_itself_is_too_deep() {
        // l = []; l.append(l)
        let p = b"\x80\x04]\x94h\x00a.";
        assert!(load(p).unwrap_err().reason.contains("deeper"));
    }

    #[test]
    fn memo_entries_are_the_same_object_later_filled() {
        // x = []; (x, x) after x.append(1): EMPTY_LIST MEMOIZE ... GET 0 APPEND
        let p = b"\x80\x04]\x94h\x00K\x01a\x86.";
        assert_eq!(
            load(p).unwrap(),
            Value::Tuple(vec![
                Value::List(vec![Value::Int(1)]),
                Value::List(vec![Value::Int(1)])
            ])
        );
    }
}
