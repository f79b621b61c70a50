"""bcd.Dataset over a dataset in object storage (moto's S3 server, behind the
tests' counting proxy): reads through the shared local shard cache, each shard
downloaded once by however many processes, eviction past the limit, refresh,
pickling into workers, shards fetched ahead in an epoch's order (also while
workers are forked), bcd.ingest into a URI, and URIs that are refused."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import subprocess
import sys

import pytest

import bcd
from helpers import ROOT, read_all, records

BUCKET = "bcd-test"


@pytest.fixture(scope="module")
def s3():
    """A moto server behind the proxy, and the environment pointing clients at it."""
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "python" / "s3_server.py"), BUCKET],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    ports = json.loads(server.stdout.readline())
    env = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{ports['proxy']}",
        "AWS_ALLOW_HTTP": "true",
        "BCD_REMOTE_MAX_RETRIES": "4",
        "BCD_REMOTE_RETRY_TIMEOUT": "20",
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    yield Proxy(ports["proxy"])
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    server.stdin.close()
    server.wait(timeout=30)


class Proxy:
    """The proxy's control endpoints."""

    def __init__(self, port):
        self.port = port

    def _call(self, method, request):
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        connection.request(method, f"/__proxy__/{request}")
        body = connection.getresponse().read()
        connection.close()
        return json.loads(body)

    def reset(self):
        self._call("POST", "reset")

    def hold(self, path):
        """The next GET whose path contains `path` waits until `release`."""
        self._call("POST", f"hold?method=GET&path={path}")

    def held(self):
        """Whether the held request has arrived (and waits)."""
        return self._call("GET", "held")

    def release(self):
        self._call("POST", "release")

    def downloads_in_order(self, prefix):
        """The shard data files under `prefix` read whole or in part, in the order
        their reads were answered."""
        names = []
        for method, path, status in self._call("GET", "log"):
            name = path.split("?")[0]
            if method == "GET" and status in (200, 206) and f"/{prefix}/" in name and name.endswith(".bin"):
                names.append(name.rsplit("/", 1)[1])
        return names

    def shard_downloads(self, prefix):
        """GETs of shard data files under `prefix`, by file name."""
        counts = {}
        for method, path, status in self._call("GET", "log"):
            name = path.split("?")[0]
            if method == "GET" and status in (200, 206) and f"/{prefix}/" in name and name.endswith(".bin"):
                counts[name.rsplit("/", 1)[1]] = counts.get(name.rsplit("/", 1)[1], 0) + 1
        return counts


def _push(tmp_path, name, *, keyed, compression, count=60, shard="2K"):
    """A local dataset pushed (with bcd.ingest into a URI) to s3://BUCKET/name."""
    source = tmp_path / f"{name}-source"
    local = bcd.Dataset.create(source, keyed=keyed, compression=compression, max_shard_size=shard)
    local.extend(records(count, keyed=keyed))
    subprocess.run(
        [str(ROOT / "target" / "debug" / "bcd"), "push", str(source), f"s3://{BUCKET}/{name}"],
        check=True,
        capture_output=True,
    )
    return local


@pytest.fixture(scope="module")
def cli():
    # `make test` runs the Rust tests first, which build target/debug/bcd; a
    # build of its own (other settings) would compile everything again.
    binary = ROOT / "target" / "debug" / "bcd"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "bcd-cli"], cwd=ROOT, check=True)
    return binary


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
@pytest.mark.parametrize("compression", ["lz4", None], ids=["lz4", "none"])
def test_a_remote_dataset_reads_as_the_local_one(s3, cli, tmp_path, keyed, compression):
    name = f"reads-{keyed}-{compression}"
    local = _push(tmp_path, name, keyed=keyed, compression=compression)
    remote = bcd.Dataset(f"s3://{BUCKET}/{name}", cache_dir=tmp_path / "cache")
    assert remote.path == f"s3://{BUCKET}/{name}"
    assert (remote.keyed, remote.compression, len(remote)) == (keyed, compression, len(local))
    assert read_all(remote) == read_all(local)
    assert [bytes(v) for v in remote.get_batch(range(len(remote)))] == [
        bytes(local.at(i)) for i in range(len(local))
    ]
    if keyed:
        key = local.key_at(7)
        assert bytes(remote[key]) == bytes(local[key]) and key in remote
    # Pickles as the URI and the cache settings.
    copy = pickle.loads(pickle.dumps(remote))
    assert copy.path == remote.path and read_all(copy) == read_all(local)
    # The cache is a read-only mirror: writes go to a local dataset, then `bcd push`.
    with pytest.raises(ValueError, match="read-only mirror"):
        remote.extend([(b"k", b"v")] if keyed else [b"v"])


def _read_everything(uri, cache_dir):
    dataset = bcd.Dataset(uri, cache_dir=cache_dir)
    return [bytes(dataset.at(i)) for i in range(len(dataset))]


def test_processes_sharing_a_cache_download_each_shard_once(s3, cli, tmp_path):
    local = _push(tmp_path, "shared", keyed=False, compression=None, count=80)
    s3.reset()
    uri = f"s3://{BUCKET}/shared"
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        results = pool.starmap(_read_everything, [(uri, str(tmp_path / "cache"))] * 3)
    expected = [bytes(local.at(i)) for i in range(len(local))]
    assert all(result == expected for result in results)
    downloads = s3.shard_downloads("shared")
    shards = len(list((tmp_path / "shared-source").glob("*.bin")))
    assert len(downloads) == shards and set(downloads.values()) == {1}, downloads


def test_a_cache_over_its_limit_evicts_and_still_reads_right(s3, cli, tmp_path):
    local = _push(tmp_path, "evict", keyed=False, compression="lz4", count=100)
    cache = tmp_path / "cache"
    remote = bcd.Dataset(f"s3://{BUCKET}/evict", cache_dir=cache, cache_limit="5K")
    order = list(range(len(local))) * 2
    for i in order[::-1] + order:
        assert bytes(remote.at(i)) == bytes(local.at(i))
    data = [p for p in cache.rglob("*.bin")]
    assert sum(p.stat().st_size for p in data) <= 5 * 1024 + 4 * 1024


def test_refresh_sees_records_ingested_into_the_uri(s3, cli, tmp_path):
    uri = f"s3://{BUCKET}/refresh"
    archive = ROOT / "fixtures" / "tar" / "shards-000000.tar"
    summary = bcd.ingest([str(archive)], uri)
    assert summary["records"] > 0
    remote = bcd.Dataset(uri, cache_dir=tmp_path / "cache")
    assert len(remote) == summary["records"]
    more = bcd.ingest([str(ROOT / "fixtures" / "tar" / "shards-000001.tar")], uri)
    assert len(remote) == summary["records"]
    remote.refresh()
    assert len(remote) == summary["records"] + more["records"]
    with pytest.raises(ValueError, match="duplicate key"):
        bcd.ingest([str(archive)], uri)


@pytest.mark.parametrize(
    "call",
    [
        lambda tmp: bcd.Dataset("hdfs://bucket/x"),
        lambda tmp: bcd.Dataset.create("s3://bucket/x"),
        lambda tmp: bcd.Dataset.create("weird://bucket/x"),
        lambda tmp: bcd.ingest([str(ROOT / "fixtures" / "tar" / "gnu.tar")], "ftp://host/x"),
        lambda tmp: bcd.ingest(["hdfs://nn/a.tar"], str(tmp / "d")),
        lambda tmp: bcd.Dataset(str(tmp), cache_dir=str(tmp)),
    ],
)
def test_unsupported_uris_are_refused_never_made_local_folders(tmp_path, monkeypatch, call):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError):
        call(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == []


def test_fields_of_a_remote_dataset_read_as_the_local_ones(s3, cli, tmp_path):
    source = tmp_path / "fields-source"
    local = bcd.Dataset.create(source, keyed=True, max_shard_size=2048)
    local.extend({"key": b"k%03d" % i, "value": b"v" * (i % 50), "label": i % 3, "caption": f"c{i}"} for i in range(200))
    subprocess.run([str(cli), "push", str(source), f"s3://{BUCKET}/fields"], check=True, capture_output=True)
    remote = bcd.Dataset(f"s3://{BUCKET}/fields", cache_dir=tmp_path / "cache")
    assert remote.schema == local.schema
    assert remote.fields().to_pylist() == local.fields().to_pylist()
    assert remote.sample(7) == local.sample(7)
    assert remote.stats()["fields"] == local.stats()["fields"]


def test_views_of_a_remote_dataset_read_from_the_cache(s3, cli, tmp_path):
    source = tmp_path / "views-source"
    local = bcd.Dataset.create(source, keyed=True, max_shard_size=2048)
    local.extend({"key": b"k%03d" % i, "value": b"v" * (i % 50), "label": i % 3} for i in range(120))
    made = local.create_view("twos", where="label = 2")
    subprocess.run([str(cli), "push", str(source), f"s3://{BUCKET}/views"], check=True, capture_output=True)
    remote = bcd.Dataset(f"s3://{BUCKET}/views", cache_dir=tmp_path / "cache")
    view = remote.view("twos")
    assert view.indices.tolist() == made.indices.tolist()
    assert [bytes(v) for v in view.get_batch(range(len(view)))] == [bytes(local.at(int(i))) for i in made.indices]
    assert [v["name"] for v in remote.views()] == ["twos"]
    # Views are made on a local dataset and pushed.
    with pytest.raises(ValueError, match="object storage"):
        remote.create_view("ones", where="label = 1")
    # A push never deletes a remote view (one dropped locally stays there); a
    # new one reaches the cache at its next sync.
    local.drop_view("twos")
    local.create_view("ones", where="label = 1")
    subprocess.run([str(cli), "push", str(source), f"s3://{BUCKET}/views"], check=True, capture_output=True)
    again = bcd.Dataset(f"s3://{BUCKET}/views", cache_dir=tmp_path / "cache")
    assert [v["name"] for v in again.views()] == ["ones", "twos"]


def _shard_of(dataset, index):
    """The shard holding record `index`, from the shard ranges."""
    for shard, (first, end, _) in enumerate(dataset.shard_ranges()):
        if first <= index < end:
            return shard
    raise IndexError(index)


def _first_touch(dataset, order):
    """The shards `order` reaches, each once, in the order it first reaches them."""
    seen = []
    for index in order:
        shard = _shard_of(dataset, int(index))
        if shard not in seen:
            seen.append(shard)
    return seen


def test_prefetch_fetches_the_shards_in_the_order_an_epoch_first_needs_them(s3, cli, tmp_path):
    import numpy as np

    local = _push(tmp_path, "prefetch", keyed=False, compression=None, count=80)
    s3.reset()
    uri = f"s3://{BUCKET}/prefetch"
    remote = bcd.Dataset(uri, cache_dir=tmp_path / "cache", prefetch=1)
    order = np.random.default_rng(7).permutation(len(remote)).astype(np.uint32)
    expected = _first_touch(local, order)
    assert len(expected) == len(local.shard_ranges()) > 5
    assert expected != sorted(expected)
    # One shard at a time, waiting: the downloads are exactly the order.
    assert remote.prefetch(order, wait=True) == len(expected)
    assert s3.downloads_in_order("prefetch") == [f"{s:06}.bin" for s in expected]
    assert [bytes(remote.at(int(i))) for i in order] == [bytes(local.at(int(i))) for i in order]
    assert s3.downloads_in_order("prefetch") == [f"{s:06}.bin" for s in expected], "no more"
    # Cached already: nothing to fetch; a list of ints (negative from the end) works too.
    assert remote.prefetch([0, -1, 5], wait=True) == 0
    with pytest.raises(IndexError):
        remote.prefetch([0, len(remote)])
    with pytest.raises(IndexError):
        remote.prefetch(np.array([-len(remote) - 1]))
    # Pickled with its settings; a local dataset has nothing to fetch.
    assert pickle.loads(pickle.dumps(remote)).prefetch(order) == 0
    assert local.prefetch(order, wait=True) == 0
    with pytest.raises(ValueError, match="prefetch"):
        bcd.Dataset(tmp_path / "prefetch-source", prefetch=2)


def test_a_cache_too_small_for_the_shards_is_not_waited_for(s3, cli, tmp_path):
    _push(tmp_path, "prefetch-limit", keyed=False, compression=None, count=60)
    remote = bcd.Dataset(f"s3://{BUCKET}/prefetch-limit", cache_dir=tmp_path / "cache", cache_limit="4K")
    with pytest.raises(ValueError, match="more than the cache limit"):
        remote.prefetch(range(len(remote)), wait=True)


_INHERITED = None


def _read_inherited(connection):
    """In a forked child: every value of the dataset the parent opened (the
    object itself, inherited as DataLoader workers inherit theirs)."""
    try:
        connection.send([bytes(_INHERITED.at(i)) for i in range(len(_INHERITED))])
    except BaseException as error:  # reported to the parent
        connection.send(repr(error))
    connection.close()


def test_workers_forked_while_shards_are_fetched_ahead_share_those_downloads(s3, cli, tmp_path):
    global _INHERITED
    local = _push(tmp_path, "forked", keyed=False, compression=None, count=80)
    s3.reset()
    shards = len(local.shard_ranges())
    remote = bcd.Dataset(f"s3://{BUCKET}/forked", cache_dir=tmp_path / "cache", prefetch=2)
    # The second shard's download is in flight (held at the proxy) when the
    # workers are forked: they inherit the parent's lock on it (closed in them).
    s3.hold("/forked/000001.bin")
    remote.prefetch(range(len(remote)))
    while not s3.held():
        pass
    _INHERITED = remote
    context = multiprocessing.get_context("fork")
    workers = []
    for _ in range(2):
        parent_end, child_end = context.Pipe()
        process = context.Process(target=_read_inherited, args=(child_end,))
        process.start()
        workers.append((process, parent_end))
    # The workers wait for the parent's download of shard 1, whatever they read
    # first; it goes on once released.
    s3.release()
    expected = [bytes(local.at(i)) for i in range(len(local))]
    for process, connection in workers:
        assert connection.recv() == expected
        process.join()
        assert process.exitcode == 0
    _INHERITED = None
    assert [bytes(remote.at(i)) for i in range(len(remote))] == expected
    downloads = s3.shard_downloads("forked")
    assert len(downloads) == shards and set(downloads.values()) == {1}, downloads
