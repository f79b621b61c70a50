//! `bcd stats`: the statistics kept at write time, as text (label counts drawn
//! as bars) or as the JSON report every front end shares
//! (`bcd_pipeline::stats_report`). The text report is a format of its own, so
//! its renderer stays here rather than in `output.rs`.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::Value;

use crate::location::local;
use crate::output::{stdout_error, stdout_text};

/// Width of the longest bar.
const BAR_WIDTH: usize = 40;
/// Values listed per field with exact counts; the rest are summed.
const COUNTS_SHOWN: usize = 20;

pub fn run(
    dataset: &OsStr,
    json: bool,
    shards: bool,
    view: Option<&str>,
    where_: Option<&str>,
) -> Result<ExitCode> {
    let dataset = bcd::Dataset::open(&local(dataset, "the dataset")?)?;
    let report = match crate::selection::local(&dataset, view, where_)? {
        None => bcd_pipeline::fields::stats_report(&dataset, shards)?,
        // A view's statistics are computed from its records: none were kept
        // at write time.
        Some(records) => bcd_pipeline::fields::records_stats_report(&dataset, &records)?,
    };
    let text = if json {
        format!("{report}\n")
    } else {
        render(&report)
    };
    stdout_text(&text).map_err(stdout_error("writing the statistics to stdout failed"))?;
    Ok(ExitCode::SUCCESS)
}

/// The text form of a stats report.
fn render(report: &Value) -> String {
    let mut out = String::new();
    let u = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let _ = writeln!(out, "records:       {}", u(report, "records"));
    let _ = writeln!(out, "shards:        {}", u(report, "shards"));
    let _ = writeln!(out, "raw bytes:     {}", human(u(report, "raw_bytes")));
    let _ = writeln!(out, "stored bytes:  {}", human(u(report, "stored_bytes")));
    let _ = writeln!(out, "key bytes:     {}", human(u(report, "key_bytes")));
    if let Some(sizes) = report.get("value_size").filter(|s| !s["min"].is_null()) {
        let _ = writeln!(
            out,
            "value size:    min {}  p50 {}  p90 {}  p99 {}  max {}",
            human(u(sizes, "min")),
            human(u(sizes, "p50")),
            human(u(sizes, "p90")),
            human(u(sizes, "p99")),
            human(u(sizes, "max")),
        );
    }
    if let Some(note) = report.get("note").and_then(Value::as_str) {
        let _ = writeln!(out, "note:          {note}");
    }
    let fields = report.get("fields").and_then(Value::as_object);
    if let Some(fields) = fields.filter(|f| !f.is_empty()) {
        let _ = writeln!(out, "\nfields:");
        for (name, field) in fields {
            render_field(&mut out, name, field);
        }
    }
    if let Some(shards) = report.get("per_shard").and_then(Value::as_array) {
        let _ = writeln!(out, "\nshards:");
        let _ = writeln!(
            out,
            "  {:>8}  {:>10}  {:>12}  {:>12}  {:>10}",
            "shard", "records", "raw", "stored", "p50 size"
        );
        for shard in shards {
            let _ = writeln!(
                out,
                "  {:>8}  {:>10}  {:>12}  {:>12}  {:>10}",
                u(shard, "shard"),
                u(shard, "records"),
                human(u(shard, "raw_bytes")),
                human(u(shard, "stored_bytes")),
                shard
                    .get("value_size")
                    .and_then(|s| s.get("p50"))
                    .and_then(Value::as_u64)
                    .map_or_else(|| "-".to_owned(), human),
            );
        }
    }
    out
}

fn render_field(out: &mut String, name: &str, field: &Value) {
    let u = |k: &str| field.get(k).and_then(Value::as_u64).unwrap_or(0);
    let ty = field.get("type").and_then(Value::as_str).unwrap_or("?");
    let _ = write!(out, "  {name} ({ty}): {} null", u("nulls"));
    if let Some(distinct) = field.get("distinct").and_then(Value::as_u64) {
        let exact = field.get("counts").is_some_and(|c| c.is_array());
        let _ = write!(out, ", {}{distinct} distinct", if exact { "" } else { "~" });
    }
    for bound in ["min", "max"] {
        if let Some(v) = field.get(bound).filter(|v| !v.is_null()) {
            let _ = write!(out, ", {bound} {}", short(v));
        }
    }
    let _ = writeln!(out);
    let Some(counts) = field.get("counts").and_then(Value::as_array) else {
        return;
    };
    let mut pairs: Vec<(String, u64)> = counts
        .iter()
        .filter_map(|pair| {
            let pair = pair.as_array()?;
            Some((short(pair.first()?), pair.get(1)?.as_u64()?))
        })
        .collect();
    pairs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total: u64 = pairs.iter().map(|p| p.1).sum();
    let largest = pairs.first().map_or(1, |p| p.1.max(1));
    let label_width = pairs
        .iter()
        .take(COUNTS_SHOWN)
        .map(|p| p.0.chars().count())
        .max()
        .unwrap_or(0)
        .min(32);
    for (value, count) in pairs.iter().take(COUNTS_SHOWN) {
        let bar = ((*count as u128 * BAR_WIDTH as u128).div_ceil(largest as u128)) as usize;
        let shown: String = value.chars().take(32).collect();
        let _ = writeln!(
            out,
            "    {shown:<label_width$}  {:<BAR_WIDTH$}  {count} ({:.1}%)",
            "#".repeat(bar),
            100.0 * *count as f64 / total.max(1) as f64,
        );
    }
    if pairs.len() > COUNTS_SHOWN {
        let rest: u64 = pairs[COUNTS_SHOWN..].iter().map(|p| p.1).sum();
        let _ = writeln!(
            out,
            "    ... {} more values: {rest}",
            pairs.len() - COUNTS_SHOWN
        );
    }
}

/// A JSON scalar as a short label: strings without quotes.
fn short(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `1.5 MiB`-style sizes (exact bytes below 1 KiB).
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    value /= 1024.0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_counts_are_bars_scaled_to_the_largest() {
        let report = serde_json::json!({
            "records": 100, "shards": 1, "raw_bytes": 2048, "stored_bytes": 1000, "key_bytes": 10,
            "value_size": {"min": 1, "p50": 20, "p90": 30, "p99": 40, "max": 50},
            "fields": {"label": {"type": "Utf8", "nulls": 0, "distinct": 3,
                "counts": [["cat", 90], ["dog", 9], ["eel", 1]]}}
        });
        let text = render(&report);
        assert!(text.contains("raw bytes:     2.0 KiB"), "{text}");
        let cat = text
            .lines()
            .find(|l| l.trim_start().starts_with("cat"))
            .unwrap();
        let eel = text
            .lines()
            .find(|l| l.trim_start().starts_with("eel"))
            .unwrap();
        assert_eq!(cat.matches('#').count(), BAR_WIDTH, "{text}");
        assert_eq!(eel.matches('#').count(), 1, "{text}");
        assert!(cat.ends_with("90 (90.0%)"), "{cat}");
        assert!(text.contains("label (Utf8): 0 null, 3 distinct"), "{text}");
    }
}
