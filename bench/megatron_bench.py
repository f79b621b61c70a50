"""`bcd ingest` of a Megatron indexed dataset (`PREFIX.bin` + `PREFIX.idx`) of
up to a billion tokens against the I/O floor, and `bcd export --format
megatron` back, checked byte for byte (issue 23).

    cargo build --release -p bcd-cli
    python3 bench/megatron_bench.py [--tokens 1000000000] [--repeats 3] [--dir /tmp/bench-megatron]

Needs numpy only. The corpus (made here, in --dir or a temp dir): `--tokens`
uint16 tokens (uniform in 0..50257, GPT-2's vocabulary; random tokens, so LZ4
finds nothing to compress, as it finds little in real token streams) in
documents of one sequence each, 64 to 4096 tokens long, written in the MMIDIDX
layout of Megatron Core's `_IndexWriter` (FORMAT.md, "Megatron indexed
datasets"): magic, version 1, dtype code 8 (uint16), the lengths (i32), the
pointers (i64, the running byte offsets), the document indices 0..N (i64).
megatron-core is not installed: its writer is a dozen lines of numpy that this
script follows, and its reader (`_IndexReader` + `np.memmap` of the `.bin`)
is what the "reader loop" below does.

Timed, in rotating order, median of `repeats`, page cache warm (both files read
once first):
- the I/O floor: read `.idx` and `.bin` and write their bytes to one file on the
  same disk, then fsync;
- `bcd ingest PREFIX --into NEW` (default LZ4, and `--compression none`), fsyncs
  included;
- `bcd export NEW --to OUT --format megatron` of the default ingest (timed
  after the others, `repeats` times), fsyncs included;
- Megatron's way of reading: the `.idx` arrays by `np.frombuffer` over a memmap,
  every sequence as an `np.frombuffer` view of the memmapped `.bin`, each one's
  sum taken (what a loader touches), in one process.
After the timing, the export's `.bin` and `.idx` are compared with the source
with `cmp`, and their sha256 printed.
"""

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BCD = ROOT / "target" / "release" / "bcd"
VOCAB = 50257
MIN_LEN, MAX_LEN = 64, 4096


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make(prefix: Path, tokens: int) -> int:
    """Writes PREFIX.bin and PREFIX.idx; returns the sequence count."""
    rng = np.random.default_rng(23)
    lengths = []
    total = 0
    with open(f"{prefix}.bin", "wb") as out:
        while total < tokens:
            step = min(1 << 24, tokens - total)
            out.write(rng.integers(0, VOCAB, size=step, dtype=np.uint16).tobytes())
            total += step
    # Sequence lengths summing to exactly `tokens`.
    while sum(lengths) < tokens:
        lengths.extend(rng.integers(MIN_LEN, MAX_LEN + 1, size=1 << 16).tolist())
    lengths = np.array(lengths, dtype=np.int64)
    ends = np.cumsum(lengths)
    n = int(np.searchsorted(ends, tokens)) + 1
    lengths = lengths[:n]
    lengths[-1] = tokens - (int(ends[n - 2]) if n > 1 else 0)
    pointers = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1] * 2, out=pointers[1:])
    with open(f"{prefix}.idx", "wb") as out:
        out.write(b"MMIDIDX\x00\x00")
        out.write((1).to_bytes(8, "little"))
        out.write((8).to_bytes(1, "little"))  # uint16
        out.write(n.to_bytes(8, "little"))
        out.write((n + 1).to_bytes(8, "little"))
        out.write(lengths.astype("<i4").tobytes())
        out.write(pointers.astype("<i8").tobytes())
        out.write(np.arange(n + 1, dtype="<i8").tobytes())
    return n


def floor(prefix: Path, out: Path) -> None:
    with open(out, "wb") as sink:
        for suffix in (".idx", ".bin"):
            with open(f"{prefix}{suffix}", "rb") as source:
                shutil.copyfileobj(source, sink, 1 << 20)
        sink.flush()
        os.fsync(sink.fileno())


def reader_loop(prefix: Path) -> int:
    """As Megatron's `_IndexReader` and `IndexedDataset.get` read: memmaps, one
    `np.frombuffer` view per sequence; returns the sum of every token."""
    index = np.memmap(f"{prefix}.idx", mode="r", order="C")
    n = int(np.frombuffer(index, dtype="<u8", count=1, offset=18)[0])
    lengths = np.frombuffer(index, dtype=np.int32, count=n, offset=34)
    pointers = np.frombuffer(index, dtype=np.int64, count=n, offset=34 + 4 * n)
    data = np.memmap(f"{prefix}.bin", mode="r", order="C")
    total = 0
    for i in range(n):
        total += int(np.frombuffer(data, dtype=np.uint16, count=int(lengths[i]), offset=int(pointers[i])).sum())
    return total


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=1_000_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="work directory (default: a temp dir; the corpus is kept when given)")
    args = parser.parse_args()
    if not BCD.exists():
        sys.exit("build first: cargo build --release -p bcd-cli")
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="megatron-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    prefix = work / "corpus_text_document"
    if not Path(f"{prefix}.idx").exists():
        started = time.perf_counter()
        make(prefix, args.tokens)
        log(f"corpus written in {time.perf_counter() - started:.1f} s")
    n = int.from_bytes(Path(f"{prefix}.idx").read_bytes()[18:26], "little")
    bin_bytes = Path(f"{prefix}.bin").stat().st_size
    tokens = bin_bytes // 2
    total_bytes = bin_bytes + Path(f"{prefix}.idx").stat().st_size
    ds, out = work / "ds", work / "out"
    floor(prefix, work / "floor.out")  # page cache warm for everyone
    (work / "floor.out").unlink()

    def ingest(*flags):
        shutil.rmtree(ds, ignore_errors=True)
        subprocess.run([BCD, "ingest", "--quiet", str(prefix), "--into", str(ds), *flags], check=True,
                       stdout=subprocess.DEVNULL)

    def export():
        for suffix in (".bin", ".idx"):
            Path(f"{out}{suffix}").unlink(missing_ok=True)
        subprocess.run([BCD, "export", str(ds), "--to", str(out), "--format", "megatron"], check=True,
                       stdout=subprocess.DEVNULL)

    methods = {
        "I/O floor (read .idx and .bin, write one file, fsync)": lambda: floor(prefix, work / "floor.out"),
        "bcd ingest": lambda: ingest(),
        "bcd ingest --compression none": lambda: ingest("--compression", "none"),
        "numpy memmap read loop (as Megatron's reader)": lambda: reader_loop(prefix),
    }
    names = list(methods)
    times = {m: [] for m in names + ["bcd export --format megatron"]}
    for repeat in range(args.repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]
        for method in order:
            (work / "floor.out").unlink(missing_ok=True)
            os.sync()
            start = time.perf_counter()
            methods[method]()
            elapsed = time.perf_counter() - start
            times[method].append(elapsed)
            log(f"{method}: {elapsed:.2f} s")
    (work / "floor.out").unlink(missing_ok=True)
    # The export, of a default (LZ4) ingest, timed on its own.
    ingest()
    for _ in range(args.repeats):
        os.sync()
        start = time.perf_counter()
        export()
        elapsed = time.perf_counter() - start
        times["bcd export --format megatron"].append(elapsed)
        log(f"export: {elapsed:.2f} s")
    # Byte-identical round trip, for both compressions.
    identical = {}
    for flags in ([], ["--compression", "none"]):
        ingest(*flags)
        export()
        same = all(subprocess.run(["cmp", f"{prefix}{s}", f"{out}{s}"]).returncode == 0 for s in (".bin", ".idx"))
        identical[" ".join(flags) or "lz4"] = same
    hashes = {s: (sha256(f"{prefix}{s}"), sha256(f"{out}{s}")) for s in (".bin", ".idx")}
    stored = sum(p.stat().st_size for p in ds.rglob("*") if p.is_file())
    shutil.rmtree(ds, ignore_errors=True)
    base = statistics.median(times[names[0]])
    load = os.getloadavg()
    print(f"\n{tokens:,} uint16 tokens in {n:,} sequences ({bin_bytes / 1e6:.0f} MB .bin, "
          f"{(total_bytes - bin_bytes) / 1e6:.0f} MB .idx; dataset {stored / 1e6:.0f} MB); median of {args.repeats}; "
          f"ratio = seconds / the I/O floor's; MB/s of .bin + .idx; load average {load[0]:.1f}\n")
    print("| method | s, median (min-max) | MB/s | ratio |")
    print("|---|---|---|---|")
    for method, runs in times.items():
        seconds = statistics.median(runs)
        print(f"| {method} | {seconds:.2f} ({min(runs):.2f}-{max(runs):.2f}) | {total_bytes / 1e6 / seconds:.0f} "
              f"| {seconds / base:.2f}x |")
    for what, same in identical.items():
        print(f"\nexport of the {what} ingest byte-identical to the source (cmp .bin and .idx): {'yes' if same else 'NO'}")
    for suffix, (a, b) in hashes.items():
        print(f"sha256 {suffix}: source {a}, export {b}")
    for suffix in (".bin", ".idx"):
        Path(f"{out}{suffix}").unlink(missing_ok=True)
    if not args.dir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
