"""The part/commit protocol that the Ray and Spark writers share (FORMAT.md,
"Staging"), free of either engine.

A job writes into ``PATH/_staging/<job id>/``. Its driver holds the job's lock
file (``.bcd-job.lock``, an ``flock``) from the start to the commit or abort, so
``bcd gc`` leaves a running job alone. Each task attempt writes one part, a
dataset of its own, in ``<task index:06>-<attempt uuid>/``, with the Rust core
(``Dataset.extend_arrow``), and returns a small description. The driver merges
the parts of the successful attempts, in task order, into ``PATH`` in one commit
(``bcd.merge``) and removes the job's directory; parts of failed or retried
attempts are never merged. A job that fails removes its directory and commits
nothing; what a killed driver leaves, ``bcd gc`` removes.

An engine may still run a task attempt after the driver has committed or
aborted (Spark kills the other tasks of a failed job asynchronously; a
speculative attempt outlives the commit). So each attempt first makes and holds
its part's claim, ``<part>.bcd-part.lock`` beside the part, and makes the part's
directory only inside a job directory that still exists; the driver removes a
part only holding its claim, which waits for the attempt writing it (or for its
death, which releases the claim), and removes the job's directory only once it
is empty. An attempt that comes after the removal finds no job directory, or its
claim unlinked, and writes nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from . import _bcd
from ._bcd import DEFAULT_MAX_SHARD_SIZE, Dataset

ON_DUPLICATE = ("error", "skip")


class WriteSettings:
    """What every task of a job needs to write its part (picklable)."""

    def __init__(
        self,
        path: str,
        job: str,
        *,
        value_column: str,
        key_column: Optional[str],
        compression: Optional[str],
        max_shard_size: int,
        on_duplicate: str,
        keyed: bool,
        fields: Any = "all",
        dedup: Optional[str] = None,
        memory_limit: Any = None,
    ) -> None:
        self.path = path
        self.job = job
        self.value_column = value_column
        self.key_column = key_column
        self.compression = compression
        self.max_shard_size = max_shard_size
        self.on_duplicate = on_duplicate
        # None or "content": repeated values left out within each part and,
        # by the driver's merge, across parts and the target.
        self.dedup = dedup
        # The duplicate checks' memory (bytes or a size string), in each task
        # and in the driver's merge.
        self.memory_limit = memory_limit
        self.keyed = keyed
        # Which other columns become fields ("all", "none", or names), as
        # Dataset.extend_arrow takes them.
        self.fields = fields
        # Whether the job made the target's directory (set by Job.start), so
        # that an abort removes it again.
        self.created_dir = False

    @property
    def job_dir(self) -> Path:
        return Path(self.path) / _bcd.STAGING_DIR / self.job

    def write_part(self, task: int, data: Any) -> Dict[str, Any]:
        """Writes ``data`` (Arrow data: a table, batch or reader) as this task
        attempt's part; returns its description."""
        name = f"{task:06d}-{uuid.uuid4().hex}"
        part = self.job_dir / name
        with _claim(self.job_dir, name):
            try:
                # Not its parents: a job directory that is gone stays gone.
                os.mkdir(part)
                dataset = Dataset.create(
                    part,
                    keyed=self.keyed,
                    compression=self.compression,
                    max_shard_size=self.max_shard_size,
                )
                added = dataset.extend_arrow(
                    data,
                    self.value_column,
                    self.key_column,
                    on_duplicate=self.on_duplicate,
                    level=5,
                    fields=self.fields,
                    dedup=self.dedup,
                    memory_limit=self.memory_limit,
                )
                del dataset
            except BaseException:
                # A failed attempt's part is never merged: it goes now, with
                # its claim, rather than at the job's end.
                shutil.rmtree(part, ignore_errors=True)
                _unlink(self.job_dir / (name + _bcd.PART_CLAIM_SUFFIX))
                raise
        return {"task": task, "path": str(part), **added}

    def write_runs(self, task: int, batches: Iterable[Any]) -> Dict[str, Any]:
        """Writes the Arrow record batches one task received (from several blocks,
        whose columns may differ) as this task attempt's parts: one part per run
        of batches with the same columns, in order, so the merge unifies their
        schemas as it unifies the parts of different tasks (a column that one
        block lacks is null for its rows, never dropped for the others). Returns
        the description of all of them."""
        import pyarrow as pa

        parts = [self.write_part(task, run) for run in _runs_of_one_schema(iter(batches))]
        if not parts:
            parts.append(self.write_part(task, pa.RecordBatchReader.from_batches(pa.schema([]), [])))
        return {"task": task, "parts": parts}


class JobEnded(RuntimeError):
    """A task attempt started after its job's driver committed or aborted."""


@contextlib.contextmanager
def _claim(job_dir: Path, name: str):
    """Holds the claim of the part ``name`` of the job in ``job_dir`` while the
    body writes it. Raises JobEnded if the job's directory is gone, or the
    driver removed the claim before the attempt could take it."""
    path = job_dir / (name + _bcd.PART_CLAIM_SUFFIX)
    ended = JobEnded(
        f"{job_dir}: the job ended (committed or aborted) before this task attempt wrote its part; nothing was written"
    )
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileNotFoundError:
        raise ended from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink == 0:
            # The driver took the claim first and removed it.
            raise ended
        yield
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def remove_job_dir(job_dir: Path) -> None:
    """Removes a job's directory, each part once no attempt writes it (holding
    its claim: this waits for an attempt still writing, and an attempt that
    comes later writes nothing), until the directory is gone."""
    suffix = _bcd.PART_CLAIM_SUFFIX
    previous = None
    while True:
        try:
            names = sorted(os.listdir(job_dir))
        except FileNotFoundError:
            return
        if names == previous:
            # Nothing could be removed since the last round (permissions, say):
            # what is left is for `bcd gc`.
            return
        previous = names
        for name in names:
            if not name.endswith(suffix):
                continue
            try:
                fd = os.open(job_dir / name, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                continue  # gone meanwhile, or not ours to open: gc's
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                shutil.rmtree(job_dir / name[: -len(suffix)], ignore_errors=True)
                _unlink(job_dir / name)
            finally:
                os.close(fd)
        # The rest: parts whose claim is gone (an attempt of an older version,
        # or one that died), and the job's lock. A part whose claim appeared
        # since the listing is left for the next round.
        try:
            names = set(os.listdir(job_dir))
        except FileNotFoundError:
            return
        for name in names:
            if name.endswith(suffix) or name + suffix in names:
                continue
            path = job_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                _unlink(path)
        try:
            os.rmdir(job_dir)
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                return  # left for `bcd gc`, as what a killed driver leaves


def _runs_of_one_schema(batches):
    """Readers of consecutive batches with the same columns (names and types, in
    any order and nullability: a batch is conformed to the run's first). Each
    reader must be read to its end before the next one is taken."""
    import pyarrow as pa

    pending = next(batches, None)
    while pending is not None:
        first, pending = pending, None
        schema = pa.schema([f.with_nullable(True) for f in first.schema], metadata=first.schema.metadata)
        names = {f.name: f.type for f in first.schema}

        def run(first=first, schema=schema, names=names):
            nonlocal pending
            yield first.cast(schema)
            for batch in batches:
                if len(batch.schema) != len(names) or any(names.get(f.name) != f.type for f in batch.schema):
                    pending = batch
                    return
                yield batch.select(schema.names).cast(schema)

        yield pa.RecordBatchReader.from_batches(schema, run())


def settings_for(
    path: Any,
    *,
    value_column: str,
    key_column: Optional[str],
    fields: Any,
    compression: Optional[str],
    max_shard_size: Optional[int],
    on_duplicate: str,
    dedup: Optional[str] = None,
    memory_limit: Any = None,
) -> WriteSettings:
    """Checks a job's options against the target (if it exists) and names the
    job."""
    if fields is None:
        fields = "all"
    if on_duplicate not in ON_DUPLICATE:
        raise ValueError(f"on_duplicate: {on_duplicate!r}: expected 'error' or 'skip'")
    if dedup not in (None, "keys", "content"):
        raise ValueError(f"dedup: {dedup!r}: expected 'content' (or None)")
    if compression not in ("lz4", None, "none"):
        raise ValueError(f"compression: {compression!r}: expected 'lz4' or None")
    compression = None if compression == "none" else compression
    path = os.fspath(path)
    keyed = key_column is not None
    if (Path(path) / "manifest.json").exists():
        existing = Dataset(path)
        if existing.keyed != keyed:
            raise ValueError(
                f"{path} is {'keyed' if existing.keyed else 'keyless'}: "
                + ("pass key_column" if existing.keyed else "pass no key_column")
            )
        # The parts take the dataset's own settings.
        compression = existing.compression
        max_shard_size = existing.max_shard_size
    return WriteSettings(
        path,
        uuid.uuid4().hex,
        value_column=value_column,
        key_column=key_column,
        compression=compression,
        max_shard_size=max_shard_size or DEFAULT_MAX_SHARD_SIZE,
        on_duplicate=on_duplicate,
        keyed=keyed,
        fields=fields,
        dedup=dedup,
        memory_limit=memory_limit,
    )


def _add_task_duplicates(summary: Dict[str, Any], tasks: List[Any]) -> None:
    """Adds to the merge's ``summary`` the repeated values each task left out
    of its own part: counted in ``skipped_values`` and listed first in
    ``content_duplicates``, ``origin`` naming the task. Such a duplicate's
    ``duplicate_of`` names the kept record by its ``key`` (keyless: its
    ``task_index``, its place among the records the task kept); one found
    across tasks (by the merge) has its ``index`` in the dataset too."""
    found = []
    for task, description in tasks:
        for part in description.get("parts", [description]):
            for duplicate in part.get("content_duplicates", []):
                entry = dict(duplicate)
                entry["origin"] = f"task {task}: {duplicate['origin']}"
                of = duplicate["duplicate_of"]
                entry["duplicate_of"] = {"key": of["key"]} if "key" in of else {"task_index": of["index"]}
                found.append(entry)
    summary["skipped_values"] = summary.get("skipped_values", 0) + len(found)
    summary["content_duplicates"] = found + summary.get("content_duplicates", [])


class Job:
    """The driver's side of one job: its staging directory and lock."""

    def __init__(self, settings: WriteSettings) -> None:
        self.settings = settings
        self._lock: Optional[int] = None

    def start(self, *, lock: bool = True) -> None:
        """Makes the job's directory and, with ``lock``, takes its lock until the
        commit or abort (a driver whose process lives that long)."""
        target = Path(self.settings.path)
        self.settings.created_dir = not target.exists()
        job_dir = self.settings.job_dir
        job_dir.mkdir(parents=True, exist_ok=True)
        if not lock:
            return
        fd = os.open(job_dir / _bcd.JOB_LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        self._lock = fd

    def commit(self, descriptions: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
        """Merges the parts, in task order, into the target in one commit."""
        by_task: Dict[int, Dict[str, Any]] = {}
        for description in descriptions:
            by_task.setdefault(description["task"], description)
        # A task's description is one part (write_part) or several (write_runs).
        parts: List[str] = [
            part["path"]
            for task in sorted(by_task)
            for part in by_task[task].get("parts", [by_task[task]])
        ]
        try:
            summary = _bcd.merge(
                parts,
                self.settings.path,
                on_duplicate=self.settings.on_duplicate,
                dedup=self.settings.dedup,
                memory_limit=self.settings.memory_limit,
            )
        except BaseException:
            self.abort()
            raise
        self._finish()
        if self.settings.dedup == "content":
            _add_task_duplicates(summary, [(task, by_task[task]) for task in sorted(by_task)])
        return summary

    def abort(self) -> None:
        """Removes the job's parts; the target is left as it was."""
        self._finish()
        target = Path(self.settings.path)
        if self.settings.created_dir and not (target / "manifest.json").exists():
            # Only what this job made: the directory and an empty _staging.
            for directory in (target / _bcd.STAGING_DIR, target):
                try:
                    directory.rmdir()
                except FileNotFoundError:
                    continue
                except OSError:
                    break

    def _finish(self) -> None:
        remove_job_dir(self.settings.job_dir)
        try:
            (Path(self.settings.path) / _bcd.STAGING_DIR).rmdir()
        except OSError:
            pass  # other jobs' parts, or already gone
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def field_names(dataset: Dataset, fields: Any) -> List[str]:
    """The field columns a reader returns: every one of the dataset's schema for
    None or ``"all"``, none for ``"none"`` (or an empty list), else the names
    given (a list, or a str separated by commas), each of which must exist."""
    available = list(dataset.schema.names)
    if fields is None or fields == "all":
        names = available
    elif fields == "none":
        names = []
    else:
        names = fields.split(",") if isinstance(fields, str) else list(fields)
        missing = [name for name in names if name not in available]
        if missing:
            raise ValueError(f"fields: no field {missing[0]!r} in {dataset.path} (fields: {available})")
    clash = [name for name in names if name in ("key", "value")]
    if clash:
        raise ValueError(
            f"fields: the field {clash[0]!r} has the name of a record column; choose the fields with fields=[...]"
        )
    return names


def read_table(dataset: Dataset, start: int, stop: int, fields: List[str]) -> Any:
    """Records ``start .. stop`` as a pyarrow Table: ``key`` (keyed datasets),
    ``value`` (binary) and the ``fields`` named, in record order."""
    import pyarrow as pa

    indices = range(start, stop)
    columns: Dict[str, Any] = {}
    if dataset.keyed:
        columns["key"] = pa.array([bytes(dataset.key_at(i)) for i in indices], type=pa.binary())
    columns["value"] = pa.array([bytes(v) for v in dataset.get_batch(indices)], type=pa.binary())
    table = pa.table(columns)
    if fields:
        extra = dataset.fields(fields).slice(start, stop - start)
        for name in fields:
            table = table.append_column(extra.schema.field(name), extra.column(name))
    return table
