//! One function per subcommand: validate the parsed arguments, call the library,
//! print.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use bcd::{Compression, CreateOptions, Dataset};
use bcd_pipeline::fields::DatasetFields;

use crate::args::{Cli, Command};
use crate::output::{say, stdout_error, stdout_text, UsageError};
use crate::remote_cmd::{local, location};
use bcd_remote::Location;
use std::path::PathBuf;

/// Problems listed by `verify` before it only counts the rest.
pub(crate) const VERIFY_SHOWN: usize = 20;

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Create {
            dataset,
            keyed,
            compression,
            max_shard_size,
        } => {
            let dataset = local(&dataset, "the dataset created")?;
            Dataset::create(
                &dataset,
                CreateOptions {
                    keyed,
                    compression: compression.into(),
                    max_shard_size,
                },
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Info { dataset, json } => match location(&dataset)? {
            Location::Local(path) => {
                let dataset = Dataset::open(&path)?;
                let fields = DatasetFields::load(&dataset)?;
                let info = InfoFields {
                    path: dataset.path().display().to_string(),
                    manifest: dataset.manifest(),
                    records: dataset.len(),
                    stored_bytes: dataset.stored_bytes(),
                    fields: (&fields.schema, &fields.metadata),
                };
                print_info(&info, json)
            }
            Location::Remote(uri) => crate::remote_cmd::info(uri, json),
        },
        Command::Get {
            dataset,
            key,
            index,
            hex,
            output,
            fields,
        } => {
            // The key first: a malformed --hex KEY is a usage error, whatever the
            // dataset.
            let key = key.map(|key| key_bytes(&key, hex)).transpose()?;
            let output = output.map(|o| local(&o, "the output file")).transpose()?;
            let path = match location(&dataset)? {
                Location::Local(path) => path,
                Location::Remote(uri) if fields => {
                    return Err(UsageError(format!(
                        "--fields reads a local dataset; `bcd pull {uri} DIR` first"
                    ))
                    .into())
                }
                Location::Remote(uri) => return crate::remote_cmd::get(uri, key, index, output),
            };
            let dataset = Dataset::open(&path)?;
            let position = match (key, index) {
                (_, Some(index)) => dataset.resolve_index(index)?,
                (Some(key), None) => match dataset.position(&key)? {
                    Some(position) => position,
                    None => bail!(
                        "key {} not found in {} (list keys with `bcd ls`)",
                        bcd::DisplayKey(key),
                        dataset.path().display()
                    ),
                },
                (None, None) => unreachable!("clap requires KEY or --index"),
            };
            if fields {
                let line = record_fields_json(&dataset, &DatasetFields::load(&dataset)?, position)?;
                stdout_text(&format!("{line}\n"))
                    .map_err(stdout_error("writing the fields to stdout failed"))?;
                return Ok(ExitCode::SUCCESS);
            }
            let value = dataset.at(position)?;
            write_value(&value, output)
        }
        Command::Ls {
            dataset,
            fields: true,
            ..
        } => ls_fields(&Dataset::open(&local(&dataset, "the dataset")?)?),
        Command::Stats {
            dataset,
            json,
            shards,
        } => {
            let dataset = Dataset::open(&local(&dataset, "the dataset")?)?;
            let report = bcd_pipeline::fields::stats_report(&dataset, shards)?;
            let text = if json {
                format!("{report}\n")
            } else {
                crate::stats_cmd::render(&report)
            };
            stdout_text(&text).map_err(stdout_error("writing the statistics to stdout failed"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ls { dataset, null, .. } => {
            let path = match location(&dataset)? {
                Location::Local(path) => path,
                Location::Remote(uri) => return crate::remote_cmd::ls(uri, null),
            };
            let dataset = Dataset::open(&path)?;
            let end = if null { b'\0' } else { b'\n' };
            let mut out = io::BufWriter::new(io::stdout().lock());
            let failed = || stdout_error("writing the keys to stdout failed");
            for index in 0..dataset.len() {
                if dataset.keyed() {
                    out.write_all(dataset.key_at(index)?).map_err(failed())?;
                } else {
                    write!(out, "{index}").map_err(failed())?;
                }
                out.write_all(&[end]).map_err(failed())?;
            }
            out.flush().map_err(failed())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify { dataset } => match location(&dataset)? {
            Location::Local(path) => verify(&path),
            Location::Remote(uri) => crate::remote_cmd::verify(uri),
        },
        Command::Merge(args) => merge(args),
        Command::Gc {
            dataset,
            dry_run,
            older_than,
            json,
        } => match location(&dataset)? {
            Location::Local(path) => gc(
                &path,
                bcd::GcOptions {
                    dry_run,
                    older_than,
                },
                json,
            ),
            Location::Remote(uri) => crate::remote_cmd::gc(
                uri,
                older_than.unwrap_or(crate::remote_cmd::DEFAULT_GRACE),
                dry_run,
                json,
            ),
        },
        Command::Ingest(args) => crate::ingest_cmd::ingest(*args),
        Command::Export(args) => crate::export_cmd::export(args),
        Command::Push {
            dataset,
            uri,
            transfer,
            replace,
        } => crate::remote_cmd::push(&dataset, &uri, &transfer, replace),
        Command::Pull {
            uri,
            dataset,
            transfer,
            replace,
        } => crate::remote_cmd::pull(&uri, &dataset, &transfer, replace),
    }
}

/// Writes a value to `output`, or to stdout.
pub(crate) fn write_value(value: &[u8], output: Option<PathBuf>) -> Result<ExitCode> {
    match output {
        Some(path) => {
            fs::write(&path, value).with_context(|| format!("writing {}", path.display()))?
        }
        None => {
            let mut stdout = io::stdout().lock();
            stdout
                .write_all(value)
                .and_then(|()| stdout.flush())
                .map_err(stdout_error("writing the value to stdout failed"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The fields of record `index` as one JSON object, with its `key` (or
/// `index` for keyless datasets) first.
fn record_fields_json(
    dataset: &Dataset,
    fields: &DatasetFields,
    index: usize,
) -> Result<serde_json::Value> {
    let shard = dataset.value_location(index)?.shard;
    let mut local = index - dataset.shard_first_record(shard) as usize;
    let mut object = serde_json::Map::new();
    identify(dataset, index, &mut object)?;
    for batch in fields.shard_batches(dataset, shard, None)? {
        if local < batch.num_rows() {
            add_fields(&mut object, bcd_fields::row_to_json(&batch, local));
            break;
        }
        local -= batch.num_rows();
    }
    Ok(serde_json::Value::Object(object))
}

/// `"key"` (as text when UTF-8, else `"key_hex"`) or `"index"`.
fn identify(
    dataset: &Dataset,
    index: usize,
    object: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    if dataset.keyed() {
        let key = dataset.key_at(index)?;
        match std::str::from_utf8(key) {
            Ok(text) => object.insert("key".into(), text.into()),
            Err(_) => object.insert(
                "key_hex".into(),
                bcd::DisplayKey(key.to_vec()).to_string().into(),
            ),
        };
    } else {
        object.insert("index".into(), index.into());
    }
    Ok(())
}

/// The names `identify` may print, which no field may take.
const RECORD_NAMES: [&str; 3] = ["key", "key_hex", "index"];
/// What a field's name gets before it when it would take one of
/// [`RECORD_NAMES`] (img2dataset's `key` column) or already begins with it, so
/// that no two names meet: `key` is printed `field.key`, `field.x` is
/// `field.field.x`, `x` stays `x`.
const FIELD_PREFIX: &str = "field.";

/// Adds a record's fields after its key or index, renamed by [`FIELD_PREFIX`]
/// where they would take a name of [`RECORD_NAMES`]: the record's own key and
/// every field are printed, whatever the fields are called.
fn add_fields(
    object: &mut serde_json::Map<String, serde_json::Value>,
    fields: serde_json::Map<String, serde_json::Value>,
) {
    for (name, value) in fields {
        let name = if RECORD_NAMES.contains(&name.as_str()) || name.starts_with(FIELD_PREFIX) {
            format!("{FIELD_PREFIX}{name}")
        } else {
            name
        };
        object.insert(name, value);
    }
}

/// `bcd ls --fields`: one JSON object per record, shard by shard.
fn ls_fields(dataset: &Dataset) -> Result<ExitCode> {
    let fields = DatasetFields::load(dataset)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let failed = || stdout_error("writing the records to stdout failed");
    let mut index = 0;
    for shard in 0..dataset.shards() {
        for batch in fields.shard_batches(dataset, shard, None)? {
            for row in 0..batch.num_rows() {
                let mut object = serde_json::Map::new();
                identify(dataset, index, &mut object)?;
                add_fields(&mut object, bcd_fields::row_to_json(&batch, row));
                writeln!(out, "{}", serde_json::Value::Object(object)).map_err(failed())?;
                index += 1;
            }
        }
    }
    out.flush().map_err(failed())?;
    Ok(ExitCode::SUCCESS)
}

fn merge(args: crate::args::MergeArgs) -> Result<ExitCode> {
    let options = bcd_pipeline::MergeRunOptions {
        copy: args.copy,
        on_duplicate: match args.on_duplicate {
            crate::args::DuplicateArg::Error => bcd_pipeline::OnDuplicate::Error,
            crate::args::DuplicateArg::Skip => bcd_pipeline::OnDuplicate::Skip,
        },
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

fn gc(path: &std::path::Path, options: bcd::GcOptions, json: bool) -> Result<ExitCode> {
    let report = Dataset::gc(path, &options)?;
    let mut out = String::new();
    if json {
        writeln!(out, "{}", bcd_pipeline::gc_json(&report, &options))?;
    } else {
        let verb = if options.dry_run {
            "would remove"
        } else {
            "removed"
        };
        for file in &report.files {
            writeln!(out, "{verb} {}", file.display())?;
        }
        for job in &report.kept_jobs {
            writeln!(
                out,
                "kept {} (running, or newer than --older-than)",
                job.display()
            )?;
        }
        writeln!(
            out,
            "{verb} {} file(s), {} bytes",
            report.files.len(),
            report.bytes
        )?;
    }
    stdout_text(&out).map_err(stdout_error(
        "writing the garbage collection report to stdout failed",
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// What `info` shows of a dataset, local or remote.
pub(crate) struct InfoFields<'a> {
    pub path: String,
    pub manifest: &'a bcd::Manifest,
    pub records: usize,
    pub stored_bytes: u64,
    /// The schema and metadata.
    pub fields: (
        &'a bcd_fields::DatasetSchema,
        &'a serde_json::Map<String, serde_json::Value>,
    ),
}

pub(crate) fn print_info(info: &InfoFields<'_>, json: bool) -> Result<ExitCode> {
    let manifest = info.manifest;
    let schema: Vec<_> = info.fields.0.fields().iter().collect();
    let metadata = info.fields.1.clone();
    let compression = manifest.compression.as_manifest_str();
    let version = match manifest.version {
        bcd::ManifestVersion::V0_2 => "0.2",
        bcd::ManifestVersion::V0_3 => "0.3",
    };
    let mut out = String::new();
    if json {
        let object = serde_json::json!({
            "path": info.path,
            "keyed": manifest.keyed,
            "compression": compression,
            "max_shard_size": manifest.max_shard_size,
            "shards": manifest.shards,
            "records": info.records,
            "stored_bytes": info.stored_bytes,
            "manifest_version": version,
            "schema": schema
                .iter()
                .map(|f| serde_json::json!({"name": f.name(), "type": f.data_type().to_string()}))
                .collect::<Vec<_>>(),
            "metadata": metadata,
        });
        writeln!(out, "{object}")?;
    } else {
        writeln!(out, "path:           {}", info.path)?;
        writeln!(out, "keyed:          {}", manifest.keyed)?;
        writeln!(out, "compression:    {}", compression.unwrap_or("none"))?;
        writeln!(out, "max shard size: {} bytes", manifest.max_shard_size)?;
        writeln!(out, "shards:         {}", manifest.shards)?;
        writeln!(out, "records:        {}", info.records)?;
        writeln!(out, "stored bytes:   {}", info.stored_bytes)?;
        writeln!(out, "manifest:       bitcask-dataset {version} layout")?;
        if !schema.is_empty() {
            writeln!(out, "fields:")?;
            for field in &schema {
                writeln!(out, "  {}: {}", field.name(), field.data_type())?;
            }
        }
        if !metadata.is_empty() {
            writeln!(
                out,
                "metadata:       {}",
                serde_json::Value::Object(metadata)
            )?;
        }
    }
    stdout_text(&out).map_err(stdout_error("writing the information to stdout failed"))?;
    Ok(ExitCode::SUCCESS)
}

fn verify(path: &std::path::Path) -> Result<ExitCode> {
    let dataset = match Dataset::open(path) {
        Ok(dataset) => dataset,
        Err(error) => {
            say!("bcd: verify failed: {}", crate::output::chain(&error));
            return Ok(ExitCode::FAILURE);
        }
    };
    let problems = dataset.verify();
    for problem in problems.iter().take(VERIFY_SHOWN) {
        say!("bcd: {}", crate::output::chain(problem));
    }
    if problems.len() > VERIFY_SHOWN {
        say!("bcd: ... and {} more", problems.len() - VERIFY_SHOWN);
    }
    let leftovers = dataset.uncommitted_files()?;
    if !leftovers.is_empty() {
        say!(
            "bcd: note: {} uncommitted file(s) from an interrupted write are ignored (the next extend overwrites them): {}",
            leftovers.len(),
            leftovers
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let [bcd::Error::CorruptIndexFile { .. }] = problems.as_slice() {
        say!("bcd: verify failed: the persisted index is wrong");
        return Ok(ExitCode::FAILURE);
    }
    if !problems.is_empty() {
        say!(
            "bcd: verify failed: {} of {} records cannot be decoded",
            problems.len(),
            dataset.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    let what = match dataset.compression() {
        Compression::Lz4 => "all decoded",
        Compression::None => "stored uncompressed",
    };
    stdout_text(&format!(
        "ok: {} records in {} shards, {what}\n",
        dataset.len(),
        dataset.shards()
    ))
    .map_err(stdout_error(
        "the dataset verified ok; writing the result to stdout failed",
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// The bytes of a KEY argument: as given (any bytes on Unix), or decoded from hex.
fn key_bytes(key: &std::ffi::OsStr, hex: bool) -> Result<Vec<u8>> {
    #[cfg(unix)]
    let raw = std::os::unix::ffi::OsStrExt::as_bytes(key).to_vec();
    #[cfg(not(unix))]
    let raw = key
        .to_str()
        .context("KEY is not valid Unicode; pass it with --hex")?
        .as_bytes()
        .to_vec();
    if !hex {
        return Ok(raw);
    }
    let text = std::str::from_utf8(&raw).ok().filter(|t| t.len() % 2 == 0);
    let decoded = text.and_then(|t| {
        (0..t.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&t[i..i + 2], 16).ok())
            .collect::<Option<Vec<u8>>>()
    });
    decoded.ok_or_else(|| {
        UsageError("--hex KEY must be an even number of hexadecimal digits".into()).into()
    })
}
