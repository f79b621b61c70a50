"""Object-storage benchmark: `bcd push` / `bcd pull` against boto3's transfer
manager (what `aws s3 sync` uses) with the same concurrency, and shuffled reads of
a dataset in object storage through the local cache against the same reads of a
local copy; all on a loopback moto S3 server.

    make python-env && .venv/bin/python -m pip install -r bench/requirements.txt
    cargo build --release -p bcd-cli
    (cd python && ../.venv/bin/maturin develop --release)
    .venv/bin/python bench/remote_bench.py [--repeats 3] [--scale 1.0] [--concurrency 8] [--only epoch|open]

The dataset is the ImageFolder corpus of bench/ingest_bench.py (distinct JPEGs of
~100 KB made with Pillow), ingested with `bcd ingest` (lz4, the default level) in
shards of --shard-size (default 32 MiB), so that both small and multipart-sized
files travel.

Methods, each repeated in a rotating order:

- push: `bcd push DS s3://bench/push-N -j C` (a new prefix each time) against
  boto3's `TransferManager(max_concurrency=C)` uploading the same files
  (multipart above 64 MiB in 16 MiB parts, as bcd), both timed as wall time;
- pull: `bcd pull s3://bench/ds DIR -j C` into an empty directory against the
  transfer manager downloading the same objects;
- epoch: one pass over every record in a shuffled order, `get_batch` of 64
  indices at a time, from the local dataset; from `s3://` with a warm cache (the
  shards already in `cache_dir`); from `s3://` with a cold cache, three ways:
  `prefetch=0` (each shard downloaded by its first read, as before issue 24),
  the default (the first read that waits starts fetching the other shards), and
  `ds.prefetch(order)` first (the epoch's order handed to the cache, as
  `bcd.torch.Sampler` does); and "download first": `bcd pull` then the local
  epoch, which the cold epochs are compared with;
- loader epoch (when torch is installed, as by `make test-torch`): one shuffled
  DataLoader epoch (`bcd.torch.MapDataset(output="tensor")`, `bcd.torch.Sampler`,
  batches of 64, --workers fork workers) from `s3://` with a warm cache against
  the same epoch from the local dataset; and from `s3://` with a cold cache (the
  sampler hands the epoch's order to the cache) against `bcd pull` then the
  local DataLoader epoch.

- cold loader (`--only cold-loader`): the cold DataLoader epoch as a training
  job starts it, each epoch in a new Python process (torch imported before the
  clock starts): from `s3://` into an empty cache, against `bcd pull` into an
  empty directory then the same epoch in a new process over the copy; the two
  back to back in a rotating order, --repeats times (the comparison of issue
  24's target, 1.05x).

- open (`--only open`): `bcd.Dataset("s3://bench/ds", cache_dir=)` into an
  empty cache (cold: the sync fetches the manifest, the listing, every `.idx`,
  the files beside the shards and the persisted index) and again (warm: one
  request), through the test proxy with each request delayed by each of
  `--delays` milliseconds (a store far away, where rounds of requests waited
  for one after another cost a round trip each); with the requests by method.

Each epoch opens its dataset, as a training job's workers do. The machine is
shared and noisy: besides the medians of each method, the script prints the
median of the per-repeat ratios (each repeat runs the compared methods back to
back), which drifts less with the machine's load. Objects a repeat stored are
removed after it (moto holds them in memory).

moto keeps objects in memory in another process; its request handling (Python)
is the bottleneck of every transfer here, for both clients alike. On a machine
of few cores it also takes the CPU the client's own reads need while a cold
epoch overlaps them with the download, which a store on other machines does
not: `--server-cpus 1` runs the server on CPU 1 only and every client (this
process, `bcd pull`, the DataLoader workers) on the other CPUs, for every
method alike.
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
BCD = ROOT / "target" / "release" / "bcd"
sys.path.insert(0, str(ROOT / "bench"))


def start_server():
    """The test S3 server: moto and the proxy in front of it (their ports)."""
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "python" / "s3_server.py"), "bench"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    return server, json.loads(server.stdout.readline())


def start_moto():
    server, ports = start_server()
    return server, ports["moto"]


def proxy(port, action, **query):
    """Asks the test proxy on `port` to do `action` (see s3_server.py); its answer."""
    import urllib.request
    url = f"http://127.0.0.1:{port}/__proxy__/{action}?" + "&".join(f"{k}={v}" for k, v in query.items())
    method = "GET" if action == "log" else "POST"
    with urllib.request.urlopen(urllib.request.Request(url, method=method)) as answer:
        return json.loads(answer.read())


def open_times(bcd, workdir, proxy_port, delays, repeats):
    """Cold and warm opens of s3://bench/ds through the test proxy, with each
    request delayed by each of `delays` ms (a store far away): the medians of
    the seconds a `bcd.Dataset(..., cache_dir=)` takes, and the requests of the
    last open of each kind by method."""
    import collections
    moto_endpoint = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{proxy_port}"
    rows = []
    try:
        for delay in delays:
            proxy(proxy_port, "reset")
            proxy(proxy_port, "delay", ms=delay)
            times = {"cold": [], "warm": []}
            requests = {}
            for repeat in range(repeats):
                cache = workdir / f"open-{delay}-{repeat}"
                for kind in ("cold", "warm"):
                    proxy(proxy_port, "reset")
                    proxy(proxy_port, "delay", ms=delay)
                    times[kind].append(timed(lambda: bcd.Dataset("s3://bench/ds", cache_dir=cache)))
                    log = proxy(proxy_port, "log")
                    requests[kind] = dict(collections.Counter(method for method, _, _ in log))
                shutil.rmtree(cache, ignore_errors=True)
            for kind in ("cold", "warm"):
                rows.append((delay, kind, statistics.median(times[kind]), requests[kind]))
    finally:
        proxy(proxy_port, "reset")
        os.environ["AWS_ENDPOINT_URL"] = moto_endpoint
    return rows


def environment(port):
    return {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ALLOW_HTTP": "true",
    }


def make_dataset(workdir, scale, shard_size):
    import ingest_bench

    tree = workdir / "jpeg"
    if not tree.exists():
        ingest_bench.make_jpeg_tree(tree, int(ingest_bench.JPEG_MB * 1e6 * scale))
    dataset = workdir / "ds"
    if not dataset.exists():
        subprocess.run(
            [str(BCD), "ingest", str(tree), "--into", str(dataset), "--quiet",
             "--max-shard-size", shard_size],
            check=True,
        )
    return dataset


def boto_client(port):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
        config=Config(max_pool_connections=64),
    )


def transfer_config(concurrency):
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(
        max_concurrency=concurrency,
        multipart_threshold=64 << 20,
        multipart_chunksize=16 << 20,
    )


def boto_upload(client, dataset, prefix, concurrency):
    from s3transfer.manager import TransferManager

    config = transfer_config(concurrency)
    with TransferManager(client, config) as manager:
        futures = [
            manager.upload(str(path), "bench", f"{prefix}/{path.name}")
            for path in sorted(dataset.iterdir())
            if path.is_file() and not path.name.startswith(".bcd.lock")
        ]
        for future in futures:
            future.result()


def boto_download(client, prefix, target, concurrency):
    from s3transfer.manager import TransferManager

    target.mkdir(parents=True)
    listed = client.list_objects_v2(Bucket="bench", Prefix=prefix + "/")["Contents"]
    config = transfer_config(concurrency)
    with TransferManager(client, config) as manager:
        futures = [
            manager.download("bench", item["Key"], str(target / item["Key"].rsplit("/", 1)[1]))
            for item in listed
        ]
        for future in futures:
            future.result()


def empty_prefix(client, prefix):
    """Removes what a run stored under `prefix/` (moto keeps it in memory)."""
    while True:
        listed = client.list_objects_v2(Bucket="bench", Prefix=prefix + "/").get("Contents", [])
        if not listed:
            return
        client.delete_objects(Bucket="bench", Delete={"Objects": [{"Key": o["Key"]} for o in listed]})


def loader_epoch(path, workers, **open_args):
    """One shuffled DataLoader epoch (fork workers, batches of 64 as one tensor
    each): the bytes read."""
    import torch
    import bcd.torch

    dataset = bcd.torch.MapDataset(path, output="tensor", **open_args)
    sampler = bcd.torch.Sampler(dataset, seed=0)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=64, sampler=sampler, num_workers=workers,
        collate_fn=bcd.torch.collate, multiprocessing_context="fork")
    return sum(int(batch.values.numel()) for batch in loader)


# One DataLoader epoch in a new process: its seconds, torch imported first.
_LOADER_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import remote_bench
import torch.utils.data, bcd.torch
started = time.perf_counter()
remote_bench.loader_epoch(sys.argv[2], int(sys.argv[3]), **({"cache_dir": sys.argv[4]} if len(sys.argv) > 4 else {}))
print(time.perf_counter() - started)
"""


def cold_loader(workdir, env, concurrency, workers, repeats):
    """The cold DataLoader epoch from s3:// against `bcd pull` then the local
    epoch, each epoch in a new process (see the module documentation)."""

    def loader(*args):
        out = subprocess.run([sys.executable, "-c", _LOADER_CHILD, str(ROOT / "bench"), *args],
                             env=env, check=True, capture_output=True, text=True)
        return float(out.stdout.split()[-1])

    cache, copy = workdir / "cold-loader-cache", workdir / "cold-loader-copy"

    def cold():
        try:
            return loader("s3://bench/ds", str(workers), str(cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def pull_then_local():
        try:
            pulled = timed(lambda: subprocess.run(
                [str(BCD), "pull", "s3://bench/ds", str(copy), "-j", concurrency],
                check=True, env=env, capture_output=True))
            return pulled + loader(str(copy), str(workers))
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    times = {"cold": [], "pull then local": []}
    ratios = []
    for repeat in range(repeats):
        runs = [("cold", cold), ("pull then local", pull_then_local)]
        for name, run in runs[repeat % 2:] + runs[:repeat % 2]:
            times[name].append(run())
        ratios.append(times["cold"][-1] / times["pull then local"][-1])
        print(f"repeat {repeat}: cold {times['cold'][-1]:.3f} s, pull then local "
              f"{times['pull then local'][-1]:.3f} s, load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"DataLoader epoch ({workers} fork workers), each in a new process, {repeats} repeats:")
    print("| epoch | median s (min-max) |")
    print("| --- | ---: |")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f}) |")
    print(f"cold / pull then local, median of the per-repeat ratios: {statistics.median(ratios):.3f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}; target 1.05)")


def timed(function):
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def epoch(dataset, order, batch=64, prefetch=False):
    """One pass over `order` by batches; with `prefetch`, the order is handed to
    the dataset's cache first."""
    if prefetch:
        dataset.prefetch(order)
    total = 0
    for start in range(0, len(order), batch):
        for value in dataset.get_batch(order[start:start + batch]):
            total += len(value)
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--shard-size", default="32MiB")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--workers", type=int, default=2,
                        help="DataLoader workers of the loader epochs (run when torch is installed)")
    parser.add_argument("--only", choices=["epoch", "open", "cold-loader"],
                        help="only the epochs (no push and pull against boto3), only "
                             "the opens through the proxy (--delays), or only the cold "
                             "DataLoader epochs, each in a new process")
    parser.add_argument("--delays", default="0,30",
                        help="with --only open: the milliseconds each request waits, per run")
    parser.add_argument("--server-cpus", type=lambda text: {int(c) for c in text.split(",")},
                        help="CPUs the S3 server runs on (comma-separated); the clients run on the others")
    args = parser.parse_args()
    if args.server_cpus:
        # Before any thread starts: a thread (and a child process) inherits the
        # CPUs of the thread that starts it.
        clients = set(os.sched_getaffinity(0)) - args.server_cpus
        if not clients:
            parser.error("--server-cpus leaves no CPU for the clients")
        os.sched_setaffinity(0, clients)

    import bcd

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bcd-remote-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    server, ports = start_server()
    port = ports["moto"]
    if args.server_cpus:
        for thread in os.listdir(f"/proc/{server.pid}/task"):
            os.sched_setaffinity(int(thread), args.server_cpus)
    os.environ.update(environment(port))
    env = {**os.environ, **environment(port)}
    try:
        dataset = make_dataset(workdir, args.scale, args.shard_size)
        size = sum(p.stat().st_size for p in dataset.iterdir() if p.is_file())
        files = sum(1 for p in dataset.iterdir() if p.is_file())
        client = boto_client(port)
        c = str(args.concurrency)
        subprocess.run([str(BCD), "push", str(dataset), "s3://bench/ds", "-j", c],
                       check=True, env=env, capture_output=True)
        if args.only == "open":
            delays = [int(d) for d in args.delays.split(",")]
            rows = open_times(bcd, workdir, ports["proxy"], delays, args.repeats)
            print(f"dataset: {files} files, {size / 1e6:.1f} MB; {args.repeats} repeats (median)")
            print("| ms a request | open | seconds | requests |")
            print("| ---: | --- | ---: | --- |")
            for delay, kind, seconds, requests in rows:
                print(f"| {delay} | {kind} | {seconds:.3f} | {requests} |")
            return
        if args.only == "cold-loader":
            cold_loader(workdir, env, c, args.workers, args.repeats)
            return
        cold = ["epoch s3 cold, prefetch=0", "epoch s3 cold", "epoch s3 cold, prefetch(order)"]
        transfers = [] if args.only == "epoch" else ["bcd push", "boto3 upload", "bcd pull", "boto3 download"]
        results = {name: [] for name in
                   transfers + ["epoch local", "epoch s3 warm"] + cold + ["pull then local"]}
        try:
            import torch  # noqa: F401
            loaders = True
            results.update({"loader local": [], "loader s3 warm": [],
                            "loader s3 cold": [], "pull then loader local": []})
        except ImportError:
            loaders = False
        ratios = {"push": [], "pull": [], "epoch": [], "loader": [],
                  **{name: [] for name in cold}, "loader s3 cold": []}
        local = bcd.Dataset(dataset)
        order = list(range(len(local)))
        random.Random(0).shuffle(order)
        for repeat in range(args.repeats):
            if args.only == "epoch":
                runs = []
            else:
                runs = [
                    ("bcd push", lambda: subprocess.run(
                        [str(BCD), "push", str(dataset), f"s3://bench/push-{repeat}", "-j", c],
                        check=True, env=env, capture_output=True)),
                    ("boto3 upload", lambda: boto_upload(client, dataset, f"boto-{repeat}", args.concurrency)),
                    ("bcd pull", lambda: subprocess.run(
                        [str(BCD), "pull", "s3://bench/ds", str(workdir / f"pull-{repeat}"), "-j", c],
                        check=True, env=env, capture_output=True)),
                    ("boto3 download", lambda: boto_download(client, "ds", workdir / f"boto-{repeat}", args.concurrency)),
                ]
            if runs:
                shift = repeat % len(runs)
                for name, run in runs[shift:] + runs[:shift]:
                    results[name].append(timed(run))
                for leftover in [workdir / f"pull-{repeat}", workdir / f"boto-{repeat}"]:
                    shutil.rmtree(leftover, ignore_errors=True)
                for prefix in [f"push-{repeat}", f"boto-{repeat}"]:
                    empty_prefix(client, prefix)
                # Per repeat, the competitor's time over bcd's (> 1: bcd is faster).
                ratios["push"].append(results["boto3 upload"][-1] / results["bcd push"][-1])
                ratios["pull"].append(results["boto3 download"][-1] / results["bcd pull"][-1])

            # The cold epochs and the pull they are compared with, back to back
            # in a rotating order, each into an empty cache (or directory).
            copy = workdir / f"copy-{repeat}"

            def pull_then_local():
                subprocess.run([str(BCD), "pull", "s3://bench/ds", str(copy), "-j", c],
                               check=True, env=env, capture_output=True)
                epoch(bcd.Dataset(copy), order)

            def cold_epoch(**settings):
                prefetch = settings.pop("prefetch_order", False)
                path = workdir / f"cold-{repeat}"
                try:
                    return timed(lambda: epoch(
                        bcd.Dataset("s3://bench/ds", cache_dir=path, **settings), order, prefetch=prefetch))
                finally:
                    shutil.rmtree(path, ignore_errors=True)

            pair = [
                ("pull then local", lambda: timed(pull_then_local)),
                (cold[0], lambda: cold_epoch(prefetch=0)),
                (cold[1], lambda: cold_epoch()),
                (cold[2], lambda: cold_epoch(prefetch_order=True)),
            ]
            shift = repeat % len(pair)
            for name, run in pair[shift:] + pair[:shift]:
                results[name].append(run())
                shutil.rmtree(copy, ignore_errors=True)
            for name in cold:
                # The cold epoch's time over pulling first (< 1.05: the target).
                ratios[name].append(results[name][-1] / results["pull then local"][-1])

            cache = workdir / f"cache-{repeat}"
            epoch(bcd.Dataset("s3://bench/ds", cache_dir=cache), order)
            results["epoch s3 warm"].append(timed(lambda: epoch(
                bcd.Dataset("s3://bench/ds", cache_dir=cache), order)))
            results["epoch local"].append(timed(lambda: epoch(bcd.Dataset(dataset), order)))
            # The time of the s3 epoch over the local one (< 1.1: within 10%).
            ratios["epoch"].append(results["epoch s3 warm"][-1] / results["epoch local"][-1])
            if loaders:
                pair = [
                    ("loader s3 warm", lambda: loader_epoch("s3://bench/ds", args.workers, cache_dir=cache)),
                    ("loader local", lambda: loader_epoch(dataset, args.workers)),
                ]
                for name, run in pair[repeat % 2:] + pair[:repeat % 2]:
                    results[name].append(timed(run))
                ratios["loader"].append(results["loader s3 warm"][-1] / results["loader local"][-1])
                fresh = workdir / f"loader-cold-{repeat}"

                def pull_then_loader():
                    subprocess.run([str(BCD), "pull", "s3://bench/ds", str(copy), "-j", c],
                                   check=True, env=env, capture_output=True)
                    loader_epoch(copy, args.workers)

                pair = [
                    ("loader s3 cold", lambda: loader_epoch("s3://bench/ds", args.workers, cache_dir=fresh)),
                    ("pull then loader local", pull_then_loader),
                ]
                for name, run in pair[repeat % 2:] + pair[:repeat % 2]:
                    results[name].append(timed(run))
                    shutil.rmtree(copy, ignore_errors=True)
                    shutil.rmtree(fresh, ignore_errors=True)
                ratios["loader s3 cold"].append(
                    results["loader s3 cold"][-1] / results["pull then loader local"][-1])
            shutil.rmtree(cache, ignore_errors=True)

        print(f"dataset: {len(local)} records, {files} files, {size / 1e6:.1f} MB; "
              f"concurrency {args.concurrency}; {args.repeats} repeats (median)")
        print("| method | seconds | MB/s |")
        print("| --- | ---: | ---: |")
        for name, times in results.items():
            median = statistics.median(times)
            print(f"| {name} | {median:.3f} | {size / 1e6 / median:.0f} |")
        print()
        print("medians of the per-repeat ratios (min-max):")
        for name, values in ratios.items():
            if values:
                if name in ("push", "pull"):
                    what = "boto3 time / bcd time"
                elif "cold" in name:
                    what = "cold time / pull then local time"
                else:
                    what = "s3 warm time / local time"
                print(f"- {name}: {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f}), {what}")
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
