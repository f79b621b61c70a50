"""Ingest benchmark: `bcd ingest` against the Python reference, same data, same run.

    make python-env && .venv/bin/python -m pip install -r bench/requirements.txt
    cargo build --release -p bcd-cli
    .venv/bin/python bench/ingest_bench.py [--repeats 3] [--scale 1.0]

Quick run (< 1 min): --scale 0.05 --repeats 1.

Corpora, made fresh in a temp dir (or kept in --workdir and reused):

- `jpeg`: an ImageFolder tree (class_00/ .. class_07/) of real JPEG files made with
  Pillow, each different (colour fields, shapes, texture, sensor noise), ~50-200 KB.
- `text`: copies (copy_0/, copy_1/, ...) of the Python standard library's .py files
  (site-packages left out) until the target size is reached. Values are compressed
  independently, so the copies do not help compression.

For each corpus, in one run, the methods below run in a rotating order within each
repeat (so drift in machine load hits all alike), with outputs removed and `sync`
called between runs (outside the timing):

- `bcd ingest TREE --into DS` (default --level), and from `TREE.tar` (made once,
  `tar --sort=name`, outside the timing): wall time of the process, start-up
  included;
- the reference: `BitcaskDataset.create(DS, keyed=True)` then `extend` of a
  generator that walks the tree in the same order and reads each file (what a user
  would write), timed inside this Python process (no interpreter start-up);
- `tar -cf OUT.tar -C TREE .`: the I/O floor (reads every file, writes them once;
  unlike the other two it does not fsync);
- text only: `bcd ingest TREE --level L` for the other --level choices.

Reports medians over repeats: MB/s = input bytes (file contents) / seconds, the
speed ratio bcd / reference, compression ratio = input bytes / .bin bytes, bcd's
as a percentage of the reference's, and the user+sys CPU seconds and peak RSS of
each process (GNU /usr/bin/time). Then peak RSS of `bcd ingest` on trees of
image-sized random-byte files of two sizes (--rss-sizes, scaled): from the tree,
from its tar, and with --keyless.
"""

import argparse
import filecmp
import io
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
import reference  # noqa: E402

BCD = ROOT / "target" / "release" / "bcd"
TIME = "/usr/bin/time"  # GNU time, for peak RSS and CPU time of a process
DEFAULT_LEVEL = "4"  # replaced by what `bcd ingest --help` says, in main()
LEVELS = ["fast", "2", "3", "4", "5", "6", "9", "reference"]
JPEG_MB = 150  # corpus sizes at --scale 1
TEXT_MB = 100
CLASSES = 8


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- corpora

_NOISE = None


def jpeg_image(seed):
    """One photographic-looking JPEG (~50-200 KB): a smooth colour field, blurred
    shapes, a mid-frequency texture and sensor noise, at a random size and quality."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    global _NOISE
    if _NOISE is None:  # a noise field to crop from: much faster than fresh noise per image
        _NOISE = np.random.default_rng(12345).normal(0, 1, (800, 1000, 3)).astype(np.float32)
    rng = np.random.default_rng(seed)
    w, h = int(rng.integers(560, 900)), int(rng.integers(420, 700))
    field = rng.random((int(rng.integers(3, 9)), int(rng.integers(3, 9)), 3)) * 255
    img = Image.fromarray(field.astype(np.uint8)).resize((w, h), Image.BICUBIC)
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(5, 30))):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(10, w // 2)), y0 + int(rng.integers(10, h // 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=colour)
    img = img.filter(ImageFilter.BoxBlur(float(rng.uniform(0.5, 3))))
    pixels = np.asarray(img, dtype=np.float32)
    texture = rng.random((h // 8 + 1, w // 8 + 1)) * 255
    texture = Image.fromarray(texture.astype(np.uint8)).resize((w, h), Image.BILINEAR)
    pixels += (np.asarray(texture, dtype=np.float32)[..., None] - 128) * np.float32(rng.uniform(0.05, 0.3))
    oy, ox = int(rng.integers(0, 800 - h)), int(rng.integers(0, 1000 - w))
    pixels += _NOISE[oy : oy + h, ox : ox + w] * np.float32(rng.uniform(3, 9))
    out = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=int(rng.integers(82, 95)))
    return out.getvalue()


def make_jpeg_tree(root, target_bytes):
    root.mkdir(parents=True)
    total, index = 0, 0
    with multiprocessing.Pool(os.cpu_count()) as pool:
        while total < target_bytes:
            seeds = range(index, index + 16 * (os.cpu_count() or 1))  # images average ~110 KB
            for seed, data in zip(seeds, pool.map(jpeg_image, seeds)):
                if total >= target_bytes:
                    break
                folder = root / f"class_{seed % CLASSES:02d}"
                folder.mkdir(exist_ok=True)
                (folder / f"img_{seed:06d}.jpg").write_bytes(data)
                total += len(data)
                index = seed + 1


def make_text_tree(root, target_bytes):
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p
        for p in stdlib.rglob("*.py")
        if "site-packages" not in p.relative_to(stdlib).parts and p.is_file() and not p.is_symlink()
    )
    total, copy = 0, 0
    while total < target_bytes:
        for path in files:
            if total >= target_bytes:
                break
            target = root / f"copy_{copy}" / path.relative_to(stdlib)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            total += target.stat().st_size
        copy += 1


def make_random_tree(root, target_bytes, seed):
    """Incompressible files of image size (50-200 KB, as the jpeg corpus): what
    JPEG/PNG/audio look like to LZ4, much faster to make than real JPEGs."""
    import numpy as np

    rng = np.random.default_rng(seed)
    total, index = 0, 0
    while total < target_bytes:
        size = int(rng.integers(50_000, 200_000))
        folder = root / f"class_{index // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"img_{index:06d}.bin").write_bytes(rng.bytes(size))
        total += size
        index += 1


def walk(root, prefix=b""):
    """(key, path) of every regular file under root: entries of each directory in
    byte order, depth first, keys '/'-joined relative paths: the order `bcd ingest`
    and `tar --sort=name` use."""
    for entry in sorted(os.scandir(root), key=lambda e: os.fsencode(e.name)):
        key = prefix + os.fsencode(entry.name)
        if entry.is_dir(follow_symlinks=False):
            yield from walk(entry.path, key + b"/")
        elif entry.is_file(follow_symlinks=False):
            yield key, entry.path


def tree_stats(root):
    files = list(walk(root))
    return len(files), sum(os.path.getsize(p) for _, p in files)


def make_tar(root, archive):
    names = sorted(os.listdir(root), key=os.fsencode)
    subprocess.run(["tar", "--sort=name", "-cf", archive, "-C", root, *names], check=True)


def corpus(workdir, name, make, target_bytes):
    """The tree and its tar, made once (kept when --workdir is reused)."""
    tree, archive = workdir / name, workdir / f"{name}.tar"
    done = workdir / f".{name}-{target_bytes}.done"
    if not done.exists():
        for leftover in (tree, archive):
            remove(leftover)
        log(f"making the {name} corpus ({target_bytes / 1e6:.0f} MB)")
        make(tree, target_bytes)
        make_tar(tree, archive)
        done.touch()
    return tree, archive


# ---------------------------------------------------------------- runs


def run_process(command):
    """Runs command under GNU time; returns wall seconds (process start included),
    user+sys CPU seconds, peak RSS in MB and stdout.

    Peak RSS comes from /usr/bin/time rather than this process's wait4: Python
    starts children with vfork, and Linux carries the parent's high-water RSS
    into the child's ru_maxrss at exec, so wait4 would report this script's size."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as usage:
        start = time.perf_counter()
        status = subprocess.run([TIME, "-f", "%M %U %S", "-o", usage.name, *command], stdout=out, stderr=err).returncode
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if status != 0:
            sys.exit(f"{' '.join(map(str, command))} failed ({status}):\n{err.read().decode()}")
        rss_kib, user, system = usage.read().split()[-3:]
        return {"s": seconds, "cpu": float(user) + float(system), "rss": int(rss_kib) / 1024, "stdout": out.read().decode()}


def ingest_command(source, out, *options):
    return [BCD, "ingest", source, "--into", out, "--quiet", "--json", *options]


def bcd_ingest(source, out, level=None, *options):
    run = run_process(ingest_command(source, out, *(["--level", level] if level else []), *options))
    run["summary"] = json.loads(run.pop("stdout"))
    return run


def reference_ingest(dataset_class, tree, out):
    """The reference as a user would call it; wall and CPU seconds (all threads)."""
    start, cpu = time.perf_counter(), time.process_time()
    dataset_class.create(out, keyed=True, compression="lz4")
    dataset_class(out).extend((key, Path(path).read_bytes()) for key, path in walk(tree))
    return {"s": time.perf_counter() - start, "cpu": time.process_time() - cpu, "rss": None}


def bin_bytes(dataset):
    return sum(f.stat().st_size for f in Path(dataset).iterdir() if f.suffix == ".bin")


def same_shards(a, b):
    names = sorted(f.name for f in Path(a).iterdir() if f.suffix in (".bin", ".idx"))
    other = sorted(f.name for f in Path(b).iterdir() if f.suffix in (".bin", ".idx"))
    return names == other and all(filecmp.cmp(Path(a) / n, Path(b) / n, shallow=False) for n in names)


def remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)


def bench_corpus(dataset_class, workdir, tree, archive, levels, repeats):
    """Runs every method `repeats` times in rotating order; returns per-method
    lists of runs: {"s", "cpu", "rss" (MB or None), "stored" (bytes)}."""
    files, input_bytes = tree_stats(tree)
    methods = {"bcd ingest TREE": ("dir", None), "bcd ingest TREE.tar": ("tar", None), "reference": ("ref", None)}
    methods["tar -cf (I/O floor)"] = ("floor", None)
    for level in levels:
        if level != DEFAULT_LEVEL:
            methods[f"bcd ingest TREE --level {level}"] = ("dir", level)
    names = list(methods)
    results = {name: [] for name in names}
    out = workdir / "out"
    checked = False
    for repeat in range(repeats):
        # Rotate the order each repeat (and reverse every other one).
        shift = repeat % len(names)
        order = names[shift:] + names[:shift]
        if repeat % 2:
            order.reverse()
        for name in order:
            kind, level = methods[name]
            remove(out)
            os.sync()
            if kind == "ref":
                run = reference_ingest(dataset_class, tree, out)
                run["stored"] = bin_bytes(out)
            elif kind == "floor":
                run = run_process(["tar", "-cf", out, "-C", tree, "."])
                run["stored"] = os.path.getsize(out)
            else:
                run = bcd_ingest(archive if kind == "tar" else tree, out, level)
                summary = run["summary"]
                assert summary["records"] == files and summary["bytes_in"] == input_bytes, summary
                run["stored"] = bin_bytes(out)
            results[name].append(run)
            log(f"  {name}: {run['s']:.2f} s, CPU {run['cpu']:.2f} s ({input_bytes / 1e6 / run['s']:.1f} MB/s)")
        if not checked:
            checked = True
            check_outputs(dataset_class, tree, archive, workdir)
    remove(out)
    return files, input_bytes, results


def check_outputs(dataset_class, tree, archive, workdir):
    """Once per corpus, outside the timing: the methods store the same records.
    bcd --level reference is byte-identical to the reference; the tar and the tree
    give identical shards; `bcd verify` accepts the default output."""
    ref, ours, ours_tar = workdir / "check-ref", workdir / "check-bcd", workdir / "check-bcd-tar"
    for path in (ref, ours, ours_tar):
        remove(path)
    reference_ingest(dataset_class, tree, ref)
    bcd_ingest(tree, ours, "reference")
    assert same_shards(ref, ours), "bcd --level reference differs from the reference"
    remove(ours)
    bcd_ingest(tree, ours)
    bcd_ingest(archive, ours_tar)
    assert same_shards(ours, ours_tar), "bcd ingest of the tar differs from the tree's"
    run_process([BCD, "verify", ours])
    for path in (ref, ours, ours_tar):
        remove(path)
    log("  checked: --level reference output == reference output; tar == tree; bcd verify ok")


# ---------------------------------------------------------------- report


def summarize(input_bytes, runs):
    seconds = [r["s"] for r in runs]
    rss = [r["rss"] for r in runs if r["rss"] is not None]
    return {
        "s": statistics.median(seconds),
        "min": min(seconds),
        "max": max(seconds),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "mbps": input_bytes / 1e6 / statistics.median(seconds),
        "ratio": input_bytes / runs[-1]["stored"],
        "rss": max(rss) if rss else None,
    }


def seconds_cell(s):
    return f"{s['s']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def print_main_table(rows):
    print(
        "| corpus | files | MB | method | wall s, median (min-max) | MB/s | speed vs reference "
        "| CPU s | compression ratio | % of reference's ratio | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for corpus_name, files, input_bytes, results in rows:
        ref = summarize(input_bytes, results["reference"])
        for name in ["bcd ingest TREE", "bcd ingest TREE.tar", "reference", "tar -cf (I/O floor)"]:
            s = summarize(input_bytes, results[name])
            if name.startswith("tar"):
                ratio_cells = "(archive) | "
            else:
                ratio_cells = f"{s['ratio']:.3f} | {100 * s['ratio'] / ref['ratio']:.1f}%"
            rss = f"{s['rss']:.0f}" if s["rss"] is not None else "n/a (in-process)"
            print(
                f"| {corpus_name} | {files} | {input_bytes / 1e6:.0f} | {name} | {seconds_cell(s)} | {s['mbps']:.1f} "
                f"| {ref['s'] / s['s']:.2f}x | {s['cpu']:.2f} | {ratio_cells} | {rss} |"
            )


def print_level_table(input_bytes, results, levels):
    """--level choices on the text corpus; returns the levels meeting both targets."""
    ref = summarize(input_bytes, results["reference"])
    print(
        "| --level | wall s, median (min-max) | MB/s | speed vs reference | CPU s | CPU vs reference "
        "| compression ratio | % of reference's ratio | >= 1.5x and >= 99%? |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| Python reference (HC 9) | {seconds_cell(ref)} | {ref['mbps']:.1f} | 1.00x | {ref['cpu']:.2f} | 1.00x "
        f"| {ref['ratio']:.3f} | 100.0% | |"
    )
    passing = []
    for level in levels:
        name = "bcd ingest TREE" if level == DEFAULT_LEVEL else f"bcd ingest TREE --level {level}"
        s = summarize(input_bytes, results[name])
        speed, share = ref["s"] / s["s"], 100 * s["ratio"] / ref["ratio"]
        ok = speed >= 1.5 and share >= 99.0
        if ok:
            passing.append(level)
        label = f"{level} (default)" if level == DEFAULT_LEVEL else level
        print(
            f"| {label} | {seconds_cell(s)} | {s['mbps']:.1f} | {speed:.2f}x | {s['cpu']:.2f} | {ref['cpu'] / s['cpu']:.2f}x "
            f"| {s['ratio']:.3f} | {share:.1f}% | {'yes' if ok else 'no'} |"
        )
    return passing


def rss_bench(workdir, sizes_mb, scale, repeats):
    """Peak RSS of `bcd ingest` on image-sized random files, at two corpus sizes,
    from the tree and from its tar, and keyless: a keyed dataset's handle indexes
    the new keys after the commit, reading them through its mmap of the shards,
    which --keyless skips, so the difference is those mapped file pages."""
    rows = []
    for i, size in enumerate(sizes_mb):
        target = int(size * 1e6 * scale)
        tree, archive = corpus(workdir, f"random-images-{target}", lambda root, n, i=i: make_random_tree(root, n, i), target)
        files, input_bytes = tree_stats(tree)
        for label, source, options in (
            ("TREE", tree, []),
            ("TREE.tar", archive, []),
            ("TREE --keyless", tree, ["--keyless"]),
        ):
            out = workdir / "out"
            runs = []
            for _ in range(repeats):
                remove(out)
                os.sync()
                run = bcd_ingest(source, out, None, *options)
                assert run["summary"]["bytes_in"] == input_bytes
                runs.append(run)
            remove(out)
            s = summarize(input_bytes, [dict(r, stored=1) for r in runs])
            rows.append((files, input_bytes, label, s, [r["rss"] for r in runs]))
            log(f"  random {input_bytes / 1e6:.0f} MB, bcd ingest {label}: peak RSS {s['rss']:.0f} MB")
    print("| corpus | files | MB | command | wall s, median | MB/s | peak RSS MB, max (each run) |")
    print("|---|---|---|---|---|---|---|")
    for files, input_bytes, label, s, each in rows:
        print(
            f"| random bytes, 50-200 KB files | {files} | {input_bytes / 1e6:.0f} | bcd ingest {label} | {s['s']:.2f} "
            f"| {s['mbps']:.1f} | {s['rss']:.0f} ({', '.join(f'{x:.0f}' for x in each)}) |"
        )


def default_level():
    """The --level `bcd ingest` uses when given none, from its --help."""
    text = subprocess.run([BCD, "ingest", "--help"], capture_output=True, text=True).stdout
    match = re.search(r"--level <[^>]*>.*?\[default: ([^\]]+)\]", text, re.DOTALL)
    return match.group(1) if match else DEFAULT_LEVEL


def stale_binary():
    built = BCD.stat().st_mtime
    for folder in ("src", "cli", "pipeline", "converters"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".rs", ".toml") and path.stat().st_mtime > built:
                return path
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each method; medians are reported (default 3)")
    parser.add_argument(
        "--scale", type=float, default=1.0, help=f"corpus sizes x this (1.0: jpeg {JPEG_MB} MB, text {TEXT_MB} MB)"
    )
    parser.add_argument("--levels", default=",".join(LEVELS), help="--level choices on the text corpus (comma-separated)")
    parser.add_argument("--rss-sizes", default="200,1000", help="MB of random data for the peak-RSS runs, x --scale")
    parser.add_argument("--workdir", type=Path, help="keep the corpora here and reuse them (default: a temp dir, removed)")
    args = parser.parse_args()

    if not BCD.exists():
        sys.exit(f"{BCD} is missing: build it first with `cargo build --release -p bcd-cli`")
    if (newer := stale_binary()) is not None:
        log(f"warning: {newer.relative_to(ROOT)} is newer than {BCD.relative_to(ROOT)}: cargo build --release -p bcd-cli")
    if not os.access(TIME, os.X_OK):
        sys.exit(f"{TIME} (GNU time) is missing: apt-get install time")
    try:
        import PIL  # noqa: F401
    except ImportError:
        sys.exit("Pillow is missing: .venv/bin/python -m pip install -r bench/requirements.txt")
    global DEFAULT_LEVEL
    DEFAULT_LEVEL = default_level()
    levels = args.levels.split(",")
    if DEFAULT_LEVEL not in levels:
        levels.append(DEFAULT_LEVEL)
    dataset_class = reference.load("0.3.0")
    started = time.perf_counter()
    load_before = os.getloadavg()

    temporary = None
    if args.workdir is None:
        temporary = tempfile.TemporaryDirectory(prefix="bcd-ingest-bench-")
        workdir = Path(temporary.name)
    else:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        rows = []
        for name, make, megabytes in (("jpeg", make_jpeg_tree, JPEG_MB), ("text", make_text_tree, TEXT_MB)):
            tree, archive = corpus(workdir, name, make, int(megabytes * 1e6 * args.scale))
            log(f"{name}: {args.repeats} repeats")
            corpus_levels = levels if name == "text" else [DEFAULT_LEVEL]
            rows.append((name, *bench_corpus(dataset_class, workdir, tree, archive, corpus_levels, args.repeats)))

        commit = subprocess.run(
            ["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True
        ).stdout.strip()
        print(
            f"machine: {os.cpu_count()} cores, load average {load_before[0]:.1f} at start; bcd {commit}; "
            f"repeats: {args.repeats}; scale: {args.scale}; medians; speed vs reference = reference wall s / bcd wall s; "
            "CPU s = user + sys of all threads\n"
        )
        print_main_table(rows)
        print()
        _, _, text_bytes, text_results = rows[1]
        passing = print_level_table(text_bytes, text_results, levels)
        print()
        log("peak RSS runs")
        rss_bench(workdir, [float(x) for x in args.rss_sizes.split(",")], args.scale, min(args.repeats, 2))
        print()
        speedup = {}
        for corpus_name, _, _, results in rows:
            ref = statistics.median(r["s"] for r in results["reference"])
            speedup[corpus_name] = ref / statistics.median(r["s"] for r in results["bcd ingest TREE"])
        print(
            f"targets: jpeg >= 5x the reference's MB/s: {speedup['jpeg']:.2f}x ({'met' if speedup['jpeg'] >= 5 else 'MISSED'}); "
            f"text >= 1.5x at >= 99% of its ratio: levels meeting both: {', '.join(passing) or 'none'} "
            f"(default {DEFAULT_LEVEL}: {'met' if DEFAULT_LEVEL in passing else 'MISSED'})"
        )
        print(f"load average {os.getloadavg()[0]:.1f} at end; total {time.perf_counter() - started:.0f} s")
    finally:
        if temporary is not None:
            temporary.cleanup()


if __name__ == "__main__":
    main()
