//! Downloads: one file from the store into a local file, in one request or in
//! parallel ranges, checked against its size and stored checksum.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::GetOptions;

use crate::error::{RemoteError, Result};
use crate::objects::{same_content, time_of, DataClaim, Stamp};
use crate::transfer::Context;

/// What a download checks the bytes against and what time it gives the file.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expected<'a> {
    /// This stamp, read earlier.
    Stamp(Stamp),
    /// The stamp the object's read answers with (no request of its own for
    /// objects read in one request); `times`: give the file its recorded time;
    /// `e_tag`: read only the write of the object with this ETag (another write
    /// is [`RemoteError::Changed`]).
    FromRead { times: bool, e_tag: Option<&'a str> },
}

impl Expected<'_> {
    /// The request options of a read of the object, with `range`.
    fn options(&self, range: Option<std::ops::Range<u64>>) -> GetOptions {
        GetOptions {
            if_match: match self {
                Expected::FromRead { e_tag, .. } => e_tag.map(str::to_owned),
                Expected::Stamp(_) => None,
            },
            range: range.map(Into::into),
            ..GetOptions::default()
        }
    }
}

/// What a download got: the checksum of the bytes written, when known (always
/// for objects that carry one), and what the object (a shard's `.idx`) says of
/// its shard's data object, when the read answered with it (a read in one
/// request).
pub(crate) struct Downloaded {
    pub(crate) xxh3: Option<u64>,
    pub(crate) claim: Option<DataClaim>,
}

/// Downloads object `name` (`size` bytes) into `dest`, creating or truncating it,
/// and fsyncs it; checks the size and, when the object has one, its checksum
/// (see [`Expected`]); gives the file the recorded modification time. On
/// failure `dest` is removed.
pub(crate) async fn download(
    ctx: &Context<'_>,
    name: &str,
    size: u64,
    expected: Expected<'_>,
    dest: &Path,
) -> Result<Downloaded> {
    ctx.check_interrupt()?;
    let result = download_into(ctx, name, size, expected, dest).await;
    if result.is_err() {
        // Bytes that failed their check, or a part of the file: never left for
        // anything to take for the object (best effort).
        let _ = std::fs::remove_file(dest);
    }
    result
}

async fn download_into(
    ctx: &Context<'_>,
    name: &str,
    size: u64,
    expected: Expected<'_>,
    dest: &Path,
) -> Result<Downloaded> {
    let uri = ctx.remote.object_uri(name);
    let location = ctx.remote.path(name);
    // A file already at `dest` is a leftover (of an interrupted pull, or a hard
    // link a killed merge left to another dataset's shard): unlinked, never
    // written through, as the store's `Storage::create` does.
    match std::fs::remove_file(dest) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(RemoteError::io(dest, "remove", e))
        }
        _ => {}
    }
    let file = Arc::new(
        OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .open(dest)
            .map_err(|e| RemoteError::io(dest, "create", e))?,
    );
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let times = match expected {
        Expected::Stamp(_) | Expected::FromRead { times: true, .. } => true,
        Expected::FromRead { times: false, .. } => false,
    };
    let stamp;
    let checksum;
    let mut claim = None;
    if size > ctx.options.multipart_threshold {
        // Read in ranges, which answer without the stamp: one request for it.
        stamp = match expected {
            Expected::Stamp(stamp) => stamp,
            Expected::FromRead { .. } => ctx.remote.stamp(name).await?,
        };
        file.set_len(size)
            .map_err(|e| RemoteError::io(dest, "write", e))?;
        let ranges = size.div_ceil(ctx.options.part_size);
        futures::stream::iter(0..ranges)
            .map(|range| {
                let start = range * ctx.options.part_size;
                let end = (start + ctx.options.part_size).min(size);
                let file = file.clone();
                let location = location.clone();
                let uri = uri.clone();
                async move {
                    ctx.check_interrupt()?;
                    let _permit = ctx.permit().await;
                    let read = |e| read_error(&uri, e);
                    let bytes = ctx
                        .store()
                        .get_opts(&location, expected.options(Some(start..end)))
                        .await
                        .map_err(read)?
                        .bytes()
                        .await
                        .map_err(read)?;
                    if bytes.len() as u64 != end - start {
                        return Err(short(&uri, start, end, bytes.len()));
                    }
                    file.write_all_at(&bytes, start)
                        .map_err(|e| RemoteError::io(dest, "write", e))?;
                    // The fsync at the end then waits for the last range only.
                    bcd::storage::start_writeback(&file, start, end);
                    ctx.moved(end - start);
                    Ok(())
                }
            })
            .buffer_unordered(ctx.options.concurrency.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        if stamp.xxh3.is_some() {
            let (xxh3, _) = crate::objects::file_checksum(dest)?;
            check_checksum(&uri, stamp, Some(xxh3))?;
        }
        checksum = stamp.xxh3;
    } else {
        let _permit = ctx.permit().await;
        let result = ctx
            .store()
            .get_opts(&location, expected.options(None))
            .await
            .map_err(|e| read_error(&uri, e))?;
        stamp = match expected {
            Expected::Stamp(stamp) => stamp,
            Expected::FromRead { .. } => Stamp::from_attributes(&result.attributes),
        };
        claim = DataClaim::from_attributes(&result.attributes);
        let mut stream = result.into_stream();
        let mut written = 0u64;
        // Writeback is started as the bytes arrive: the fsync at the end then
        // waits for the last few MiB, not the whole file (which is what the
        // first read of a cold shard waits for).
        let mut kicked = 0u64;
        let mut out = &*file;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| RemoteError::store(&uri, "read", e))?;
            written += chunk.len() as u64;
            if written > size {
                return Err(short(&uri, 0, size, written as usize));
            }
            hasher.update(&chunk);
            out.write_all(&chunk)
                .map_err(|e| RemoteError::io(dest, "write", e))?;
            if written - kicked >= bcd::storage::WRITEBACK_EVERY {
                bcd::storage::start_writeback(&file, kicked, written);
                kicked = written;
            }
        }
        if written != size {
            return Err(short(&uri, 0, size, written as usize));
        }
        ctx.moved(size);
        check_checksum(&uri, stamp, Some(hasher.digest()))?;
        checksum = Some(hasher.digest());
    }
    let dest_owned = dest.to_owned();
    tokio::task::spawn_blocking(move || {
        if let Some(mtime) = stamp.mtime_ns.filter(|_| times) {
            file.set_modified(time_of(mtime))
                .map_err(|e| RemoteError::io(&dest_owned, "set the modification time of", e))?;
        }
        file.sync_all()
            .map_err(|e| RemoteError::io(&dest_owned, "fsync", e))
    })
    .await
    .expect("the fsync task does not panic")?;
    Ok(Downloaded {
        xxh3: checksum,
        claim,
    })
}

/// A failed read of `uri`: [`RemoteError::Changed`] when the object is no
/// longer the write asked for.
fn read_error(uri: &str, error: object_store::Error) -> RemoteError {
    match error {
        object_store::Error::Precondition { .. } => RemoteError::Changed {
            uri: uri.to_owned(),
        },
        other => RemoteError::store(uri, "read", other),
    }
}

fn short(uri: &str, start: u64, end: u64, got: usize) -> RemoteError {
    RemoteError::Corrupt {
        uri: uri.to_owned(),
        reason: format!(
            "bytes {start}..{end} read as {got} bytes: the object changed while being copied"
        ),
    }
}

fn check_checksum(uri: &str, stamp: Stamp, found: Option<u64>) -> Result<()> {
    match (stamp.xxh3, found) {
        (Some(expected), Some(found)) if !same_content(stamp, found) => Err(RemoteError::Corrupt {
            uri: uri.to_owned(),
            reason: format!(
                "its bytes have checksum {found:016x}, but it was uploaded with {expected:016x}"
            ),
        }),
        _ => Ok(()),
    }
}
