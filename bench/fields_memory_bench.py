"""Ingest memory with fields (issue 27): peak RSS and wall time of `bcd ingest`
with three small fields against the same ingest without them, same data, same
run, for one or several `bcd` binaries (say main's and a branch's).

    make python-env
    cargo build --release -p bcd-cli
    .venv/bin/python bench/fields_memory_bench.py --records 20000000 \
        --workdir /work/bench-fieldsmem --bcd new=target/release/bcd [--bcd main=/path/to/bcd]

Corpora (made once in --workdir and reused): `--records` records, each a value
`text` (a 44-byte string) and three fields, `id` (a 14-character string), `n`
(an int64) and `x` (a float64):

- `records.jsonl`: one JSON object per line, written by this script;
- `records.parquet`: the same columns, written by pyarrow (row groups of 1M rows).

Runs, in a rotating order within each repeat (so drift in machine load hits all
alike), outputs removed between runs (outside the timing), for every binary,
source and `--max-shard-size` (default 1 GiB: one shard holds every record of
20 million; and 64 MiB):

- with fields: JSON Lines every field (the schema inferred), Parquet every
  column (the default `--fields all`);
- without: JSON Lines with `--schema` of no field (`[]`), Parquet with
  `--fields none`.

Every ingest is keyless (`--keyless`: no key set, which is another issue's).
Reports, per binary, source and shard size, medians of wall seconds, CPU seconds
and peak RSS (GNU time) with and without fields, the RSS difference (the target:
at most 150 MB) and the time ratio with / without (the target: at most 1.15),
as the ratio of the medians and as the median of the ratios of back-to-back
pairs (the two ingests of a pair run one right after the other).
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import ingest_bench  # noqa: E402  (the timed process runner, log, remove)

SHARD_SIZES = {"1GiB": "1GiB", "64MiB": "64MiB"}


def log(message):
    ingest_bench.log(message)


def make_corpora(workdir, records):
    """The JSON Lines and Parquet files of `records` records, made once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl = workdir / f"records-{records}.jsonl"
    parquet = workdir / f"records-{records}.parquet"
    chunk = 1_000_000
    if not jsonl.exists():
        log(f"writing {jsonl}")
        partial = jsonl.with_suffix(".partial")
        with open(partial, "w") as out:
            for start in range(0, records, chunk):
                out.write(
                    "".join(
                        f'{{"text": "record {i:012d} of the fields memory bench", '
                        f'"id": "id{i:012d}", "n": {i * 7 % 1_000_003}, "x": {i * 0.5}}}\n'
                        for i in range(start, min(start + chunk, records))
                    )
                )
        partial.rename(jsonl)
    if not parquet.exists():
        log(f"writing {parquet}")
        partial = parquet.with_suffix(".partial")
        schema = pa.schema([("text", pa.string()), ("id", pa.string()), ("n", pa.int64()), ("x", pa.float64())])
        with pq.ParquetWriter(partial, schema) as writer:
            for start in range(0, records, chunk):
                rows = range(start, min(start + chunk, records))
                writer.write_table(
                    pa.table(
                        {
                            "text": [f"record {i:012d} of the fields memory bench" for i in rows],
                            "id": [f"id{i:012d}" for i in rows],
                            "n": [i * 7 % 1_000_003 for i in rows],
                            "x": [i * 0.5 for i in rows],
                        },
                        schema=schema,
                    ),
                    row_group_size=chunk,
                )
        partial.rename(parquet)
    no_fields = workdir / "no-fields.json"
    no_fields.write_text("[]")
    return {
        "jsonl": (jsonl, ["--value-field", "text"], ["--schema", str(no_fields)]),
        "parquet": (parquet, ["--value-column", "text"], ["--fields", "none"]),
    }


def ingest(bcd, source, out, options):
    ingest_bench.remove(out)
    run = ingest_bench.run_process([bcd, "ingest", source, "--into", out, "--keyless", "--quiet", "--json", *options])
    summary = json.loads(run.pop("stdout"))
    ingest_bench.remove(out)
    return run, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--bcd", action="append", default=[], help="NAME=PATH of a bcd binary (repeatable)")
    parser.add_argument("--sources", default="jsonl,parquet")
    parser.add_argument("--shard-sizes", default=",".join(SHARD_SIZES))
    args = parser.parse_args()
    binaries = dict(b.split("=", 1) for b in args.bcd) or {"release": str(ingest_bench.BCD)}
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpora = make_corpora(args.workdir, args.records)
    out = args.workdir / "out"

    # The ingests with and without fields of one build, source and shard size
    # run back to back (which one first alternates), so each pair's ratio sees
    # the same machine: on a shared one, a build's medians drift between runs
    # by more than the effect sought, and the ratio of two medians taken
    # minutes apart carries that drift.
    groups = []
    for name, bcd in binaries.items():
        for source in args.sources.split(","):
            path, options, without = corpora[source]
            for size in args.shard_sizes.split(","):
                pair = []
                for fields in (True, False):
                    extra = options + ["--max-shard-size", SHARD_SIZES[size]] + ([] if fields else without)
                    pair.append(((name, source, size, fields), bcd, path, extra))
                groups.append(pair)
    results = {run[0]: [] for pair in groups for run in pair}
    for repeat in range(args.repeats):
        rotated = groups[repeat % len(groups):] + groups[: repeat % len(groups)]
        for pair in rotated:
            for key, bcd, path, extra in pair if repeat % 2 == 0 else pair[::-1]:
                log(f"repeat {repeat + 1}: {key}")
                run, summary = ingest(bcd, path, out, extra)
                assert summary["records"] == args.records, summary
                results[key].append(run)

    def median(key, what):
        return statistics.median(r[what] for r in results[key])

    report = []
    print(f"\n{args.records:,} records, medians of {args.repeats}\n")
    print("| bcd | source | max shard size | s with / without | ratio | pair ratio, median (range) | CPU s with / without | peak RSS MB with / without | RSS difference MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in binaries:
        for source in args.sources.split(","):
            for size in args.shard_sizes.split(","):
                w, wo = (name, source, size, True), (name, source, size, False)
                row = {
                    "bcd": name,
                    "source": source,
                    "max_shard_size": size,
                    "s": [median(w, "s"), median(wo, "s")],
                    "cpu": [median(w, "cpu"), median(wo, "cpu")],
                    "rss_mb": [median(w, "rss"), median(wo, "rss")],
                    "all_s": [[r["s"] for r in results[k]] for k in (w, wo)],
                    # Each back-to-back pair's time with fields over without.
                    "pair_ratios": [a["s"] / b["s"] for a, b in zip(results[w], results[wo])],
                    "all_rss_mb": [[r["rss"] for r in results[k]] for k in (w, wo)],
                }
                report.append(row)
                print(
                    f"| {name} | {source} | {size} | {row['s'][0]:.2f} / {row['s'][1]:.2f} | "
                    f"{row['s'][0] / row['s'][1]:.2f} | {statistics.median(row['pair_ratios']):.2f} "
                    f"({min(row['pair_ratios']):.2f}-{max(row['pair_ratios']):.2f}) | "
                    f"{row['cpu'][0]:.2f} / {row['cpu'][1]:.2f} | "
                    f"{row['rss_mb'][0]:.0f} / {row['rss_mb'][1]:.0f} | {row['rss_mb'][0] - row['rss_mb'][1]:.0f} |"
                )
    print()
    print(json.dumps(report, indent=1))
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
