"""Fields benchmark (issue 10): what storing fields beside the records costs, how
fast they are read back without touching the blobs, and how converting labelled
data compares with the tools users would otherwise use.

    python3 -m venv /work/bench-venv-train
    /work/bench-venv-train/bin/pip install -r bench/requirements-train.txt -r tests/python/requirements.txt
    cargo build --release -p bcd-cli
    /work/bench-venv-train/bin/maturin build --release -m python/Cargo.toml -o /work/bench-wheels
    /work/bench-venv-train/bin/pip install --force-reinstall --no-deps /work/bench-wheels/bcd_python-*.whl
    /work/bench-venv-train/bin/python bench/fields_bench.py [--repeats 3] [--scale 1.0]

Corpora (made once in --workdir, default a temp dir): the ImageFolder JPEG tree
of bench/ingest_bench.py (8 classes, --scale x 100 MB), and from the same images
a WebDataset tar (`KEY.cls`, `KEY.jpg`, `KEY.json` with a caption, as
webdataset's TarWriter writes them) and a Parquet dump (`id`, `image`, `label`,
`caption`, written by pyarrow).

1. Ingest with and without fields, same run, rotating order, medians (wall
   time of the `bcd ingest` process, GNU time for CPU):
   tree vs tree `--labels folder`; tar (every member a record) vs tar
   `--samples`; Parquet `--fields none` vs the default (all columns).
2. Reading fields without the blobs: a dataset of 1,000,000 records (8-byte
   values) with a `label` (int64, 10 classes) and a `caption` (string) written
   by `Dataset.extend_arrow`; `Dataset.fields()` in a fresh process after open
   (median of --repeats), and `bcd stats DS --json` as a process.
3. Converting the labelled tree (image bytes + class index) with LitData
   `optimize`, MosaicML `MDSWriter` and an LMDB transaction, against
   `bcd ingest --labels folder`: wall time and output size, medians.
"""

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import ingest_bench  # noqa: E402  (the JPEG corpus and the timed process runner)

BCD = ROOT / "target" / "release" / "bcd"


def log(message):
    ingest_bench.log(message)


def make_corpora(workdir, megabytes):
    tree = workdir / "jpeg"
    done = workdir / f".fields-{megabytes}.done"
    if not done.exists():
        for leftover in (tree, workdir / "wds.tar", workdir / "dump.parquet"):
            ingest_bench.remove(leftover)
        log(f"making the JPEG tree ({megabytes} MB)")
        ingest_bench.make_jpeg_tree(tree, megabytes * 1_000_000)
        files = sorted(p for p in tree.rglob("*.jpg"))
        classes = sorted({p.parent.name for p in files})
        log("writing the WebDataset tar and the Parquet dump")
        with tarfile.open(workdir / "wds.tar", "w") as tar:
            for i, path in enumerate(files):
                label = classes.index(path.parent.name)
                members = {
                    "cls": str(label).encode(),
                    "jpg": path.read_bytes(),
                    "json": json.dumps({"caption": f"a photo of {path.stem}", "source": "bench"}).encode(),
                }
                for ext in sorted(members):
                    info = tarfile.TarInfo(f"sample{i:06d}.{ext}")
                    info.size = len(members[ext])
                    tar.addfile(info, io.BytesIO(members[ext]))
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table(
            {
                "id": [p.relative_to(tree).as_posix() for p in files],
                "image": [p.read_bytes() for p in files],
                "label": [classes.index(p.parent.name) for p in files],
                "caption": [f"a photo of {p.stem}" for p in files],
            }
        )
        pq.write_table(table, workdir / "dump.parquet", row_group_size=256)
        done.touch()
    return tree, workdir / "wds.tar", workdir / "dump.parquet"


def ingest(source, out, *options):
    run = ingest_bench.run_process([BCD, "ingest", source, "--into", out, "--quiet", "--json", *options])
    run["summary"] = json.loads(run.pop("stdout"))
    ingest_bench.remove(out)
    subprocess.run(["sync"], check=True)
    return run


def ingest_pairs(workdir, tree, tar, parquet, repeats):
    pairs = {
        "ImageFolder tree": ((tree,), (tree, "--labels", "folder")),
        "WebDataset tar (jpg+cls+json)": ((tar,), (tar, "--samples")),
        "Parquet dump (label, caption)": (
            (parquet, "--value-column", "image", "--key-column", "id", "--fields", "none"),
            (parquet, "--value-column", "image", "--key-column", "id"),
        ),
    }
    methods = [(name, kind, args) for name, (plain, fields) in pairs.items() for kind, args in (("without", plain), ("with", fields))]
    runs = {(name, kind): [] for name, kind, _ in methods}
    for repeat in range(repeats):
        order = methods[repeat % len(methods) :] + methods[: repeat % len(methods)]
        for name, kind, (source, *options) in order:
            runs[(name, kind)].append(ingest(source, workdir / "out", *options))
        log(f"ingest repeat {repeat + 1}/{repeats} done")
    rows = []
    for name in pairs:
        without, with_fields = runs[(name, "without")], runs[(name, "with")]
        mb = with_fields[0]["summary"]["bytes_in"] / 1e6
        s0 = statistics.median(r["s"] for r in without)
        s1 = statistics.median(r["s"] for r in with_fields)
        rows.append(
            {
                "corpus": name,
                "records without/with": f"{without[0]['summary']['records']} / {with_fields[0]['summary']['records']}",
                "MB": round(mb, 1),
                "s without": round(s0, 3),
                "s with": round(s1, 3),
                "with / without": round(s1 / s0, 3),
                "cpu without": round(statistics.median(r["cpu"] for r in without), 2),
                "cpu with": round(statistics.median(r["cpu"] for r in with_fields), 2),
            }
        )
    return rows


MILLION = r"""
import sys, time, bcd, pyarrow as pa
path, n = sys.argv[1], int(sys.argv[2])
ds = bcd.Dataset.create(path, keyed=False, compression=None)
step = 100_000
for start in range(0, n, step):
    idx = range(start, min(n, start + step))
    ds.extend_arrow(pa.table({
        "value": pa.array([i.to_bytes(8, "little") for i in idx], pa.binary()),
        "label": pa.array([i % 10 for i in idx], pa.int64()),
        "caption": pa.array([f"caption number {i}" for i in idx]),
    }))
"""

READ_FIELDS = r"""
import sys, time, bcd
ds = bcd.Dataset(sys.argv[1])
start = time.perf_counter()
table = ds.fields()
seconds = time.perf_counter() - start
assert table.num_rows == len(ds)
print(seconds)
"""

# The same after `import pyarrow`: fields() imports pyarrow (and numpy) on its
# first call, which on this machine is most of the time above; this is bcd's part.
READ_FIELDS_IMPORTED = r"""
import sys, time, bcd, pyarrow
ds = bcd.Dataset(sys.argv[1])
start = time.perf_counter()
table = ds.fields()
seconds = time.perf_counter() - start
assert table.num_rows == len(ds)
print(seconds)
"""


def million(workdir, repeats):
    path = workdir / "million"
    if not (path / "manifest.json").exists():
        log("writing the 1,000,000-record dataset with fields")
        subprocess.run([sys.executable, "-c", MILLION, str(path), "1000000"], check=True)
    fields_s = []
    imported_s = []
    stats_s = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", READ_FIELDS, str(path)], check=True, capture_output=True, text=True)
        fields_s.append(float(out.stdout))
        out = subprocess.run([sys.executable, "-c", READ_FIELDS_IMPORTED, str(path)], check=True, capture_output=True, text=True)
        imported_s.append(float(out.stdout))
        stats_s.append(ingest_bench.run_process([BCD, "stats", path, "--json"])["s"])
    stats = json.loads(subprocess.run([BCD, "stats", path, "--json"], check=True, capture_output=True).stdout)
    assert stats["records"] == 1_000_000, stats
    return {
        "records": 1_000_000,
        "fields() s (median)": round(statistics.median(fields_s), 4),
        "fields() s (all)": [round(s, 4) for s in fields_s],
        "fields() s after import pyarrow (median)": round(statistics.median(imported_s), 4),
        "fields() s after import pyarrow (all)": [round(s, 4) for s in imported_s],
        "bcd stats --json s (median, process)": round(statistics.median(stats_s), 4),
    }


def tree_items(tree):
    files = sorted(tree.rglob("*.jpg"))
    classes = sorted({p.parent.name for p in files})
    return [(p, classes.index(p.parent.name)) for p in files]


def convert_litdata(items, out):
    import litdata

    litdata.optimize(
        fn=_litdata_sample,
        inputs=[(str(p), label) for p, label in items],
        output_dir=str(out),
        chunk_bytes="64MB",
        num_workers=2,
        mode="overwrite",
    )


def _litdata_sample(item):
    path, label = item
    return {"image": Path(path).read_bytes(), "label": label}


def convert_mds(items, out):
    from streaming import MDSWriter

    with MDSWriter(out=str(out), columns={"image": "bytes", "label": "int"}, size_limit="64mb") as writer:
        for path, label in items:
            writer.write({"image": path.read_bytes(), "label": label})


def convert_lmdb(items, out):
    import lmdb
    import pickle

    total = sum(p.stat().st_size for p, _ in items)
    env = lmdb.open(str(out), map_size=int(total * 2 + (64 << 20)))
    with env.begin(write=True) as txn:
        for i, (path, label) in enumerate(items):
            txn.put(i.to_bytes(8, "big"), pickle.dumps((path.read_bytes(), label)))
    env.sync()
    env.close()


def directory_bytes(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def conversions(workdir, tree, repeats):
    items = tree_items(tree)
    out = workdir / "converted"
    methods = {
        "bcd ingest --labels folder": lambda: ingest_bench.run_process(
            [BCD, "ingest", tree, "--into", out, "--labels", "folder", "--quiet"]
        ),
        "LitData optimize (2 workers)": lambda: convert_litdata(items, out),
        "MosaicML MDSWriter": lambda: convert_mds(items, out),
        "LMDB (one transaction)": lambda: convert_lmdb(items, out),
    }
    names = list(methods)
    times = {name: [] for name in names}
    sizes = {}
    for repeat in range(repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for name in order:
            ingest_bench.remove(out)
            subprocess.run(["sync"], check=True)
            start = time.perf_counter()
            methods[name]()
            subprocess.run(["sync"], check=True)
            times[name].append(time.perf_counter() - start)
            sizes[name] = directory_bytes(out)
        log(f"conversion repeat {repeat + 1}/{repeats} done")
    ingest_bench.remove(out)
    input_mb = sum(p.stat().st_size for p, _ in items) / 1e6
    base = statistics.median(times[names[0]])
    return [
        {
            "tool": name,
            "s (median)": round(statistics.median(times[name]), 3),
            "MB/s": round(input_mb / statistics.median(times[name]), 1),
            "time / bcd": round(statistics.median(times[name]) / base, 2),
            "output MB": round(sizes[name] / 1e6, 1),
        }
        for name in names
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="x 100 MB of JPEGs")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: ingest, million, convert")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fields-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    try:
        tree, tar, parquet = make_corpora(workdir, int(100 * args.scale))
        report = {"load_average": os.getloadavg()}
        if "ingest" not in skip:
            report["ingest"] = ingest_pairs(workdir, tree, tar, parquet, args.repeats)
        if "million" not in skip:
            report["million"] = million(workdir, max(args.repeats, 5))
        if "convert" not in skip:
            report["convert"] = conversions(workdir, tree, args.repeats)
        report["load_average_after"] = os.getloadavg()
        print(json.dumps(report, indent=1))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
