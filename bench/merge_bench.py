"""Merge and engine benchmarks (issue 12).

    make python-env
    cargo build --release -p bcd-cli
    .venv/bin/python bench/merge_bench.py merge [--parts 1000] [--records 10000000]
    .venv/bin/python bench/merge_bench.py engines [--images 2000]

`merge`: PARTS keyed part datasets holding RECORDS records in total, with tiny
values (8 bytes) so that bytes cannot hide what the merge costs per key, made
(outside the timing) with the Python package's `extend_arrow`; then `bcd merge
PART... --into NEW` (wall time of the process: the key check, the hard links,
the commit, the index of the target, the removal of the parts). Run a second
time with values 64 times larger to show the time does not follow the bytes.

`engines`: an ImageFolder tree of JPEG-sized random files (the ImageFolder
benchmark corpus shape: --images files of 50-200 KB in 8 classes) converted
with, each timed end to end on this machine:
- `bcd ingest TREE` (the baseline);
- Ray Data: `read_binary_files` -> `bcd.ray.write`, and the same Dataset
  `write_parquet` (the engine's own writer);
- Spark `local[2]`: `binaryFile` -> `df.write.format("bcd")`, and
  `df.write.parquet`.
The engine columns include the engine's own start-up only where a user pays it
per job (Ray and Spark sessions are started before the timing).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BCD = ROOT / "target" / "release" / "bcd"


def run(args: list) -> float:
    started = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def make_parts(work: Path, parts: int, records: int, value_len: int) -> list:
    """PARTS keyed, uncompressed part datasets, written by the Python package."""
    import pyarrow as pa

    import bcd

    per_part = records // parts
    made = []
    for p in range(parts):
        first = p * per_part
        keys = pa.array([f"img/{i:09d}.jpg" for i in range(first, first + per_part)])
        values = pa.array([i.to_bytes(8, "little") * (value_len // 8) for i in range(first, first + per_part)], pa.binary())
        part = work / f"part-{p:05d}"
        dataset = bcd.Dataset.create(part, keyed=True, compression=None)
        dataset.extend_arrow(pa.table({"id": keys, "v": values}), "v", "id")
        made.append(part)
    return made


def bench_merge(args) -> None:
    for value_len in (8, 512):
        work = Path(tempfile.mkdtemp(prefix="merge-bench-", dir=args.workdir))
        try:
            made = time.perf_counter()
            parts = make_parts(work, args.parts, args.records, value_len)
            made = time.perf_counter() - made
            size = sum(f.stat().st_size for p in parts for f in p.iterdir())
            seconds = run([BCD, "merge", *parts, "--into", work / "merged", "--json"])
            info = json.loads(subprocess.run([BCD, "info", work / "merged", "--json"], check=True,
                                             capture_output=True).stdout)
            print(json.dumps({
                "bench": "merge", "parts": args.parts, "records": info["records"],
                "value_bytes": value_len, "part_bytes": size, "seconds": round(seconds, 2),
                "records_per_s": round(info["records"] / seconds), "parts_made_in_s": round(made, 1),
            }))
        finally:
            shutil.rmtree(work, ignore_errors=True)


def make_tree(tree: Path, images: int) -> int:
    rng = random.Random(12)
    total = 0
    for i in range(images):
        directory = tree / f"class_{i % 8:02d}"
        directory.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(rng.randrange(50_000, 200_000))
        (directory / f"{i:06d}.jpg").write_bytes(data)
        total += len(data)
    return total


def bench_engines(args) -> None:
    work = Path(tempfile.mkdtemp(prefix="engines-bench-", dir=args.workdir))
    try:
        tree = work / "tree"
        total = make_tree(tree, args.images)
        subprocess.run(["sync"])
        results = {"images": args.images, "mb": round(total / 1e6, 1)}
        results["bcd_ingest_s"] = round(run([BCD, "ingest", tree, "--into", work / "ingested", "--quiet"]), 2)

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import ray

        import bcd.ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        started = time.perf_counter()
        ds = ray.data.read_binary_files(str(tree), include_paths=True)
        bcd.ray.write(ds, work / "ray.bcd", value_column="bytes", key_column="path")
        results["ray_bcd_s"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        ray.data.read_binary_files(str(tree), include_paths=True).write_parquet(str(work / "ray.parquet"))
        results["ray_parquet_s"] = round(time.perf_counter() - started, 2)
        ray.shutdown()

        sys.path.insert(0, str(ROOT / "python" / "tests"))
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        import bcd.spark
        from test_spark import _java_home

        os.environ["JAVA_HOME"] = _java_home()
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").getOrCreate())
        bcd.spark.register(spark)
        started = time.perf_counter()
        df = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(str(tree))
        df.select("path", "content").write.format("bcd").option("value_column", "content") \
            .option("key_column", "path").mode("append").save(str(work / "spark.bcd"))
        results["spark_bcd_s"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        df.select("path", "content").write.parquet(str(work / "spark.parquet"))
        results["spark_parquet_s"] = round(time.perf_counter() - started, 2)
        spark.stop()
        print(json.dumps(results))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=["merge", "engines"])
    parser.add_argument("--parts", type=int, default=1000)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    if not BCD.exists():
        sys.exit(f"{BCD} is missing: cargo build --release -p bcd-cli")
    {"merge": bench_merge, "engines": bench_engines}[args.which](args)


if __name__ == "__main__":
    main()
