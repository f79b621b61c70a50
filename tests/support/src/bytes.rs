//! Bytes as lowercase hex text, the way the Python reference (`bytes.hex()`) and
//! the fixtures' JSON files spell them.

use serde_json::Value;

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.extend_from_slice(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]);
    }
    String::from_utf8(text).expect("hex digits are ASCII")
}

/// The bytes a lowercase hex string spells; panics on odd length or any other
/// character (all producers here write lowercase).
pub fn unhex(text: &str) -> Vec<u8> {
    fn nibble(digit: u8) -> u8 {
        match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            _ => panic!("{:?} is not a lowercase hex digit", digit as char),
        }
    }
    let text = text.as_bytes();
    assert!(text.len().is_multiple_of(2), "odd-length hex");
    text.chunks_exact(2)
        .map(|pair| (nibble(pair[0]) << 4) | nibble(pair[1]))
        .collect()
}

/// [`unhex`] of a JSON string; panics if `value` is not a string.
pub fn unhex_json(value: &Value) -> Vec<u8> {
    unhex(value.as_str().expect("a hex string"))
}

#[cfg(test)]
mod tests {
    use super::{hex, unhex};

    #[test]
    fn round_trips_every_byte() {
        let bytes: Vec<u8> = (0..=255).collect();
        let text = hex(&bytes);
        assert!(text.starts_with("000102") && text.ends_with("fdfeff"));
        assert_eq!(unhex(&text), bytes);
        assert_eq!(unhex(""), b"");
    }

    #[test]
    #[should_panic(expected = "not a lowercase hex digit")]
    fn uppercase_is_refused() {
        unhex("0A");
    }
}
