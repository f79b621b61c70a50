//! The opcodes: a stack machine over the pickle's bytes that builds plain
//! data only ([`super`] says what it reads and refuses).

use std::collections::HashMap;

use super::{PickleError, Value};

/// A value while the pickle is read: containers are nodes of an arena, so a
/// memo entry and the stack share one object, as in Python.
#[derive(Clone, Debug)]
pub(super) enum Item {
    Scalar(Value),
    /// `bytes` still in the input, `(start, len)`: copied once, when the
    /// plain value is made (a memo entry or the stack share it for free).
    InputBytes(usize, usize),
    Node(usize),
    /// `_codecs.encode`, waiting for its REDUCE.
    CodecsEncode,
}

#[derive(Debug)]
pub(super) enum Node {
    List(Vec<Item>),
    Tuple(Vec<Item>),
    Dict(Vec<(Item, Item)>),
}

pub(super) struct Machine<'a> {
    pub(super) input: &'a [u8],
    pub(super) at: usize,
    pub(super) op_at: usize,
    pub(super) stack: Vec<Item>,
    pub(super) marks: Vec<usize>,
    pub(super) memo: HashMap<u64, Item>,
    pub(super) nodes: Vec<Node>,
}

impl<'a> Machine<'a> {
    pub(super) fn new(input: &'a [u8]) -> Machine<'a> {
        Machine {
            input,
            at: 0,
            op_at: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            nodes: Vec::new(),
        }
    }

    /// The bytes read so far.
    pub(super) fn position(&self) -> usize {
        self.at
    }

    pub(super) fn fail<T>(&self, reason: impl Into<String>) -> Result<T, PickleError> {
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
            return self.fail(format!(
                "an integer of {} bytes does not fit 64 bits",
                bytes.len()
            ));
        }
        if bytes.is_empty() {
            return Ok(Value::Int(0));
        }
        let fill = if bytes[bytes.len() - 1] & 0x80 != 0 {
            0xff
        } else {
            0
        };
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
        if !items.len().is_multiple_of(2) {
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

    pub(super) fn run(&mut self) -> Result<Item, PickleError> {
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
                    match std::str::from_utf8(text)
                        .ok()
                        .and_then(|t| t.parse::<f64>().ok())
                    {
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
                    if !items.len().is_multiple_of(2) {
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
                b'S' => {
                    return self.fail("protocol 0's quoted STRING (Python 2's str) is not read")
                }
                b'i' => self.refuse("INST")?,
                b'o' => self.refuse("OBJ")?,
                0x81 => self.refuse("NEWOBJ")?,
                0x92 => self.refuse("NEWOBJ_EX")?,
                b'b' => self.refuse("BUILD")?,
                b'P' | b'Q' => {
                    return self.fail("a persistent id refers to an object outside the pickle")
                }
                0x82..=0x84 => return self.fail("an extension code refers to a registered class"),
                0x8f..=0x91 => return self.fail(
                    "a set; only None, bool, int, float, str, bytes, list, tuple and dict are read",
                ),
                0x97 | 0x98 => {
                    return self.fail("an out-of-band buffer refers to data outside the pickle")
                }
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
}
