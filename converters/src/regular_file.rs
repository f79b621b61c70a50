//! Opening a file whose path came from data (a CSV row) or from a directory
//! the user named (an index, a chunk): only a regular file is read, and nothing
//! here can block. A file is read whole within a limit ([`read_bounded`]) or
//! mapped ([`map_bounded`]).
//!
//! A FIFO blocks an `open` for reading until a writer appears, and a read of
//! `/dev/zero` never ends, so the type is checked before the file is opened, the
//! open itself does not block (`O_NONBLOCK`), and the opened descriptor is checked
//! again (`fstat`), which closes the race with a rename between the two. A symbolic
//! link to a regular file is followed and read.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

use bytes::Bytes;

use crate::{SourceError, MAX_VALUE_SIZE};

/// Why [`read_regular`] read nothing.
#[derive(Debug)]
pub enum ReadRegularError {
    /// The file could not be examined, opened or read.
    Io(io::Error),
    /// It is not a regular file: what it is ("a FIFO", ...).
    NotRegular(&'static str),
    /// It holds more than [`MAX_VALUE_SIZE`] bytes (at least this many).
    TooLarge(u64),
}

/// What a non-regular file is, for messages; `None` for a regular file.
pub(crate) fn special_kind(metadata: &Metadata) -> Option<&'static str> {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO");
        }
        if file_type.is_char_device() {
            return Some("a character device");
        }
        if file_type.is_block_device() {
            return Some("a block device");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
    }
    Some("a special file")
}

/// Opens `path` for reading if it is a regular file (following symbolic links),
/// without blocking on a FIFO or device; returns it with its size.
pub fn open_regular(path: &Path) -> Result<(File, u64), ReadRegularError> {
    // stat first: a FIFO is refused before any open.
    let before = std::fs::metadata(path).map_err(ReadRegularError::Io)?;
    if let Some(kind) = special_kind(&before) {
        return Err(ReadRegularError::NotRegular(kind));
    }
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // If the path was swapped for a FIFO since the stat, the open must not wait
        // for a writer. On a regular file O_NONBLOCK changes nothing.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(ReadRegularError::Io)?;
    let opened = file.metadata().map_err(ReadRegularError::Io)?;
    if let Some(kind) = special_kind(&opened) {
        return Err(ReadRegularError::NotRegular(kind));
    }
    Ok((file, opened.len()))
}

/// The source error of a file [`open_regular`] refused or could not open.
pub(crate) fn regular_error(path: &Path, error: ReadRegularError) -> SourceError {
    match error {
        ReadRegularError::Io(source) => SourceError::Io {
            path: path.to_owned(),
            source,
        },
        ReadRegularError::NotRegular(kind) => SourceError::NotRegularFile {
            file: path.display().to_string(),
            location: "opening it".into(),
            path: path.to_owned(),
            kind,
        },
        ReadRegularError::TooLarge(size) => SourceError::TooLarge {
            file: path.display().to_string(),
            location: "opening it".into(),
            what: "the file".into(),
            size,
            limit: crate::MAX_VALUE_SIZE,
        },
    }
}

/// Reads a whole regular file (see [`open_regular`]) of at most
/// [`MAX_VALUE_SIZE`] bytes; a larger one is refused before it is read.
pub(crate) fn read_regular(path: &Path) -> Result<Vec<u8>, ReadRegularError> {
    read_within(path, MAX_VALUE_SIZE)
}

/// Reads a whole regular file of at most `limit` bytes; a larger one is
/// refused before it is read (`TooLarge` then holds its size, or, for a file
/// that grew while read, at least `limit + 1`).
fn read_within(path: &Path, limit: u64) -> Result<Vec<u8>, ReadRegularError> {
    let (file, len) = open_regular(path)?;
    if len > limit {
        return Err(ReadRegularError::TooLarge(len));
    }
    // The file may grow after the fstat: read one byte past the limit to notice.
    let mut value = Vec::with_capacity(len as usize);
    file.take(limit + 1)
        .read_to_end(&mut value)
        .map_err(ReadRegularError::Io)?;
    if value.len() as u64 > limit {
        return Err(ReadRegularError::TooLarge(value.len() as u64));
    }
    Ok(value)
}

/// Reads the whole regular file at `path` (see [`open_regular`]: a FIFO or
/// device is refused unopened) of at most `limit` bytes: a larger one is
/// refused before anything is read, and one that grows past `limit` while
/// read is refused too. Errors name the file, and call it `what` ("the
/// index") when it is too large.
pub(crate) fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, SourceError> {
    read_within(path, limit).map_err(|error| match error {
        ReadRegularError::TooLarge(size) => too_large(path, what, size, limit),
        other => regular_error(path, other),
    })
}

fn too_large(path: &Path, what: &str, size: u64, limit: u64) -> SourceError {
    SourceError::TooLarge {
        file: path.display().to_string(),
        location: "the file".into(),
        what: what.into(),
        size,
        limit,
    }
}

/// Maps the whole regular file at `path` (see [`open_regular`]) of at most
/// `limit` bytes, read-only, as bytes that keep the mapping alive (slices of
/// them share it; an Arrow buffer made from them points into it). A larger
/// file is refused before it is mapped, naming it as `what`; an empty one
/// gives empty bytes (nothing can map nothing).
///
/// The pages are read on first touch: a file truncated by another process
/// while mapped makes that touch fault (SIGBUS), as the SAFETY note says.
pub(crate) fn map_bounded(path: &Path, limit: u64, what: &str) -> Result<Bytes, SourceError> {
    let (file, len) = open_regular(path).map_err(|e| regular_error(path, e))?;
    if len > limit {
        return Err(too_large(path, what, len, limit));
    }
    map_opened(path, &file, len)
}

/// Maps `file`, opened from `path` by [`open_regular`] with `len` bytes (its
/// caller bounded `len`), as [`map_bounded`] does; a file whose size changed
/// since is refused.
pub(crate) fn map_opened(path: &Path, file: &File, len: u64) -> Result<Bytes, SourceError> {
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the mapping is read-only and private to this process, and the
    // bytes are only read, never written through. The file is an input the
    // user named, which bcd never writes; what the mapping assumes is that no
    // other process truncates or rewrites it while it is read (the tools that
    // wrote it have finished). If one does, a read of a lost page faults
    // (SIGBUS) and the ingest dies before its commit, leaving the dataset
    // unchanged, as with any mmap-based reader (LitData's own maps its chunks).
    // Mapped here: LitData footer chunks and uncompressed MDS shards and
    // LitData chunks.
    let map = unsafe { memmap2::Mmap::map(file) }.map_err(|source| SourceError::Io {
        path: path.to_owned(),
        source,
    })?;
    if map.len() as u64 != len {
        return Err(SourceError::Corrupt {
            file: path.display().to_string(),
            location: "the file".into(),
            reason: format!(
                "it changed size while being opened ({len} then {} bytes)",
                map.len()
            ),
        });
    }
    Ok(Bytes::from_owner(map))
}

/// Fills `buf` from `file` at `offset`, without moving a shared cursor (the
/// Megatron `.bin`, an LMDB data file's pages).
#[cfg(unix)]
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Fills `buf` from `file` at `offset`.
#[cfg(not(unix))]
pub(crate) fn read_exact_at(mut file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_regular_files_and_links_to_them_refuses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc").unwrap();
        assert_eq!(read_regular(&file).unwrap(), b"abc");
        #[cfg(unix)]
        {
            let link = dir.path().join("l");
            std::os::unix::fs::symlink(&file, &link).unwrap();
            assert_eq!(read_regular(&link).unwrap(), b"abc");
            assert!(matches!(
                read_regular(Path::new("/dev/null")),
                Err(ReadRegularError::NotRegular("a character device"))
            ));
        }
        assert!(matches!(
            read_regular(dir.path()),
            Err(ReadRegularError::NotRegular("a directory"))
        ));
        assert!(matches!(
            read_regular(&dir.path().join("missing")),
            Err(ReadRegularError::Io(_))
        ));
    }

    /// A FIFO at `path` (no writer ever opens it: a read of it would block).
    #[cfg(unix)]
    fn fifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn read_bounded_reads_up_to_its_limit_and_refuses_more_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("index.json");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_bounded(&file, 10, "the index").unwrap(), b"0123456789");
        let error = read_bounded(&file, 9, "the index").unwrap_err();
        assert!(
            matches!(
                &error,
                SourceError::TooLarge { size: 10, limit: 9, what, .. } if what == "the index"
            ),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("index.json") && text.contains("the index of 10 bytes"),
            "{text}"
        );
        let missing = read_bounded(&dir.path().join("gone.json"), 9, "the index");
        let text = missing.unwrap_err().to_string();
        assert!(text.contains("gone.json"), "{text}");
    }

    #[cfg(unix)]
    #[test]
    fn read_bounded_and_map_bounded_refuse_a_fifo_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.json");
        fifo(&path);
        // Returns at once: the FIFO is refused before it is opened.
        for error in [
            read_bounded(&path, 1 << 20, "the index").unwrap_err(),
            map_bounded(&path, 1 << 20, "a chunk").unwrap_err(),
        ] {
            assert!(
                matches!(&error, SourceError::NotRegularFile { kind: "a FIFO", .. }),
                "{error:?}"
            );
            assert!(error.to_string().contains("index.json"), "{error}");
        }
        let error = read_bounded(Path::new("/dev/zero"), 1 << 20, "the index").unwrap_err();
        assert!(
            matches!(
                &error,
                SourceError::NotRegularFile {
                    kind: "a character device",
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn map_bounded_maps_the_file_within_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("chunk-0-0.bin");
        std::fs::write(&file, b"chunk bytes").unwrap();
        let bytes = map_bounded(&file, 11, "a chunk").unwrap();
        assert_eq!(&bytes[..], b"chunk bytes");
        // Slices share the mapping, and outlive the handle they came from.
        let tail = bytes.slice(6..);
        drop(bytes);
        assert_eq!(&tail[..], b"bytes");
        let error = map_bounded(&file, 10, "a chunk").unwrap_err();
        assert!(
            matches!(
                &error,
                SourceError::TooLarge {
                    size: 11,
                    limit: 10,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("chunk-0-0.bin"), "{error}");
        std::fs::write(&file, b"").unwrap();
        assert!(map_bounded(&file, 10, "a chunk").unwrap().is_empty());
    }
}
