"""Read and write bitcask-dataset stores from Python, with a Rust core.

A dataset is a directory of append-only, memory-mapped shards of byte blobs,
optionally keyed and LZ4-compressed: the format of the Python package
``bitcask-dataset`` (0.2.0 / 0.3.0), whose ``BitcaskDataset`` class
:class:`Dataset` mirrors, so switching is a one-line import change::

    import bcd

    ds = bcd.Dataset.create("images", keyed=True)
    ds.extend((path.name.encode(), path.read_bytes()) for path in paths)
    ds[b"cat.jpg"]           # a read-only memoryview
    ds.at(-1), ds.key_at(0), len(ds), b"cat.jpg" in ds
    ds.get_batch([3, 1, 4])  # many values, decompressed in parallel

``bcd.partition`` gives one rank's part of an epoch (shuffled, block-shuffled,
category-balanced or weighted, exactly split over ranks, resumable, also on
another number of ranks) as a NumPy array for any training loop, and
``bcd.partition_mix`` the same for a mixture of several sources in fixed
proportions; ``bcd.torch`` (imported on its own, it imports torch) has
PyTorch's datasets and sampler built on them.

``bcd.ingest`` is the ``bcd ingest`` command as a function: it reads
directory trees, tar / WebDataset shards, Parquet, CSV-of-paths or TFRecord
files into a dataset in one all-or-nothing commit, for example
``bcd.ingest(["shards-{000000..000099}.tar"], "train.bcd")``.

``bcd.ImageOptions`` says what to make of image values (a random resized
crop, a centre crop or a resize to a fixed size, a random flip) and
``Dataset.get_images_into`` / ``bcd.decode_images`` decode JPEGs and PNGs that
way into one uint8 buffer on all cores, without the GIL (``bcd.torch``'s
``image=``). ``bcd.AudioOptions`` and ``Dataset.get_audio_into`` /
``bcd.decode_audio`` do the same for WAV clips, into one float32 buffer of
fixed-length clips (``bcd.torch``'s ``audio=``).

``ds.create_view("cats", where="label = 'cat'")`` keeps a named subset of the
records beside the shards (``bcd view create``); ``ds.view("cats")`` reads it as
a :class:`View`, a read-only dataset of those records, and ``ds.select(indices)``
makes one that is not kept.

``bcd.merge(parts, into)`` appends whole datasets in one commit (``bcd merge``)
and ``bcd.gc(path)`` removes what no manifest references (``bcd gc``). The
submodules ``bcd.ray`` and ``bcd.spark`` write and read datasets from Ray Data and
Spark; they import those engines, and only when imported themselves.

Datasets written here open in the reference and datasets it writes open here;
for the same records and settings the shard files are byte-identical.
"""

from ._bcd import (
    DEFAULT_MAX_SHARD_SIZE,
    AudioOptions,
    Dataset,
    ImageOptions,
    __version__,
    decode_audio,
    decode_images,
    gc,
    ingest,
    merge,
)
from .mixture import partition_mix
from .sampling import partition
from .views import View

__all__ = [
    "DEFAULT_MAX_SHARD_SIZE",
    "AudioOptions",
    "Dataset",
    "ImageOptions",
    "View",
    "__version__",
    "decode_audio",
    "decode_images",
    "gc",
    "ingest",
    "merge",
    "partition",
    "partition_mix",
]
