"""`bcd ingest` of a Hugging Face `save_to_disk` directory of JPEG-sized images,
beside the I/O floor and `datasets`' own reader, in the same run on the same
data (issue 23).

    python3 -m venv /tmp/bench-venv
    /tmp/bench-venv/bin/pip install -r bench/requirements-train.txt pyarrow==26.0.1 datasets==5.0.1
    cargo build --release -p bcd-cli
    /tmp/bench-venv/bin/python bench/hf_disk_bench.py [--megabytes 1024] [--repeats 3] [--dir /tmp/bench-hf]

The corpus (made by `datasets` itself, in --dir or a temp dir): rows of
`id` (string), `image` (an `Image` feature holding JPEG-sized bytes: a JPEG
header, then random bytes, 40-200 KiB, incompressible as JPEG is) and `label`
(a `ClassLabel` of 1000 names), built with `Dataset.from_generator` and written
by `save_to_disk` (its default 500 MB shards).

Timed, in rotating order, median of `repeats`, page cache warm (every file is
read once first):
- the I/O floor: read every data file `state.json` lists, in order, and write
  its bytes to one file on the same disk, then fsync (what any conversion must
  at least do);
- `bcd ingest DIR --into NEW --value-column image --key-column id` as a process
  (default LZ4, and `--compression none`), fsyncs included;
- `datasets`' own reader: `datasets.load_from_disk` in a fresh process, the
  image column cast to `Image(decode=False)` (the bytes are not real JPEGs; a
  loader would decode them, which is no part of a conversion), every row
  iterated and its image's bytes touched (construction not timed).
Ratios are seconds / the floor's seconds; MB/s are of image bytes. The CPU
seconds (user + system, of the process and its children) are beside: on a
machine shared with other work, wall time mostly measures waiting for a core,
and CPU time is what the conversion itself spends. With
`--baseline OTHER_BCD`, both ingests are also timed with that binary (an older
build) in the same rotation.

Once, outside the timing, every record bcd stored (key, value, label), read back
through `bcd export --to OUT.parquet` and pyarrow, is compared with what
`datasets.load_from_disk` gives, row by row.
"""

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BCD = ROOT / "target" / "release" / "bcd"
JPEG_HEADER = bytes.fromhex("ffd8ffe000104a46494600010100000100010000")
MIN_SIZE, MAX_SIZE = 40 << 10, 200 << 10


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def rows(count):
    for i in range(count):
        rng = random.Random(i)
        size = rng.randrange(MIN_SIZE, MAX_SIZE)
        image = JPEG_HEADER + rng.randbytes(size - len(JPEG_HEADER))
        yield {"id": f"img-{i:07}", "image": {"bytes": image, "path": None}, "label": i % 1000}


def make(out, count):
    import datasets

    datasets.disable_progress_bars()
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=[f"class{k:03}" for k in range(1000)]),
        }
    )
    cache = out.parent / "hf-cache"
    data = datasets.Dataset.from_generator(rows, gen_kwargs={"count": count}, features=features,
                                           cache_dir=str(cache))
    data.save_to_disk(str(out))
    shutil.rmtree(cache, ignore_errors=True)


def data_files(directory):
    state = json.loads((directory / "state.json").read_text())
    return [directory / f["filename"] for f in state["_data_files"]]


def floor(directory, out):
    """Every data file's bytes, in state.json's order, into one file, fsynced."""
    with open(out, "wb") as sink:
        for path in data_files(directory):
            with open(path, "rb") as source:
                shutil.copyfileobj(source, sink, 1 << 20)
        sink.flush()
        os.fsync(sink.fileno())


def bcd_ingest(directory, out, *flags, binary=BCD):
    subprocess.run([binary, "ingest", directory, "--into", out, "--format", "hf-disk", "--value-column", "image",
                    "--key-column", "id", "--quiet", *flags], check=True, stdout=subprocess.DEVNULL)


def cpu_seconds():
    """User + system CPU seconds of this process and its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def in_child(mode, directory):
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(directory)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def child(mode, directory):
    """`loop`: seconds of iterating `load_from_disk`'s dataset, touching every
    image (loading not timed). `records`: every row as (id, sha1 of the image,
    label)."""
    import datasets

    data = datasets.load_from_disk(directory).cast_column("image", datasets.Image(decode=False))
    if mode == "loop":
        start = time.perf_counter()
        total = sum(len(row["image"]["bytes"]) for row in data)
        print(json.dumps({"seconds": time.perf_counter() - start, "bytes": total}))
    else:
        print(json.dumps([[row["id"], hashlib.sha1(row["image"]["bytes"]).hexdigest(), row["label"]]
                          for row in data]))


def check(directory, work):
    """Records bcd stored, exported to Parquet, against `load_from_disk`'s rows."""
    import pyarrow.parquet as pq

    ds, out = work / "check-ds", work / "check.parquet"
    shutil.rmtree(ds, ignore_errors=True)
    bcd_ingest(directory, ds)
    subprocess.run([BCD, "export", ds, "--to", out], check=True, stdout=subprocess.DEVNULL)
    table = pq.read_table(out).to_pydict()
    images = [x["bytes"] if isinstance(x, dict) else x for x in table["image"]]
    ours = [[i, hashlib.sha1(image).hexdigest(), label] for i, image, label in zip(table["id"], images, table["label"])]
    theirs = in_child("records", directory)
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    mismatches = sum(a != b for a, b in zip(ours, theirs))
    assert mismatches == 0, f"{mismatches} records differ"
    shutil.rmtree(ds)
    out.unlink()
    return len(ours)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="work directory (default: a temp dir; kept when given)")
    parser.add_argument("--baseline", help="another bcd binary (an older build) to time in the same runs")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    if not BCD.exists():
        sys.exit("build first: cargo build --release -p bcd-cli")
    count = args.megabytes * (1 << 20) // ((MIN_SIZE + MAX_SIZE) // 2)
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="hf-disk-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    directory = work / "saved"
    if not (directory / "state.json").exists():
        started = time.perf_counter()
        make(directory, count)
        log(f"save_to_disk: {count} rows written in {time.perf_counter() - started:.1f} s")
    stored = sum(p.stat().st_size for p in data_files(directory))
    images = in_child("loop", directory)["bytes"]
    checked = check(directory, work)
    log(f"{checked} records equal to load_from_disk's rows")
    floor(directory, work / "warm")  # page cache warm for everyone
    (work / "warm").unlink()
    methods = {
        "I/O floor (read the data files, write one file, fsync)": lambda: floor(directory, work / "floor.out"),
        "bcd ingest": lambda: bcd_ingest(directory, work / "ds"),
        "bcd ingest --compression none": lambda: bcd_ingest(directory, work / "ds", "--compression", "none"),
        "datasets load_from_disk loop (decode=False)": None,
    }
    if args.baseline:
        baseline = Path(args.baseline)
        methods["bcd ingest (baseline)"] = lambda: bcd_ingest(directory, work / "ds", binary=baseline)
        methods["bcd ingest --compression none (baseline)"] = lambda: bcd_ingest(
            directory, work / "ds", "--compression", "none", binary=baseline)
    names = list(methods)
    times = {m: [] for m in names}
    cpu = {m: [] for m in names}
    for repeat in range(args.repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        for method in order:
            shutil.rmtree(work / "ds", ignore_errors=True)
            (work / "floor.out").unlink(missing_ok=True)
            if methods[method] is None:
                elapsed = in_child("loop", directory)["seconds"]
            else:
                os.sync()
                start, start_cpu = time.perf_counter(), cpu_seconds()
                methods[method]()
                elapsed = time.perf_counter() - start
                cpu[method].append(cpu_seconds() - start_cpu)
            times[method].append(elapsed)
            log(f"{method}: {elapsed:.2f} s" + (f", {cpu[method][-1]:.2f} s of CPU" if cpu[method] else ""))
    shutil.rmtree(work / "ds", ignore_errors=True)
    (work / "floor.out").unlink(missing_ok=True)
    base = statistics.median(times[names[0]])
    load = os.getloadavg()
    print(f"\n{checked} rows, {images / 1e6:.0f} MB of images ({MIN_SIZE >> 10}-{MAX_SIZE >> 10} KiB), "
          f"{stored / 1e6:.0f} MB of Arrow files; median of {args.repeats}; ratio = seconds / the I/O floor's; "
          f"load average {load[0]:.1f}; equal to load_from_disk: yes ({checked} rows)\n")
    base_cpu = statistics.median(cpu[names[0]])
    print("| method | s, median (min-max) | MB/s of images | ratio | CPU s (user+sys), median | CPU ratio |")
    print("|---|---|---|---|---|---|")
    for method in names:
        seconds = statistics.median(times[method])
        used = f"{statistics.median(cpu[method]):.2f} | {statistics.median(cpu[method]) / base_cpu:.2f}x" \
            if cpu[method] else "(not measured) |"
        print(f"| {method} | {seconds:.2f} ({min(times[method]):.2f}-{max(times[method]):.2f}) "
              f"| {images / 1e6 / seconds:.0f} | {seconds / base:.2f}x | {used} |")
    if not args.dir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
