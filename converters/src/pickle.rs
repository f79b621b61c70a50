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

use std::fmt;

mod machine;
mod plain;

use machine::Machine;

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

/// Reads one pickle: `bytes` must hold it whole (bytes after its STOP are
/// refused).
pub fn loads(bytes: &[u8], limits: Limits) -> Result<Value, PickleError> {
    let mut machine = Machine::new(bytes);
    let top = machine.run()?;
    if machine.position() != bytes.len() {
        return Err(PickleError {
            offset: machine.position(),
            reason: format!(
                "{} bytes after the STOP opcode",
                bytes.len() - machine.position()
            ),
        });
    }
    let mut budget = limits.max_output;
    machine.plain(&top, 0, limits.max_depth, &mut budget)
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
        for p in [
            &b"(i__main__\nX\nq\x00."[..],
            b"\x80\x02N}b.",
            b"\x80\x02NNR.",
        ] {
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
