//! `bcd view create|list|refresh|drop`: named subsets of a dataset's records
//! (FORMAT.md, "Views"), made and kept by `bcd_pipeline::views` and the store.
//! `list` reads a dataset in object storage too; the others write beside the
//! shards of a local one (views travel with `bcd push` and `bcd pull`).

use std::ffi::OsStr;
use std::process::ExitCode;

use anyhow::Result;
use bcd::Dataset;
use bcd_pipeline::views::{self, ViewInfo};

use crate::args::ViewCommand;
use crate::location::{local, location, remote, Location};
use crate::output::{say, stdout_error, stdout_text};

pub fn run(command: ViewCommand) -> Result<ExitCode> {
    match command {
        ViewCommand::Create {
            dataset,
            name,
            where_,
            replace,
        } => {
            let dataset = open(&dataset)?;
            let summary = views::create_view(&dataset, &name, &where_, replace)?;
            say!(
                "view {name:?} of {}: {} of {} records",
                dataset.path().display(),
                summary.records,
                summary.evaluated_over
            );
        }
        ViewCommand::Refresh { dataset, name } => {
            let dataset = open(&dataset)?;
            let summary = views::refresh_view(&dataset, &name)?;
            say!(
                "view {name:?} of {}: {} records evaluated, {} added; {} of {} records",
                dataset.path().display(),
                summary.evaluated,
                summary.added,
                summary.records,
                summary.evaluated_over
            );
        }
        ViewCommand::Drop { dataset, name } => {
            let dataset = open(&dataset)?;
            dataset.drop_view(&name)?;
            say!("view {name:?} of {} dropped", dataset.path().display());
        }
        ViewCommand::List { dataset, json } => {
            let infos = match location(&dataset)? {
                Location::Local(path) => views::list_views(&Dataset::open(&path)?)?,
                Location::Remote(uri) => {
                    remote_list(&bcd_remote::RemoteDataset::open(remote(uri)?)?)?
                }
            };
            print(&infos, json)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn open(dataset: &OsStr) -> Result<Dataset> {
    Ok(Dataset::open(local(dataset, "the dataset")?)?)
}

/// The views of a dataset in object storage, each read and checked as a local
/// one's.
fn remote_list(dataset: &bcd_remote::RemoteDataset) -> Result<Vec<ViewInfo>> {
    let mut out = Vec::new();
    for name in dataset.view_names()? {
        let view = dataset.view(&name);
        out.push(ViewInfo::of(name, view));
    }
    Ok(out)
}

/// One line per view (`name  records/evaluated  expression`), or a JSON array.
fn print(infos: &[ViewInfo], json: bool) -> Result<()> {
    let text = match json {
        true => {
            let array: Vec<_> = infos.iter().map(ViewInfo::to_json).collect();
            format!("{}\n", serde_json::Value::Array(array))
        }
        false => {
            let mut text = String::new();
            for info in infos {
                let line = match (&info.problem, info.records, info.evaluated_over) {
                    (Some(problem), _, _) => format!("{}\tunreadable: {problem}\n", info.name),
                    (None, Some(records), Some(over)) => format!(
                        "{}\t{records} of {over} records\t{}\n",
                        info.name,
                        info.expression.as_deref().unwrap_or("(from indices)")
                    ),
                    _ => format!("{}\n", info.name),
                };
                text.push_str(&line);
            }
            text
        }
    };
    stdout_text(&text).map_err(stdout_error("writing the views to stdout failed"))?;
    Ok(())
}
