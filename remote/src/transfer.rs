//! Moving files: the options push and pull share, the state of one transfer
//! ([`Context`]), and uploads (one request, or a multipart upload recorded in a
//! journal so that a kill's leftover can be aborted later). Downloads are in
//! `download.rs`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::multipart::PartId;
use object_store::{
    ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload,
};
use tokio::sync::Semaphore;

use crate::error::{RemoteError, Result};
use crate::objects::{is_conflict, same_content, DataClaim, Stamp};
use crate::store::{Clients, Remote};

/// Where the journal of multipart uploads in progress lives, below the prefix.
pub const UPLOADS_DIR: &str = ".bcd-uploads";

/// How transfers run.
#[derive(Clone)]
pub struct TransferOptions {
    /// Requests in flight at once (files, parts and ranges together). Default: 16.
    pub concurrency: usize,
    /// Files larger than this are uploaded in parts, and downloaded in ranges, in
    /// parallel. Default: 64 MiB.
    pub multipart_threshold: u64,
    /// Size of a part or range. Default: 16 MiB (S3 wants at least 5 MiB).
    pub part_size: u64,
    /// Set to stop the transfer at the next file or part; nothing is committed.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// Called with the bytes moved so far, after each file, part or range.
    pub progress: Option<Arc<dyn Fn(u64) + Send + Sync>>,
    /// Replace a destination that holds another dataset (not an earlier state
    /// of the source: committed files whose contents differ, other settings,
    /// more shards) instead of refusing it. A pushed prefix reads as no dataset
    /// until the new manifest is committed; a pulled directory is pulled beside
    /// it and renamed into its place. Default: false.
    pub replace: bool,
}

impl Default for TransferOptions {
    fn default() -> Self {
        TransferOptions {
            concurrency: 16,
            multipart_threshold: 64 << 20,
            part_size: 16 << 20,
            interrupt: None,
            progress: None,
            replace: false,
        }
    }
}

impl std::fmt::Debug for TransferOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferOptions")
            .field("concurrency", &self.concurrency)
            .field("multipart_threshold", &self.multipart_threshold)
            .field("part_size", &self.part_size)
            .field("replace", &self.replace)
            .finish_non_exhaustive()
    }
}

/// What a push or pull did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TransferSummary {
    /// Files copied.
    pub files: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Files already on the other side (the same content checksum).
    pub skipped: u64,
    /// Their bytes.
    pub skipped_bytes: u64,
    /// Committed shards of the destination afterwards.
    pub shards: u64,
    /// Whether a new manifest was committed (false when the destination was
    /// already up to date).
    pub committed: bool,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// State shared by the transfers of one push or pull.
pub(crate) struct Context<'a> {
    pub(crate) remote: &'a Remote,
    pub(crate) clients: Clients,
    pub(crate) options: TransferOptions,
    permits: Arc<Semaphore>,
    moved: AtomicU64,
    /// Set when one transfer failed: the others stop at their next file or part
    /// and clean up after themselves (abort their multipart uploads) rather than
    /// being dropped mid-way.
    failed: AtomicBool,
}

impl<'a> Context<'a> {
    pub(crate) fn new(remote: &'a Remote, options: TransferOptions) -> Result<Context<'a>> {
        Ok(Context {
            remote,
            clients: remote.clients()?,
            permits: Arc::new(Semaphore::new(options.concurrency.max(1))),
            options,
            moved: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        })
    }

    pub(crate) fn check_interrupt(&self) -> Result<()> {
        match &self.options.interrupt {
            Some(flag) if flag.load(Ordering::Relaxed) => Err(RemoteError::Interrupted),
            _ if self.failed.load(Ordering::Relaxed) => Err(RemoteError::Interrupted),
            _ => Ok(()),
        }
    }

    /// Runs `transfers` (at most `concurrency` at once) to their ends and returns
    /// their results in any order, or the first error. Unlike `try_collect`, a
    /// failure does not drop the transfers in flight (a dropped multipart upload
    /// stays open until a gc): it makes them stop at their next file or part,
    /// and each cleans up before this returns.
    pub(crate) async fn run_all<T, F>(
        &self,
        transfers: impl IntoIterator<Item = F>,
    ) -> Result<Vec<T>>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let results: Vec<Result<T>> = futures::stream::iter(transfers)
            .map(|transfer| async move {
                let result = transfer.await;
                if result.is_err() {
                    self.failed.store(true, Ordering::Relaxed);
                }
                result
            })
            .buffer_unordered(self.options.concurrency.max(1))
            .collect()
            .await;
        let mut done = Vec::with_capacity(results.len());
        let mut first = None;
        for result in results {
            match result {
                Ok(value) => done.push(value),
                // The others' errors are mostly the stop this one caused.
                Err(RemoteError::Interrupted) if first.is_some() => {}
                Err(e) => match &first {
                    Some(RemoteError::Interrupted) | None => first = Some(e),
                    Some(_) => {}
                },
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    pub(crate) fn moved(&self, bytes: u64) {
        let total = self.moved.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if let Some(progress) = &self.options.progress {
            progress(total);
        }
    }

    pub(crate) async fn permit(&self) -> tokio::sync::OwnedSemaphorePermit {
        self.permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    pub(crate) fn store(&self) -> &dyn ObjectStore {
        self.clients.store.as_ref()
    }
}

/// A local file to upload as object `name`.
#[derive(Clone)]
pub(crate) struct Upload {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    pub(crate) mtime_ns: Option<u64>,
    /// `Create` for a new immutable file, `Overwrite` for the persisted index.
    pub(crate) mode: PutMode,
    /// For a shard's `.idx`: what it says of the shard's data object.
    pub(crate) data: Option<DataClaim>,
}

impl Upload {
    /// The user metadata of the object: its checksum and time, and the claim
    /// of a shard's `.idx` on its data object.
    fn attributes(&self, xxh3: u64) -> object_store::Attributes {
        let mut attributes = Stamp::attributes(xxh3, self.mtime_ns);
        if let Some(claim) = &self.data {
            claim.insert_into(&mut attributes);
        }
        attributes
    }
}

/// Maps `path` on a blocking thread, checking it is `size` bytes; returns its
/// bytes and their checksum. Mapped rather than read: the pages of the page cache
/// go to the socket as they are, where a read fills (and the kernel first zeroes)
/// a fresh buffer per file, which cost a push as much CPU as signing it. The
/// files pushed are a dataset's immutable shards (and its persisted index, which
/// is replaced by a rename, never rewritten in place), mapped by every reader of
/// the store alike.
async fn map_file(path: PathBuf, size: u64) -> Result<(bytes::Bytes, u64)> {
    tokio::task::spawn_blocking(move || {
        let file = File::open(&path).map_err(|e| RemoteError::io(&path, "open", e))?;
        let len = file
            .metadata()
            .map_err(|e| RemoteError::io(&path, "stat", e))?
            .len();
        if len != size {
            return Err(changed(&path, size, len));
        }
        if size == 0 {
            return Ok((bytes::Bytes::new(), xxhash_rust::xxh3::xxh3_64(&[])));
        }
        // SAFETY: the mapping is read only, of a file the store never changes in
        // place (see above); its length was checked against the file's.
        let map =
            unsafe { memmap2::Mmap::map(&file) }.map_err(|e| RemoteError::io(&path, "map", e))?;
        let xxh3 = xxhash_rust::xxh3::xxh3_64(&map);
        Ok((bytes::Bytes::from_owner(map), xxh3))
    })
    .await
    .expect("the map task does not panic")
}

/// Runs `request` as a task of its own on the runtime's worker threads. A push or
/// pull polls its transfers from one future (on the calling thread); the client
/// does CPU work inside a request (S3 signs each payload with SHA-256), which
/// would otherwise run one request at a time there.
async fn spawned<T: Send + 'static>(
    request: impl std::future::Future<Output = object_store::Result<T>> + Send + 'static,
) -> object_store::Result<T> {
    match tokio::spawn(request).await {
        Ok(output) => output,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime shutting down cancels a task.
        Err(e) => Err(object_store::Error::Generic {
            store: "bcd",
            source: Box::new(e),
        }),
    }
}

fn changed(path: &Path, expected: u64, found: u64) -> RemoteError {
    RemoteError::io(
        path,
        "read",
        std::io::Error::other(format!(
            "the file changed while being copied ({expected} then {found} bytes)"
        )),
    )
}

/// Uploads `upload`; `before_complete` runs before a multipart upload is completed
/// (the push checks the remote manifest is still the one it read). Returns the
/// checksum stored.
pub(crate) async fn upload<F, Fut>(
    ctx: &Context<'_>,
    upload: &Upload,
    before_complete: F,
) -> Result<Uploaded>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    ctx.check_interrupt()?;
    let uri = ctx.remote.object_uri(&upload.name);
    let location = ctx.remote.path(&upload.name);
    let multipart = ctx.clients.multipart.clone();
    match multipart {
        Some(multipart) if upload.size > ctx.options.multipart_threshold => {
            let (bytes, xxh3) = map_file(upload.path.clone(), upload.size).await?;
            let options = PutMultipartOptions {
                attributes: upload.attributes(xxh3),
                ..PutMultipartOptions::default()
            };
            let id = {
                let _permit = ctx.permit().await;
                multipart
                    .create_multipart_opts(&location, options)
                    .await
                    .map_err(|e| RemoteError::store(&uri, "start a multipart upload", e))?
            };
            let journal = journal_name(&upload.name, &id);
            let entry = serde_json::json!({"name": upload.name, "upload_id": id}).to_string();
            let recorded = ctx
                .store()
                .put(
                    &ctx.remote.path(&journal),
                    PutPayload::from(entry.into_bytes()),
                )
                .await
                .map_err(|e| RemoteError::store(ctx.remote.object_uri(&journal), "upload", e));
            let result = async {
                recorded?;
                let parts = upload.size.div_ceil(ctx.options.part_size);
                let part_ids: Vec<PartId> = futures::stream::iter(0..parts)
                    .map(|part| {
                        let multipart = multipart.clone();
                        let location = location.clone();
                        let id = id.clone();
                        let uri = uri.clone();
                        let start = part * ctx.options.part_size;
                        let len = ctx.options.part_size.min(upload.size - start);
                        let bytes = bytes.slice(start as usize..(start + len) as usize);
                        async move {
                            ctx.check_interrupt()?;
                            let _permit = ctx.permit().await;
                            let part_id = spawned(async move {
                                multipart
                                    .put_part(
                                        &location,
                                        &id,
                                        part as usize,
                                        PutPayload::from(bytes),
                                    )
                                    .await
                            })
                            .await
                            .map_err(|e| RemoteError::store(&uri, "upload a part", e))?;
                            ctx.moved(len);
                            Ok::<_, RemoteError>(part_id)
                        }
                    })
                    .buffered(ctx.options.concurrency.max(1))
                    .try_collect()
                    .await?;
                // A transfer that failed meanwhile stops this one short of its
                // completion: it is aborted below.
                ctx.check_interrupt()?;
                before_complete().await?;
                let _permit = ctx.permit().await;
                let done = multipart
                    .complete_multipart(&location, &id, part_ids)
                    .await
                    .map_err(|e| RemoteError::store(&uri, "complete a multipart upload", e))?;
                Ok(done.e_tag)
            }
            .await;
            match result {
                Ok(e_tag) => {
                    let _ = ctx.store().delete(&ctx.remote.path(&journal)).await;
                    Ok(Uploaded { xxh3, e_tag })
                }
                Err(e) => {
                    // Best effort: a failed abort leaves the journal entry for the
                    // next push or gc.
                    if multipart.abort_multipart(&location, &id).await.is_ok() {
                        let _ = ctx.store().delete(&ctx.remote.path(&journal)).await;
                    }
                    Err(e)
                }
            }
        }
        _ => {
            let (bytes, xxh3) = map_file(upload.path.clone(), upload.size).await?;
            let options = PutOptions {
                mode: upload.mode.clone(),
                attributes: upload.attributes(xxh3),
                ..PutOptions::default()
            };
            let _permit = ctx.permit().await;
            let store = ctx.clients.store.clone();
            let put = spawned(async move {
                store
                    .put_opts(&location, PutPayload::from(bytes), options)
                    .await
            });
            let e_tag = match put.await {
                Ok(put) => put.e_tag,
                // Already there with these very bytes: this push's own, uploaded by
                // a run of it that was killed while the request was on its way, or
                // by a first attempt whose answer was lost before a retry.
                Err(e) if is_conflict(&e) && same_content(ctx.remote.stamp(&upload.name).await?, xxh3) => None,
                Err(e) if is_conflict(&e) => {
                    return Err(RemoteError::Conflict {
                        uri,
                        reason: "an object of other content appeared while this push uploaded it: another writer is pushing to this prefix".into(),
                    })
                }
                Err(e) => return Err(RemoteError::store(uri, "upload", e)),
            };
            ctx.moved(upload.size);
            Ok(Uploaded { xxh3, e_tag })
        }
    }
}

/// What an upload wrote: the checksum of the bytes, and the ETag the store gave
/// the object (none when the store gives none, or when the object was already
/// there with these bytes), by which the push's last check knows the object
/// is still the one it wrote.
#[derive(Clone, Debug)]
pub(crate) struct Uploaded {
    pub(crate) xxh3: u64,
    pub(crate) e_tag: Option<String>,
}

/// The journal entry's name of multipart upload `id` of object `name`.
pub(crate) fn journal_name(name: &str, id: &str) -> String {
    format!(
        "{UPLOADS_DIR}/{name}.{:016x}",
        xxhash_rust::xxh3::xxh3_64(id.as_bytes())
    )
}

/// Aborts the multipart uploads recorded in the journal (leftovers of killed
/// pushes) whose entries were written before `older_than` (`None`: all), and
/// removes their entries. Returns how many were aborted.
pub(crate) async fn abort_journaled(
    remote: &Remote,
    clients: &Clients,
    older_than: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<u64> {
    let Some(multipart) = &clients.multipart else {
        return Ok(0);
    };
    let mut aborted = 0;
    for entry in remote.list_sub(UPLOADS_DIR).await? {
        if older_than.is_some_and(|limit| entry.last_modified >= limit) {
            continue;
        }
        let journal = format!("{UPLOADS_DIR}/{}", entry.name);
        let body = match remote.read_all(&journal).await {
            Ok(body) => body,
            // Completed (and its entry removed) meanwhile.
            Err(RemoteError::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }) => continue,
            Err(e) => return Err(e),
        };
        let parsed: Option<(String, String)> = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                Some((
                    v.get("name")?.as_str()?.to_owned(),
                    v.get("upload_id")?.as_str()?.to_owned(),
                ))
            });
        if let Some((name, id)) = parsed {
            match multipart.abort_multipart(&remote.path(&name), &id).await {
                Ok(()) => aborted += 1,
                // Already gone (completed, aborted, or expired by a lifecycle rule).
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    return Err(RemoteError::store(
                        remote.object_uri(&name),
                        "abort a multipart upload",
                        e,
                    ))
                }
            }
        }
        clients
            .store
            .delete(&remote.path(&journal))
            .await
            .map_err(|e| RemoteError::store(remote.object_uri(&journal), "delete", e))?;
    }
    Ok(aborted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    fn map(path: &Path, size: u64) -> Result<(bytes::Bytes, u64)> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(map_file(path.to_owned(), size))
    }

    #[test]
    fn mapped_files_carry_their_bytes_and_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000000.bin");
        std::fs::write(&path, b"key and value").unwrap();
        let (bytes, xxh3) = map(&path, 13).unwrap();
        assert_eq!(&bytes[..], b"key and value");
        assert_eq!(xxh3, xxhash_rust::xxh3::xxh3_64(b"key and value"));
        assert_eq!(&bytes.slice(4..7)[..], b"and");
        // An empty data file (a shard of empty values, stored plainly) cannot be
        // mapped: it is sent as no bytes.
        std::fs::write(&path, b"").unwrap();
        let (bytes, xxh3) = map(&path, 0).unwrap();
        assert!(bytes.is_empty());
        assert_eq!(xxh3, xxhash_rust::xxh3::xxh3_64(b""));
    }

    #[test]
    fn a_file_of_another_size_than_listed_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000000.idx");
        std::fs::write(&path, [1u8; 8]).unwrap();
        let error = map(&path, 4).unwrap_err();
        let cause = error.source().map(ToString::to_string).unwrap_or_default();
        assert!(error.to_string().contains("000000.idx"), "{error}");
        assert!(
            cause.contains("changed while being copied (4 then 8 bytes)"),
            "{error}: {cause}"
        );
    }
}
