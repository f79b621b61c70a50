"""Core store benchmark: bcd (Rust) against the Python reference, same data, same run.

    make python-env && cargo build --release -p bcd-bench
    .venv/bin/python bench/core_bench.py [--repeats 5] [--scale 1.0]

Corpora (made fresh in a temp dir): `text`, real source text (the Python standard
library's .py files, one file per record, keyed by path) and `random`, 100 KiB
incompressible values (what JPEG/PNG/MP3 look like to LZ4). For each: time to
write the dataset (reference `create` + one `extend`; bcd `Dataset::create` +
`extend`), time to open it, and a shuffled read of every record that touches every
byte (sums them). Times exclude interpreter/process start-up. Reports the median
over repeats and the ratio reference / bcd (> 1 means bcd is faster).
"""

import argparse
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
import reference  # noqa: E402

BENCH = ROOT / "target" / "release" / "core-bench"


def text_corpus(scale):
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
    limit = int(len(files) * scale)
    return [(str(p).encode(), p.read_bytes()) for p in files[:limit]]


def random_corpus(scale):
    rng = random.Random(0)
    return [(b"img/%06d.jpg" % i, rng.randbytes(100 * 1024)) for i in range(int(1000 * scale))]


def write_records_file(records, path):
    with open(path, "wb") as f:
        for k, v in records:
            f.write(struct.pack("<I", len(k)) + k + struct.pack("<I", len(v)) + v)


def run_reference(dataset_class, records, path, order):
    import numpy as np

    start = time.perf_counter()
    dataset_class.create(path, keyed=True, compression="lz4")
    dataset_class(path).extend(iter(records))
    write = time.perf_counter() - start
    start = time.perf_counter()
    ds = dataset_class(path)
    opened = time.perf_counter() - start
    start = time.perf_counter()
    checksum = 0
    for i in order:
        checksum += int(np.frombuffer(ds.at(i), np.uint8).sum(dtype=np.uint64))
    read = time.perf_counter() - start
    return write, opened, read, checksum


def run_bcd(records_file, path, order_file):
    out = subprocess.run([BENCH, "write", path, records_file, "1", "lz4"], check=True, capture_output=True, text=True)
    write = float(out.stdout)
    out = subprocess.run([BENCH, "read", path, order_file], check=True, capture_output=True, text=True)
    opened, read, checksum = out.stdout.split()
    return write, float(opened), float(read), int(checksum)


def dir_size(path):
    return sum(f.stat().st_size for f in Path(path).iterdir() if f.suffix == ".bin")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    if not BENCH.exists():
        sys.exit("build first: cargo build --release -p bcd-bench")
    dataset_class = reference.load("0.3.0")
    print(f"machine: {os.cpu_count()} cores; repeats: {args.repeats}; medians; ratio = reference / bcd\n")
    print("| corpus | records | MB | step | reference s | bcd s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, make in [("text", text_corpus), ("random 100 KiB", random_corpus)]:
        records = make(args.scale)
        megabytes = sum(len(k) + len(v) for k, v in records) / 1e6
        order = list(range(len(records)))
        random.Random(1).shuffle(order)
        results = {"reference": [], "bcd": []}
        with tempfile.TemporaryDirectory() as tmp:
            records_file = os.path.join(tmp, "records")
            order_file = os.path.join(tmp, "order")
            write_records_file(records, records_file)
            Path(order_file).write_bytes(struct.pack(f"<{len(order)}I", *order))
            sizes = {}
            for _ in range(args.repeats):
                # Alternate, so drift in machine load hits both alike.
                for side in ("reference", "bcd"):
                    path = os.path.join(tmp, side)
                    shutil.rmtree(path, ignore_errors=True)
                    if side == "reference":
                        results[side].append(run_reference(dataset_class, records, path, order))
                    else:
                        results[side].append(run_bcd(records_file, path, order_file))
                    sizes[side] = dir_size(path)
            checksums = {side: {r[3] for r in rs} for side, rs in results.items()}
            assert checksums["reference"] == checksums["bcd"] and len(checksums["bcd"]) == 1, checksums
            assert sizes["reference"] == sizes["bcd"], sizes
        for step, column in [("write (lz4 HC)", 0), ("open", 1), ("shuffled read", 2)]:
            ref = statistics.median(r[column] for r in results["reference"])
            ours = statistics.median(r[column] for r in results["bcd"])
            print(f"| {name} | {len(records)} | {megabytes:.0f} | {step} | {ref:.3f} | {ours:.3f} | {ref / ours:.1f}x |")
        ratio = megabytes * 1e6 / sizes["bcd"]
        print(f"| {name} | | | compression ratio (identical bytes on disk) | {ratio:.2f} | {ratio:.2f} | |")


if __name__ == "__main__":
    main()
