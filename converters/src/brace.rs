//! WebDataset-style brace expansion of archive names: `shards-{000000..000123}.tar`,
//! `{train,val}-{0..3}.tar`.

/// Most names one pattern may expand to: a typo such as `{0..99999999}` should fail
/// clearly, not exhaust memory.
pub(crate) const MAX_EXPANSION: usize = 1_000_000;

/// Expands every `{a..b}` numeric range (zero-padded to the width of `a` when `a`
/// has a leading zero) and `{x,y,z}` list, left to right. Text without braces is
/// returned as is.
pub fn expand(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('{') else {
        return Ok(vec![pattern.to_owned()]);
    };
    let close = pattern[open..]
        .find('}')
        .map(|i| open + i)
        .ok_or_else(|| format!("unclosed '{{' in {pattern:?}"))?;
    let (head, body, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let choices = if let Some((from, to)) = body.split_once("..") {
        range(from, to).map_err(|wrong| match wrong {
            Range::Malformed => format!(
                "bad range {{{body}}} in {pattern:?}: expected {{FIRST..LAST}} with FIRST <= LAST"
            ),
            Range::TooLong(n) => format!(
                "range {{{body}}} in {pattern:?} names {n} numbers, more than the {MAX_EXPANSION} one pattern may expand to"
            ),
        })?
    } else if body.contains(',') {
        body.split(',').map(str::to_owned).collect()
    } else {
        return Err(format!(
            "bad braces {{{body}}} in {pattern:?}: expected {{a..b}} or {{x,y}}"
        ));
    };
    let rest = expand(tail)?;
    if choices.len().saturating_mul(rest.len()) > MAX_EXPANSION {
        return Err(format!(
            "{pattern:?} expands to more than {MAX_EXPANSION} names"
        ));
    }
    let mut out = Vec::with_capacity(choices.len() * rest.len());
    for choice in &choices {
        for suffix in &rest {
            out.push(format!("{head}{choice}{suffix}"));
        }
    }
    Ok(out)
}

/// Why a `{FIRST..LAST}` range was refused.
enum Range {
    /// Not two numbers, or FIRST > LAST.
    Malformed,
    /// Well-formed, but naming this many numbers, over [`MAX_EXPANSION`].
    TooLong(u128),
}

fn range(from: &str, to: &str) -> Result<Vec<String>, Range> {
    let parse = |n: &str| n.parse::<u64>().map_err(|_| Range::Malformed);
    let (a, b) = (parse(from)?, parse(to)?);
    if a > b {
        return Err(Range::Malformed);
    }
    let count = u128::from(b - a) + 1;
    if count > MAX_EXPANSION as u128 {
        return Err(Range::TooLong(count));
    }
    let width = if from.starts_with('0') { from.len() } else { 0 };
    Ok((a..=b).map(|n| format!("{n:0width$}")).collect())
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn expands_padded_ranges_and_lists() {
        assert_eq!(expand("a.tar").unwrap(), ["a.tar"]);
        assert_eq!(
            expand("shards-{000008..000011}.tar").unwrap(),
            [
                "shards-000008.tar",
                "shards-000009.tar",
                "shards-000010.tar",
                "shards-000011.tar"
            ]
        );
        assert_eq!(
            expand("{train,val}-{1..2}.tgz").unwrap(),
            ["train-1.tgz", "train-2.tgz", "val-1.tgz", "val-2.tgz"]
        );
    }

    #[test]
    fn rejects_malformed_and_huge_patterns() {
        for bad in [
            "x{1..",
            "x{3..1}",
            "x{a..b}",
            "x{}",
            "{0..99999999}",
            "{0..999}{0..9999}",
        ] {
            assert!(expand(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_range_over_the_limit_names_the_limit_not_the_order() {
        let error = expand("shards-{0..99999999}.tar").unwrap_err();
        assert!(
            error.contains("100000000 numbers") && error.contains("1000000"),
            "{error}"
        );
        assert!(!error.contains("FIRST <= LAST"), "{error}");
        // The largest range allowed still expands.
        assert_eq!(expand("{1..1000000}").unwrap().len(), 1_000_000);
        // An order that is wrong keeps its own message.
        assert!(expand("x{3..1}").unwrap_err().contains("FIRST <= LAST"));
    }
}
