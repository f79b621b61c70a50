"""Type stubs of the native module ``bcd._bcd`` (import ``bcd``, not this)."""

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, SupportsIndex, Tuple, TypedDict, Union

import numpy
from typing_extensions import disjoint_base

from .views import View

if sys.version_info >= (3, 12):
    from collections.abc import Buffer
else:
    from typing_extensions import Buffer

__all__ = ["DEFAULT_MAX_SHARD_SIZE", "Dataset", "__version__", "ingest"]

__version__: str
DEFAULT_MAX_SHARD_SIZE: int
"""1 GiB: the reference's default ``max_shard_size``."""

_StrPath = Union[str, "os.PathLike[str]"]
_Compression = Optional[Literal["lz4"]]
_Entry = Union[Buffer, Tuple[Buffer, Buffer], Sequence[Buffer], Mapping[str, Any]]

@disjoint_base
class Dataset:
    """An append-only, memory-mapped collection of byte blobs in the
    bitcask-dataset format, optionally keyed and LZ4-compressed.

    Mirrors the reference's ``bitcask_dataset.BitcaskDataset``: the same
    constructor, ``create``, ``extend``, ``[key]``, ``at``, ``key_at``, ``len``
    and ``in``, the same exceptions, and the same files on disk, so switching is
    a one-line import change. Adds ``get_batch``.

    Keys and values go in as any C-contiguous buffer (``bytes``, ``bytearray``,
    ``memoryview``, ``array.array``, ``mmap``, NumPy arrays of any dtype, counted
    in bytes). Values and keys come out as read-only ``memoryview``s; for
    uncompressed datasets a value is a zero-copy view of the shard's memory
    mapping (or, for shards of 16 KiB or less, of the shard read into memory;
    ``numpy.frombuffer`` uses it without copying) that stays valid for as long
    as it is held, even after the ``Dataset`` is gone. Truncating a committed
    shard file while it is mapped makes the next read of it kill the process
    with SIGBUS, as with any memory mapping.

    A ``Dataset`` pickles as its path, so DataLoader workers (``fork`` or
    ``spawn``) reopen it. Reads may run in many threads at once; ``extend`` waits
    for reads in other threads, and they wait for it only while it writes a batch
    or commits (while its ``entries`` run, they read the committed records).
    Arguments are converted before any lock is taken, so an iterable of indices
    or an ``__index__`` may use the dataset. A process forked at any moment,
    even during another thread's ``extend``, may use the inherited object: it sees
    the committed records and does not keep the writer lock.

    Errors: ``FileNotFoundError`` (no dataset, a missing shard file),
    ``ValueError`` (an invalid manifest, corrupt shards or values, with the file
    and record in the message), ``OSError`` (I/O), ``BlockingIOError`` (another
    writer holds the dataset's lock).

    ``path`` may be an ``s3://``, ``gs://`` or ``az://`` URI: the dataset is then
    read through a local shard cache in ``cache_dir`` (default
    ``$BCD_CACHE_DIR``, else ``~/.cache/bcd``) shared by every process, holding at
    most ``cache_limit`` bytes of shards (an int or a size such as ``"20G"``;
    default no bound). A shard is downloaded whole on its first read, once however
    many workers read it; least recently used shards are evicted. Up to
    ``prefetch`` shards (default 8; 0: none) are fetched ahead of the readers at
    once: see :meth:`prefetch`. Such a dataset is read-only. Any other
    ``scheme://`` is a ``ValueError``. The signature is ``Dataset(path,
    cache_dir=None, cache_limit=None, prefetch=None)``.
    """

    def refresh(self) -> None:
        """Picks up records committed since the dataset was opened (for a dataset
        in object storage, a newer remote manifest)."""

    @classmethod
    def create(
        cls,
        path: _StrPath,
        *,
        keyed: bool = False,
        compression: _Compression = "lz4",
        max_shard_size: Union[int, str] = 1 << 30,
    ) -> "Dataset":
        """Creates an empty dataset in a new or empty directory and opens it.

        ``compression`` is ``"lz4"`` (LZ4 blocks, byte-identical to the
        reference's) or ``None``; a new shard starts before a record would take
        the current one past ``max_shard_size`` bytes: an int, or a size string
        as ``bcd create --max-shard-size`` takes (``"64M"``, ``"1.5GiB"``: K, M,
        G, T and KiB.. are powers of 1024, KB, MB.. powers of 1000).

        Raises ``FileExistsError`` if the directory has files in it,
        ``ValueError`` for another compression or a ``max_shard_size`` that is not
        positive or not a size, ``TypeError`` if it is neither an int nor a str.
        """

    def __new__(
        cls,
        path: _StrPath,
        cache_dir: Optional[_StrPath] = None,
        cache_limit: Union[int, str, None] = None,
        prefetch: Optional[int] = None,
        verify: bool = False,
    ) -> "Dataset":
        """Opens an existing dataset, checking every committed shard.

        With ``verify=True`` every value read is checked against the XXH3-128
        written with it (``NNNNNN.xxh128`` beside each shard; ``bcd
        dedup-index`` builds them for a dataset without): a value whose bytes
        changed on disk raises ``ValueError`` naming the shard file and the
        record. The cost is one hash of each value read (several GB/s per core)
        and 16 bytes of page cache per record of each shard read.

        Raises ``FileNotFoundError`` if there is no dataset at ``path``, and
        ``ValueError`` if its manifest or shards are invalid (or, with
        ``verify``, a shard has no content hashes). ``cache_dir``,
        ``cache_limit`` and ``prefetch`` are for a dataset in object storage
        only (``ValueError`` for a local path).
        """

    @property
    def path(self) -> Union[Path, str]:
        """The dataset's directory, as given; the URI (a str) for a dataset in
        object storage."""

    @property
    def keyed(self) -> bool:
        """Whether records carry unique keys."""

    @property
    def compression(self) -> _Compression:
        """``"lz4"`` or ``None``."""

    @property
    def max_shard_size(self) -> int:
        """The shard size limit in bytes (1 GiB for datasets of reference 0.2.0)."""

    @property
    def threads(self) -> int:
        """Threads a batch read (``get_batch``, ``get_batch_into``) or an image
        decode (``get_images_into``) may use in this process: every core by
        default. ``bcd.torch`` sets 1 in each DataLoader worker (what torch
        sets for its own threads there), where the workers share the cores. At
        least 1; setting 0 raises ValueError."""

    @threads.setter
    def threads(self, threads: int) -> None: ...

    def shard_ranges(self) -> list[Tuple[int, int, int]]:
        """``(first record, end record, stored bytes)`` of each committed shard, in
        order: for readers that split a dataset by shard (``bcd.ray.read``)."""

    def extend_arrow(
        self,
        data: Any,
        value_column: str = "value",
        key_column: Optional[str] = None,
        *,
        on_duplicate: Literal["error", "skip"] = "error",
        level: Union[int, Literal["fast", "reference"], None] = None,
        fields: Union[str, Sequence[str], None] = None,
        dedup: Optional[Literal["content"]] = None,
        memory_limit: Union[int, str, None] = None,
    ) -> Dict[str, Any]:
        """Adds the rows of Arrow data in one commit, all or nothing.

        ``data`` is anything with ``__arrow_c_stream__`` or ``__arrow_c_array__``
        (the Arrow PyCapsule interface): a pyarrow ``Table``, ``RecordBatch`` or
        ``RecordBatchReader`` (its batches are read as they come). Values come
        from ``value_column`` (binary, string, fixed-size binary or a struct with
        a ``bytes`` field, dictionary-encoded or not), keys from ``key_column``
        (string, binary or integer as decimal text), which a keyed dataset needs
        and a keyless one refuses. The bytes are read in place from the Arrow
        buffers, compressed and written without the GIL; no Python object is
        made per row. A null value or key is a ``ValueError`` naming the row.
        ``on_duplicate="skip"`` leaves out keys seen before and counts them.
        The other columns become fields beside the records, each row as it is
        in Arrow (any type, nested ones too; int32 widens into an earlier
        int64): ``fields`` is ``"all"`` (the default, also for None),
        ``"none"``, or the names to keep (a list, or a str separated by
        commas). A type that conflicts with the dataset's is a ``ValueError``
        naming the field and both types, with nothing committed.

        Returns ``{"records", "skipped", "shards", "bytes_stored"}``; with
        ``dedup="content"`` (as ``extend``'s) also ``"skipped_values"`` and
        ``"content_duplicates"``.
        """

    def extend(
        self,
        entries: Iterable[_Entry],
        *,
        level: Union[int, Literal["fast", "reference"], None] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        dedup: Optional[Literal["content"]] = None,
        memory_limit: Union[int, str, None] = None,
    ) -> Optional[Dict[str, Any]]:
        """Adds values (keyless datasets) or unique ``(key, value)`` pairs (keyed
        datasets: tuples or lists of two buffers) as new shards, all or nothing.

        An entry may also be a record dict, ``{"key": k, "value": v, **fields}``
        (no ``"key"`` for a keyless dataset): every other item is a field stored
        beside the record (None, bool, int, float, str, bytes, lists and dicts of
        them, NumPy scalars). Fields new to the dataset are null for earlier
        records; a field whose type conflicts with the dataset's schema is a
        ``TypeError`` naming the field and both types, and nothing is committed.
        ``metadata`` (a dict of JSON values) is merged into the dataset
        metadata with this commit by the rules of FORMAT.md ("Merging
        metadata"): class names (``class_names``, ``class_labels``) are
        append-only, and this extend's ``label_index`` (and ``class_labels``
        columns) are renumbered by name into the dataset's classes; any other
        key whose value differs from the dataset's is a ``ValueError`` naming it,
        as is an integer JSON cannot keep exactly (beyond ``-2**63 .. 2**64``),
        and nothing is committed.

        ``entries`` may be any iterable, including a generator, and is read
        lazily: batches of up to 256 records or 8 MiB per core are copied, then
        compressed on all cores and written without holding the GIL. Nothing is
        visible until the single commit at the end; on any error, including an
        exception raised by ``entries`` itself (which propagates unchanged),
        nothing is committed and the directory is left as it was. The entries may
        read this dataset (``key not in dataset``): they see its committed records.
        An ``extend`` of this object from code it runs raises ``RuntimeError``, and
        so does its copy in a process forked by ``entries``: only the process that
        began it writes, commits or removes anything.

        Shards that other handles or processes committed since this one was opened
        are picked up first, so they are never overwritten.

        With ``dedup="content"`` an entry whose value is byte for byte that of an
        earlier record (committed, or earlier in ``entries``) is left out, the
        first winning: found by its content hash (XXH3-128, kept beside the
        shards as ``NNNNNN.xxh128``) and confirmed by comparing the bytes, so a
        hash collision never drops data. Every committed shard needs content
        hashes (``bcd dedup-index``). The call then returns ``{"records",
        "skipped_values", "content_duplicates"}``: each duplicate names its
        ``key`` (keyless: ``index``, its entry number), ``origin`` and
        ``duplicate_of`` (``index`` and ``key`` of the record kept); without
        ``dedup``, None. ``memory_limit`` (an int or a size such as ``"4G"``;
        default a quarter of the machine's memory) bounds the memory of the
        duplicate checks, which keep 12-16 bytes per key (and value) written and
        spill sorted runs to ``.bcd-spill/`` in the dataset past it.

        ``level`` means what it means to ``ingest`` and ``bcd ingest --level``:
        1..12 is liblz4's high-compression level, with values that do not
        compress stored as literal-only LZ4 blocks (which the reference reads);
        ``"fast"`` is liblz4's fast mode; ``"reference"`` compresses every value
        at level 9. Without ``level``, ``extend`` writes the reference's bytes
        exactly (as ``"reference"``). Another level is a ``ValueError`` naming
        ``level``, a level that is neither an int nor a str a ``TypeError``.

        Raises ``TypeError`` for an entry that is not a buffer (or not a pair, for
        a keyed dataset) or a buffer that is not C-contiguous, ``ValueError`` for a
        key already in the dataset or repeated in ``entries``, and
        ``BlockingIOError`` if another writer is extending the dataset.
        """

    def __len__(self) -> int:
        """The number of records."""

    def __contains__(self, key: object, /) -> bool:
        """Whether ``key`` (a buffer) is in the dataset; ``False`` for keyless
        datasets and for objects that are not buffers."""

    def __getitem__(self, key: Buffer, /) -> memoryview:
        """The value of ``key``.

        Raises ``KeyError`` if it is absent and ``TypeError`` on a keyless dataset.
        """

    def at(self, index: SupportsIndex) -> memoryview:
        """The value at insertion position ``index`` (negative counts from the end).

        Raises ``IndexError`` past either end.
        """

    def key_at(self, index: SupportsIndex) -> memoryview:
        """The key at insertion position ``index`` (negative counts from the end).

        Raises ``TypeError`` on a keyless dataset, ``IndexError`` past either end.
        """

    def get_batch(
        self, indices: Iterable[SupportsIndex], *, read_ahead: Optional[bool] = None, positional: bool = False
    ) -> list[memoryview]:
        """The values at ``indices``, as ``at`` returns them, in order.

        Every index is checked before anything is read (``IndexError`` names the
        first bad one); ``indices`` is iterated with no lock held, and its length
        hint is not trusted. Compressed values are decompressed in parallel without the
        GIL, on threads started for the batch: safe in processes forked after a
        read, as DataLoader workers are.

        ``read_ahead`` asks the kernel for every value's pages at once, and only
        those pages, before the reads: ``None`` (the default) does it when the
        values average 16 KiB or more, ``True`` always (indices scattered
        sparsely over the files, as a small view's are: a page fault alone
        reads 128 KiB around each value, one value at a time), ``False`` never.

        ``positional=True`` reads the values as ``get_batch_into(...,
        positional=True)`` does, mapping nothing, each straight into a new
        ``bytes`` (a list of ``bytes`` then, which read as the memoryviews do).
        """

    def prefetch(self, indices: Union[Iterable[SupportsIndex], "numpy.ndarray"], *, wait: bool = False) -> int:
        """Fetches the shards holding the records at ``indices`` (an epoch's
        order, such as a sampler's NumPy array, read in place) ahead of the
        reads, in the order the indices first reach them, in the background,
        and returns at once: how many of those shards were not cached yet.

        For a dataset in object storage; a local one has nothing to fetch (0,
        and the indices are not looked at). Up to ``prefetch`` shards are in
        flight at once in the whole cache; a read that needs a shard meanwhile
        goes first. With a ``cache_limit``, shards fetched ahead and not read
        yet stay within half of it. A new call replaces the order this process
        was working on. Without any call, the first read that has to wait for a
        shard starts fetching the other shards in shard order, unless another
        process sharing the cache works on an order given to it (as the main
        process of a DataLoader does for a ``bcd.torch.Sampler``'s epoch).

        ``wait=True`` returns once every shard is in the cache (``ValueError``
        if they cannot all fit within ``cache_limit``), raising the error that
        stopped them if one did. ``IndexError`` for an index out of range.
        """

    @property
    def schema(self) -> Any:
        """The fields' schema, a ``pyarrow.Schema`` (empty without fields).
        Imports pyarrow."""

    @property
    def metadata(self) -> dict[str, Any]:
        """The dataset metadata (class names, sources, ...) of the state this
        handle reads."""

    def fields(self, columns: Optional[Iterable[str]] = None) -> Any:
        """The fields of every record in record order, a ``pyarrow.Table``
        (only ``columns`` when given), memory-mapped without copying where the
        type allows; shards without fields read as nulls. Imports pyarrow."""

    def sample(self, index: SupportsIndex) -> dict[str, Any]:
        """Record ``index`` as a dict: ``"key"`` (keyed datasets), ``"value"``
        and every field by name. Imports pyarrow."""

    def stats(self, *, shards: bool = False) -> dict[str, Any]:
        """The statistics kept at write time, as ``bcd stats --json`` prints
        them (per-shard figures under ``"per_shard"`` with ``shards=True``)."""

    def view(self, name: str) -> "View":
        """The view ``name`` (``bcd view create``, ``create_view``) as a
        read-only :class:`bcd.View` of its records. KeyError if there is none,
        ValueError if it was evaluated over another state of this dataset (fewer
        records, or other ones) or its file is damaged."""

    def views(self) -> List[_ViewInfo]:
        """Every view, by name, each read and checked (``problem`` says why
        one cannot be read)."""

    def create_view(
        self,
        name: str,
        *,
        where: Optional[str] = None,
        indices: Optional[Union[Sequence[int], numpy.ndarray, Any]] = None,
        replace: bool = False,
    ) -> "View":
        """Creates and returns the view ``name``: the records the SQL expression
        ``where`` selects now (fields and the pseudo-columns ``index``, ``key``,
        ``size``), or the records ``indices`` (any one-dimensional integer
        array; order and repeats do not matter). FileExistsError if a view of
        that name exists (unless ``replace``), ValueError for an expression
        naming a missing field or comparing incompatible types, IndexError for
        an index past the end."""

    def select(
        self,
        indices: Optional[Union[Sequence[int], numpy.ndarray, Any]] = None,
        *,
        where: Optional[str] = None,
    ) -> "View":
        """The records ``indices`` (or the expression ``where``) selects, as a
        :class:`bcd.View` that is not persisted."""

    def refresh_view(self, name: str) -> "View":
        """Extends the view ``name`` over the records appended since it was
        evaluated (only those are evaluated) and returns it."""

    def drop_view(self, name: str) -> None:
        """Removes the view ``name``; the records are not touched."""

    def _position(self, key: Buffer) -> Optional[int]: ...
    def _records_stats(self, indices: numpy.ndarray) -> str: ...

    def get_batch_into(
        self,
        indices: Iterable[SupportsIndex],
        allocate: Callable[[int], Buffer],
        *,
        read_ahead: Optional[bool] = None,
        positional: Optional[bool] = None,
    ) -> "numpy.ndarray":
        """Reads the values at ``indices`` back to back into one buffer.

        Calls ``allocate(total_bytes)`` once, with no lock held; it must return a
        writable, C-contiguous buffer of at least that many bytes (a NumPy
        array, a bytearray, a tensor's ``.numpy()`` in shared memory), which is
        filled on all cores without the GIL. Returns the offsets, a NumPy
        ``int64`` array of ``len(indices) + 1``: value ``i`` is
        ``buffer[offsets[i]:offsets[i + 1]]``. Indices are checked as by
        ``get_batch``, and ``read_ahead`` is as there. ``positional=True``
        reads the values with positional reads (``pread``) of their shard
        files instead of through the mappings, so the process maps none of the
        shards' pages (the process's datasets together keep at most a quarter
        of its descriptor limit of shard files open): values under 32 KiB
        stored are read in runs of neighbours (gaps under 64 KiB, up to 8 MiB a
        run) with one read each into a buffer the dataset object keeps between
        batches, larger ones stored verbatim (uncompressed, or LZ4 literal-only
        blocks such as JPEGs) straight into their place in the buffer;
        ``None``, the default, does so when ``read_ahead`` is ``True``
        (``bcd.torch`` asks for it in DataLoader workers). Nothing else may use the
        buffer during the call. ``bcd.torch`` uses it so DataLoader workers hand a batch to the main
        process as one tensor in shared memory instead of pickled values.
        """

    def get_images_into(
        self,
        indices: Iterable[SupportsIndex],
        out: Buffer,
        options: "ImageOptions",
        *,
        seed: int = 0,
        epoch: int = 0,
        positional: bool = False,
    ) -> list[tuple[int, str]]:
        """Decodes the images (JPEG or PNG values) at ``indices`` into ``out``
        as ``options`` says, one after another (``len(indices) *
        options.image_bytes`` bytes: ``out`` is typically a uint8 array or
        tensor of shape ``(len(indices), *options.shape)``), on all cores
        without the GIL. Record ``i``'s random crop and flip come from ``(seed,
        epoch, i)`` alone. Returns the images that failed as ``(position in
        indices, message naming the record)``, their slots left as they were.
        Indices are checked as by ``get_batch``. Nothing else may use ``out``
        during the call. With ``positional=True`` each value is read with a
        positional read of its shard's file into the decoding thread's scratch
        space rather than through the mapping: nothing of the shards is mapped
        into the process (``bcd.torch`` does so in DataLoader workers, whose
        memory would otherwise grow with every shard page they read)."""

    def get_audio_into(
        self,
        indices: Iterable[SupportsIndex],
        out: Buffer,
        options: "AudioOptions",
        *,
        seed: int = 0,
        epoch: int = 0,
        positional: bool = False,
    ) -> tuple[list[int], list[tuple[int, str]]]:
        """Decodes the audio clips (WAV values) at ``indices`` into ``out`` as
        ``options`` says, one after another (``len(indices) *
        options.clip_floats`` float32s: ``out`` is typically a float32 array or
        tensor of shape ``(len(indices), *options.shape)``), on all cores
        without the GIL. Record ``i``'s random crop comes from ``(seed, epoch,
        i)`` alone. Returns ``(frames, failures)``: the frames each clip kept
        (the rest of its row is zeros; 0 for a failure) and the clips that
        failed as ``(position in indices, message naming the record)``, their
        slots left as they were. Indices are checked as by ``get_batch``.
        Nothing else may use ``out`` during the call. ``positional`` as for
        ``get_images_into``."""

    def refresh(self) -> int:
        """Picks up records committed since the open (or the last refresh) by
        this or another process (a nightly ``bcd ingest``, the reference's
        ``extend``) and returns how many were added. Cheap when nothing
        changed: one read of ``manifest.json``. Raises ``RuntimeError`` if the
        directory now holds an incompatible dataset (other settings, fewer
        shards)."""

    def __reduce__(self) -> Tuple[type, Tuple[str]]:
        """Pickles as the path alone."""

    def __repr__(self) -> str: ...

class _ViewInfo(TypedDict):
    name: str
    records: Optional[int]
    expression: Optional[str]
    evaluated_over: Optional[int]
    problem: Optional[str]

class _IngestSummary(TypedDict):
    """What ``ingest`` did: the fields of ``bcd ingest --json``."""

    dataset: str
    created: bool
    records: int
    skipped: int
    skipped_members: dict[str, int]
    bytes_in: int
    bytes_stored: int
    compression_ratio: float
    shards: int
    seconds: float
    mb_per_s: float
    skipped_values: int
    content_duplicates: list[Dict[str, Any]]

def ingest(
    sources: Union[_StrPath, Iterable[_StrPath]],
    into: _StrPath,
    *,
    format: Optional[
        Literal[
            "dir", "tar", "parquet", "hf-disk", "csv", "tfrecord", "jsonl", "megatron", "lmdb", "mds", "litdata"
        ]
    ] = None,
    keyless: bool = False,
    compression: Union[Literal["lz4", "none"], None] = ...,
    max_shard_size: Union[int, str, None] = None,
    on_duplicate: Literal["error", "skip"] = "error",
    jobs: Optional[int] = None,
    level: Union[int, Literal["fast", "reference"], None] = None,
    include: Union[str, Iterable[str], None] = None,
    exclude: Union[str, Iterable[str], None] = None,
    follow_links: bool = False,
    value_column: Optional[str] = None,
    key_column: Optional[str] = None,
    skip_nulls: bool = False,
    split: Optional[str] = None,
    lmdb_value: Optional[Literal["raw", "pickle", "caffe-datum"]] = None,
    lmdb_db: Optional[str] = None,
    path_column: Optional[str] = None,
    root: Optional[_StrPath] = None,
    delimiter: Optional[str] = None,
    feature: Optional[str] = None,
    key_feature: Optional[str] = None,
    fields: Union[str, Iterable[str], None] = None,
    field_type: Union[
        Mapping[str, Literal["int64", "float64", "bool", "string"]], Iterable[str], None
    ] = None,
    labels: Optional[Literal["folder"]] = None,
    samples: bool = False,
    value_ext: Union[str, Iterable[str], None] = None,
    json_fields: bool = False,
    skip_bad_samples: bool = False,
    value_field: Optional[str] = None,
    value_base64: bool = False,
    key_field: Optional[str] = None,
    schema: Union[_StrPath, Sequence[Mapping[str, str]], None] = None,
    dedup: Optional[Literal["content"]] = None,
    dedup_report: Optional[_StrPath] = None,
    memory_limit: Union[int, str, None] = None,
) -> _IngestSummary:
    """Reads sources into the dataset at ``into`` in one all-or-nothing commit,
    exactly as ``bcd ingest`` does (the options are its flags in snake_case).

    ``sources``: directory trees (``dir``: every regular file, keyed by its
    relative path), tar / WebDataset archives (``tar``: plain, gzip or zstd;
    brace ranges like ``"shards-{000000..000099}.tar"``), Parquet files
    (``parquet``: needs ``value_column``), Hugging Face ``save_to_disk``
    directories (``hf-disk``: needs ``value_column``, and ``split`` for a
    ``DatasetDict``), CSV files listing paths (``csv``),
    TFRecord files (``tfrecord``), JSON Lines files (``jsonl``: one record per
    object, the value its ``value_field``, ``"text"`` by default), Megatron
    indexed datasets (``megatron``: ``PREFIX`` naming ``PREFIX.idx`` and
    ``PREFIX.bin``, one record per sequence with the fields ``document`` and
    ``length``), LMDB environments (``lmdb``: a directory holding
    ``data.mdb``, or the data file; every entry of the unnamed database, or of
    ``lmdb_db``, in key order, its value as stored or decoded by
    ``lmdb_value="pickle"`` (a ``bytes``, a ``(bytes, label)`` tuple or a dict
    whose ``value_column`` entry is the value; plain data only) or
    ``"caffe-datum"``), MosaicML Streaming directories (``mds``: ``index.json`` and its
    shards, plain or compressed; one record per sample) or LitData ``optimize``
    directories (``litdata``: ``index.json`` and its chunks, rows kept as an
    Arrow footer too; one record per item, leaves named by their pytree path
    such as ``"meta.label"``). For ``mds`` and ``litdata`` the value is the
    column (leaf) ``value_column``, by default the only binary one, else the
    only text one (the key aside), the key ``key_column`` (keyless without it),
    the others typed fields; pickled columns are refused unless ``fields``
    leaves them out, and shard hashes the MDS index gives are checked. The format is
    detected from the names unless ``format`` is given; options that belong to
    another format are a ``ValueError``.

    A missing or empty ``into`` is created, keyed unless ``keyless`` or the
    source has no keys, with ``compression`` (``"lz4"``, the default, or
    ``None``) and ``max_shard_size`` (an int or a size such as ``"64M"``, as
    in ``Dataset.create``); an existing dataset keeps its own settings,
    and options contradicting them are a ``ValueError``. ``on_duplicate="skip"``
    keeps the first of repeated keys (re-running an ingest is then idempotent);
    ``"error"`` fails the run. ``level`` is 1..12 (default 5; values that do not
    compress are stored as literal blocks), ``"fast"`` or ``"reference"`` (the
    reference's bytes); ``jobs`` defaults to the number of cores. A value an
    option does not accept is a ``ValueError`` naming it, as in
    ``level: "13": expected 1..12, fast or reference``.

    Fields: Parquet, hf-disk, CSV, TFRecord, MDS and LitData sources store
    their other columns (features, leaves) as structured fields beside each
    record. ``fields`` chooses them: ``"all"`` (the default; for TFRecord only
    with ``feature``, since the whole
    record already holds them), ``"none"``, ``"label,caption"`` or a list of
    names. CSV column types are inferred from the first 1000 rows (int64, else
    float64, else bool, else string; empty cells are null) unless
    ``field_type`` declares them: ``{"label": "int64"}`` or
    ``["label=int64"]``. TFRecord fields cost a prescan (every file is read
    twice). Naming a column the source lacks, or the value or key column, is a
    ``ValueError``. Directory trees: ``labels="folder"`` adds ``label`` (each
    file's first folder) and ``label_index`` (as torchvision's ImageFolder numbers
    it). Tar: ``samples=True`` groups WebDataset samples into one record each (the
    value the first member whose extension is in ``value_ext``, default
    ``"jpg,jpeg,png,webp,flac,wav,mp3,mp4,bin"``; every other member a field named by
    its extension), ``json_fields`` adds the top-level scalars of JSON members as
    typed fields, ``skip_bad_samples`` skips and counts samples that would fail.
    JSON Lines (``format="jsonl"``): ``value_field`` (default ``"text"``),
    ``value_base64``, ``key_field`` and ``schema`` (a schema file's path, or the
    list ``[{"name": "label", "type": "int64"}, ...]`` itself).

    ``dedup="content"`` also leaves out records whose value repeats an
    earlier record's (committed or in this run; every committed shard needs
    content hashes: ``bcd dedup-index``), whatever ``on_duplicate`` says: they
    are counted (``skipped_values``), listed (``content_duplicates``) and, with
    ``dedup_report``, written to that file as JSON Lines once the run commits.
    ``memory_limit`` bounds the duplicate checks' memory (``--memory-limit``).

    The summary has exactly the keys and values ``bcd ingest --json`` prints.

    The pipeline runs without the GIL. On any error nothing is committed and a
    dataset the call created is removed again; Ctrl-C stops the run the same way
    and raises ``KeyboardInterrupt``. Raises ``FileNotFoundError`` for a missing
    source, ``ValueError`` for invalid options, corrupt sources (the message names
    the file and record) and duplicate keys, ``OSError`` for I/O errors.
    """


STAGING_DIR: str
"""Directory inside a dataset where distributed writers stage their parts."""
JOB_LOCK_NAME: str
"""Lock file of a staging job, held by its driver while the job runs."""
PART_CLAIM_SUFFIX: str
"""Suffix of a part's claim beside it in the job's directory, held by the task
attempt writing the part until it is written."""

def merge(
    parts: Iterable[_StrPath],
    into: _StrPath,
    *,
    copy: bool = False,
    on_duplicate: Literal["error", "skip"] = "error",
    dedup: Optional[Literal["content"]] = None,
    dedup_report: Optional[_StrPath] = None,
    memory_limit: Union[int, str, None] = None,
) -> Dict[str, Any]:
    """Appends the datasets ``parts``, in order, to the dataset ``into`` in one
    commit: ``bcd merge PART... --into DATASET``. Returns the summary ``bcd merge
    --json`` prints (``parts``, ``records``, ``skipped``, ``shards``,
    ``rewritten_shards``, ``linked_files``, ``copied_files``, ``bytes_stored``,
    ``created``, ``seconds``, ``parts_not_removed``, ``already_merged``: parts
    an interrupted merge had committed, only removed now).

    Parts must have the target's ``keyed`` and ``compression`` settings; a
    missing ``into`` is created with the first part's. Without ``copy``, shards
    move by hard link (no byte copied on one file system) and the parts are
    removed once the merge is committed; with it they are copied and the parts
    left as they are. Keys are checked across the target and every part: a
    duplicate is a ``ValueError`` naming the key and both places, or with
    ``on_duplicate="skip"`` the first copy wins (the target's, then earlier
    parts'). All or nothing: on any error the target is as it was and every part
    whole. ``BlockingIOError`` if a writer holds the target or a part.

    ``dedup="content"`` also leaves out a part record whose value repeats an
    earlier record's (the target's, an earlier part's or earlier in its part;
    every shard of the target needs content hashes, a part's without them get
    them computed): listed in ``content_duplicates`` (``origin`` names the
    part) and, with ``dedup_report``, written there as JSON Lines.
    ``memory_limit`` bounds the duplicate checks' memory.
    """

def gc(
    path: _StrPath,
    *,
    dry_run: bool = False,
    older_than: Union[str, float, None] = None,
) -> Dict[str, Any]:
    """Removes from the dataset ``path`` what no manifest references (leftovers
    of killed writers, staging parts of failed or abandoned jobs): ``bcd gc``.
    ``older_than`` is a duration (``"30m"``, ``"1h"``, ``"2d"``) or seconds.
    Returns ``{"files", "bytes", "kept_jobs", "dry_run"}``; with ``dry_run``
    nothing is removed. ``BlockingIOError`` while a writer holds the dataset.
    """

def _partition(
    n: int,
    seed: int,
    epoch: int,
    rank: int,
    world_size: int,
    shuffle: bool,
    block_size: Optional[int],
    drop_last: bool,
    categories: Optional[Buffer],
    weights: Union[Buffer, Literal["inverse_frequency"], None],
    num_samples: Optional[int],
    resumed_from: Optional[List[List[int]]],
    start: int,
    dtype: Literal["int64", "uint64", "uint32"],
) -> numpy.ndarray:
    """``bcd.partition`` with its arguments normalised (``uint32`` category
    codes, ``float64`` weights); use ``bcd.partition``."""

def _rank_len(
    n: int,
    world_size: int,
    drop_last: bool,
    shuffle: bool,
    block_size: Optional[int],
    categories: Optional[Buffer],
    weights: Union[Buffer, Literal["inverse_frequency"], None],
    num_samples: Optional[int],
    rank: Optional[int],
    resumed_from: Optional[List[List[int]]],
) -> int:
    """``bcd.sampling.rank_len``, checking every setting ``bcd.partition``
    checks (and ``rank``, if given); use ``rank_len``."""

def _partition_mix(
    lengths: List[int],
    weights: Buffer,
    num_samples: Optional[int],
    seed: int,
    epoch: int,
    rank: int,
    world_size: int,
    shuffle: bool,
    block_size: Optional[int],
    drop_last: bool,
    resumed_from: Optional[List[List[int]]],
    start: int,
    dtype: Literal["int64", "uint64", "uint32"],
    pairs: bool,
) -> Any:
    """``bcd.partition_mix`` with its arguments normalised (``float64``
    weights); use ``bcd.partition_mix``."""

def _mix_rank_len(
    lengths: List[int],
    weights: Buffer,
    num_samples: Optional[int],
    world_size: int,
    drop_last: bool,
    shuffle: bool,
    block_size: Optional[int],
    resumed_from: Optional[List[List[int]]],
    rank: Optional[int],
) -> int:
    """The samples each rank of a mixture's epoch gets, checking every setting
    ``bcd.partition_mix`` checks (and ``rank``, if given)."""

def _mix_source_seed(seed: int, source: int) -> int:
    """The seed of the image crops of a mixture's source ``source``:
    ``stream_key(seed, 0, MixSource, source)``."""

def _category_codes(chunks: List[Any], what: str) -> numpy.ndarray:
    """The ``uint32`` category codes of the chunks of one Arrow column (objects
    with ``__arrow_c_array__``); use ``bcd.sampling.category_codes``."""

def _field_categories(dataset: Dataset, field: str) -> numpy.ndarray:
    """The ``uint32`` category codes of a stored field, as ``bcd export
    --balance-by`` computes them; use ``bcd.sampling.field_codes``."""


class ImageOptions:
    """What to make of each image value, checked when made (``ValueError`` or
    ``TypeError`` naming the keyword):

    - ``size``: the output's side, or ``(height, width)``.
    - ``crop``: ``"random_resized"`` (torchvision's ``RandomResizedCrop``:
      ``scale``, default ``(0.08, 1.0)``, the box's share of the area drawn
      uniformly; ``ratio``, default ``(3/4, 4/3)``, its aspect drawn
      log-uniformly; ten tries, then the central box), ``"center"``
      (``Resize(resize)`` then ``CenterCrop(size)``, as one resampling;
      ``resize`` defaults to the longer output side / 0.875, 256 for 224), or
      ``"resize"`` (the whole image to ``size``).
    - ``flip``: mirror left to right with probability 1/2 (default: with a
      random crop only).
    - ``channels_first``: images as ``3 x H x W`` instead of ``H x W x 3``.
    - ``dct_scaling``: decode JPEGs at 1/2, 1/4 or 1/8 scale where the box
      stays at least the output size (default ``True``); off, every JPEG is
      decoded at full size first.

    The box is resampled with Pillow's antialiased bilinear filter. JPEGs are
    decoded by libjpeg-turbo (the columns and rows the box needs), PNGs by the
    ``png`` crate; greyscale becomes RGB and alpha is dropped, as Pillow's
    ``convert("RGB")``; CMYK JPEGs are refused.
    """

    def __init__(
        self,
        size: int | tuple[int, int],
        *,
        crop: str = "random_resized",
        scale: tuple[float, float] | None = None,
        ratio: tuple[float, float] | None = None,
        resize: int | None = None,
        flip: bool | None = None,
        channels_first: bool = False,
        dct_scaling: bool = True,
    ) -> None: ...
    @property
    def shape(self) -> tuple[int, int, int]:
        """One image's shape: ``(height, width, 3)`` or ``(3, height, width)``."""
    @property
    def image_bytes(self) -> int:
        """Bytes of one image."""
    @property
    def size(self) -> tuple[int, int]: ...
    @property
    def crop(self) -> str: ...
    @property
    def flip(self) -> bool: ...
    @property
    def channels_first(self) -> bool: ...
    def crop_box(
        self, width: int, height: int, *, seed: int = 0, epoch: int = 0, record: int = 0
    ) -> tuple[float, float, float, float, bool]:
        """The box kept from a ``width`` x ``height`` image for ``record`` of
        ``epoch`` under ``seed``: ``(left, top, width, height, flipped)`` in the
        image's pixels (fractional for ``crop="center"``)."""

def decode_images(
    values: Sequence[Buffer],
    out: Buffer,
    options: ImageOptions,
    *,
    seed: int = 0,
    epoch: int = 0,
    records: Sequence[int] | None = None,
    threads: int | None = None,
) -> list[tuple[int, str]]:
    """Decodes image values (JPEG or PNG bytes) into ``out`` as
    ``Dataset.get_images_into`` does, value ``i`` drawing its crop from
    ``(seed, epoch, records[i])`` (``records`` defaults to ``0..len(values)``);
    returns the failures as ``(i, message)``."""


class AudioOptions:
    """What to make of each audio value, checked when made (``ValueError``
    naming the keyword):

    - ``frames``: the frames of each output clip; a longer clip is cut, a
      shorter one zero-padded after its end. A clip holds at most 2**28
      samples (frames x channels, 1 GiB of float32).
    - ``channels``: the output's channels (default 1). A clip with as many is
      kept as it is; with 1, a clip of several channels is mixed down to their
      mean; any other difference is an error.
    - ``crop``: which frames of a longer clip are kept: ``"random"`` (default:
      an offset drawn uniformly from ``(seed, epoch, record)``), ``"start"`` or
      ``"center"``.
    - ``sample_rate``: the rate every clip must have (default: any). Clips are
      not resampled; one at another rate is an error.

    Values are WAV files (RIFF/WAVE): PCM of 8 to 32 bits (``WAVE_FORMAT_PCM``,
    or ``WAVE_FORMAT_EXTENSIBLE`` of PCM) and IEEE floats of 32 or 64 bits.
    Samples are scaled to [-1, 1) as libsndfile (``soundfile``) and torchaudio
    scale them: 8-bit ``(x - 128) / 128``, 16-bit ``x / 32768``, 24-bit ``x /
    2**23``, 32-bit ``x / 2**31``; floats as stored. Clips are laid out
    channels first, ``(channels, frames)``. A data chunk shorter than it
    declares is an error, except the length ``0xFFFFFFFF`` that streaming
    writers leave (the data then runs to the end); a partial last frame is
    left out.
    """

    def __init__(
        self,
        frames: int,
        *,
        channels: int = 1,
        crop: str = "random",
        sample_rate: int | None = None,
    ) -> None: ...
    @property
    def shape(self) -> tuple[int, int]:
        """One clip's shape: ``(channels, frames)``."""
    @property
    def clip_floats(self) -> int:
        """Float32 samples of one clip: ``channels * frames``."""
    @property
    def frames(self) -> int: ...
    @property
    def channels(self) -> int: ...
    @property
    def crop(self) -> str: ...
    @property
    def sample_rate(self) -> int | None: ...

def decode_audio(
    values: Sequence[Buffer],
    out: Buffer,
    options: AudioOptions,
    *,
    seed: int = 0,
    epoch: int = 0,
    records: Sequence[int] | None = None,
    threads: int | None = None,
) -> tuple[list[int], list[tuple[int, str]]]:
    """Decodes audio values (WAV bytes) into ``out`` (a float32 buffer) as
    ``Dataset.get_audio_into`` does, value ``i`` drawing its crop from
    ``(seed, epoch, records[i])`` (``records`` defaults to
    ``0..len(values)``); returns ``(frames, failures)``."""
