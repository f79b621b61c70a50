//! `bcd push` and `bcd pull`: copy a local dataset to object storage or back,
//! committing at the end (the remote manifest's conditional put, or the local
//! atomic rename), with the signal handler: an interrupt commits nothing.

use std::ffi::OsStr;
use std::process::ExitCode;

use anyhow::Result;
use bcd_remote::{TransferOptions, TransferSummary};

use crate::args::TransferArgs;
use crate::location::{local, remote, remote_uri};
use crate::output::{print_transfer, say, EXIT_INTERRUPTED};
use crate::signals::{Interrupts, Phase};

pub fn push(dataset: &OsStr, uri: &OsStr, args: &TransferArgs, replace: bool) -> Result<ExitCode> {
    let dir = local(dataset, "the dataset pushed")?;
    let uri = remote_uri(uri, "push")?;
    let remote = remote(uri.clone())?;
    let after_failure = |_| {
        match replace {
        // The replaced dataset's manifest may be gone already.
        true => format!(
            "nothing was committed; {uri} holds the dataset it held, or none if the replace had begun: run the push again to complete it"
        ),
        false => format!("nothing was committed, {uri} is as it was"),
    }
    };
    transfer(
        "pushed",
        uri.to_string(),
        args,
        replace,
        after_failure,
        |options| bcd_remote::push(&dir, &remote, options),
    )
}

pub fn pull(uri: &OsStr, dataset: &OsStr, args: &TransferArgs, replace: bool) -> Result<ExitCode> {
    let uri = remote_uri(uri, "pull")?;
    let dir = local(dataset, "the dataset pulled into")?;
    let remote = remote(uri)?;
    let existed = std::fs::symlink_metadata(&dir).is_ok();
    let was_dataset = dir.join(bcd::format::MANIFEST_NAME).exists();
    // A failed pull removes a directory it created; an interrupted one keeps
    // what it downloaded, for a rerun.
    let after_failure = |_interrupted: bool| {
        let shown = dir.display();
        match (was_dataset, existed, std::fs::symlink_metadata(&dir).is_ok()) {
            (true, _, _) => format!("nothing was committed, {shown} is as it was"),
            (false, false, false) => format!("nothing was committed, {shown} was not created"),
            (false, _, true) => format!(
                "nothing was committed: {shown} is not a dataset yet, and keeps the files downloaded so far for a rerun of the pull to complete"
            ),
            (false, true, false) => format!("nothing was committed, {shown} is gone"),
        }
    };
    transfer(
        "pulled",
        dir.display().to_string(),
        args,
        replace,
        after_failure,
        |options| bcd_remote::pull(&remote, &dir, options),
    )
}

fn transfer_options(args: &TransferArgs, interrupts: &Interrupts) -> TransferOptions {
    TransferOptions {
        concurrency: args.concurrency as usize,
        multipart_threshold: args.multipart_threshold,
        part_size: args.part_size,
        interrupt: Some(interrupts.flag()),
        progress: None,
        replace: false,
    }
}

/// Runs a push or pull with the signal handler: an interrupt stops it with
/// nothing committed. `after_failure` says, once it failed, what state the
/// destination is in (whether it was interrupted).
fn transfer(
    verb: &'static str,
    destination: String,
    args: &TransferArgs,
    replace: bool,
    after_failure: impl FnOnce(bool) -> String,
    run: impl FnOnce(&TransferOptions) -> bcd_remote::Result<TransferSummary>,
) -> Result<ExitCode> {
    let interrupts = Interrupts::install()?;
    let mut options = transfer_options(args, &interrupts);
    options.replace = replace;
    interrupts.enter(Phase::Running);
    let result = run(&options);
    interrupts.enter(Phase::Finished(match result {
        Ok(_) => "the copy was committed",
        Err(_) => "nothing was committed",
    }));
    match result {
        Ok(summary) => {
            print_transfer(&summary, verb, &destination, args.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(bcd_remote::RemoteError::Interrupted) => {
            say!("bcd: interrupted; {}", after_failure(true));
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        Err(error) => Err(anyhow::Error::new(error).context(format!(
            "{verb} to {destination} failed; {}",
            after_failure(false)
        ))),
    }
}
