//! Writing records to tar archives: deterministic (fixed mtime, uid, gid, mode),
//! GNU long names for paths over 100 bytes, optionally split into several archives
//! for WebDataset readers. A file target is written under a temporary name and
//! renamed into place when complete, so a failed export leaves no partial archive.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Modification time written into every header (the Unix epoch), so output is
/// byte-identical across runs.
pub const FIXED_MTIME: u64 = 0;
/// Mode of every member.
pub const FIXED_MODE: u32 = 0o644;

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
    #[error("record {index}: key {key:?} is not a safe member name ({reason}); pass --rename-unsafe to export it under a cleaned name")]
    UnsafeName {
        /// Record number.
        index: u64,
        /// The key, lossily decoded.
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// Writing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The archive being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A bad target pattern.
    #[error("{0}")]
    Usage(String),
}

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

/// Why a name is unsafe as a tar member, or `None` if it is fine.
pub fn unsafe_reason(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        return Some("empty");
    }
    if name.contains(&0) {
        return Some("contains a NUL byte");
    }
    if name.starts_with(b"/") {
        return Some("absolute path");
    }
    if name.ends_with(b"/") {
        return Some("ends with '/', which means a directory");
    }
    for component in name.split(|&b| b == b'/') {
        match component {
            b".." => return Some("contains a '..' component"),
            b"." | b"" => return Some("contains an empty or '.' component"),
            _ => {}
        }
    }
    None
}

/// A cleaned version of an unsafe name: empty, `.` and `..` components dropped,
/// NUL written as `%00`; `unnamed` if nothing is left.
pub fn clean_name(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for component in name.split(|&b| b == b'/') {
        if matches!(component, b"" | b"." | b"..") {
            continue;
        }
        if !out.is_empty() {
            out.push(b'/');
        }
        for &b in component {
            match b {
                0 => out.extend_from_slice(b"%00"),
                b => out.push(b),
            }
        }
    }
    if out.is_empty() {
        out.extend_from_slice(b"unnamed");
    }
    out
}

struct Open {
    builder: tar::Builder<Box<dyn Write>>,
    /// Final path and temporary path (None for stdout).
    paths: Option<(PathBuf, PathBuf)>,
    bytes: u64,
    members: u64,
}

/// Writes members to one or more tar archives.
pub struct TarExporter {
    target: Target,
    split: Split,
    rename_unsafe: bool,
    current: Option<Open>,
    next_archive: u64,
    /// Names written so far, to keep cleaned names unique (only with rename_unsafe).
    names: HashSet<Vec<u8>>,
    summary: ExportSummary,
}

impl TarExporter {
    /// An exporter to `target`. Splitting needs a [`Target::Pattern`].
    pub fn new(
        target: Target,
        split: Split,
        rename_unsafe: bool,
    ) -> Result<TarExporter, ExportError> {
        let splitting = split.max_bytes.is_some() || split.max_members.is_some();
        match &target {
            Target::Pattern(pattern) => {
                format_pattern(pattern, 0)?;
            }
            _ if splitting => {
                return Err(ExportError::Usage(
                    "splitting needs a numbered target such as --to shards-%06d.tar".into(),
                ))
            }
            _ => {}
        }
        Ok(TarExporter {
            target,
            split,
            rename_unsafe,
            current: None,
            next_archive: 0,
            names: HashSet::new(),
            summary: ExportSummary::default(),
        })
    }

    /// Adds record `index` as a member named `name`, refusing (or, with
    /// `rename_unsafe`, cleaning) unsafe names.
    pub fn add(&mut self, index: u64, name: &[u8], value: &[u8]) -> Result<(), ExportError> {
        let mut name = Cow::Borrowed(name);
        if let Some(reason) = unsafe_reason(&name) {
            if !self.rename_unsafe {
                return Err(ExportError::UnsafeName {
                    index,
                    key: String::from_utf8_lossy(&name).into_owned(),
                    reason,
                });
            }
            let mut cleaned = clean_name(&name);
            if self.names.contains(&cleaned) {
                cleaned.extend_from_slice(format!(".{index}").as_bytes());
            }
            name = Cow::Owned(cleaned);
            self.summary.renamed += 1;
        }
        if self.rename_unsafe {
            self.names.insert(name.to_vec());
        }
        self.roll_if_full(value.len() as u64)?;
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
        let path = crate::bytes_to_path(&name);
        let result = open.builder.append_data(&mut header, &path, value);
        let archive_path = open
            .paths
            .as_ref()
            .map_or_else(|| PathBuf::from("-"), |p| p.0.clone());
        result.map_err(|source| ExportError::Io {
            path: archive_path,
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
            && (self
                .split
                .max_members
                .is_some_and(|max| open.members >= max)
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
                let stdout: Box<dyn Write> =
                    Box::new(BufWriter::with_capacity(1 << 20, io::stdout()));
                return Ok(Open {
                    builder: tar::Builder::new(stdout),
                    paths: None,
                    bytes: 0,
                    members: 0,
                });
            }
            Target::File(path) => path.clone(),
            Target::Pattern(pattern) => PathBuf::from(format_pattern(pattern, self.next_archive)?),
        };
        self.next_archive += 1;
        let tmp = temporary_path(&path);
        // Name the file the user asked for, not the temporary one.
        let file = File::create(&tmp).map_err(|source| ExportError::Io {
            path: path.clone(),
            source,
        })?;
        let writer: Box<dyn Write> = Box::new(BufWriter::with_capacity(1 << 20, file));
        Ok(Open {
            builder: tar::Builder::new(writer),
            paths: Some((path, tmp)),
            bytes: 0,
            members: 0,
        })
    }

    fn close(&mut self, open: Open) -> Result<(), ExportError> {
        let label = open
            .paths
            .as_ref()
            .map_or_else(|| PathBuf::from("-"), |p| p.0.clone());
        let io_error = |source| ExportError::Io {
            path: label.clone(),
            source,
        };
        let mut writer = open.builder.into_inner().map_err(io_error)?;
        writer.flush().map_err(io_error)?;
        drop(writer);
        if let Some((path, tmp)) = open.paths {
            std::fs::rename(&tmp, &path).map_err(io_error)?;
            self.summary.archives.push(path);
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

impl Drop for TarExporter {
    /// An unfinished export removes its temporary file; finished archives stay.
    fn drop(&mut self) {
        if let Some(Open {
            paths: Some((_, tmp)),
            ..
        }) = self.current.take()
        {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

fn temporary_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial"))
}

/// Substitutes `n` for the pattern's one `%d` / `%0Nd`.
fn format_pattern(pattern: &str, n: u64) -> Result<String, ExportError> {
    let bad = || {
        ExportError::Usage(format!(
            "{pattern:?} needs exactly one %d or %0Nd for the archive number, e.g. shards-%06d.tar"
        ))
    };
    let start = pattern.find('%').ok_or_else(bad)?;
    let rest = &pattern[start + 1..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if rest.as_bytes().get(digits) != Some(&b'd') || rest[digits + 1..].contains('%') {
        return Err(bad());
    }
    let width: usize = if digits == 0 {
        0
    } else {
        rest[..digits].parse().map_err(|_| bad())?
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
    fn unsafe_names_are_recognised_and_cleaned() {
        for (name, cleaned) in [
            (&b"/etc/passwd"[..], &b"etc/passwd"[..]),
            (b"a/../../b", b"a/b"),
            (b"", b"unnamed"),
            (b"x\0y", b"x%00y"),
            (b"./a", b"a"),
            (b"d/", b"d"),
        ] {
            assert!(unsafe_reason(name).is_some(), "{name:?}");
            assert_eq!(clean_name(name), cleaned);
        }
        for fine in [
            &b"a"[..],
            b"train/cat/1.jpg",
            b"..hidden",
            b"a..b/c",
            b"\xff",
        ] {
            assert_eq!(unsafe_reason(fine), None, "{fine:?}");
        }
    }

    #[test]
    fn patterns_number_archives() {
        assert_eq!(format_pattern("s-%06d.tar", 7).unwrap(), "s-000007.tar");
        assert_eq!(format_pattern("%d.tar", 12).unwrap(), "12.tar");
        for bad in ["s.tar", "s-%x.tar", "%d-%d.tar", "%06.tar"] {
            assert!(format_pattern(bad, 0).is_err(), "{bad}");
        }
    }
}
