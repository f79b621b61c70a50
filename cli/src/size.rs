//! Parsing of SIZE arguments: `1048576`, `64K`, `1.5GiB`, `100MB`.

/// Parses a byte count: a number with an optional unit. `K`, `M`, `G`, `T` and
/// `KiB`, `MiB`, `GiB`, `TiB` are powers of 1024; `KB`, `MB`, `GB`, `TB` are powers
/// of 1000; `B` or nothing is bytes. Units are case-insensitive; a decimal number
/// is allowed with a unit (`1.5G`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use bytes or K/M/G/T (KiB/MiB/GiB/TiB, powers of 1024) or KB/MB/GB/TB (powers of 1000)"
            ))
        }
    };
    let bad = || {
        format!("invalid size {text:?}: expected a number of bytes such as 1048576, 64M or 1.5GiB")
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(bad());
    }
    let too_large = || format!("size {text:?} is too large");
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let mut bytes = whole.checked_mul(multiplier).ok_or_else(too_large)?;
    if !fraction.is_empty() {
        // Exact arithmetic on at most 9 fractional digits; beyond a byte it is noise.
        let digits = &fraction[..fraction.len().min(9)];
        let numerator: u64 = digits.parse().map_err(|_| bad())?;
        let scaled = (numerator as u128 * multiplier as u128) / 10u128.pow(digits.len() as u32);
        bytes = bytes.checked_add(scaled as u64).ok_or_else(too_large)?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn accepts_bytes_and_both_unit_families() {
        for (text, bytes) in [
            ("0", 0),
            ("4096", 4096),
            ("64K", 64 << 10),
            ("64k", 64 << 10),
            ("64KiB", 64 << 10),
            ("1M", 1 << 20),
            ("1 MiB", 1 << 20),
            ("2G", 2 << 30),
            ("1.5G", 3 << 29),
            ("1T", 1 << 40),
            ("10MB", 10_000_000),
            ("1kb", 1000),
            ("7B", 7),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn rejects_garbage_with_a_hint() {
        for text in [
            "",
            "G",
            "1.2.3K",
            "12X",
            "-5",
            "99999999999999999999",
            "20000000T",
        ] {
            assert!(parse_size(text).is_err(), "{text}");
        }
        assert!(parse_size("3 parsecs").unwrap_err().contains("KiB/MiB/GiB"));
    }
}
