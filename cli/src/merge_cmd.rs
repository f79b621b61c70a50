//! `bcd merge`: append local datasets to a local dataset in one commit.

use std::process::ExitCode;

use anyhow::Result;

use crate::args::{DuplicateArg, MergeArgs};
use crate::location::local;
use crate::output::{say, stdout_error, stdout_text};

pub fn run(args: MergeArgs) -> Result<ExitCode> {
    let options = bcd_pipeline::MergeRunOptions {
        copy: args.copy,
        on_duplicate: match args.on_duplicate {
            DuplicateArg::Error => bcd_pipeline::OnDuplicate::Error,
            DuplicateArg::Skip => bcd_pipeline::OnDuplicate::Skip,
        },
        dedup: args.dedup.dedup(),
        dedup_report: args.dedup.dedup_report.clone(),
        memory_limit: args.dedup.memory_limit,
    };
    // A URI would otherwise name a local folder `s3:/...`.
    let into = local(args.into.as_os_str(), "the dataset merged into")?;
    let parts = (args.parts.iter())
        .map(|part| local(part.as_os_str(), "a merged part"))
        .collect::<Result<Vec<_>>>()?;
    let report = bcd_pipeline::merge(&parts, &into, &options)?;
    for (part, error) in &report.summary.parts_not_removed {
        say!(
            "bcd: warning: {} was merged but could not be removed ({error}); delete it, do not merge it again",
            part.display()
        );
    }
    let text = match args.json {
        true => format!("{}\n", report.to_json()),
        false => format!("{}\n", report.to_text()),
    };
    stdout_text(&text).map_err(stdout_error(format!(
        "the merge into {} was committed; writing its summary to stdout failed",
        args.into.display()
    )))?;
    Ok(ExitCode::SUCCESS)
}
