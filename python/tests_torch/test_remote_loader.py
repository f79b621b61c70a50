"""bcd.torch over a dataset in object storage (moto's S3 server behind the
tests' counting proxy, as python/tests/test_remote.py runs it): a DataLoader
with two fork workers reads every sample and its stored label exactly once,
equal to the local dataset's, and the workers share one shard cache, so each
shard is downloaded once; the sampler hands each epoch's order to the cache,
which fetches the shards in the order the epoch first needs them (before any
worker reads; over a view, the shards of the view's records), and an
IterableDataset hands each worker's own order."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch.utils.data

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import bcd  # noqa: E402
import bcd.torch  # noqa: E402
from helpers import ROOT  # noqa: E402
from test_remote import BUCKET, Proxy, _first_touch, s3  # noqa: E402,F401  (the server fixture)


def _push(local_path, uri):
    """`bcd push` of the local dataset to `uri` (the CLI that `make test` built)."""
    binary = ROOT / "target" / "debug" / "bcd"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "bcd-cli"], cwd=ROOT, check=True)
    subprocess.run([str(binary), "push", str(local_path), uri], check=True, capture_output=True)


def test_a_dataloader_reads_an_s3_dataset_through_one_shared_cache(s3, tmp_path):
    local_path = tmp_path / "local"
    local = bcd.Dataset.create(local_path, keyed=True, compression="lz4", max_shard_size=4096)
    local.extend({"key": b"k%04d" % i, "value": b"%04d|" % i * (3 + i % 40), "label": i % 5} for i in range(400))
    uri = f"s3://{BUCKET}/torch"
    _push(local_path, uri)
    s3.reset()

    dataset = bcd.torch.MapDataset(uri, fields=["label"], cache_dir=tmp_path / "cache")
    assert len(dataset) == 400
    sampler = bcd.torch.Sampler(dataset, shuffle=True, seed=3)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=32, sampler=sampler, num_workers=2, multiprocessing_context="fork"
    )
    seen = {}
    for values, labels in loader:
        for value, label in zip(values, labels.tolist()):
            index = int(bytes(value)[:4])
            assert index not in seen
            seen[index] = (bytes(value), label)
    assert sorted(seen) == list(range(400))
    assert all(seen[i] == (bytes(local.at(i)), i % 5) for i in range(400))
    downloads = s3.shard_downloads("torch")
    shards = len(list(local_path.glob("*.bin")))
    assert shards >= 3 and len(downloads) == shards and set(downloads.values()) == {1}, downloads


def test_the_sampler_has_the_cache_fetch_first_the_shard_the_epoch_needs_first(s3, tmp_path):
    local_path = tmp_path / "local"
    # Keyless: opening reads no keys, so no shard is fetched before the epoch.
    local = bcd.Dataset.create(local_path, compression=None, max_shard_size=2048)
    local.extend(b"%04d|" % i * (3 + i % 40) for i in range(300))
    uri = f"s3://{BUCKET}/torch-order"
    _push(local_path, uri)
    s3.reset()

    # One download ahead at a time, one worker: nothing else is fetched until
    # the first shard is (the worker waits for it, then goes on).
    dataset = bcd.torch.MapDataset(uri, cache_dir=tmp_path / "cache", prefetch=1)
    sampler = bcd.torch.Sampler(dataset, shuffle=True, seed=5)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=16, sampler=sampler, num_workers=1, multiprocessing_context="fork"
    )
    values = [bytes(value) for batch in loader for value in batch]
    assert sorted(values) == sorted(bytes(local.at(i)) for i in range(300))
    first = int(bcd.partition(300, seed=5, epoch=0, rank=0, world_size=1)[0])
    shard = next(s for s, (begin, end, _) in enumerate(local.shard_ranges()) if begin <= first < end)
    downloads = s3.downloads_in_order("torch-order")
    assert downloads[0] == f"{shard:06}.bin", downloads
    assert sorted(downloads) == [f"{s:06}.bin" for s in range(len(local.shard_ranges()))], downloads


def _until(condition, what):
    """Waits until `condition()` holds; the bound only turns a hang into a failure."""
    deadline = time.monotonic() + 300
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_an_epoch_of_the_sampler_has_the_cache_fetch_its_shards_in_order_before_any_read(s3, tmp_path):
    local_path = tmp_path / "local"
    local = bcd.Dataset.create(local_path, compression=None, max_shard_size=2048)
    local.extend(b"%04d|" % i * (3 + i % 40) for i in range(300))
    uri = f"s3://{BUCKET}/torch-epoch"
    _push(local_path, uri)
    s3.reset()

    # One download at a time, and nothing read: what reaches the store is the
    # order the sampler handed over, exactly.
    dataset = bcd.torch.MapDataset(uri, cache_dir=tmp_path / "cache", prefetch=1)
    sampler = bcd.torch.Sampler(dataset, shuffle=True, seed=5)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        order = bcd.partition(300, seed=5, epoch=epoch, rank=0, world_size=1)
        indices = iter(sampler)
        assert next(indices) == order[0]
        if epoch == 0:
            expected = [f"{s:06}.bin" for s in _first_touch(local, order)]
            assert expected != sorted(expected) and len(expected) == len(local.shard_ranges())
            _until(lambda: len(s3.downloads_in_order("torch-epoch")) >= len(expected), "the prefetch")
            assert s3.downloads_in_order("torch-epoch") == expected
        # Epoch 1: every shard is cached; nothing more is fetched.
        assert [bytes(dataset.dataset.at(int(i))) for i in order[:20]] == [bytes(local.at(int(i))) for i in order[:20]]
    assert s3.downloads_in_order("torch-epoch") == expected


def test_an_iterable_dataset_hands_the_cache_the_order_of_its_own_part_of_the_epoch(s3, tmp_path, monkeypatch):
    local_path = tmp_path / "local"
    local = bcd.Dataset.create(local_path, compression=None, max_shard_size=2048)
    local.extend(b"%04d|" % i * (3 + i % 40) for i in range(200))
    uri = f"s3://{BUCKET}/torch-iterable"
    _push(local_path, uri)
    s3.reset()

    # What the iterable hands over, on its way to the cache (the sampler's
    # tests above watch the same function reach the store).
    handed = []
    original = bcd.torch.iterable.prefetch_order

    def recording(source, order):
        handed.append((source, np.array(order)))
        original(source, order)

    monkeypatch.setattr(bcd.torch.iterable, "prefetch_order", recording)
    dataset = bcd.torch.IterableDataset(uri, cache_dir=tmp_path / "cache", seed=2, rank=0, world_size=1)
    values = [bytes(value) for value in dataset]
    order = bcd.partition(200, seed=2, epoch=0, rank=0, world_size=1)
    assert values == [bytes(local.at(int(i))) for i in order]
    assert len(handed) == 1 and handed[0][0] is dataset._map and handed[0][1].tolist() == order.tolist()
    downloads = s3.downloads_in_order("torch-iterable")
    assert sorted(downloads) == [f"{s:06}.bin" for s in range(len(local.shard_ranges()))], downloads


def test_a_sampler_over_a_mix_has_each_source_fetch_its_own_records_shards_in_order(s3, tmp_path):
    sources, locals_ = [], []
    for number, count in enumerate((150, 90)):
        local_path = tmp_path / f"local-{number}"
        local = bcd.Dataset.create(local_path, compression=None, max_shard_size=2048)
        local.extend(b"%d|%04d|" % (number, i) * (3 + i % 40) for i in range(count))
        _push(local_path, f"s3://{BUCKET}/torch-mix-{number}")
        locals_.append(local)
    s3.reset()
    for number in range(2):
        uri = f"s3://{BUCKET}/torch-mix-{number}"
        sources.append(bcd.torch.MapDataset(uri, cache_dir=tmp_path / "cache", prefetch=1))
    mix = bcd.torch.Mix(sources, [0.5, 0.5], seed=3)
    sampler = bcd.torch.Sampler(mix)
    # Iterating the sampler reads nothing: what is fetched is what it handed over.
    order = np.array(list(sampler))
    for number, local in enumerate(locals_):
        offset = 150 if number else 0
        mine = [int(i) - offset for i in order if (int(i) >= 150) == bool(number)]
        expected = [f"{s:06}.bin" for s in _first_touch(local, mine)]
        assert len(expected) == len(local.shard_ranges())
        prefix = f"torch-mix-{number}"
        _until(lambda: len(s3.downloads_in_order(prefix)) >= len(expected), "the prefetch")
        assert s3.downloads_in_order(prefix) == expected, number


def test_a_sampler_over_a_view_has_the_cache_fetch_the_shards_of_the_views_records_in_order(s3, tmp_path):
    local_path = tmp_path / "local"
    local = bcd.Dataset.create(local_path, compression=None, max_shard_size=2048)
    local.extend(b"%04d|" % i * (3 + i % 40) for i in range(300))
    # Records of the later shards only: the view's positions taken for record
    # indices would reach the first shards.
    chosen = [i for i in range(120, 300) if i % 7 != 3]
    local.create_view("later", indices=chosen)
    uri = f"s3://{BUCKET}/torch-view"
    _push(local_path, uri)
    s3.reset()

    dataset = bcd.torch.MapDataset(uri, view="later", cache_dir=tmp_path / "cache", prefetch=1)
    assert len(dataset) == len(chosen)
    # Opening the view checks it against the last shard it was evaluated over
    # (FORMAT.md section 12), which fetches that shard.
    opened = s3.downloads_in_order("torch-view")
    assert opened == [f"{len(local.shard_ranges()) - 1:06}.bin"], opened
    sampler = bcd.torch.Sampler(dataset, shuffle=True, seed=4)
    # Iterating the sampler reads nothing: what is fetched is what it handed over.
    positions = np.array(list(sampler))
    assert sorted(positions.tolist()) == list(range(len(chosen)))
    records = [chosen[p] for p in positions]
    expected = [f"{s:06}.bin" for s in _first_touch(local, records)]
    shards = len(local.shard_ranges())
    assert 1 < len(expected) < shards and "000000.bin" not in expected, (expected, shards)
    # The epoch's shards in the order it first needs them (the one the open
    # fetched again where the epoch reaches it, unless the cache kept it).
    kept = [name for name in expected if name not in opened]

    def fetched():
        return s3.downloads_in_order("torch-view")[len(opened):]

    _until(lambda: fetched() in (expected, kept) or len(fetched()) >= len(expected), "the prefetch")
    assert fetched() in (expected, kept), (fetched(), expected)
    # The samples are the view's records, in the sampler's order.
    assert [bytes(dataset[int(p)]) for p in positions[:30]] == [bytes(local.at(i)) for i in records[:30]]
