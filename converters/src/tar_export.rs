//! Writing records to tar archives: deterministic (fixed mtime, uid, gid, mode),
//! GNU long names for paths over 100 bytes, optionally split into several archives
//! for WebDataset readers. A file target is written under a temporary name and
//! renamed into place when complete, so a failed export leaves no partial archive.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

pub use crate::member_names::{clean_name, unsafe_reason, UniqueNames};

/// Modification time written into every header (the Unix epoch), so output is
/// byte-identical across runs.
pub(crate) const FIXED_MTIME: u64 = 0;
/// Mode of every member.
pub(crate) const FIXED_MODE: u32 = 0o644;

/// Where archives go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Standard output (one archive, no splitting).
    Stdout,
    /// One archive at this path.
    File(PathBuf),
    /// Numbered archives: the pattern holds one `%d` or `%0Nd` (`shards-%06d.tar`).
    Pattern(String),
}

/// When to start the next archive of a [`Target::Pattern`]: whichever limit is
/// reached first. A member is never split, so an archive may exceed `max_bytes`
/// by one member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Payload bytes per archive.
    pub max_bytes: Option<u64>,
    /// Members per archive.
    pub max_members: Option<u64>,
}

/// Export failures; each names the file or the record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// A key that would be a dangerous or invalid member name.
    #[error("record {index}: key {key:?} is not a safe member name ({reason}); pass `rename_unsafe` to export it under a cleaned name")]
    UnsafeName {
        /// Record number.
        index: u64,
        /// The key, lossily decoded.
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// Writing the output failed: creating, writing, syncing or renaming an archive,
    /// or writing to standard output (a closed pipe is
    /// [`io::ErrorKind::BrokenPipe`] here).
    #[error("{}: writing failed", path.display())]
    Write {
        /// The archive being written (`-` for standard output).
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The target cannot be written as an archive (a directory, a name ending in
    /// `/`, `.` or `..`, a missing parent directory, an existing file that is not a
    /// regular file). Nothing was written. A usage error.
    #[error("{}: {reason}", path.display())]
    BadTarget {
        /// The target as given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A numbered target's pattern is malformed. A usage error.
    #[error("{pattern:?}: {reason}; a numbered target needs exactly one %d or %0Nd (N at most {MAX_PATTERN_WIDTH}), e.g. shards-%06d.tar")]
    BadPattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Splitting was asked for without a numbered target. A usage error.
    #[error("splitting needs a numbered file target such as shards-%06d.tar (given {target})")]
    SplitNeedsPattern {
        /// The target given, as text.
        target: String,
    },
}

impl ExportError {
    /// Whether the options themselves cannot work (target, pattern, splitting),
    /// found before anything was written: a front end reports these as usage
    /// errors.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ExportError::BadTarget { .. }
                | ExportError::BadPattern { .. }
                | ExportError::SplitNeedsPattern { .. }
        )
    }
}

/// Widest `%0Nd` accepted: a u64 has at most 20 decimal digits.
pub(crate) const MAX_PATTERN_WIDTH: usize = 20;

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Members written.
    pub members: u64,
    /// Payload bytes written.
    pub bytes: u64,
    /// Members whose names were cleaned (with `rename_unsafe`).
    pub renamed: u64,
    /// Archives written (empty for stdout).
    pub archives: Vec<PathBuf>,
}

/// The writer under an archive's builder. `Abandoned` swallows what the builder
/// writes when it is dropped (its end-of-archive blocks), so that a failed export
/// to standard output does not end in what looks like a complete archive.
enum Output {
    Stdout(BufWriter<io::Stdout>),
    File(BufWriter<File>),
    Abandoned,
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Stdout(w) => w.write(buf),
            Output::File(w) => w.write(buf),
            Output::Abandoned => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Stdout(w) => w.flush(),
            Output::File(w) => w.flush(),
            Output::Abandoned => Ok(()),
        }
    }
}

/// A temporary archive, removed when dropped unless it was renamed into place.
pub(crate) struct Partial {
    pub(crate) tmp: PathBuf,
    pub(crate) committed: bool,
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The archive being written.
struct Open {
    /// Taken out when the archive is closed.
    builder: Option<tar::Builder<Output>>,
    /// The final path (`-` for stdout).
    path: PathBuf,
    /// The temporary file (None for stdout).
    partial: Option<Partial>,
    bytes: u64,
    members: u64,
    /// Members, or with [`TarExporter::add_sample`] samples, for splitting.
    units: u64,
}

impl Drop for Open {
    /// An archive dropped before it was closed is abandoned: nothing more reaches
    /// its output, and its temporary file is removed (by `partial`, dropped next).
    fn drop(&mut self) {
        if let Some(builder) = &mut self.builder {
            *builder.get_mut() = Output::Abandoned;
        }
    }
}

/// Writes members to one or more tar archives.
pub struct TarExporter {
    target: Target,
    split: Split,
    rename_unsafe: bool,
    current: Option<Open>,
    next_archive: u64,
    /// Names written or to be written, to keep renamed names unique (only with
    /// rename_unsafe).
    names: UniqueNames,
    summary: ExportSummary,
}

impl TarExporter {
    /// An exporter to `target`. Splitting needs a [`Target::Pattern`]. The target
    /// is checked before anything is written: a pattern must hold exactly one `%d`
    /// or `%0Nd`, and a file target (or a pattern's first archive) must not be a
    /// directory, end in `/`, be `.` or `..`, or lie in a missing directory.
    pub fn new(
        target: Target,
        split: Split,
        rename_unsafe: bool,
    ) -> Result<TarExporter, ExportError> {
        let splitting = split.max_bytes.is_some() || split.max_members.is_some();
        match &target {
            Target::Pattern(pattern) => {
                let first = format_pattern(pattern, 0)?;
                check_target(Path::new(&first), pattern)?;
            }
            _ if splitting => {
                return Err(ExportError::SplitNeedsPattern {
                    target: match &target {
                        Target::File(path) => path.display().to_string(),
                        _ => "standard output".into(),
                    },
                })
            }
            Target::File(path) => check_target(path, &path.to_string_lossy())?,
            Target::Stdout => {}
        }
        Ok(TarExporter {
            target,
            split,
            rename_unsafe,
            current: None,
            next_archive: 0,
            names: UniqueNames::default(),
            summary: ExportSummary::default(),
        })
    }

    /// Declares the names of the members to come, so that names chosen for unsafe
    /// keys (with `rename_unsafe`) avoid them too, not just the names written
    /// before. Unsafe names among them are ignored. Call before the first `add`.
    pub fn reserve_names<'a>(&mut self, names: impl IntoIterator<Item = &'a [u8]>) {
        if !self.rename_unsafe {
            return;
        }
        for name in names {
            if unsafe_reason(name).is_none() {
                self.names.reserve(name);
            }
        }
    }

    /// Adds record `index` as a member named `name`, refusing (or, with
    /// `rename_unsafe`, cleaning) unsafe names.
    pub fn add(&mut self, index: u64, name: &[u8], value: &[u8]) -> Result<(), ExportError> {
        let name = self.safe_name(index, name)?;
        self.roll_if_full(value.len() as u64)?;
        self.append(&name, value)?;
        self.count_unit();
        Ok(())
    }

    /// Adds record `index` as one WebDataset sample: `members` (name, bytes) in
    /// order, all in the same archive. With a split, [`Split::max_members`]
    /// counts samples and a sample is never split across archives. Each name is
    /// checked (or cleaned) as by [`TarExporter::add`].
    pub fn add_sample(
        &mut self,
        index: u64,
        members: &[(Vec<u8>, &[u8])],
    ) -> Result<(), ExportError> {
        let names = members
            .iter()
            .map(|(name, _)| self.safe_name(index, name).map(Cow::into_owned))
            .collect::<Result<Vec<_>, _>>()?;
        let bytes = members.iter().map(|(_, value)| value.len() as u64).sum();
        self.roll_if_full(bytes)?;
        for (name, (_, value)) in names.iter().zip(members) {
            self.append(name, value)?;
        }
        self.count_unit();
        Ok(())
    }

    /// `name`, or with `rename_unsafe` a cleaned one; an unsafe name otherwise
    /// is an error naming record `index`.
    fn safe_name<'n>(&mut self, index: u64, name: &'n [u8]) -> Result<Cow<'n, [u8]>, ExportError> {
        let mut name = Cow::Borrowed(name);
        if let Some(reason) = unsafe_reason(&name) {
            if !self.rename_unsafe {
                return Err(ExportError::UnsafeName {
                    index,
                    key: String::from_utf8_lossy(&name).into_owned(),
                    reason,
                });
            }
            name = Cow::Owned(self.names.rename(&name));
            self.summary.renamed += 1;
        } else if self.rename_unsafe {
            self.names.reserve(&name);
        }
        Ok(name)
    }

    /// One more unit (member, or sample) in the current archive, for splitting.
    fn count_unit(&mut self) {
        if let Some(open) = self.current.as_mut() {
            open.units += 1;
        }
    }

    /// Appends one member to the current archive (opening it if needed).
    fn append(&mut self, name: &[u8], value: &[u8]) -> Result<(), ExportError> {
        if self.current.is_none() {
            let open = self.open_next()?;
            self.current = Some(open);
        }
        let open = self.current.as_mut().expect("opened above");
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(value.len() as u64);
        header.set_mode(FIXED_MODE);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(FIXED_MTIME);
        let path = crate::bytes_to_path(name);
        let builder = open.builder.as_mut().expect("open until closed");
        builder
            .append_data(&mut header, &path, value)
            .map_err(|source| ExportError::Write {
                path: open.path.clone(),
                source,
            })?;
        open.bytes += value.len() as u64;
        open.members += 1;
        self.summary.members += 1;
        self.summary.bytes += value.len() as u64;
        Ok(())
    }

    fn roll_if_full(&mut self, incoming: u64) -> Result<(), ExportError> {
        let Some(open) = &self.current else {
            return Ok(());
        };
        let full = open.members > 0
            && (self.split.max_members.is_some_and(|max| open.units >= max)
                || self
                    .split
                    .max_bytes
                    .is_some_and(|max| open.bytes + incoming > max));
        if full {
            let open = self.current.take().expect("checked above");
            self.close(open)?;
        }
        Ok(())
    }

    fn open_next(&mut self) -> Result<Open, ExportError> {
        let path = match &self.target {
            Target::Stdout => {
                let stdout = BufWriter::with_capacity(1 << 20, io::stdout());
                return Ok(Open {
                    builder: Some(tar::Builder::new(Output::Stdout(stdout))),
                    path: PathBuf::from("-"),
                    partial: None,
                    bytes: 0,
                    members: 0,
                    units: 0,
                });
            }
            Target::File(path) => path.clone(),
            Target::Pattern(pattern) => PathBuf::from(format_pattern(pattern, self.next_archive)?),
        };
        self.next_archive += 1;
        let tmp = temporary_path(&path);
        // Name the file the user asked for, not the temporary one.
        let file = File::create(&tmp).map_err(|source| ExportError::Write {
            path: path.clone(),
            source,
        })?;
        let partial = Partial {
            tmp,
            committed: false,
        };
        let writer = Output::File(BufWriter::with_capacity(1 << 20, file));
        Ok(Open {
            builder: Some(tar::Builder::new(writer)),
            path,
            partial: Some(partial),
            bytes: 0,
            members: 0,
            units: 0,
        })
    }

    /// Ends `open`'s archive: the end blocks, a flush, and for a file an fsync,
    /// the rename into place and an fsync of its directory. On any failure the
    /// temporary file is removed (when `open` drops).
    fn close(&mut self, mut open: Open) -> Result<(), ExportError> {
        let write_error = |source| ExportError::Write {
            path: open.path.clone(),
            source,
        };
        let builder = open.builder.take().expect("open until closed");
        match builder.into_inner().map_err(write_error)? {
            Output::Stdout(mut stdout) => stdout.flush().map_err(write_error)?,
            Output::File(writer) => {
                let file = writer
                    .into_inner()
                    .map_err(|e| write_error(e.into_error()))?;
                file.sync_all().map_err(write_error)?;
                drop(file);
                let partial = open.partial.as_mut().expect("a file has a temporary");
                std::fs::rename(&partial.tmp, &open.path).map_err(write_error)?;
                partial.committed = true;
                sync_parent(&open.path).map_err(write_error)?;
                self.summary.archives.push(open.path.clone());
            }
            Output::Abandoned => unreachable!("only a dropped archive is abandoned"),
        }
        Ok(())
    }

    /// Ends the last archive (an empty export still writes one valid, empty archive)
    /// and returns what was written.
    pub fn finish(mut self) -> Result<ExportSummary, ExportError> {
        let open = match self.current.take() {
            Some(open) => open,
            None => self.open_next()?,
        };
        self.close(open)?;
        Ok(std::mem::take(&mut self.summary))
    }
}

/// Makes a rename in `path`'s directory durable.
pub(crate) fn sync_parent(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        File::open(parent)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

pub(crate) fn temporary_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial"))
}

/// Refuses an archive path that cannot be written by a rename into place: one
/// ending in `/` or naming `.`/`..`, an existing directory or other non-regular
/// file (a device, a FIFO, a symbolic link), or a path whose directory does not
/// exist. `shown` is the target as the user gave it.
pub(crate) fn check_target(path: &Path, shown: &str) -> Result<(), ExportError> {
    let bad = |reason: &str| ExportError::BadTarget {
        path: PathBuf::from(shown),
        reason: reason.to_owned(),
    };
    let text = path.as_os_str().as_encoded_bytes();
    if text.is_empty() {
        return Err(bad("an empty path"));
    }
    if text.ends_with(b"/") || path.file_name().is_none() || text.ends_with(b"/.") || text == b"." {
        return Err(bad("names a directory, not an archive file"));
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => return Err(bad("is a directory, not an archive file")),
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(bad(
                "is a symbolic link; name the file it points to (export replaces the target by a rename)",
            ))
        }
        Ok(meta) if !meta.is_file() => {
            return Err(bad(
                "is not a regular file (a device, FIFO or socket); export writes archives by renaming a new file into place",
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(bad(&e.to_string())),
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(bad(&format!(
            "its directory {} does not exist",
            parent.display()
        )));
    }
    Ok(())
}

/// Substitutes `n` for the pattern's one `%d` / `%0Nd`.
fn format_pattern(pattern: &str, n: u64) -> Result<String, ExportError> {
    let bad = |reason: &str| ExportError::BadPattern {
        pattern: pattern.to_owned(),
        reason: reason.to_owned(),
    };
    let start = pattern.find('%').ok_or_else(|| bad("no %d"))?;
    let rest = &pattern[start + 1..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if rest.as_bytes().get(digits) != Some(&b'd') {
        return Err(bad("'%' is not followed by d or 0Nd"));
    }
    if rest[digits + 1..].contains('%') {
        return Err(bad("more than one '%'"));
    }
    let spec = &rest[..digits];
    let width: usize = match spec.parse::<usize>() {
        _ if spec.is_empty() => 0,
        Ok(width) if width > MAX_PATTERN_WIDTH => {
            return Err(bad(&format!("the width {width} is too large")))
        }
        Err(_) => return Err(bad(&format!("the width {spec} is too large"))),
        _ if !spec.starts_with('0') => {
            return Err(bad("a width without a leading 0 would pad with spaces"))
        }
        Ok(width) => width,
    };
    Ok(format!(
        "{}{n:0width$}{}",
        &pattern[..start],
        &rest[digits + 1..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_number_archives() {
        assert_eq!(format_pattern("s-%06d.tar", 7).unwrap(), "s-000007.tar");
        assert_eq!(format_pattern("%d.tar", 12).unwrap(), "12.tar");
        assert_eq!(
            format_pattern("s-%020d", u64::MAX).unwrap(),
            "s-18446744073709551615"
        );
        for bad in [
            "s.tar",
            "s-%x.tar",
            "%d-%d.tar",
            "%06.tar",
            "x-%70000d.tar",
            "x-%070000d.tar",
            "x-%021d.tar",
            "x-%6d.tar",
            "x-%099999999999999999999999d.tar",
            "%",
        ] {
            let error = format_pattern(bad, 0).unwrap_err();
            assert!(error.is_usage(), "{bad}: {error}");
        }
    }
}
