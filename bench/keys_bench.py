"""Benchmarks of issue 25: keyed ingest at scale, duplicates by content, checksums on read.

    make python-env && .venv/bin/python -m pip install -r bench/requirements.txt
    cargo build --release -p bcd-cli -p bcd-bench
    # The baseline: keys-bench built from another commit (main before the
    # compact key set), which lacks Dataset::set_memory_limit:
    mkdir /tmp/base && git archive BASE | tar -x -C /tmp/base
    sed '/MEMORY_LIMIT_LINE/d' bench/src/keys_bench.rs > /tmp/base/bench/src/keys_bench.rs
    # (add the keys-bench [[bin]] of bench/Cargo.toml to /tmp/base/bench/Cargo.toml)
    (cd /tmp/base && cargo build --release -p bcd-bench --bin keys-bench)
    .venv/bin/python bench/keys_bench.py keys --records 20000000 --baseline /tmp/base/target/release/keys-bench
    .venv/bin/python bench/keys_bench.py keys --records 100000000 --repeats 1
    .venv/bin/python bench/keys_bench.py keys --records 300000000 --memory-limit 4G --repeats 1
    .venv/bin/python bench/keys_bench.py dedup --mb 1000 --repeats 5
    .venv/bin/python bench/keys_bench.py verify --mb 1000 --repeats 5

`keys`: `keys-bench extend DATASET N [LIMIT]` (bench/src/keys_bench.rs: one
keyed extend of N records made in the process, 12-byte keys in no order, 8-byte
values stored uncompressed, through the batched path `bcd ingest` takes; the
commit writes the persisted index). Reports wall seconds and records/s (the
extend and its commit), CPU seconds (user + system, every thread: steadier
than wall time on a shared machine), peak RSS (GNU time) and its bytes per record, and the
most bytes the spill directory held. `--baseline BIN` runs the same program
built from another commit (built as above) on the sizes up to
`--baseline-max`, alternating with this one.

`dedup`: `bcd ingest TREE` of a JPEG tree (bench/ingest_bench.py's corpus,
each image distinct) with and without `--dedup content`, alternating, medians:
the cost of hashing every value and checking it against the others'.

`verify`: `bcd verify DS --content` and `bcd verify DS` of that tree's
dataset (built with `--dedup content`) from a warm page cache, alternating:
GB/s of values checked, and the content hashes' bytes per record. With
`--python`, also the dataset read through the Python package (a release build
in the environment: `get_batch` of every record in shuffled batches) with and
without `verify=True`.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from ingest_bench import make_jpeg_tree, run_process  # noqa: E402

BCD = ROOT / "target/release/bcd"
KEYS_BENCH = ROOT / "target/release/keys-bench"


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def dir_bytes(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def keys(args):
    rows = []
    for n in [int(x) for x in args.records.split(",")]:
        programs = [("this", KEYS_BENCH)]
        if args.baseline and n <= args.baseline_max:
            programs.append(("baseline", Path(args.baseline)))
        for repeat in range(args.repeats):
            for name, program in programs if repeat % 2 == 0 else programs[::-1]:
                out = Path(args.workdir) / f"keys-{name}-{n}"
                shutil.rmtree(out, ignore_errors=True)
                command = [program, "extend", out, str(n)]
                if name == "this" and args.memory_limit:
                    command.append(str(size(args.memory_limit)))
                log(f"{name} {n:,} records (repeat {repeat + 1})")
                run = run_process(command)
                result = json.loads(run["stdout"])
                on_disk = dir_bytes(out)
                shutil.rmtree(out, ignore_errors=True)
                rows.append(
                    {
                        "program": name,
                        "records": n,
                        "seconds": result["seconds"],
                        "records_per_s": result["records_per_s"],
                        "rss_mb": run["rss"],
                        "rss_bytes_per_record": run["rss"] * (1 << 20) / n,
                        "spill_mb": result["spill_bytes_max"] / 1e6,
                        "dataset_mb": on_disk / 1e6,
                        "cpu_s": run["cpu"],
                    }
                )
                log(json.dumps(rows[-1]))
    print(
        "| program | records | runs | seconds, median | records/s, median | CPU s, median "
        "| peak RSS MiB (max) | RSS bytes/record | spill MB (max) | dataset MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    groups = {}
    for row in rows:
        groups.setdefault((row["program"], row["records"]), []).append(row)
    for (name, n), runs in groups.items():
        print(
            f"| {name} | {n:,} | {len(runs)} | {statistics.median(r['seconds'] for r in runs):.1f} "
            f"| {statistics.median(r['records_per_s'] for r in runs) / 1e6:.2f} M "
            f"| {statistics.median(r['cpu_s'] for r in runs):.1f} "
            f"| {max(r['rss_mb'] for r in runs):.0f} | {max(r['rss_bytes_per_record'] for r in runs):.1f} "
            f"| {max(r['spill_mb'] for r in runs):.0f} | {runs[0]['dataset_mb']:.0f} |"
        )


def jpeg_tree(args):
    tree = Path(args.workdir) / f"jpeg-{args.mb}"
    done = tree.with_suffix(".done")
    if not done.exists():
        shutil.rmtree(tree, ignore_errors=True)
        log(f"making a {args.mb} MB JPEG tree")
        make_jpeg_tree(tree, args.mb * 1_000_000)
        done.touch()
    return tree


def dedup(args):
    tree = jpeg_tree(args)
    out = Path(args.workdir) / "dedup-out"
    runs = {"plain": [], "dedup content": []}
    for repeat in range(args.repeats):
        order = list(runs) if repeat % 2 == 0 else list(runs)[::-1]
        for name in order:
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run(["sync"])
            extra = ["--dedup", "content"] if name != "plain" else []
            run = run_process([BCD, "ingest", tree, "--into", out, "--quiet", "--json", *extra])
            summary = json.loads(run["stdout"])
            runs[name].append({"s": run["s"], "cpu": run["cpu"], "rss": run["rss"], "mb": summary["bytes_in"] / 1e6})
            log(f"{name}: {run['s']:.2f} s, {summary['bytes_in'] / 1e6 / run['s']:.0f} MB/s")
    shutil.rmtree(out, ignore_errors=True)
    print("| ingest | runs | MB | wall s, median (min-max) | MB/s | CPU s, median | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    medians = {}
    for name, rs in runs.items():
        wall = [r["s"] for r in rs]
        medians[name] = statistics.median(wall)
        print(
            f"| {name} | {len(rs)} | {rs[0]['mb']:.0f} | {medians[name]:.2f} ({min(wall):.2f}-{max(wall):.2f}) "
            f"| {rs[0]['mb'] / medians[name]:.0f} | {statistics.median(r['cpu'] for r in rs):.2f} | {max(r['rss'] for r in rs):.0f} |"
        )
    print(f"\n--dedup content / plain, wall time: {medians['dedup content'] / medians['plain']:.3f}")


def verify(args):
    tree = jpeg_tree(args)
    compression = ["--compression", args.compression] if args.compression else []
    ds = Path(args.workdir) / f"verify-ds-{args.mb}-{args.compression or 'default'}"
    if not (ds / "manifest.json").exists():
        shutil.rmtree(ds, ignore_errors=True)
        subprocess.run([BCD, "ingest", tree, "--into", ds, "--quiet", "--dedup", "content", *compression], check=True)
    # Every value is one file of the tree, byte for byte.
    total = dir_bytes(tree)
    records = sum(1 for p in tree.rglob("*") if p.is_file())
    stored = sum(p.stat().st_size for p in ds.glob("*.bin"))
    hashes = sum(p.stat().st_size for p in ds.glob("*.xxh128"))
    subprocess.run([BCD, "verify", ds, "--content"], capture_output=True, check=True)  # warm the cache
    runs = {"bcd verify --content": [], "bcd verify": []}
    for repeat in range(args.repeats):
        for name in list(runs) if repeat % 2 == 0 else list(runs)[::-1]:
            extra = ["--content"] if name.endswith("--content") else []
            run = run_process([BCD, "verify", ds, *extra])
            runs[name].append((run["s"], run["cpu"]))
    print(
        f"records {records:,}, values {total / 1e6:.0f} MB, stored {stored / 1e6:.0f} MB, "
        f"content hashes {hashes:,} bytes ({hashes / records:.1f} per record)"
    )
    print("| command | runs | wall s, median (min-max) | GB/s of values | CPU s, median | GB per CPU s |")
    print("|---|---|---|---|---|---|")
    for name, rs in runs.items():
        w = [s for s, _ in rs]
        m = statistics.median(w)
        cpu = statistics.median(c for _, c in rs)
        print(
            f"| {name} | {len(w)} | {m:.3f} ({min(w):.3f}-{max(w):.3f}) | {total / 1e9 / m:.2f} "
            f"| {cpu:.2f} | {f'{total / 1e9 / cpu:.2f}' if cpu else '-'} |"
        )
    if args.python:
        python_reads(ds, total, args.repeats)


def python_reads(ds, total, repeats):
    """The dataset read through the Python package (a release build in the
    environment), `get_batch` of every record in shuffled batches of 64, with
    and without `verify=True`."""
    import bcd

    order = list(range(len(bcd.Dataset(ds))))
    random.Random(0).shuffle(order)
    batches = [order[i : i + 64] for i in range(0, len(order), 64)]
    results = {False: [], True: []}
    for repeat in range(repeats):
        for checked in [False, True] if repeat % 2 == 0 else [True, False]:
            reader = bcd.Dataset(ds, verify=checked)
            start = time.perf_counter()
            for batch in batches:
                reader.get_batch(batch)
            results[checked].append(time.perf_counter() - start)
    print("\n| get_batch of every record, shuffled batches of 64 | runs | s, median (min-max) | GB/s |")
    print("|---|---|---|---|")
    for checked, w in results.items():
        m = statistics.median(w)
        print(f"| verify={checked} | {len(w)} | {m:.3f} ({min(w):.3f}-{max(w):.3f}) | {total / 1e9 / m:.2f} |")
    print(f"\nverify=True / verify=False: {statistics.median(results[True]) / statistics.median(results[False]):.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["keys", "dedup", "verify"])
    parser.add_argument("--records", default="10000000", help="keys: record counts, comma-separated")
    parser.add_argument("--memory-limit", help="keys: the duplicate check's memory limit (4G, 1500M)")
    parser.add_argument("--baseline", help="keys: keys-bench built from another commit")
    parser.add_argument("--baseline-max", type=int, default=20_000_000, help="keys: largest count the baseline runs")
    parser.add_argument("--mb", type=int, default=1000, help="dedup, verify: MB of JPEG files")
    parser.add_argument("--compression", help="verify: the dataset's --compression (default: bcd ingest's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python", action="store_true", help="verify: also time reads through the Python package (release build)")
    parser.add_argument("--workdir", default=None, help="where datasets and corpora go (default: a temp dir)")
    args = parser.parse_args()
    temporary = None
    if args.workdir is None:
        temporary = tempfile.mkdtemp(prefix="keys-bench-", dir=ROOT / "target")
        args.workdir = temporary
    try:
        {"keys": keys, "dedup": dedup, "verify": verify}[args.what](args)
    finally:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)


if __name__ == "__main__":
    main()
