//! `megatron`: Megatron indexed token datasets, `PREFIX.bin` + `PREFIX.idx`
//! ([`bcd_converters::megatron_source`]); local only (the `.bin` is read by
//! positioned reads).

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use bcd_converters::megatron_index::MAGIC;
use bcd_converters::megatron_source::{dataset_files, MegatronSource};
use bcd_converters::Source;

use super::{Format, OptionSpec, Probe, Sign, SourceName};
use crate::source_errors::SourceSetupError;
use crate::source_format::SourceFormat;
use crate::source_options::SourceOptions;

#[allow(non_upper_case_globals)]
impl SourceFormat {
    /// Megatron indexed datasets (`PREFIX.bin` + `PREFIX.idx`): one record per
    /// sequence of tokens.
    pub const Megatron: SourceFormat = SourceFormat::named("megatron");
}

/// The descriptor of [`SourceFormat::Megatron`].
pub(crate) struct Megatron;

/// It takes no options: the `.idx` says everything.
static OPTIONS: &[OptionSpec] = &[];

/// Whether `path` is a regular file starting with the `MMIDIDX` magic. A FIFO
/// or device is never opened.
fn starts_with_magic(path: &Path) -> std::io::Result<bool> {
    if !std::fs::metadata(path)?.is_file() {
        return Ok(false);
    }
    let mut head = Vec::with_capacity(MAGIC.len());
    std::fs::File::open(path)?
        .take(MAGIC.len() as u64)
        .read_to_end(&mut head)?;
    Ok(head == MAGIC)
}

impl Format for Megatron {
    fn format(&self) -> SourceFormat {
        SourceFormat::Megatron
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn name_sign(&self, name: &SourceName<'_>, _options: &SourceOptions) -> Option<Sign> {
        // `PREFIX`, `PREFIX.idx` or `PREFIX.bin` naming both files, the `.idx` a
        // Megatron one: no suffix of its own says it, the pair on disk does.
        let (idx, bin) = dataset_files(Path::new(name.raw));
        let pair = bin.is_file() && starts_with_magic(&idx).unwrap_or(false);
        pair.then_some(Sign::Name)
    }

    fn disk_sign(&self, probe: &Probe<'_>) -> std::io::Result<Option<Sign>> {
        if probe.is_dir {
            return Ok(None);
        }
        Ok(starts_with_magic(probe.path)?.then_some(Sign::Content))
    }

    fn open(
        &self,
        sources: &[&OsStr],
        _options: &SourceOptions,
        _target: Option<&Path>,
    ) -> Result<Box<dyn Source>, SourceSetupError> {
        let names: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Ok(Box::new(MegatronSource::new(&names)))
    }
}
