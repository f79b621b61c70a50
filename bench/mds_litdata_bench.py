"""`bcd ingest` of MosaicML Streaming (MDS) and LitData directories against the
I/O floor of the same files, with each tool's own reader loop beside (issue 23).

    python3 -m venv /work/venvs/mds
    /work/venvs/mds/bin/pip install -r bench/requirements-train.txt pyarrow==26.0.1
    cargo build --release -p bcd-cli
    /work/venvs/mds/bin/python bench/mds_litdata_bench.py [--megabytes 1024] [--repeats 3]

The corpus (made fresh in a temp dir, by the tools themselves): samples of
JPEG-sized random bytes (60-140 KiB, incompressible as JPEG is), each with a
string id and an int label, written
- by `streaming.MDSWriter` (columns id: str, image: bytes, label: int; 64 MiB
  shards), plain, and zstd-compressed with xxh64 hashes in the index;
- by `litdata.optimize` (items {"id", "image", "label"}; 64 MB chunks), plain,
  and with compression="zstd" (its default layout, zstd frames of 256 items).

Timed, each in rotating order, median of `repeats`, page cache warm (every
directory is read once first):
- the I/O floor: read every shard file the index lists, in order, and write its
  bytes to one file on the same disk, then fsync (what any conversion must at
  least do; for compressed shards it does not decompress);
- `bcd ingest DIR --into NEW --key-column id` as a process (default LZ4,
  `--level fast` (liblz4's fast mode) and `--compression none`), fsyncs
  included; with `--baseline OTHER_BCD`, the same three with that binary (an
  older build) in the same rotation;
- the tool's own reader loop: `streaming.StreamingDataset` / `litdata.StreamingDataset`
  iterated in order in a fresh process over a copy, touching every image (they
  read and decode, and write nothing; imports and the dataset's construction
  are not timed).
Ratios are seconds / the floor's seconds. The CPU seconds (user + system, of
the process and its children) are beside: on a machine shared with other work,
wall time also measures waiting for a core. `--corpora` picks some of the
corpora (comma-separated names as below). With litdata 0.2.76 and pyarrow
installed, `optimize` writes these flat dict items (no image or tensor leaf) as
an Arrow IPC footer only (`LDARW01`), which bcd reads since session 34 (before,
it refused the layout, and the LitData corpora failed their check). Two more
LitData corpora are text, the common LLM case: items {"id", "text" (1-7 KiB of
random words), "label", "meta": {"source"}} ingested with `--value-column text`,
plain and with compression="zstd" (which becomes the footer's IPC zstd: text
is not "binary heavy"). Once per corpus, outside the timing, every record bcd
stored (key, value, label), read back through `bcd export --to OUT.parquet` and
pyarrow, is compared with what the tool's reader gives.
"""

import argparse
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
MIN_SIZE, MAX_SIZE = 60 << 10, 140 << 10


def sample(i):
    rng = random.Random(i)
    return {"id": f"img-{i:07}", "image": rng.randbytes(rng.randint(MIN_SIZE, MAX_SIZE)), "label": i % 1000}


WORDS = ["the", "of", "data", "model", "train", "token", "shard", "river", "stone", "light", "north",
         "value", "record", "bright", "quietly", "table", "garden", "number", "signal", "window"]


def text_sample(i):
    rng = random.Random(i)
    words, size, target = [], 0, rng.randint(1 << 10, 7 << 10)
    while size < target:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return {"id": f"doc-{i:07}", "text": " ".join(words), "label": i % 1000, "meta": {"source": f"s{i % 7}"}}


def write_mds(out, count, **options):
    from streaming import MDSWriter

    # `bytes`: MDS's jpeg encoding would have its reader decode them as images.
    columns = {"id": "str", "image": "bytes", "label": "int"}
    with MDSWriter(out=str(out), columns=columns, **options) as writer:
        for i in range(count):
            writer.write(sample(i))


def write_litdata(out, count, fn=sample, **options):
    from litdata import optimize

    optimize(fn=fn, inputs=list(range(count)), output_dir=str(out), chunk_bytes="64MB", num_workers=1, **options)


def value_of(kind):
    """The item's value leaf: the text of the text corpora, else the image."""
    return "text" if kind == "litdata-text" else "image"


def shard_files(directory):
    index = json.loads((directory / "index.json").read_text())
    if "shards" in index:
        return [directory / (s["zip_data"] or s["raw_data"])["basename"] for s in index["shards"]]
    return [directory / c["filename"] for c in index["chunks"]]


def floor(directory, out):
    """Every shard's bytes, in index order, into one file, fsynced."""
    with open(out, "wb") as sink:
        for path in shard_files(directory):
            with open(path, "rb") as source:
                shutil.copyfileobj(source, sink, 1 << 20)
        sink.flush()
        os.fsync(sink.fileno())


def bcd_ingest(kind, directory, out, *flags, binary=BCD):
    value = ["--value-column", "text"] if kind == "litdata-text" else []
    subprocess.run([binary, "ingest", directory, "--into", out, "--key-column", "id", *value, "--quiet", *flags],
                   check=True, stdout=subprocess.DEVNULL)


def cpu_seconds():
    """User + system CPU seconds of this process and its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def reader(kind, directory):
    """The tool's own dataset over `directory`, in order."""
    if kind == "mds":
        from streaming import StreamingDataset

        return StreamingDataset(local=str(directory), shuffle=False, batch_size=1)
    from litdata import StreamingDataset

    return StreamingDataset(input_dir=str(directory), shuffle=False)


def value_bytes(value):
    return value.encode() if isinstance(value, str) else bytes(value)


def in_child(mode, kind, directory):
    """Runs `mode` of this script in a fresh process (the tools keep one dataset
    per directory and process) and returns what it printed, as JSON."""
    out = subprocess.run([sys.executable, __file__, "--child", mode, kind, str(directory)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def child(mode, kind, directory):
    """`loop`: the seconds of iterating the tool's reader (imports and the
    dataset's construction not timed), touching every image. `records`: every
    record as (id, sha1 of the image, label)."""
    import hashlib

    data = reader(kind, directory)
    value = value_of(kind)
    if mode == "loop":
        start = time.perf_counter()
        total = sum(len(item[value]) for item in data)
        print(json.dumps({"seconds": time.perf_counter() - start, "bytes": total}))
    else:
        print(json.dumps([[x["id"], hashlib.sha1(value_bytes(x[value])).hexdigest(), int(x["label"])] for x in data]))


def check(kind, directory, work):
    import hashlib

    import pyarrow.parquet as pq

    ds, out = work / "check-ds", work / "check.parquet"
    shutil.rmtree(ds, ignore_errors=True)
    bcd_ingest(kind, directory, ds)
    subprocess.run([BCD, "export", ds, "--to", out], check=True, stdout=subprocess.DEVNULL)
    table = pq.read_table(out).to_pydict()
    ours = [[i, hashlib.sha1(value).hexdigest(), label]
            for i, value, label in zip(table["id"], table[value_of(kind)], table["label"])]
    theirs = in_child("records", kind, scratch(directory, work))
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    mismatches = sum(a != b for a, b in zip(ours, theirs))
    assert mismatches == 0, f"{mismatches} records differ"
    shutil.rmtree(ds)
    out.unlink()
    return len(ours)


def scratch(directory, work):
    copy = work / "scratch"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(directory, copy)
    return copy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="work directory (default: a temp dir)")
    parser.add_argument("--make-only", action="store_true", help="write the corpora into --dir and stop")
    parser.add_argument("--keep", action="store_true", help="keep each corpus after its measurement (the disk needs room for all six)")
    parser.add_argument("--corpora", help="comma-separated names of the corpora to run (default: all six)")
    parser.add_argument("--baseline", help="another bcd binary (an older build) to time in the same runs")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, kind, directory = args.child
        return child(mode, kind, directory)
    if not BCD.exists() and not args.make_only:
        sys.exit("build first: cargo build --release -p bcd-cli")
    count = args.megabytes * (1 << 20) // ((MIN_SIZE + MAX_SIZE) // 2)
    text_count = args.megabytes * (1 << 20) // (4 << 10)
    work = Path(args.dir or tempfile.mkdtemp(prefix="mds-bench-"))
    corpora = {
        "mds": ("mds", lambda out: write_mds(out, count)),
        "mds zstd+xxh64": ("mds", lambda out: write_mds(out, count, compression="zstd", hashes=["xxh64"])),
        "litdata": ("litdata", lambda out: write_litdata(out, count)),
        "litdata zstd (batch)": ("litdata", lambda out: write_litdata(out, count, compression="zstd")),
        "litdata text": ("litdata-text", lambda out: write_litdata(out, text_count, fn=text_sample)),
        "litdata text zstd": (
            "litdata-text",
            lambda out: write_litdata(out, text_count, fn=text_sample, compression="zstd"),
        ),
    }
    if args.corpora:
        wanted = args.corpora.split(",")
        unknown = set(wanted) - set(corpora)
        if unknown:
            sys.exit(f"unknown corpora {sorted(unknown)}; they are {list(corpora)}")
        corpora = {name: corpora[name] for name in wanted}
    rows = []
    for name, (kind, make) in corpora.items():
        directory = work / name.replace(" ", "_").replace("(", "").replace(")", "").replace("+", "_")
        if not directory.exists():
            started = time.perf_counter()
            make(directory)
            print(f"{name}: written in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        if args.make_only:
            continue
        stored = sum(p.stat().st_size for p in shard_files(directory))
        checked = check(kind, directory, work)
        print(f"{name}: {checked} records equal to the tool's reading", file=sys.stderr)
        floor(directory, work / "warm")  # page cache warm for everyone
        methods = {
            "I/O floor (read shards, write one file, fsync)": lambda: floor(directory, work / "floor.out"),
            "bcd ingest": lambda: bcd_ingest(kind, directory, work / "ds"),
            "bcd ingest --level fast": lambda: bcd_ingest(kind, directory, work / "ds", "--level", "fast"),
            "bcd ingest --compression none": lambda: bcd_ingest(kind, directory, work / "ds", "--compression", "none"),
            f"{kind} StreamingDataset loop": None,
        }
        if args.baseline:
            baseline = Path(args.baseline)
            for flags in ([], ["--level", "fast"], ["--compression", "none"]):
                methods[" ".join(["bcd ingest", *flags, "(baseline)"])] = (
                    lambda flags=flags: bcd_ingest(kind, directory, work / "ds", *flags, binary=baseline))
        times = {m: [] for m in methods}
        cpu = {m: [] for m in methods}
        names = list(methods)
        for repeat in range(args.repeats):
            order = names[repeat % len(names):] + names[:repeat % len(names)]
            for method in order:
                shutil.rmtree(work / "ds", ignore_errors=True)
                if methods[method] is None:
                    # A fresh process on a copy; only its iteration is timed.
                    elapsed = in_child("loop", kind, scratch(directory, work))["seconds"]
                else:
                    os.sync()
                    start, start_cpu = time.perf_counter(), cpu_seconds()
                    methods[method]()
                    elapsed = time.perf_counter() - start
                    cpu[method].append(cpu_seconds() - start_cpu)
                times[method].append(elapsed)
                used = f", {cpu[method][-1]:.2f} s of CPU" if cpu[method] else ""
                print(f"  {name}: {method}: {elapsed:.2f} s{used}", file=sys.stderr)
        base = statistics.median(times[names[0]])
        for method in names:
            seconds = statistics.median(times[method])
            used = statistics.median(cpu[method]) if cpu[method] else None
            rows.append((name, checked, stored, method, seconds, min(times[method]), max(times[method]), seconds / base,
                         used))
            # Each corpus's rows as soon as they are measured (a later corpus may fail).
            print(f"  {name}: {method}: median {seconds:.2f} s, {stored / 1e6 / seconds:.0f} MB/s, "
                  f"{seconds / base:.2f}x the floor", file=sys.stderr)
        (work / "warm").unlink()
        for leftover in (work / "ds", work / "floor.out", work / "scratch"):
            shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
        if not args.keep:
            shutil.rmtree(directory)
    load = os.getloadavg()
    print(f"\n{count} samples of {MIN_SIZE >> 10}-{MAX_SIZE >> 10} KiB random bytes (text corpora: {text_count} "
          f"items of 1-7 KiB of text); median of {args.repeats}; ratio = seconds / the I/O floor's; "
          f"load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")
    print("| corpus | records | shard MB | method | s (min-max) | MB/s | ratio | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, checked, stored, method, seconds, lo, hi, ratio, used in rows:
        used = f"{used:.2f}" if used is not None else ""
        print(f"| {name} | {checked} | {stored / 1e6:.0f} | {method} | {seconds:.2f} ({lo:.2f}-{hi:.2f}) "
              f"| {stored / 1e6 / seconds:.0f} | {ratio:.2f}x | {used} |")
    if not args.dir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
