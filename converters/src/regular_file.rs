//! Opening a file whose path came from data (a CSV row), not from the user's
//! command line: only a regular file is read, and nothing here can block.
//!
//! A FIFO blocks an `open` for reading until a writer appears, and a read of
//! `/dev/zero` never ends, so the type is checked before the file is opened, the
//! open itself does not block (`O_NONBLOCK`), and the opened descriptor is checked
//! again (`fstat`), which closes the race with a rename between the two. A symbolic
//! link to a regular file is followed and read.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

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
    let (file, len) = open_regular(path)?;
    if len > MAX_VALUE_SIZE {
        return Err(ReadRegularError::TooLarge(len));
    }
    // The file may grow after the fstat: read one byte past the limit to notice.
    let mut value = Vec::with_capacity(len as usize);
    file.take(MAX_VALUE_SIZE + 1)
        .read_to_end(&mut value)
        .map_err(ReadRegularError::Io)?;
    if value.len() as u64 > MAX_VALUE_SIZE {
        return Err(ReadRegularError::TooLarge(value.len() as u64));
    }
    Ok(value)
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
}
