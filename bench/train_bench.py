"""Training-read benchmark (issue 11): one DataLoader epoch over the ImageFolder
benchmark corpus, bcd against LitData, MosaicML Streaming and an LMDB map-style
dataset, each converted from the same files with its own tool; the research
protocol (sequential, shuffled, and shuffled with a JPEG decode, in one
process) against LMDB and TFRecord; and sampler construction for 100 million
records.

    python3 -m venv /work/bench-venv-train
    /work/bench-venv-train/bin/pip install -r bench/requirements-train.txt
    /work/bench-venv-train/bin/maturin build --release -m python/Cargo.toml -o /work/bench-wheels
    /work/bench-venv-train/bin/pip install --force-reinstall --no-deps /work/bench-wheels/bcd_python-*.whl
    /work/bench-venv-train/bin/python bench/train_bench.py --data /work/bench-data-train --runs 5

The epoch: 2 fork workers, batch 64, shuffled, each sample the image's bytes and
its label (the class folder's index), every byte touched in the training loop
(zlib.crc32 of each image; the sums must agree between readers, which also shows
each read every image exactly once). Wall time from creating the loader's
iterator to the last batch, worker start-up included; readers run in a rotating
order within each run (load drift hits all alike), medians over runs.

- bcd: `bcd.torch.MapDataset(output="tensor")` + `bcd.torch.Sampler` +
  `bcd.torch.collate`: a batch crosses from the worker as one uint8 tensor in
  shared memory; also `output="bytes"` (values pickled, as the others do).
- LitData: `litdata.optimize` then `litdata.StreamingDataset(shuffle=True)`.
- MosaicML: `streaming.MDSWriter` then `streaming.StreamingDataset(shuffle=True)`.
- LMDB: one transaction of `put`s (key = index, value = image bytes), then a
  map-style dataset opening the environment in each worker, with torch's
  `RandomSampler`.
- in-memory list: the images as `bytes` in a Python list, map-style: the ceiling
  of any reader whose workers send values back pickled.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

BATCH = 64
WORKERS = 2


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the corpus and its conversions


def image_files(tree: Path):
    """(path, label) of every image, classes in sorted folder order (ImageFolder's)."""
    classes = sorted(p.name for p in tree.iterdir() if p.is_dir())
    out = []
    for label, name in enumerate(classes):
        for path in sorted((tree / name).iterdir()):
            out.append((path, label))
    return out


def prepare(data: Path, megabytes: int):
    import ingest_bench

    tree = data / "jpeg"
    if not tree.exists():
        log(f"making the ImageFolder corpus ({megabytes} MB)")
        ingest_bench.make_jpeg_tree(tree, megabytes * 1_000_000)
    files = image_files(tree)
    conversions = {}
    # bcd: `bcd.ingest` of the tree (keys = relative paths, in the order above).
    path = data / "bcd.bcd"
    if not path.exists():
        import bcd

        start = time.perf_counter()
        bcd.ingest([str(tree)], str(path))
        conversions["bcd"] = time.perf_counter() - start
    labels_path = data / "labels.json"
    if not labels_path.exists():
        import bcd

        dataset = bcd.Dataset(path)
        classes = sorted(p.name for p in tree.iterdir() if p.is_dir())
        labels = [classes.index(bytes(dataset.key_at(i)).decode().split("/")[0]) for i in range(len(dataset))]
        labels_path.write_text(json.dumps(labels))
    # LitData.
    path = data / "litdata"
    if not path.exists():
        import litdata

        start = time.perf_counter()
        litdata.optimize(fn=_litdata_sample, inputs=[(str(p), l) for p, l in files], output_dir=str(path),
                         chunk_bytes="64MB", num_workers=WORKERS)
        conversions["litdata"] = time.perf_counter() - start
    # MosaicML Streaming.
    path = data / "mds"
    if not path.exists():
        from streaming import MDSWriter

        start = time.perf_counter()
        with MDSWriter(out=str(path), columns={"image": "bytes", "label": "int"}, size_limit="64mb") as writer:
            for p, l in files:
                writer.write({"image": p.read_bytes(), "label": l})
        conversions["mosaic"] = time.perf_counter() - start
    # LMDB.
    path = data / "lmdb"
    if not path.exists():
        import lmdb

        start = time.perf_counter()
        env = lmdb.open(str(path), map_size=1 << 34, subdir=True, lock=True)
        with env.begin(write=True) as txn:
            for i, (p, l) in enumerate(files):
                txn.put(b"%08d" % i, p.read_bytes())
        env.sync()
        env.close()
        (data / "lmdb-labels.json").write_text(json.dumps([l for _, l in files]))
        conversions["lmdb"] = time.perf_counter() - start
    if conversions:
        log(f"conversion seconds: {conversions}")
    return files


def _litdata_sample(item):
    path, label = item
    with open(path, "rb") as file:
        return {"image": file.read(), "label": label}


# ---------------------------------------------------------------- the readers (one epoch each)


class LmdbImages:
    """A map-style dataset over the LMDB environment, opened in each worker."""

    def __init__(self, path, labels):
        self.path, self.labels, self.env = path, labels, None

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        if self.env is None:
            import lmdb

            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin(buffers=False) as txn:
            return txn.get(b"%08d" % index), self.labels[index]

    def __getstate__(self):
        return {"path": self.path, "labels": self.labels, "env": None}


class ListImages:
    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return self.images[index], self.labels[index]


def touch(batch) -> tuple[int, int]:
    """crc32 of every image of a batch: (sum of checksums, samples)."""
    import bcd.torch

    total = 0
    if isinstance(batch, bcd.torch.Batch):
        memory = memoryview(batch.values.numpy())
        offsets = batch.offsets.tolist()
        for start, end in zip(offsets[:-1], offsets[1:]):
            total += zlib.crc32(memory[start:end])
        return total, len(offsets) - 1
    if isinstance(batch, dict):  # LitData and MosaicML
        images = batch["image"]
    else:
        images = batch[0]
    for image in images:
        total += zlib.crc32(image)
    return total, len(images)


def one_epoch(reader: str, data: Path, seed: int):
    import torch
    import torch.utils.data

    labels = json.loads((data / "labels.json").read_text())
    options = dict(batch_size=BATCH, num_workers=WORKERS, multiprocessing_context="fork")
    if reader.startswith("bcd"):
        import bcd.torch

        output = "tensor" if reader == "bcd" else "bytes"
        dataset = bcd.torch.MapDataset(data / "bcd.bcd", fields={"label": labels}, output=output)
        sampler = bcd.torch.Sampler(dataset, seed=seed)
        loader = torch.utils.data.DataLoader(dataset, sampler=sampler, collate_fn=bcd.torch.collate, **options)
    elif reader == "litdata":
        import litdata

        dataset = litdata.StreamingDataset(str(data / "litdata"), shuffle=True, seed=seed)
        loader = torch.utils.data.DataLoader(dataset, collate_fn=_collate_dicts, **options)
    elif reader == "mosaic":
        import streaming
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        dataset = streaming.StreamingDataset(local=str(data / "mds"), shuffle=True, shuffle_seed=seed, batch_size=BATCH)
        loader = torch.utils.data.DataLoader(dataset, collate_fn=_collate_dicts, **options)
    elif reader == "lmdb":
        lmdb_labels = json.loads((data / "lmdb-labels.json").read_text())
        dataset = LmdbImages(str(data / "lmdb"), lmdb_labels)
        generator = torch.Generator().manual_seed(seed)
        loader = torch.utils.data.DataLoader(dataset, shuffle=True, generator=generator, collate_fn=_collate_pairs, **options)
    elif reader == "list":
        files = image_files(data / "jpeg")
        dataset = ListImages([p.read_bytes() for p, _ in files], [l for _, l in files])
        generator = torch.Generator().manual_seed(seed)
        loader = torch.utils.data.DataLoader(dataset, shuffle=True, generator=generator, collate_fn=_collate_pairs, **options)
    else:
        raise ValueError(reader)
    checksum = samples = 0
    start = time.perf_counter()
    for batch in loader:
        crc, count = touch(batch)
        checksum += crc
        samples += count
    seconds = time.perf_counter() - start
    return {"reader": reader, "seconds": seconds, "samples": samples, "checksum": checksum}


def _collate_dicts(samples):
    import torch

    return {"image": [s["image"] for s in samples], "label": torch.tensor([int(s["label"]) for s in samples])}


def _collate_pairs(samples):
    import torch

    return [s[0] for s in samples], torch.tensor([s[1] for s in samples])


# ---------------------------------------------------------------- sampler construction


def write_tfrecord(files, path: Path):
    """The images as tf.train.Example records (image bytes, label), written with
    the tfrecord package; returns each record's byte offset."""
    from tfrecord import TFRecordWriter

    writer = TFRecordWriter(str(path))
    offsets = []
    at = 0
    for p, label in files:
        data = p.read_bytes()
        offsets.append(at)
        writer.write({"image": (data, "byte"), "label": (label, "int")})
        writer.file.flush()
        at = path.stat().st_size
    writer.close()
    return offsets


def read_tfrecord_at(handle, offset: int) -> bytes:
    """The image of the Example at `offset`: a seek, the length, the record,
    parsed with protobuf (as a reader without TensorFlow does)."""
    from tfrecord import example_pb2

    handle.seek(offset)
    length = int.from_bytes(handle.read(8), "little")
    handle.read(4)
    record = handle.read(length)
    handle.read(4)
    example = example_pb2.Example.FromString(record)
    return example.features.feature["image"].bytes_list.value[0]


def protocol(data: Path, files, runs: int):
    """The research protocol (VersaDB's evaluation) in one process: every image
    read in index order, in a shuffled order, and shuffled with a JPEG decode
    (Pillow, to RGB), from bcd, LMDB and TFRecord; medians of `runs`, page cache
    warm (one untimed pass first)."""
    import random

    import bcd
    import lmdb
    from PIL import Image

    tfrecord = data / "images.tfrecord"
    offsets_path = data / "images.tfrecord.offsets.json"
    if not offsets_path.exists():
        offsets_path.write_text(json.dumps(write_tfrecord(files, tfrecord)))
    offsets = json.loads(offsets_path.read_text())
    n = len(files)
    dataset = bcd.Dataset(data / "bcd.bcd")
    env = lmdb.open(str(data / "lmdb"), readonly=True, lock=False, readahead=True)
    handle = open(tfrecord, "rb", buffering=0)

    def read_bcd(i):
        return dataset.at(i)

    def read_lmdb(i, txn=[None]):
        if txn[0] is None:
            txn[0] = env.begin(buffers=True)
        return txn[0].get(b"%08d" % i)

    def read_tf(i):
        return read_tfrecord_at(handle, offsets[i])

    stores = {"bcd": read_bcd, "lmdb": read_lmdb, "tfrecord": read_tf}
    modes = ("sequential", "shuffled", "shuffled+decode")
    seconds = {(store, mode): [] for store in stores for mode in modes}
    checks = {}
    for run in range(runs + 1):
        order = list(range(n))
        random.Random(run).shuffle(order)
        for store, read in stores.items():
            for mode in modes:
                indices = range(n) if mode == "sequential" else order
                start = time.perf_counter()
                total = 0
                for i in indices:
                    value = read(i)
                    if mode == "shuffled+decode":
                        with Image.open(io.BytesIO(value)) as image:
                            total += image.convert("RGB").size[0]
                    else:
                        total += zlib.crc32(value)
                elapsed = time.perf_counter() - start
                if run > 0:  # run 0 warms the page cache
                    seconds[(store, mode)].append(elapsed)
                checks.setdefault((mode, run), set()).add(total)
        log(f"protocol run {run}/{runs} done")
    assert all(len(v) == 1 for v in checks.values()), "the stores returned different images"
    print(f"\n{n} images, one process, median of {runs} (page cache warm)\n")
    print("| mode | bcd images/s | LMDB images/s | TFRecord images/s | bcd / LMDB | bcd / TFRecord |")
    print("|---|---|---|---|---|---|")
    table = []
    for mode in modes:
        rate = {store: n / statistics.median(seconds[(store, mode)]) for store in stores}
        table.append({"mode": mode, **rate})
        print(f"| {mode} | {rate['bcd']:,.0f} | {rate['lmdb']:,.0f} | {rate['tfrecord']:,.0f} | "
              f"{rate['bcd'] / rate['lmdb']:.2f}x | {rate['bcd'] / rate['tfrecord']:.2f}x |")
    return table


def sampler_run(records: int, what: str):
    """In a fresh process under GNU time: seconds and peak RSS of building one
    rank's epoch of `records` records."""
    script = f"""
import time, json
import bcd.sampling
start = time.perf_counter()
if {what!r} == "sampler":
    sampler = bcd.sampling.EpochSampler({records}, seed=1, rank=0, world_size=1)
    order = sampler.indices()
elif {what!r} == "partition-int64":
    order = bcd.partition({records}, seed=1, epoch=0, rank=0, world_size=1)
elif {what!r} == "sampler-8-ranks":
    sampler = bcd.sampling.EpochSampler({records}, seed=1, rank=3, world_size=8)
    order = sampler.indices()
elif {what!r} == "resume-at-end":
    sampler = bcd.sampling.EpochSampler({records}, seed=1, rank=0, world_size=1)
    order = sampler.indices(start={records} - 1000)
elif {what!r} == "elastic-8-to-3":
    # 8 ranks stopped at 0, 1/8, ..., 7/8 of their parts, resumed on 3.
    part = -(-{records} // 8)
    order = bcd.partition({records}, seed=1, epoch=0, rank=0, world_size=3, dtype="uint32",
                          resumed_from=[[part * r // 8 for r in range(8)]])
elif {what!r}.startswith("mix"):
    # 10 sources of records/10 each, weights 1..10.
    import bcd.mixture
    lengths = [{records} // 10] * 10
    weights = [float(k + 1) for k in range(10)]
    if {what!r} == "mix-sampler":
        order = bcd.mixture.MixEpochSampler(lengths, weights, seed=1, rank=0, world_size=1).indices()
    elif {what!r} == "mix-sampler-8-ranks":
        order = bcd.mixture.MixEpochSampler(lengths, weights, seed=1, rank=3, world_size=8).indices()
    elif {what!r} == "mix-partition-int64":
        sources, order = bcd.partition_mix(lengths, weights, seed=1, epoch=0, rank=0, world_size=1)
    elif {what!r} == "mix-elastic-8-to-3":
        part = -(-{records} // 8)
        order = bcd.partition_mix(lengths, weights, seed=1, epoch=0, rank=0, world_size=3, dtype="uint32",
                                  pairs=False, resumed_from=[[part * r // 8 for r in range(8)]])
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "length": len(order), "dtype": str(order.dtype)}}))
"""
    result = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-c", script], capture_output=True, text=True, check=True)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    out["peak_rss_mb"] = int(result.stderr.strip().splitlines()[-1]) / 1024
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--megabytes", type=int, default=150)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--readers", default="bcd,bcd-bytes,litdata,mosaic,lmdb,list")
    parser.add_argument("--only", choices=["epoch", "sampler", "protocol"], default=None)
    parser.add_argument("--sampler-records", type=int, default=100_000_000)
    parser.add_argument(
        "--sampler-cases",
        default="sampler,sampler-8-ranks,partition-int64,resume-at-end,elastic-8-to-3,"
        "mix-sampler,mix-sampler-8-ranks,mix-partition-int64,mix-elastic-8-to-3",
    )
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    results = {"epoch": [], "sampler": [], "protocol": []}
    if args.only in (None, "epoch"):
        files = prepare(args.data, args.megabytes)
        readers = args.readers.split(",")
        log(f"{len(files)} images, {sum(p.stat().st_size for p, _ in files) / 1e6:.0f} MB; readers {readers}")
        for run in range(args.runs):
            order = readers[run % len(readers):] + readers[:run % len(readers)]
            for reader in order:
                outcome = one_epoch(reader, args.data, seed=run)
                outcome["run"] = run
                results["epoch"].append(outcome)
                log(f"run {run} {reader}: {outcome['samples'] / outcome['seconds']:.0f} samples/s")
        checksums = {r["checksum"] for r in results["epoch"]}
        assert len(checksums) == 1, f"readers disagree on the images: {checksums}"
        table = []
        for reader in readers:
            seconds = [r["seconds"] for r in results["epoch"] if r["reader"] == reader]
            samples = results["epoch"][0]["samples"]
            median = statistics.median(seconds)
            table.append((reader, median, min(seconds), max(seconds), samples / median))
        best_other = max(rate for reader, *_, rate in table if reader in ("litdata", "mosaic", "lmdb"))
        print(f"\n{samples} images, batch {BATCH}, {WORKERS} fork workers, median of {args.runs}\n")
        print("| reader | epoch s, median (min-max) | samples/s | vs best of LitData, MosaicML, LMDB |")
        print("|---|---|---|---|")
        for reader, median, low, high, rate in table:
            print(f"| {reader} | {median:.2f} ({low:.2f}-{high:.2f}) | {rate:,.0f} | {rate / best_other:.2f}x |")
    if args.only in (None, "protocol"):
        files = prepare(args.data, args.megabytes)
        results["protocol"] = protocol(args.data, files, args.runs)
    if args.only in (None, "sampler"):
        print("\n| what | records | seconds | peak RSS MB | entries |")
        print("|---|---|---|---|---|")
        for what in args.sampler_cases.split(","):
            runs = [sampler_run(args.sampler_records, what) for _ in range(3)]
            results["sampler"].append({"what": what, "runs": runs})
            seconds = statistics.median(r["seconds"] for r in runs)
            rss = max(r["peak_rss_mb"] for r in runs)
            print(f"| {what} | {args.sampler_records:,} | {seconds:.2f} | {rss:.0f} | {runs[0]['length']:,} {runs[0]['dtype']} |")
    (args.data / "train_bench.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
