//! Tar archives and WebDataset shards: `.tar`, `.tar.gz`/`.tgz`, `.tar.zst`, or `-`
//! for stdin, several in order, with brace ranges (`shards-{000000..000123}.tar`).
//! Compression is recognised by its magic bytes, not the name. ustar, GNU (long
//! names) and PAX headers are read by the `tar` crate.
//!
//! Regular files become records keyed by member path (a leading `./` dropped);
//! directories are passed over; other member types (links, devices, FIFOs, sparse
//! files) are skipped and counted.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use tar::EntryType;

use crate::{brace, Origin, Record, Skipped, Source, SourceError};

/// Largest member accepted: one value of the store is at most 4 GiB.
pub const MAX_MEMBER_SIZE: u64 = u32::MAX as u64;
/// Records read ahead of the consumer (bounds memory to this many members).
const READ_AHEAD: usize = 8;

enum Message {
    Record(Result<Record, SourceError>),
    Skipped(&'static str),
}

/// Streams the regular-file members of one or more archives, reading on a
/// background thread so decompression overlaps the consumer's work.
pub struct TarSource {
    receiver: Receiver<Message>,
    reader: Option<JoinHandle<()>>,
    skipped: Skipped,
    done: bool,
}

impl TarSource {
    /// A source over `inputs` (paths, brace patterns, or `-` for stdin), in order.
    /// Every name is expanded and every file checked to exist before anything is read.
    pub fn new(inputs: &[String]) -> Result<TarSource, SourceError> {
        let mut archives = VecDeque::new();
        for input in inputs {
            for name in brace::expand(input).map_err(SourceError::Usage)? {
                if name != "-" {
                    std::fs::metadata(&name).map_err(|source| SourceError::Io {
                        path: PathBuf::from(&name),
                        source,
                    })?;
                }
                archives.push_back(name);
            }
        }
        if archives.iter().filter(|a| *a == "-").count() > 1 {
            return Err(SourceError::Usage("stdin (-) can be read only once".into()));
        }
        let (sender, receiver) = sync_channel(READ_AHEAD);
        let reader = std::thread::Builder::new()
            .name("tar-reader".into())
            .spawn(move || read_archives(archives, &sender))
            .map_err(|source| SourceError::Io {
                path: PathBuf::from("tar-reader thread"),
                source,
            })?;
        Ok(TarSource {
            receiver,
            reader: Some(reader),
            skipped: Skipped::default(),
            done: false,
        })
    }
}

impl Iterator for TarSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.receiver.recv() {
                Ok(Message::Skipped(kind)) => self.skipped.add(kind),
                Ok(Message::Record(record)) => {
                    self.done = record.is_err();
                    return Some(record);
                }
                Err(_) => {
                    self.done = true;
                    if let Some(reader) = self.reader.take() {
                        if reader.join().is_err() {
                            return Some(Err(SourceError::Usage(
                                "internal error: the tar reader thread panicked".into(),
                            )));
                        }
                    }
                }
            }
        }
        None
    }
}

impl Source for TarSource {
    fn keyed(&self) -> bool {
        true
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }
}

/// Reads each archive in turn; stops at the first error or when the consumer is gone.
fn read_archives(archives: VecDeque<String>, sender: &SyncSender<Message>) {
    for name in archives {
        if let Err(error) = read_archive(&name, sender) {
            let _ = sender.send(Message::Record(Err(error)));
            return;
        }
    }
}

/// Opens `name` (or stdin) and undoes gzip or zstd compression, found by magic bytes.
fn open_archive(name: &str) -> Result<Box<dyn Read>, SourceError> {
    let io_error = |source| SourceError::Io {
        path: PathBuf::from(name),
        source,
    };
    let raw: Box<dyn Read> = if name == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(name).map_err(io_error)?)
    };
    let mut reader = BufReader::with_capacity(1 << 20, raw);
    let magic = reader.fill_buf().map_err(io_error)?;
    Ok(if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(reader))
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::stream::read::Decoder::with_buffer(reader).map_err(io_error)?)
    } else if magic.starts_with(b"BZh") || magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z']) {
        return Err(SourceError::Usage(format!(
            "{name}: bzip2 and xz archives are not supported; decompress it first (or pipe it to `bcd ingest -`)"
        )));
    } else {
        Box::new(reader)
    })
}

fn read_archive(name: &str, sender: &SyncSender<Message>) -> Result<(), SourceError> {
    let corrupt = |location: String, error: io::Error| SourceError::Corrupt {
        archive: name.to_owned(),
        location,
        reason: error.to_string(),
    };
    let mut archive = tar::Archive::new(open_archive(name)?);
    let entries = archive
        .entries()
        .map_err(|e| corrupt("at byte 0".into(), e))?;
    // Where to point when the next header cannot be read.
    let mut last = String::from("at the first header");
    for entry in entries {
        let mut entry = entry.map_err(|e| corrupt(last.clone(), e))?;
        let offset = entry.raw_header_position();
        let mut path = entry.path_bytes().into_owned();
        while path.starts_with(b"./") {
            path.drain(..2);
        }
        let member = String::from_utf8_lossy(&path).into_owned();
        last = format!("after member {member:?} (header at byte {offset})");
        let origin = Origin::Member {
            archive: name.to_owned(),
            member: member.clone(),
            offset,
        };
        let skipped = match entry.header().entry_type() {
            EntryType::Regular | EntryType::Continuous => None,
            EntryType::Directory => continue,
            EntryType::Symlink => Some("symlink"),
            EntryType::Link => Some("hard link"),
            EntryType::Char | EntryType::Block => Some("device"),
            EntryType::Fifo => Some("fifo"),
            EntryType::GNUSparse => Some("sparse file"),
            _ => Some("other member type"),
        };
        if let Some(kind) = skipped {
            if sender.send(Message::Skipped(kind)).is_err() {
                return Ok(());
            }
            continue;
        }
        if path.is_empty() || path == b"." {
            return Err(SourceError::Corrupt {
                archive: name.to_owned(),
                location: format!("member at byte {offset}"),
                reason: "a regular file with an empty name".into(),
            });
        }
        let size = entry.size();
        if size > MAX_MEMBER_SIZE {
            return Err(SourceError::Corrupt {
                archive: name.to_owned(),
                location: format!("member {member:?} (header at byte {offset})"),
                reason: format!("{size} bytes is larger than a value can be (4 GiB)"),
            });
        }
        // Never trust the header's size for the allocation: grow as data arrives.
        let mut value = Vec::with_capacity(size.min(64 << 20) as usize);
        entry
            .read_to_end(&mut value)
            .map_err(|e| corrupt(format!("member {member:?} (header at byte {offset})"), e))?;
        if value.len() as u64 != size {
            return Err(corrupt(
                format!("member {member:?} (header at byte {offset})"),
                io::Error::new(io::ErrorKind::UnexpectedEof, "member data ends early"),
            ));
        }
        let record = Record {
            key: path,
            value,
            origin,
        };
        if sender.send(Message::Record(Ok(record))).is_err() {
            return Ok(()); // the consumer stopped
        }
    }
    // Read on past the end-of-archive blocks to the end of the stream, so that a
    // gzip or zstd decoder reaches its trailer and checks the data's checksum: a
    // corrupt .tar.gz must fail, not be ingested.
    io::copy(&mut archive.into_inner(), &mut io::sink()).map_err(|e| corrupt(last, e))?;
    Ok(())
}
