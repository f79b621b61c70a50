"""Throughput of `bcd ingest` from Parquet, TFRecord and CSV, beside the cost of
just reading the same input in Python with its usual library, in the same run.

    make python-env && .venv/bin/python -m pip install -r bench/requirements.txt
    cargo build --release -p bcd-cli
    .venv/bin/python bench/sources_bench.py [--megabytes 256] [--repeats 3]

Data (made fresh in a temp dir): records of 64 KiB, half random bytes (what JPEG
looks like to LZ4) and half text-like, keyed by an integer id.
- Parquet (pyarrow, snappy pages, 64 MiB row groups): `bcd ingest --value-column
  image --key-column id` versus pyarrow's own read of the same column
  (`ParquetFile.iter_batches`, touching every value), and versus the Python
  reference fed from pyarrow batches.
- TFRecord (written by the `tfrecord` package, tf.train.Example with image/encoded
  and image/filename): `bcd ingest --feature image/encoded --key-feature
  image/filename` versus a Python loop over the file with the `tfrecord` package's
  reader (parsing each Example, no CRC check), and versus the reference fed by it.
- CSV listing one file per record: `bcd ingest list.csv` versus the reference fed by
  a Python loop reading the listed files.
Each source is also ingested with `--compression none`, which shows the cost of
reading and writing alone (the default spends most of its time in LZ4 level 5 on
the text half).
Wall-clock seconds, median over repeats, input MB (values) per second; ratios are
bcd / other. The page cache is warm for everyone (each input is read once before).
"""

import argparse
import csv
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
sys.path.insert(0, str(ROOT / "tests" / "python"))
import reference  # noqa: E402

BCD = ROOT / "target" / "release" / "bcd"
VALUE = 64 * 1024


def values(megabytes):
    rng = random.Random(0)
    words = [b"the ", b"quick ", b"brown ", b"fox ", b"jumps ", b"over ", b"lazy ", b"dog\n"]
    out = []
    for i in range(megabytes * (1 << 20) // VALUE):
        if i % 2:
            out.append(rng.randbytes(VALUE))
        else:
            text = b"".join(rng.choice(words) for _ in range(VALUE // 4))
            out.append(text[:VALUE])
    return out


def run_bcd(args):
    start = time.perf_counter()
    subprocess.run([BCD, "ingest", "--quiet", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not BCD.exists():
        sys.exit("build first: cargo build --release -p bcd-cli")
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tfrecord import TFRecordWriter
    from tfrecord.reader import tfrecord_loader

    dataset_class = reference.load("0.3.0")
    data = values(args.megabytes)
    total_mb = sum(map(len, data)) / 1e6
    tmp = Path(tempfile.mkdtemp())
    try:
        parquet = tmp / "dump.parquet"
        table = pa.table({"id": pa.array(range(len(data)), pa.int64()), "image": pa.array(data, pa.binary())})
        pq.write_table(table, parquet, compression="snappy", row_group_size=1024)
        del table
        tfrecord = tmp / "train.tfrecord"
        writer = TFRecordWriter(str(tfrecord))
        for i, v in enumerate(data):
            writer.write({"image/encoded": (v, "byte"), "image/filename": (b"%08d.jpg" % i, "byte")})
        writer.close()
        files = tmp / "files"
        files.mkdir()
        with open(tmp / "list.csv", "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["path"])
            for i, v in enumerate(data):
                (files / f"{i:08d}.bin").write_bytes(v)
                out.writerow([f"files/{i:08d}.bin"])
        del data
        for path in (parquet, tfrecord):
            path.read_bytes()  # warm the page cache for everyone

        def pyarrow_read():
            n = 0
            for batch in pq.ParquetFile(parquet).iter_batches(columns=["image"], batch_size=256):
                for v in batch.column(0):
                    n += len(v.as_buffer())
            return n

        def reference_from_parquet(out):
            def records():
                for batch in pq.ParquetFile(parquet).iter_batches(columns=["id", "image"], batch_size=256):
                    for k, v in zip(batch.column(0), batch.column(1)):
                        yield str(k.as_py()).encode(), v.as_buffer()
            dataset_class.create(out, keyed=True)
            dataset_class(out).extend(records())

        def tfrecord_loop():
            n = 0
            for example in tfrecord_loader(str(tfrecord), None, {"image/encoded": "byte", "image/filename": "byte"}):
                n += len(example["image/encoded"])
            return n

        def reference_from_tfrecord(out):
            loader = tfrecord_loader(str(tfrecord), None, {"image/encoded": "byte", "image/filename": "byte"})
            dataset_class.create(out, keyed=True)
            dataset_class(out).extend((bytes(e["image/filename"]), bytes(e["image/encoded"])) for e in loader)

        def reference_from_csv(out):
            def records():
                with open(tmp / "list.csv", newline="") as f:
                    for row in csv.DictReader(f):
                        yield row["path"].encode(), (tmp / row["path"]).read_bytes()
            dataset_class.create(out, keyed=True)
            dataset_class(out).extend(records())

        def fresh(name):
            path = tmp / name
            shutil.rmtree(path, ignore_errors=True)
            return path

        cases = {
            "parquet": {
                "bcd ingest": lambda: run_bcd([str(parquet), "--into", str(fresh("a")), "--value-column", "image", "--key-column", "id"]),
                "bcd ingest --compression none": lambda: run_bcd([str(parquet), "--into", str(fresh("a2")), "--value-column", "image", "--key-column", "id", "--compression", "none"]),
                "pyarrow read only": lambda: timed(pyarrow_read),
                "reference extend": lambda: timed(lambda: reference_from_parquet(fresh("b"))),
            },
            "tfrecord": {
                "bcd ingest": lambda: run_bcd([str(tfrecord), "--into", str(fresh("c")), "--feature", "image/encoded", "--key-feature", "image/filename"]),
                "bcd ingest --compression none": lambda: run_bcd([str(tfrecord), "--into", str(fresh("c2")), "--feature", "image/encoded", "--key-feature", "image/filename", "--compression", "none"]),
                "Python loop (tfrecord pkg) read only": lambda: timed(tfrecord_loop),
                "reference extend": lambda: timed(lambda: reference_from_tfrecord(fresh("d"))),
            },
            "csv of paths": {
                "bcd ingest": lambda: run_bcd([str(tmp / "list.csv"), "--into", str(fresh("e"))]),
                "bcd ingest --compression none": lambda: run_bcd([str(tmp / "list.csv"), "--into", str(fresh("e2")), "--compression", "none"]),
                "reference extend": lambda: timed(lambda: reference_from_csv(fresh("f"))),
            },
        }
        print(f"{total_mb:.0f} MB of values in 64 KiB records, half random, half text; {os.cpu_count()} cores; "
              f"median of {args.repeats}; ratio = other's seconds / bcd's\n")
        print("| source | reader | MB/s | ratio |")
        print("|---|---|---|---|")
        for source, readers in cases.items():
            times = {name: [] for name in readers}
            for _ in range(args.repeats):
                for name, fn in readers.items():
                    times[name].append(fn())
            ours = statistics.median(times["bcd ingest"])
            for name, ts in times.items():
                t = statistics.median(ts)
                ratio = "" if name == "bcd ingest" else f"{t / ours:.1f}x"
                print(f"| {source} | {name} | {total_mb / t:.0f} | {ratio} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
