"""Python-side benchmark of the `bcd` package: shuffled reads, cold-cache reads, open
time and memory, against the reference `bitcask-dataset` 0.3.0, py-lmdb and plain
files. Same run, same data; medians of several runs; ratios against each target.

    bash tests/python/setup-env.sh     # the reference releases, in .venv/reference
    python3 -m venv /work/bench-venv
    /work/bench-venv/bin/pip install -r tests/python/requirements.txt -r bench/requirements.txt
    /work/bench-venv/bin/maturin build --release -m python/Cargo.toml -o /work/bench-wheels
    /work/bench-venv/bin/pip install --force-reinstall /work/bench-wheels/bcd_python-*.whl
    /work/bench-venv/bin/python bench/python_bench.py --data /work/bench-data --runs 5   # ~9 min
    # smoke run: --quick --runs 1 (~1 min); one section: --only read|cold|open (repeatable)

Root is needed for `cold` (it drops the page cache) and to read the kernel log.
Sections (each measured configuration runs in a fresh subprocess):

- `read`: a shuffled read of every record (one fixed permutation), each value
  touched with `zlib.crc32` (every byte read; the checksums must agree across
  stores), page cache warm. Two data sets: `small`, 200,000 slices of 512-1536
  bytes of Python source text (compresses ~1.7x), and `large`, 4,000 values of
  100 KiB random bytes (incompressible, like JPEGs). Contenders: bcd `ds.at(i)`,
  bcd `ds.get_batch(256 indices)`, bcd `ds[key]` and the reference's `ds.at(i)`, on
  the same lz4 and uncompressed datasets (the small lz4 one written at LZ4 HC 9 as
  the reference writes it, the large one by `bcd.ingest` of the files, literal-only
  blocks); py-lmdb `txn.get(key)` in one read transaction with `buffers=True`
  (zero-copy views; values uncompressed); one file per record,
  `open(path, "rb").read()` (on the small set only the first 20,000 records of the
  permutation: opening a file costs ~50 µs here even when cached); and the loop
  with the touch alone over values already in memory, the floor that every reader
  pays. Each worker opens the store (timed apart) and reads everything twice; the
  first pass is the number reported (a fresh process, as a DataLoader worker
  starting an epoch). Other jobs on this machine drop the page cache too: a warm
  run during which another process did (seen in the kernel log) is repeated.
- `cold`: the `large` set, the page cache dropped (`sync`, `echo 3 >
  /proc/sys/vm/drop_caches`) before every run; rates count open + pass, since the
  reference's open reads every key and so pulls the values into the cache.
- `open`: 1M and 10M keyed records of 100-byte values (12-byte keys, uncompressed),
  written by the bcd package. In a fresh process each: the wall time of
  `Dataset(path)` / `BitcaskDataset(path)`, then random `ds[key]` lookups, the
  anonymous (private) memory the open adds (RssAnon after minus before, from
  /proc/self/status) and the process's peak RSS (VmHWM: `ru_maxrss` is not used,
  since a vfork+exec child inherits its parent's high-water mark). bcd is measured
  on its first open (no `.bcd-index` yet: it reads every key and writes the index
  file) and on later opens (maps it). Then N processes open the same dataset at
  once (DataLoader workers), and the total RssAnon and PSS
  (/proc/PID/smaps_rollup) are read while all of them hold it open.

Generated data is kept in --data and reused by later runs (delete a store's
directory and its `.done` marker to rebuild it).
"""

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

# The data sets, the constants they share and the per-configuration workers.
from python_bench_workers import *  # noqa: E402,F401,F403
from python_bench_workers import HERE as WORKER, ROOT  # noqa: E402

# ---------------------------------------------------------------- helpers


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def warm(paths):
    """Reads every file under paths, so the page cache holds them."""
    buffer = bytearray(1 << 20)
    for path in paths:
        for dirpath, _, names in os.walk(path):
            for name in names:
                with open(os.path.join(dirpath, name), "rb", buffering=0) as f:
                    while f.readinto(buffer):
                        pass


def du(path):
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            if not name.startswith(".bcd"):
                total += os.path.getsize(os.path.join(dirpath, name))
    return total


def median(xs):
    return statistics.median(xs)


def spread(xs):
    return f"{min(xs):.3g}-{max(xs):.3g}"


def loadavg():
    return os.getloadavg()[0]


def rotated(items, r):
    r %= len(items)
    return items[r:] + items[:r]


# ---------------------------------------------------------------- sections

READ_CONFIGS = [
    # (label, worker store, dataset store, compression)
    ("bcd at(i)", "bcd-at", "bcd-lz4", "lz4"),
    ("bcd get_batch(256)", "bcd-batch", "bcd-lz4", "lz4"),
    ("bcd ds[key]", "bcd-key", "bcd-lz4", "lz4"),
    ("reference at(i)", "ref-at", "bcd-lz4", "lz4"),
    ("bcd at(i)", "bcd-at", "bcd-none", "none"),
    ("bcd get_batch(256)", "bcd-batch", "bcd-none", "none"),
    ("bcd ds[key]", "bcd-key", "bcd-none", "none"),
    ("reference at(i)", "ref-at", "bcd-none", "none"),
    ("lmdb txn.get(key), buffers=True", "lmdb", "lmdb", "none"),
    ("files open().read()", "files", "files", "none"),
]
# The loop and the touch alone, on values already in memory (a list of bytes):
# what is left of a pass time after this is the store's own cost.
FLOOR = ("touch only: crc32 of in-memory values (floor)", "floor", "bcd-none", "none")
# Opening 200,000 files costs ~50 µs each here even with a warm page cache: on the
# small set, files read the first FILES_LIMIT records of the permutation, once.
FILES_LIMIT = 20_000
COLD_EXTRA = [
    ("lmdb txn.get(key), buffers=True, readahead=False", "lmdb-nora", "lmdb", "none"),
    ("sequential read of the whole shard file (disk ceiling)", "seq", "bcd-none", "none"),
]


def foreign_drops_since(uptime):
    """How many times a process other than this one dropped the page cache since
    `uptime` (seconds since boot), from the kernel log (root). Other jobs on this
    machine run cold-cache benchmarks too; a warm run they hit is repeated."""
    out = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    mine = f"({os.getpid()}):"
    count = 0
    for line in out.splitlines():
        if "drop_caches" not in line or mine in line:
            continue
        try:
            stamp = float(line[1 : line.index("]")])
        except ValueError:
            continue
        count += stamp > uptime
    return count


def boot_seconds():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def measure_reads(stores, n, flat, configs, runs, cold, log):
    samples = {c: [] for c in configs}
    loads = []
    hits = 0
    warmed = {name: boot_seconds() for name in stores}
    for r in range(runs):
        for config in rotated(configs, r):
            label, store, dataset, _ = config
            limited = store == "files" and not flat and n > FILES_LIMIT
            spec = {
                "kind": "read",
                "store": store,
                "path": str(stores[dataset]),
                "n": n,
                "flat": flat,
                "passes": 1 if cold or limited else 2,
                "limit": FILES_LIMIT if limited else None,
            }
            for attempt in range(4):
                if cold:
                    drop_caches()
                elif foreign_drops_since(warmed[dataset] - 1):
                    warm([stores[dataset]])
                    warmed[dataset] = boot_seconds()
                started = boot_seconds()
                loads.append(loadavg())
                result = run_worker(spec)
                if cold or not foreign_drops_since(started - 1):
                    break
                hits += 1
                log(f"    run {r + 1} {label}: another process dropped the page cache; repeating")
            samples[config].append(result)
            log(f"    run {r + 1} {label} [{config[3]}]: open {result['open_s']:.3f} s, "
                f"pass {', '.join(f'{p:.3f}' for p in result['pass_s'])} s")
    checks = {c for results in samples.values() for res in results
              if res["records"] == n for c in res["checksums"] if c is not None}
    if len(checks) != 1:
        raise RuntimeError(f"stores disagree on the values read: checksums {checks}")
    return samples, loads, hits


def read_rows(samples, n, nbytes):
    rows = []
    for (label, store, dataset, comp), results in samples.items():
        if results[0]["records"] != n:
            label += f" (first {results[0]['records']:,} of the permutation)"
            nbytes_read = nbytes * results[0]["records"] / n  # approximately
        else:
            nbytes_read = nbytes
        n_read = results[0]["records"]
        firsts = [res["pass_s"][0] for res in results]
        seconds = [res["pass_s"][1] for res in results if len(res["pass_s"]) > 1]
        totals = [res["open_s"] + res["pass_s"][0] for res in results]
        rows.append({
            "label": label,
            "store": store,
            "dataset": dataset,
            "compression": comp,
            "records": n_read,
            "open_s": median([res["open_s"] for res in results]),
            "pass_s": median(firsts),
            "pass_s_all": firsts,
            "pass2_s": median(seconds) if seconds else None,
            "open_pass_s": median(totals),
            "open_pass_s_all": totals,
            "records_per_s": n_read / median(firsts),
            "mb_per_s": nbytes_read / median(firsts) / 1e6,
            "records_per_s_pass2": n_read / median(seconds) if seconds else None,
            "records_per_s_with_open": n_read / median(totals),
        })
    return rows


def ratio_text(a, b):
    return f"{a / b:.2f}x"


def print_read_table(title, rows, sizes, cold):
    """Warm: rates from the pass alone (the open is shown apart). Cold: rates from
    open + pass, since an open that reads every key also pulls values into the page
    cache (the reference's does), which the pass then finds there."""
    by = {(r["store"], r["compression"]): r for r in rows}
    rate = "records_per_s_with_open" if cold else "records_per_s"
    floor = by.get(("floor", "none"))
    lmdb = by.get(("lmdb", "none"))
    print(f"\n#### {title}\n")
    if cold:
        print("records/s = records / median (open + pass) seconds, each run in a fresh process after "
              "dropping the page cache; 'vs reference' compares the same dataset (same compression); "
              "'vs lmdb' compares with py-lmdb at its default readahead=True (uncompressed).\n")
        print("| reader | stored | store MB | open s | pass s | open + pass s, median (min-max) | records/s "
              "| MB/s | vs reference | vs lmdb |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    else:
        print("records/s = records / median pass seconds (the open is timed apart); 'over floor' = "
              "(pass - touch-only pass) / records; 'vs reference' compares the same dataset (same "
              "compression); 'vs lmdb' compares with py-lmdb (uncompressed).\n")
        print("| reader | stored | store MB | open s | pass s, median (min-max) | records/s | MB/s "
              "| records/s, 2nd pass | µs/record over floor | vs reference | vs lmdb |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ref = by.get(("ref-at", r["compression"]))
        vs_ref = ratio_text(r[rate], ref[rate]) if ref and r["store"].startswith("bcd") else ""
        vs_lmdb = (ratio_text(r[rate], lmdb[rate])
                   if lmdb and r["store"] not in ("lmdb", "floor", "seq") else "")
        store_mb = f"{sizes[r['dataset']] / 1e6:.0f}" if r["store"] != "floor" else ""
        if cold:
            print(f"| {r['label']} | {r['compression']} | {store_mb} | {r['open_s']:.3f} | {r['pass_s']:.3f} | "
                  f"{r['open_pass_s']:.3f} ({spread(r['open_pass_s_all'])}) | {r[rate]:,.0f} | "
                  f"{sizes['files'] / r['open_pass_s'] / 1e6:.0f} | {vs_ref} | {vs_lmdb} |")
            continue
        p2 = r["records_per_s_pass2"]
        over = (f"{(r['pass_s'] / r['records'] - floor['pass_s'] / floor['records']) * 1e6:.2f}"
                if floor and r is not floor else "")
        opened = f"{r['open_s']:.3f}" if r is not floor else ""  # its "open" loads the values
        print(f"| {r['label']} | {r['compression']} | {store_mb} | {opened} | "
              f"{r['pass_s']:.3f} ({spread(r['pass_s_all'])}) | {r[rate]:,.0f} | {r['mb_per_s']:.0f} | "
              f"{f'{p2:,.0f}' if p2 else ''} | {over} | {vs_ref} | {vs_lmdb} |")


def section_read(args, data, results, cold):
    sets = [("large", args.large, True)] if cold else [("small", args.small, False), ("large", args.large, True)]
    out = results.setdefault("cold" if cold else "read", {})
    for name, n, flat in sets:
        print(f"  {'cold' if cold else 'read'}: {name} set, {n} records", file=sys.stderr)
        stores = make_read_set(data, name, n)
        sizes = {s: du(p) for s, p in stores.items()}
        nbytes = sizes["files"]
        configs = READ_CONFIGS + (COLD_EXTRA if cold else [FLOOR])
        if not cold:
            warm(stores.values())
        samples, loads, hits = measure_reads(
            stores, n, flat, configs, args.cold_runs if cold else args.runs, cold,
            lambda s: print(s, file=sys.stderr),
        )
        rows = read_rows(samples, n, nbytes)
        out[name] = {"records": n, "value_bytes": nbytes, "store_bytes": sizes, "rows": rows,
                     "load_avg": [min(loads), median(loads), max(loads)], "repeated_runs": hits}
        kind = "cold page cache (dropped before every run)" if cold else "page cache warm"
        what = ("~1 KiB text slices" if name == "small" else "100 KiB random bytes")
        print_read_table(
            f"Shuffled read, {name}: {n:,} records of {what} ({nbytes / 1e6:.0f} MB), {kind}; "
            f"load average {min(loads):.1f}-{max(loads):.1f}"
            + (f"; {hits} runs repeated because another process dropped the page cache" if hits else ""),
            rows, sizes, cold)
        sys.stdout.flush()


def hold_open(spec, procs):
    """Starts procs workers that open the dataset at once and hold it open; returns
    their reports, their smaps totals while all hold it, and the wall time until
    the last had opened and looked its keys up."""
    started = time.perf_counter()
    children = []
    for k in range(procs):
        s = dict(spec, hold=True, seed=SEED + k)
        children.append(subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    reports = []
    try:
        for child in children:
            line = child.stdout.readline()
            if not line:
                raise RuntimeError("a holding worker died")
            reports.append(json.loads(line))
        wall = time.perf_counter() - started
        smaps = [smaps_rollup(child.pid) for child in children]
    finally:
        for child in children:
            try:
                child.stdin.write("\n")
                child.stdin.close()
            except BrokenPipeError:
                pass
        for child in children:
            child.wait()
    return reports, smaps, wall


def mem_available_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def section_open(args, data, results):
    out = results.setdefault("open", {})
    print("\n#### Open time and memory (keyed, 100-byte values, uncompressed, page cache warm)\n")
    print(f"Fresh process per open; median of {args.runs} runs. 'added' = RssAnon after the open minus "
          "before (imports done before): the private memory the open adds; peak = VmHWM of the process, "
          "which also counts the shared, file-backed pages it maps; lookups = mean µs of the first "
          f"{LOOKUPS} random `ds[key]` after the open (they fault pages in), then of {STEADY_LOOKUPS:,} more.\n")
    print("| records | opener | open s, median (min-max) | open vs reference | RssAnon added MB | "
          "added vs reference | peak RSS MB | first lookup µs | lookups µs, first 1000 | next 20,000 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    group_rows = []
    for n in args.open_sizes:
        path = make_open_set(data, n)
        index = path / ".bcd-index"
        warm([path])
        configs = [("bcd, first open (builds and writes .bcd-index)", "bcd", True),
                   ("bcd, later opens (maps .bcd-index)", "bcd", False),
                   ("reference", "ref", False)]
        samples = {c: [] for c in configs}
        for r in range(args.runs):
            for config in configs:  # first open must precede later opens
                label, store, first = config
                if first:
                    index.unlink(missing_ok=True)
                elif store == "bcd":
                    assert index.exists(), "the first open did not write .bcd-index"
                res = run_worker({"kind": "open", "store": store, "path": str(path), "n": n})
                res["load"] = loadavg()
                samples[config].append(res)
                print(f"    {n} run {r + 1} {label}: open {res['open_s']:.3f} s, "
                      f"+{res['rss_anon_added_kib'] / 1024:.1f} MB anon, peak {res['vm_hwm_kib'] / 1024:.0f} MB",
                      file=sys.stderr)
        rows = []
        for (label, store, first), res in samples.items():
            rows.append({
                "records": n, "label": label, "store": store, "first_open": first,
                "open_s": median([x["open_s"] for x in res]),
                "open_s_all": [x["open_s"] for x in res],
                "rss_anon_added_mb": median([x["rss_anon_added_kib"] for x in res]) / 1024,
                "peak_rss_mb": median([x["vm_hwm_kib"] for x in res]) / 1024,
                "ru_maxrss_mb": median([x["ru_maxrss_kib"] for x in res]) / 1024,
                "first_lookup_us": median([x["first_lookup_us"] for x in res]),
                "lookup_us": median([x["lookup_us"] for x in res]),
                "steady_lookup_us": median([x["steady_lookup_us"] for x in res]),
                "index_file_after": all(x["index_file"] for x in res),
                "raw": res,
            })
        ref = rows[-1]
        for row in rows:
            vs = "" if row is ref else ratio_text(ref["open_s"], row["open_s"]) + " faster"
            added = row["rss_anon_added_mb"]
            vs_mem = "" if row is ref else (f"1/{ref['rss_anon_added_mb'] / added:.0f}" if added > 0.05 else "~0")
            print(f"| {n:,} | {row['label']} | {row['open_s']:.3f} ({spread(row['open_s_all'])}) | {vs} | "
                  f"{added:.1f} | {vs_mem} | {row['peak_rss_mb']:.0f} | {row['first_lookup_us']:.0f} | "
                  f"{row['lookup_us']:.1f} | {row['steady_lookup_us']:.1f} |")
        sys.stdout.flush()

        # N processes at once, as DataLoader workers.
        groups = []
        for label, store in (("bcd (maps .bcd-index)", "bcd"), ("reference", "ref")):
            peak = max(r["peak_rss_mb"] for r in rows if r["store"] == store) * 1024
            need = peak * args.procs * 1.3
            if need > mem_available_kib():
                print(f"    skipping {args.procs} x {label} at {n}: needs ~{need / 2**20:.1f} GiB, "
                      f"{mem_available_kib() / 2**20:.1f} GiB available", file=sys.stderr)
                groups.append({"label": label, "skipped": True})
                continue
            reports, smaps, wall = hold_open({"kind": "open", "store": store, "path": str(path), "n": n},
                                             args.procs)
            groups.append({
                "label": label, "procs": args.procs, "wall_s": wall,
                "open_s_max": max(x["open_s"] for x in reports),
                "rss_anon_total_mb": sum(s["RssAnon"] for s in smaps) / 1024,
                "rss_anon_added_total_mb": sum(x["rss_anon_added_kib"] for x in reports) / 1024,
                "pss_total_mb": sum(s["Pss"] for s in smaps) / 1024,
                "pss_anon_total_mb": sum(s.get("Pss_Anon", 0) for s in smaps) / 1024,
                "pss_file_total_mb": sum(s.get("Pss_File", 0) for s in smaps) / 1024,
                "rss_total_mb": sum(s["Rss"] for s in smaps) / 1024,
                "reports": reports, "smaps": smaps,
            })
            g = groups[-1]
            print(f"    {n} x{args.procs} {label}: wall {wall:.2f} s, RssAnon {g['rss_anon_total_mb']:.0f} MB, "
                  f"PSS {g['pss_total_mb']:.0f} MB", file=sys.stderr)
        group_rows.append((n, groups))
        out[str(n)] = {"rows": rows, "procs": groups, "store_bytes": du(path),
                       "index_file_bytes": index.stat().st_size if index.exists() else None}

    print(f"\n#### {args.procs} processes opening the same dataset at once (as DataLoader workers)\n")
    print("Totals over the processes while all hold the dataset open (after their lookups); "
          "wall = from starting them to the last one ready (interpreter start-up included).\n")
    print("| records | opener | wall s | slowest open s | RssAnon total MB | RssAnon added by the opens MB | "
          "PSS total MB | of which file-backed MB |")
    print("|---|---|---|---|---|---|---|---|")
    for n, groups in group_rows:
        for g in groups:
            if g.get("skipped"):
                print(f"| {n:,} | {g['label']} | skipped: not enough free memory | | | | | |")
                continue
            print(f"| {n:,} | {g['label']} | {g['wall_s']:.2f} | {g['open_s_max']:.3f} | "
                  f"{g['rss_anon_total_mb']:.0f} | {g['rss_anon_added_total_mb']:.1f} | {g['pss_total_mb']:.0f} | "
                  f"{g['pss_file_total_mb']:.0f} |")
    sys.stdout.flush()


def environment():
    def version(module):
        try:
            mod = __import__(module)
            return getattr(mod, "__version__", "?")
        except Exception as error:  # noqa: BLE001 - report, don't fail
            return f"missing ({error})"

    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src", "python/src", "python/bcd"],
                           capture_output=True, text=True).stdout.strip()
    import bcd

    so = next(Path(bcd.__file__).parent.glob("_bcd*.so"), None)
    with open("/proc/meminfo") as f:
        mem = f.readline().split()[1]
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "mem_total_gib": round(int(mem) / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "bcd": version("bcd"),
        "bcd_so": f"{so} ({so.stat().st_size / 1e6:.0f} MB, installed {time.ctime(so.stat().st_mtime)})" if so else "?",
        "git": git + (" + uncommitted changes in src/ or python/" if dirty else ""),
        "reference": "bitcask-dataset 0.3.0 (tests/python/reference.py)",
        "lmdb": version("lmdb"),
        "numpy": version("numpy"),
        "lz4": version("lz4"),
        "load_avg_start": os.getloadavg(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("/work/bench-data"),
                        help="where generated datasets are kept between runs (not in the repo)")
    parser.add_argument("--runs", type=int, default=5, help="runs per configuration (medians reported)")
    parser.add_argument("--cold-runs", type=int, help="runs per cold configuration (default: --runs)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", action="append", choices=["read", "cold", "open"],
                        help="run only this section (repeatable); default: all")
    parser.add_argument("--procs", type=int, default=4, help="processes opening at once")
    parser.add_argument("--json", type=Path, help="write results here (default: DATA/python_bench.json)")
    args = parser.parse_args()
    args.small, args.large = (20_000, 400) if args.quick else (200_000, 4_000)
    args.open_sizes = (150_000, 300_000) if args.quick else (1_000_000, 10_000_000)
    args.cold_runs = args.cold_runs or args.runs
    sections = args.only or ["read", "cold", "open"]
    if "cold" in sections and os.geteuid() != 0:
        sys.exit("the cold section drops the page cache and needs root; leave it out with --only")
    args.data.mkdir(parents=True, exist_ok=True)
    json_path = args.json or args.data / ("python_bench-quick.json" if args.quick else "python_bench.json")

    env = environment()
    started = time.perf_counter()
    print("### Python package: reads, cold reads, open (`bench/python_bench.py`)\n")
    print("```")
    print(" ".join([Path(sys.executable).name, "bench/python_bench.py"] + sys.argv[1:]))
    for k, v in env.items():
        print(f"{k}: {v}")
    print("```")
    sys.stdout.flush()
    results = {"environment": env, "args": {k: str(v) for k, v in vars(args).items()}}
    if "read" in sections:
        section_read(args, args.data, results, cold=False)
    if "cold" in sections:
        section_read(args, args.data, results, cold=True)
    if "open" in sections:
        section_open(args, args.data, results)
    results["environment"]["load_avg_end"] = os.getloadavg()
    results["seconds"] = time.perf_counter() - started
    json_path.write_text(json.dumps(results, indent=1))
    print(f"\n(total {results['seconds']:.0f} s; load average at end {os.getloadavg()[0]:.1f}; "
          f"JSON in {json_path})")


if __name__ == "__main__":
    main()
