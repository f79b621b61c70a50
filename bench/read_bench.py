"""The read path (issue 24), measured side by side in one run on the same data:

- ``epoch``: one DataLoader epoch with the README's code exactly
  (``MapDataset(path, fields=["label"])`` + ``Sampler`` + a plain
  ``DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=2)``, no
  collate_fn), image bytes + label, every byte touched by a crc32, against
  LitData, MosaicML Streaming and an LMDB map-style dataset (train_bench.py's
  conversions of the same JPEG corpus).
- ``images``: the same epoch with decode + RandomResizedCrop(224) + flip to
  uint8 tensors: bcd's ``image=bcd.torch.Image(224, channels_first=True)``
  against the same three stores with torchvision's ``decode_jpeg`` +
  ``RandomResizedCrop(224)`` + ``RandomHorizontalFlip`` in the workers (and
  LMDB with Pillow); images per second per core; and one process decoding the
  same images one by one (libjpeg-turbo full decode through torchvision, bcd's
  crop-aware decode on one thread) to show where the time goes.
- ``single``: ``Dataset.at(i)`` and ``ds[key]`` in a Python loop, shuffled,
  over the JPEGs in an LZ4 dataset, against LMDB's ``txn.get(buffers=True)``.
- ``protocol``: the research protocol: JPEGs, text documents and WAV audio
  (made here), sequential read, shuffled read and read + preprocess (JPEG
  decode with Pillow, a byte-level split of the text, WAV decode to float32),
  1, 2 and 4 DataLoader workers, bcd against LMDB and TFRecord (the
  ``tfrecord`` package's torch dataset), with the peak of the summed PSS of the
  main process and its workers. The WAV preprocess cells also run bcd's own
  WAV decode (``MapDataset(audio=...)``, every clip whole into float32, in
  Rust), in the same rotation.

    python3 -m venv /work/venvs/read
    /work/venvs/read/bin/pip install -r bench/requirements-train.txt tfrecord==1.14.6 protobuf==7.36.2 lz4==4.4.5 pyarrow==26.0.1
    /work/venvs/read/bin/maturin build --release -m python/Cargo.toml -o /work/venvs/read-wheels
    /work/venvs/read/bin/pip install --force-reinstall --no-deps /work/venvs/read-wheels/bcd_python-*.whl
    /work/venvs/read/bin/python bench/read_bench.py --data /work/bench-data-read --megabytes 150 --runs 5 epoch images single
    /work/venvs/read/bin/python bench/read_bench.py --data /work/bench-data-read --protocol-megabytes 450 --runs 3 protocol
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import random
import statistics
import struct
import sys
import threading
import time
import wave
import zlib
from typing import Optional
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import train_bench  # noqa: E402  (the corpus, its conversions, the other readers)

BATCH = 64
# Passes over the shuffled order in one timing of `single`.
PASSES = 20
WORKERS = 2


def prepare(data: Path, megabytes: int) -> None:
    """The corpus and its conversions; then the start method a user's process
    has: LitData's `optimize` sets multiprocessing's start method to spawn for
    the whole process, and a plain DataLoader (the README's code, the
    protocol's loaders) would then start each worker as a new interpreter that
    imports torch again (seconds per epoch, measured: the README's epoch took
    11.3 s instead of 1.9 s)."""
    train_bench.prepare(data, megabytes)
    multiprocessing.set_start_method("fork", force=True)


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def labelled_bcd(data: Path) -> Path:
    """The JPEG tree ingested with its folder labels (a stored field `label`),
    as the README's MapDataset(path, fields=["label"]) reads it."""
    import bcd

    path = data / "bcd-labels.bcd"
    if not path.exists():
        bcd.ingest([str(data / "jpeg")], str(path), labels="folder")
    return path


# ---------------------------------------------------------------- epoch: the README's code


def readme_epoch(data: Path, seed: int) -> dict:
    import torch
    import torch.utils.data

    import bcd.torch

    # The README's lines, exactly.
    dataset = bcd.torch.MapDataset(labelled_bcd(data), fields=["label"])
    sampler = bcd.torch.Sampler(dataset, seed=seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=WORKERS)
    checksum = samples = 0
    start = time.perf_counter()
    for images, labels in loader:
        for image in images:
            checksum += zlib.crc32(image)
        samples += len(labels)
    return {"seconds": time.perf_counter() - start, "samples": samples, "checksum": checksum}


def run_epochs(data: Path, runs: int) -> None:
    prepare(data, 0)
    labelled_bcd(data)
    readers = ["bcd-readme", "litdata", "mosaic", "lmdb"]
    results = {reader: [] for reader in readers}
    checksums = set()
    for run in range(runs):
        order = readers[run % len(readers):] + readers[: run % len(readers)]
        for reader in order:
            if reader == "bcd-readme":
                outcome = readme_epoch(data, seed=run)
            else:
                outcome = train_bench.one_epoch(reader, data, seed=run)
            results[reader].append(outcome["seconds"])
            checksums.add(outcome["checksum"])
            log(f"epoch run {run} {reader}: {outcome['samples'] / outcome['seconds']:.0f} samples/s")
    assert len(checksums) == 1, f"readers disagree on the images: {checksums}"
    samples = outcome["samples"]
    table(f"{samples} images, bytes + label, batch {BATCH}, {WORKERS} fork workers, median of {runs}", results, samples)


def table(title: str, results: dict, samples: int, per_core: bool = False) -> None:
    medians = {reader: statistics.median(seconds) for reader, seconds in results.items()}
    others = [samples / medians[r] for r in medians if r.split("-")[0] in ("litdata", "mosaic", "lmdb")]
    best = max(others)
    print(f"\n{title}\n")
    print("| reader | epoch s, median (min-max) | samples/s | " + ("per core | " if per_core else "") + "vs best of LitData, MosaicML, LMDB |")
    print("|---|---|---|" + ("---|" if per_core else "") + "---|")
    for reader, seconds in results.items():
        rate = samples / medians[reader]
        core = f"{rate / WORKERS:,.0f} | " if per_core else ""
        print(f"| {reader} | {medians[reader]:.2f} ({min(seconds):.2f}-{max(seconds):.2f}) | {rate:,.0f} | {core}{rate / best:.2f}x |")


# ---------------------------------------------------------------- images: decode + crop


class TorchvisionCrop:
    """decode_jpeg + RandomResizedCrop(224) + RandomHorizontalFlip on one
    sample's bytes, as a worker of the other stores runs them."""

    def __init__(self, pillow: bool = False):
        self.pillow = pillow
        self.transform = None

    def __call__(self, value):
        import torch
        from torchvision.transforms import v2

        if self.transform is None:
            self.transform = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()])
        if self.pillow:
            from PIL import Image

            image = v2.functional.pil_to_tensor(Image.open(io.BytesIO(value)).convert("RGB"))
        else:
            from torchvision.io import decode_jpeg

            image = decode_jpeg(torch.frombuffer(bytearray(value), dtype=torch.uint8))
        return self.transform(image)


class CroppedLmdb(train_bench.LmdbImages):
    def __init__(self, path, labels, pillow=False):
        super().__init__(path, labels)
        self.crop = TorchvisionCrop(pillow)

    def __getitem__(self, index):
        value, label = super().__getitem__(index)
        return self.crop(value), label

    def __getstate__(self):
        return {**super().__getstate__(), "crop": TorchvisionCrop(self.crop.pillow)}


def _streaming_crop(dataset_class):
    class Cropped(dataset_class):
        def __getitem__(self, index):
            sample = super().__getitem__(index)
            if not hasattr(self, "_crop"):
                self._crop = TorchvisionCrop()
            return self._crop(sample["image"]), int(sample["label"])

    return Cropped


def image_epoch(reader: str, data: Path, seed: int) -> dict:
    import torch
    import torch.utils.data

    options = dict(batch_size=BATCH, num_workers=WORKERS, multiprocessing_context="fork")
    if reader == "bcd-rust":
        import bcd.torch

        dataset = bcd.torch.MapDataset(labelled_bcd(data), fields=["label"], image=bcd.torch.Image(224, channels_first=True))
        sampler = bcd.torch.Sampler(dataset, seed=seed)
        loader = torch.utils.data.DataLoader(dataset, sampler=sampler, **options)
    elif reader.startswith("lmdb"):
        labels = json.loads((data / "lmdb-labels.json").read_text())
        dataset = CroppedLmdb(str(data / "lmdb"), labels, pillow=reader == "lmdb-pillow")
        generator = torch.Generator().manual_seed(seed)
        loader = torch.utils.data.DataLoader(dataset, shuffle=True, generator=generator, **options)
    elif reader == "litdata":
        import litdata

        dataset = _streaming_crop(litdata.StreamingDataset)(str(data / "litdata"), shuffle=True, seed=seed)
        loader = torch.utils.data.DataLoader(dataset, **options)
    elif reader == "mosaic":
        import streaming
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        dataset = _streaming_crop(streaming.StreamingDataset)(
            local=str(data / "mds"), shuffle=True, shuffle_seed=seed, batch_size=BATCH
        )
        loader = torch.utils.data.DataLoader(dataset, **options)
    else:
        raise ValueError(reader)
    samples = 0
    total = 0
    start = time.perf_counter()
    for images, labels in loader:
        assert images.dtype == torch.uint8 and images.shape[1:] == (3, 224, 224), images.shape
        total += int(images[:, 0, 112, 112].sum())  # touch the batch
        samples += len(labels)
    return {"seconds": time.perf_counter() - start, "samples": samples}


def decode_floor(data: Path, count: int = 300) -> None:
    """One process, one thread: what each image costs to decode whole with
    libjpeg-turbo (torchvision's decode_jpeg; Pillow's) and to decode, crop
    and resize the bcd way (bcd.decode_images, one thread), over the same
    images; the crops are RandomResizedCrop(224)'s."""
    import numpy as np
    import torch
    from PIL import Image
    from torchvision.io import decode_jpeg
    from torchvision.transforms import v2

    import bcd

    torch.set_num_threads(1)
    files = train_bench.image_files(data / "jpeg")[:count]
    values = [p.read_bytes() for p, _ in files]
    crop = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()])
    rows = []

    def timed(name, body):
        body()  # warm
        start = time.perf_counter()
        body()
        rows.append((name, (time.perf_counter() - start) / len(values) * 1e3))

    timed("torchvision decode_jpeg (whole image)", lambda: [decode_jpeg(torch.frombuffer(bytearray(v), dtype=torch.uint8)) for v in values])
    timed(
        "torchvision decode_jpeg + RandomResizedCrop + flip",
        lambda: [crop(decode_jpeg(torch.frombuffer(bytearray(v), dtype=torch.uint8))) for v in values],
    )
    timed("Pillow decode (whole image, to RGB)", lambda: [Image.open(io.BytesIO(v)).convert("RGB") for v in values])
    for scaling in (False, True):
        options = bcd.ImageOptions(224, channels_first=True, dct_scaling=scaling)
        out = np.zeros((len(values), *options.shape), dtype=np.uint8)
        timed(
            f"bcd decode + crop + resize + flip, one thread, dct_scaling={scaling}",
            lambda: bcd.decode_images(values, out, options, threads=1),
        )
    print(f"\nOne process, one thread, {len(values)} images, ms per image\n")
    print("| what | ms per image | images/s |")
    print("|---|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.2f} | {1000 / ms:,.0f} |")


def run_images(data: Path, runs: int) -> None:
    prepare(data, 0)
    labelled_bcd(data)
    readers = ["bcd-rust", "litdata", "mosaic", "lmdb", "lmdb-pillow"]
    results = {reader: [] for reader in readers}
    for run in range(runs):
        order = readers[run % len(readers):] + readers[: run % len(readers)]
        for reader in order:
            outcome = image_epoch(reader, data, seed=run)
            results[reader].append(outcome["seconds"])
            log(f"images run {run} {reader}: {outcome['samples'] / outcome['seconds']:.0f} images/s")
    table(
        f"{outcome['samples']} images, decode + RandomResizedCrop(224) + flip to uint8, batch {BATCH}, "
        f"{WORKERS} fork workers, median of {runs}",
        results,
        outcome["samples"],
        per_core=True,
    )
    decode_floor(data)


# ---------------------------------------------------------------- single reads


def run_single(data: Path, runs: int) -> None:
    import bcd
    import lmdb

    prepare(data, 0)
    dataset = bcd.Dataset(data / "bcd.bcd")  # LZ4 (bcd.ingest's default level: JPEGs stored as literals)
    env = lmdb.open(str(data / "lmdb"), readonly=True, lock=False, readahead=True)
    n = len(dataset)
    keys = [bytes(dataset.key_at(i)) for i in range(n)]
    lmdb_keys = [b"%08d" % i for i in range(n)]
    env_keys = {}
    with env.begin() as txn:
        for i in range(n):
            env_keys[keys[i]] = txn.get(lmdb_keys[i]) is not None
    assert all(env_keys.values())
    results = {"bcd at(i)": [], "bcd ds[key]": [], "lmdb txn.get(buffers=True)": [], "lmdb txn.get(key path)": []}
    checks = {}
    # The LMDB environment holds the images under their index: a second one
    # keyed by path makes ds[key]'s comparison like for like.
    keyed_path = data / "lmdb-keyed"
    if not keyed_path.exists():
        keyed = lmdb.open(str(keyed_path), map_size=1 << 34)
        with keyed.begin(write=True) as txn:
            for i in range(n):
                txn.put(keys[i], dataset.at(i))
        keyed.sync()
        keyed.close()
    keyed = lmdb.open(str(keyed_path), readonly=True, lock=False, readahead=True)
    for run in range(runs + 1):
        order = list(range(n))
        random.Random(run).shuffle(order)
        shuffled_keys = [keys[i] for i in order]
        shuffled_lmdb = [lmdb_keys[i] for i in order]

        def bcd_at():
            at = dataset.at
            return sum(len(at(i)) for i in order)

        def bcd_key():
            return sum(len(dataset[k]) for k in shuffled_keys)

        def lmdb_get():
            with env.begin(buffers=True) as txn:
                get = txn.get
                return sum(len(get(k)) for k in shuffled_lmdb)

        def lmdb_key():
            with keyed.begin(buffers=True) as txn:
                get = txn.get
                return sum(len(get(k)) for k in shuffled_keys)

        # Contenders in rotating order, each timed over PASSES passes of the
        # shuffled order (one pass of 1553 reads takes a few ms: a single
        # pass measures the machine's scheduling as much as the reads).
        contenders = list(zip(results, (bcd_at, bcd_key, lmdb_get, lmdb_key)))
        contenders = contenders[run % 4 :] + contenders[: run % 4]
        for name, body in contenders:
            start = time.perf_counter()
            total = sum(body() for _ in range(PASSES))
            elapsed = (time.perf_counter() - start) / PASSES
            if run:
                results[name].append(elapsed)
            checks.setdefault(run, set()).add(total)
    assert all(len(totals) == 1 for totals in checks.values())
    print(f"\n{n} JPEGs in an LZ4 dataset (~100 KB each), shuffled, one Python loop, page cache warm, {PASSES} passes a run, median of {runs} runs\n")
    print("| read | µs per read, median (min-max) | reads/s | vs LMDB txn.get(buffers=True) |")
    print("|---|---|---|---|")
    base = statistics.median(results["lmdb txn.get(buffers=True)"])
    for name, seconds in results.items():
        median = statistics.median(seconds)
        print(f"| {name} | {median / n * 1e6:.2f} ({min(seconds) / n * 1e6:.2f}-{max(seconds) / n * 1e6:.2f}) | {n / median:,.0f} | {base / median:.2f}x |")


# ---------------------------------------------------------------- the research protocol


def make_text(root: Path, megabytes: int) -> list[bytes]:
    """Text documents (1-20 KB) cut from the standard library's sources."""
    import sysconfig

    out_path = root / "text.json"
    if out_path.exists():
        return [d.encode("latin-1") for d in json.loads(out_path.read_text())]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    text = b"".join(p.read_bytes() for p in sorted(stdlib.glob("*.py")))
    rng = random.Random(1)
    documents, total = [], 0
    while total < megabytes * 1_000_000:
        size = rng.randrange(1_000, 20_000)
        start = rng.randrange(0, len(text) - size)
        documents.append(text[start : start + size])
        total += size
    out_path.write_text(json.dumps([d.decode("latin-1") for d in documents]))
    return documents


# The longest clip of the WAV corpus: 4 s at 16 kHz.
WAV_FRAMES = 64_000


def make_wavs(root: Path, megabytes: int) -> list[bytes]:
    """WAV files (16-bit mono, 16 kHz, 1-4 s of tones and noise)."""
    import numpy as np

    out = root / "wav"
    if out.exists():  # the stores are made beside the files: the files only
        return [p.read_bytes() for p in sorted(out.glob("*.wav"))]
    out.mkdir(parents=True)
    rng = np.random.default_rng(2)
    total, files = 0, []
    while total < megabytes * 1_000_000:
        seconds = rng.uniform(1, 4)
        t = np.arange(int(16_000 * seconds)) / 16_000
        signal = 0.3 * np.sin(2 * np.pi * rng.uniform(100, 2000) * t) + 0.05 * rng.normal(size=t.size)
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16_000)
            w.writeframes((np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes())
        data = buffer.getvalue()
        (out / f"{len(files):06d}.wav").write_bytes(data)
        files.append(data)
        total += len(data)
    return files


def preprocess(modality: str, value) -> int:
    """The paper's preprocessing, returning a small number (so every store's
    workers send back the same few bytes)."""
    if modality == "jpeg":
        from PIL import Image

        with Image.open(io.BytesIO(value)) as image:
            return int(image.convert("RGB").getpixel((0, 0))[0])
    if modality == "text":
        return len(bytes(value).split())
    import numpy as np

    with wave.open(io.BytesIO(value)) as w:
        frames = w.readframes(w.getnframes())
    return int(np.frombuffer(frames, dtype="<i2").astype(np.float32).__truediv__(32768.0).size)


def _clip_frames(sample) -> int:
    """What bcd's WAV decode gives back per sample in the protocol: the frames
    decoded (a small number, as `preprocess` returns)."""
    return sample[1]


class Preprocessed:
    """A transform for bcd.torch.MapDataset: the value through `preprocess`."""

    def __init__(self, modality):
        self.modality = modality

    def __call__(self, value):
        return preprocess(self.modality, value)


class LmdbValues:
    def __init__(self, path, n, modality, task):
        self.path, self.n, self.modality, self.task, self.env = path, n, modality, task, None

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if self.env is None:
            import lmdb

            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin() as txn:
            value = txn.get(b"%08d" % index)
        return preprocess(self.modality, value) if self.task == "preprocess" else value

    def __getstate__(self):
        return {**self.__dict__, "env": None}


def protocol_store(root: Path, modality: str, values: list[bytes]) -> None:
    """The values as a bcd dataset, an LMDB environment and a TFRecord file
    (with the index the tfrecord package's dataset needs to split it)."""
    import bcd
    import lmdb
    from tfrecord import TFRecordWriter

    base = root / modality
    base.mkdir(parents=True, exist_ok=True)
    if not (base / "bcd").exists():
        bcd.ingest([str(_tree(base, values))], str(base / "bcd"), level=5)
    if not (base / "lmdb").exists():
        env = lmdb.open(str(base / "lmdb"), map_size=1 << 34)
        with env.begin(write=True) as txn:
            for i, value in enumerate(values):
                txn.put(b"%08d" % i, value)
        env.sync()
        env.close()
    if not (base / "data.tfrecord").exists():
        writer = TFRecordWriter(str(base / "data.tfrecord"))
        for value in values:
            writer.write({"value": (value, "byte")})
        writer.close()
        from tfrecord.tools.tfrecord2idx import create_index

        create_index(str(base / "data.tfrecord"), str(base / "data.tfindex"))


def _tree(base: Path, values: list[bytes]) -> Path:
    """The values as files named by their index (ingested in that order)."""
    tree = base / "files"
    if not tree.exists():
        tree.mkdir()
        for i, value in enumerate(values):
            (tree / f"{i:08d}").write_bytes(value)
    return tree


def tfrecord_loader(base: Path, modality: str, task: str, workers: int, seed: int):
    import torch.utils.data
    from tfrecord.torch.dataset import TFRecordDataset

    def transform(features):
        value = features["value"].tobytes() if hasattr(features["value"], "tobytes") else bytes(features["value"])
        return preprocess(modality, value) if task == "preprocess" else value

    shuffle = None if task == "sequential" else 1024
    dataset = TFRecordDataset(
        str(base / "data.tfrecord"),
        str(base / "data.tfindex"),
        {"value": "byte"},
        shuffle_queue_size=shuffle,
        transform=transform,
    )
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=workers, collate_fn=_keep)


def _keep(samples):
    return samples


def protocol_epoch(store: str, base: Path, modality: str, task: str, workers: int, seed: int, n: int) -> dict:
    import torch
    import torch.utils.data

    import bcd.torch

    if store.startswith("bcd-audio"):
        # bcd's own WAV decode (MapDataset(audio=...)): every clip decoded
        # whole (the corpus's clips are at most WAV_FRAMES long) into float32,
        # zero-padded, a batch at a time in Rust. "bcd-audio": each sample
        # then gives back its frame count, the few bytes the others' workers
        # send; "bcd-audio-tensors": the batch crosses as one float32 tensor
        # in shared memory (what training takes; 1.4 GB an epoch here).
        assert modality == "wav" and task == "preprocess", (modality, task)
        transform = _clip_frames if store == "bcd-audio" else None
        audio = bcd.torch.Audio(WAV_FRAMES, crop="start")
        dataset = bcd.torch.MapDataset(base / "bcd", audio=audio, transform=transform)
        sampler = bcd.torch.Sampler(dataset, seed=seed)
        loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=workers, collate_fn=_keep)
    elif store.startswith("bcd"):
        # "bcd" as the README's code reads; "bcd-mapped" and "bcd-positional"
        # with each way of reading forced (`MapDataset(positional=...)`).
        transform = Preprocessed(modality) if task == "preprocess" else None
        forced = {"bcd": {}, "bcd-mapped": {"positional": False}, "bcd-positional": {"positional": True}}[store]
        dataset = bcd.torch.MapDataset(base / "bcd", transform=transform, **forced)
        sampler = bcd.torch.Sampler(dataset, seed=seed, shuffle=task != "sequential")
        # The same collate as LMDB's and TFRecord's: what each worker returns
        # crosses as it is (a bcd Batch, or the list of preprocessed results,
        # which torch's default collate would make a tensor that crosses as a
        # shared-memory handle, a round trip the others do not pay).
        loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=workers, collate_fn=_keep)
    elif store == "lmdb":
        dataset = LmdbValues(str(base / "lmdb"), n, modality, task)
        generator = torch.Generator().manual_seed(seed)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=BATCH, shuffle=task != "sequential", generator=generator, num_workers=workers, collate_fn=_keep
        )
    else:
        loader = tfrecord_loader(base, modality, task, workers, seed)
    memory = PeakPss()
    samples = 0
    start = time.perf_counter()
    with memory:
        for batch in loader:
            if task == "preprocess":
                samples += len(batch)
            else:
                for value in batch:
                    zlib.crc32(value)
                samples += len(batch)
    seconds = time.perf_counter() - start
    assert samples == n, (store, samples, n)
    return {"seconds": seconds, "pss_mb": memory.peak / 1e6}


class PeakPss:
    """The peak, sampled every 20 ms, of the summed PSS of this process and
    its children (the DataLoader workers)."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()

    def _sample(self):
        pids = [os.getpid()]
        try:
            with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            total += int(line.split()[1]) * 1024
                            break
            except OSError:
                pass
        self.peak = max(self.peak, total)

    def _run(self):
        while not self._stop.wait(0.02):
            self._sample()

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


def run_protocol(data: Path, megabytes: int, runs: int, only: Optional[set] = None) -> None:
    """Each modality's corpus holds `megabytes` of values, made under
    `protocol-{megabytes}MB` (JPEGs by ingest_bench's generator, as the epoch's
    corpus). The size sets how long an epoch runs: at 50 MB of text an epoch
    took 0.1-0.5 s, most of it starting the workers, and single cells moved by
    1.5x between runs of the same build; 450 MB makes every epoch but the
    shortest a second or more of reading. `only`: the cells to run, as
    (modality, task, workers), all when None."""
    import ingest_bench

    root = data / f"protocol-{megabytes}MB"
    root.mkdir(parents=True, exist_ok=True)
    tree = root / "jpeg-files"
    if not tree.exists():
        log(f"making the protocol's JPEG corpus ({megabytes} MB)")
        ingest_bench.make_jpeg_tree(tree, megabytes * 1_000_000)
    # Only the counts stay: the corpora in this process's memory would add
    # the same 1.35 GB to every store's peak PSS.
    counts = {}
    for modality, make in (
        ("jpeg", lambda: [p.read_bytes() for p, _ in train_bench.image_files(tree)]),
        ("text", lambda: make_text(root, megabytes)),
        ("wav", lambda: make_wavs(root, megabytes)),
    ):
        base = root / modality
        if not all((base / name).exists() for name in ("bcd/manifest.json", "lmdb", "data.tfrecord", "data.tfindex")):
            values = make()
            protocol_store(root, modality, values)
            del values
        # Counted from the stores (the values, once made, are not read again:
        # held and freed, they left this process's heap, and its PSS, larger).
        import bcd

        counts[modality] = len(bcd.Dataset(str(base / "bcd")))
    cells = {}
    for modality, count in counts.items():
        for task in ("sequential", "shuffled", "preprocess"):
            for workers in (1, 2, 4):
                if only is not None and (modality, task, workers) not in only:
                    continue
                stores = _protocol_stores(modality, task)
                for run in range(runs):
                    order = stores[run % len(stores):] + stores[: run % len(stores)]
                    for store in order:
                        outcome = protocol_epoch(store, root / modality, modality, task, workers, run, count)
                        cells.setdefault((modality, task, workers, store), []).append(outcome)
                log(f"protocol {modality} {task} {workers} workers done")
    print(f"\nThe research protocol: DataLoader, batch {BATCH}, medians of {runs}; peak summed PSS of the main process and workers\n")
    print("| modality | task | workers | bcd items/s | LMDB items/s | TFRecord items/s | bcd / LMDB | bcd / TFRecord | PSS MB bcd / LMDB / TFRecord |")
    print("|---|---|---|---|---|---|---|---|---|")
    for modality, count in counts.items():
        for task in ("sequential", "shuffled", "preprocess"):
            for workers in (1, 2, 4):
                if only is not None and (modality, task, workers) not in only:
                    continue
                rate = {}
                pss = {}
                for store in ("bcd", "lmdb", "tfrecord"):
                    outcomes = cells[(modality, task, workers, store)]
                    rate[store] = count / statistics.median(o["seconds"] for o in outcomes)
                    pss[store] = max(o["pss_mb"] for o in outcomes)
                print(
                    f"| {modality} | {task} | {workers} | {rate['bcd']:,.0f} | {rate['lmdb']:,.0f} | {rate['tfrecord']:,.0f} | "
                    f"{rate['bcd'] / rate['lmdb']:.2f}x | {rate['bcd'] / rate['tfrecord']:.2f}x | "
                    f"{pss['bcd']:.0f} / {pss['lmdb']:.0f} / {pss['tfrecord']:.0f} |"
                )
    audio = [key for key in cells if key[3].startswith("bcd-audio")]
    if audio:
        print("\nbcd's WAV decode in Rust (MapDataset(audio=bcd.torch.Audio(WAV_FRAMES, crop=\"start\"))) in the same runs\n")
        print("| workers | bcd `audio=` | items/s | / LMDB | / TFRecord | PSS MB (LMDB, TFRecord) |")
        print("|---|---|---|---|---|---|")
        for modality, task, workers, kind in sorted(audio):
            count = counts[modality]
            rate = {}
            pss = {}
            for store in (kind, "lmdb", "tfrecord"):
                outcomes = cells[(modality, task, workers, store)]
                rate[store] = count / statistics.median(o["seconds"] for o in outcomes)
                pss[store] = max(o["pss_mb"] for o in outcomes)
            sent = "frames per sample" if kind == "bcd-audio" else "float32 batches"
            print(
                f"| {workers} | {sent} | {rate[kind]:,.0f} | {rate[kind] / rate['lmdb']:.2f}x | "
                f"{rate[kind] / rate['tfrecord']:.2f}x | {pss[kind]:.0f} ({pss['lmdb']:.0f}, {pss['tfrecord']:.0f}) |"
            )


def _protocol_stores(modality: str, task: str) -> tuple:
    """The stores of a protocol cell: bcd as the README reads, LMDB, TFRecord,
    and for the WAV preprocess cells bcd's own WAV decode too."""
    if modality == "wav" and task == "preprocess":
        return ("bcd", "lmdb", "tfrecord", "bcd-audio", "bcd-audio-tensors")
    return ("bcd", "lmdb", "tfrecord")


def run_positional(data: Path, megabytes: int, runs: int) -> None:
    """bcd's protocol epochs read through the mappings and with positional
    reads (``MapDataset(positional=False / True)``), alternating, on the
    corpora `protocol` made: seconds and peak summed PSS, medians of `runs`."""
    root = data / f"protocol-{megabytes}MB"
    counts = {}
    for modality in ("jpeg", "text", "wav"):
        import bcd

        counts[modality] = len(bcd.Dataset(str(root / modality / "bcd")))
    stores = ("bcd-mapped", "bcd-positional")
    cells = {}
    for modality, count in counts.items():
        for task in ("sequential", "shuffled", "preprocess"):
            for workers in (1, 2, 4):
                for run in range(runs):
                    for store in stores if run % 2 == 0 else stores[::-1]:
                        outcome = protocol_epoch(store, root / modality, modality, task, workers, run, count)
                        cells.setdefault((modality, task, workers, store), []).append(outcome)
                log(f"positional {modality} {task} {workers} workers done")
    print(f"\nbcd's protocol epochs, mapped and positional, medians of {runs}\n")
    print("| modality | task | workers | mapped s / PSS MB | positional s / PSS MB | speed, positional |")
    print("|---|---|---|---|---|---|")
    for modality in counts:
        for task in ("sequential", "shuffled", "preprocess"):
            for workers in (1, 2, 4):
                row = {}
                for store in stores:
                    outcomes = cells[(modality, task, workers, store)]
                    row[store] = (statistics.median(o["seconds"] for o in outcomes), max(o["pss_mb"] for o in outcomes))
                (ms, mp), (ps, pp) = row["bcd-mapped"], row["bcd-positional"]
                print(f"| {modality} | {task} | {workers} | {ms:.2f} / {mp:.0f} | {ps:.2f} / {pp:.0f} | {ms / ps:.2f}x |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--megabytes", type=int, default=150)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--protocol-megabytes", type=int, default=450, help="the size of each modality's corpus in the research protocol"
    )
    parser.add_argument(
        "--cells",
        help="only these protocol cells, comma-separated MODALITY:TASK:WORKERS (say wav:preprocess:1,text:preprocess:4)",
    )
    parser.add_argument("what", nargs="+", choices=["epoch", "images", "single", "protocol", "floor", "positional"])
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    prepare(args.data, args.megabytes)
    for what in args.what:
        if what == "epoch":
            run_epochs(args.data, args.runs)
        elif what == "images":
            run_images(args.data, args.runs)
        elif what == "floor":
            decode_floor(args.data)
        elif what == "single":
            run_single(args.data, args.runs)
        elif what == "positional":
            run_positional(args.data, args.protocol_megabytes, args.runs)
        else:
            only = None
            if args.cells:
                only = {(m, t, int(w)) for m, t, w in (cell.split(":") for cell in args.cells.split(","))}
            run_protocol(args.data, args.protocol_megabytes, args.runs, only)


if __name__ == "__main__":
    main()
