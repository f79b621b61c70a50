"""`bcd ingest` of an LMDB environment of JPEG-sized values, beside the I/O
floor and py-lmdb's own read loop, in the same run on the same data.

    make python-env && .venv/bin/python -m pip install -r bench/requirements.txt
    cargo build --release -p bcd-cli
    .venv/bin/python bench/lmdb_bench.py [--megabytes 1536] [--repeats 5]

Data (made fresh in a temp dir under target/, by py-lmdb as image-to-LMDB
scripts write it): values of 40 to 200 KiB (JPEG's sizes; a JPEG header, then
random bytes, which is what JPEG looks like to LZ4), keyed by a zero-padded
index, in two environments: the values as stored (`raw`), and
`pickle.dumps((image_bytes, label))` per entry with the `__keys__`/`__len__`
entries (`pickle`, read with `--lmdb-value pickle`).

Timed, each with a warm page cache (everything is read once before):
- `bcd ingest ENV --into DS` (the default: LZ4 blocks, incompressible values
  stored as literal blocks) and with `--compression none`;
- the I/O floor: reading `data.mdb` and writing its bytes to one file on the
  same disk with an fsync (`cat data.mdb > out; sync out`, done in Python with
  1 MiB reads);
- py-lmdb's read loop: a cursor over every entry, copying each value to
  `bytes` (what a training loader's `txn.get` costs), and, for `pickle`,
  `pickle.loads` of each.
Each ingest is then checked against py-lmdb's reading: every key and value
(for `pickle`, the tuple's bytes and its label) equal, in order.
Wall-clock seconds, median (min-max) over repeats, contenders in rotating
order, with the CPU seconds (user + system) each spent beside (on a shared
machine, wall time mostly measures waiting for a core); MB/s of value bytes; ratios to the I/O floor. With `--baseline
OTHER_BCD`, both ingests are also timed with that binary (an older build) in
the same runs; `--layouts raw` times one environment only.
"""

import argparse
import hashlib
import os
import pickle
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lmdb

ROOT = Path(__file__).resolve().parents[1]
BCD = ROOT / "target" / "release" / "bcd"
JPEG_HEADER = bytes.fromhex("ffd8ffe000104a46494600010100000100010000")


def make(env_dir: Path, megabytes: int, layout: str) -> tuple[int, int]:
    """Writes the environment; returns (entries, value bytes)."""
    rng = random.Random(1)
    env = lmdb.open(str(env_dir), map_size=4 * megabytes << 20, writemap=False)
    total = entries = 0
    keys = []
    txn = env.begin(write=True)
    while total < megabytes << 20:
        size = rng.randrange(40 << 10, 200 << 10)
        image = JPEG_HEADER + rng.randbytes(size - len(JPEG_HEADER))
        key = b"%08d" % entries
        value = image if layout == "raw" else pickle.dumps((image, entries % 1000))
        txn.put(key, value)
        keys.append(key)
        total += size
        entries += 1
        if entries % 2000 == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    if layout == "pickle":
        with env.begin(write=True) as txn:
            txn.put(b"__keys__", pickle.dumps(keys))
            txn.put(b"__len__", pickle.dumps(len(keys)))
    env.close()
    return entries, total


def io_floor(env_dir: Path, out: Path) -> None:
    with open(env_dir / "data.mdb", "rb") as src, open(out, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())


def py_lmdb_loop(env_dir: Path, layout: str) -> None:
    env = lmdb.open(str(env_dir), readonly=True, lock=False, readahead=True)
    with env.begin() as txn:
        for _key, value in txn.cursor():
            value = bytes(value)
            if layout == "pickle" and not _key.startswith(b"__"):
                pickle.loads(value)
    env.close()


def digest_lmdb(env_dir: Path, layout: str) -> str:
    h = hashlib.blake2b()
    env = lmdb.open(str(env_dir), readonly=True, lock=False)
    with env.begin() as txn:
        for key, value in txn.cursor():
            if layout == "pickle":
                if key in (b"__keys__", b"__len__"):
                    continue
                value, label = pickle.loads(value)
                h.update(b"%d:" % label)
            h.update(len(key).to_bytes(4, "little") + key + len(value).to_bytes(4, "little") + value)
    env.close()
    return h.hexdigest()


def digest_bcd(ds: Path, layout: str) -> str:
    import bcd

    h = hashlib.blake2b()
    dataset = bcd.Dataset(ds)
    labels = dataset.fields().to_pydict()["label"] if layout == "pickle" else None
    for i in range(len(dataset)):
        key, value = bytes(dataset.key_at(i)), bytes(dataset.at(i))
        if labels is not None:
            h.update(b"%d:" % labels[i])
        h.update(len(key).to_bytes(4, "little") + key + len(value).to_bytes(4, "little") + value)
    return h.hexdigest()


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn) -> tuple[float, float]:
    """Wall and CPU seconds of `fn()`."""
    start, start_cpu = time.perf_counter(), cpu_seconds()
    fn()
    return time.perf_counter() - start, cpu_seconds() - start_cpu


def warm(path: Path) -> None:
    for file in path.rglob("*") if path.is_dir() else [path]:
        if file.is_file():
            with open(file, "rb") as f:
                while f.read(1 << 22):
                    pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=1536)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", help="another bcd binary (an older build) to time in the same runs")
    parser.add_argument("--dir", help="where the temporary work directory goes (default: target/)")
    parser.add_argument("--layouts", default="raw,pickle", help="which environments (raw, pickle)")
    args = parser.parse_args()
    if not BCD.exists():
        sys.exit("build first: cargo build --release -p bcd-cli")
    (ROOT / "target").mkdir(exist_ok=True)
    parent = Path(args.dir) if args.dir else ROOT / "target"
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix="lmdb-bench-") as tmp:
        tmp = Path(tmp)
        print("| layout | entries | value MB | what | wall s, median (min-max) | MB/s of values | vs I/O floor "
              "| CPU s (user+sys), median | CPU vs I/O floor |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for layout in args.layouts.split(","):
            env_dir = tmp / f"env-{layout}"
            entries, total = make(env_dir, args.megabytes, layout)
            mb = total / 1e6
            flags = ["--lmdb-value", "pickle"] if layout == "pickle" else []
            runs, cpu = {}, {}

            def bcd_ingest(extra, binary=BCD):
                def run():
                    ds = tmp / "ds"
                    shutil.rmtree(ds, ignore_errors=True)
                    subprocess.run(
                        [binary, "ingest", "--quiet", str(env_dir), "--into", str(ds), *flags, *extra],
                        check=True,
                    )
                return run

            cases = [
                ("I/O floor (read data.mdb, write one file, fsync)", lambda: io_floor(env_dir, tmp / "floor")),
                ("bcd ingest", bcd_ingest([])),
                ("bcd ingest --compression none", bcd_ingest(["--compression", "none"])),
                ("py-lmdb read loop" + (" + pickle.loads" if layout == "pickle" else ""), lambda: py_lmdb_loop(env_dir, layout)),
            ]
            if args.baseline:
                cases += [
                    ("bcd ingest (baseline)", bcd_ingest([], Path(args.baseline))),
                    ("bcd ingest --compression none (baseline)", bcd_ingest(["--compression", "none"], Path(args.baseline))),
                ]
            warm(env_dir)
            for repeat in range(args.repeats):
                # Rotating order, so no contender always runs first or last.
                shift = repeat % len(cases)
                for name, fn in cases[shift:] + cases[:shift]:
                    wall, used = timed(fn)
                    runs.setdefault(name, []).append(wall)
                    cpu.setdefault(name, []).append(used)
            floor = statistics.median(runs[cases[0][0]])
            floor_cpu = statistics.median(cpu[cases[0][0]])
            for name, _ in cases:
                times = runs[name]
                median = statistics.median(times)
                print(
                    f"| {layout} | {entries} | {mb:.0f} | {name} | {median:.2f} ({min(times):.2f}-{max(times):.2f}) "
                    f"| {mb / median:.0f} | {median / floor:.2f}x "
                    f"| {statistics.median(cpu[name]):.2f} | {statistics.median(cpu[name]) / floor_cpu:.2f}x |"
                )
            # Equality with py-lmdb's reading, of the last ingest (--compression
            # none) and of a default one.
            want = digest_lmdb(env_dir, layout)
            got_none = digest_bcd(tmp / "ds", layout)
            bcd_ingest([])()
            got_lz4 = digest_bcd(tmp / "ds", layout)
            equal = want == got_none == got_lz4
            print(f"| {layout} | {entries} | {mb:.0f} | equal to py-lmdb's reading (keys, values{', labels' if layout == 'pickle' else ''}) | {'yes' if equal else 'NO'} | | | | |")
            shutil.rmtree(env_dir)
            shutil.rmtree(tmp / "ds", ignore_errors=True)


if __name__ == "__main__":
    main()
