"""bcd.torch over a view (``MapDataset(path, view=...)``, ``IterableDataset(path,
view=...)``): samples are the view's records, a DataLoader epoch with fork and
spawn workers yields each exactly once, and the Sampler's settings
(``balance_by`` from a stored field, ``weights``, ``block_size``) work over the
view's records."""

from __future__ import annotations

import collections
import pickle

import numpy as np
import pytest
import torch
import torch.utils.data

import bcd
import bcd.torch
from loaders import index_of, make_dataset

N = 301


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("views") / "d"
    labels = make_dataset(path, N, compression="lz4", classes=(60, 30, 10))
    # The records of the smaller classes, and the first 40.
    view = bcd.Dataset(path).create_view("some", where="label <> 0 OR index < 40")
    return path, labels, view.indices.tolist()


def records_of(batches) -> list:
    out = []
    for values, _labels in batches:
        out.extend(index_of(v) for v in values)
    return out


def test_samples_are_the_views_records(stored):
    path, labels, records = stored
    dataset = bcd.torch.MapDataset(path, view="some", fields=["label"])
    assert len(dataset) == len(records) < N
    assert dataset.records.tolist() == records
    for i in [0, 5, -1]:
        value, label = dataset[i]
        assert index_of(value) == records[i] and label == labels[records[i]]
    samples = dataset.__getitems__([3, 0])
    assert [(index_of(v), l) for v, l in samples] == [(records[3], labels[records[3]]), (records[0], labels[records[0]])]
    tensors = bcd.torch.MapDataset(path, view="some", output="tensor", fields=["label"])
    batch = tensors.read_batch([1, 2])
    assert [index_of(bytes(batch[i][0].numpy())) for i in range(2)] == records[1:3]
    assert batch.fields["label"].tolist() == [labels[r] for r in records[1:3]]
    with pytest.raises(IndexError):
        dataset[len(records)]
    copy = pickle.loads(pickle.dumps(dataset))
    assert index_of(copy[2][0]) == records[2]
    with pytest.raises(KeyError, match="no view named"):
        bcd.torch.MapDataset(path, view="missing")


@pytest.mark.parametrize("workers,context", [(0, None), (2, "fork"), (2, "spawn")])
def test_an_epoch_over_a_view_yields_each_of_its_records_once(stored, workers, context):
    path, labels, records = stored
    dataset = bcd.torch.MapDataset(path, view="some", fields=["label"])
    sampler = bcd.torch.Sampler(dataset, seed=3)
    options = {} if not workers else {"num_workers": workers, "multiprocessing_context": context}
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, sampler=sampler, **options)
    sampler.set_epoch(1)
    got = records_of(loader)
    assert sorted(got) == records and got != records


def test_the_samplers_settings_work_over_the_views_records(stored):
    path, labels, records = stored
    dataset = bcd.torch.MapDataset(path, view="some", fields=["label"])
    view_labels = labels[records]
    # balance_by a stored field: the view's records' classes, balanced on every prefix.
    sampler = bcd.torch.Sampler(dataset, balance_by="label", seed=1)
    order = list(sampler)
    assert sorted(order) == list(range(len(records)))
    counts = collections.Counter(view_labels.tolist())
    seen = collections.Counter()
    for t, position in enumerate(order, start=1):
        seen[view_labels[position]] += 1
        for label, total in counts.items():
            assert abs(seen[label] - t * total / len(records)) <= 1 + 1e-9
    # weights per view record, with num_samples: only records of positive weight.
    weights = np.where(view_labels == 2, 1.0, 0.0)
    picked = list(bcd.torch.Sampler(dataset, weights=weights, num_samples=int(weights.sum()), seed=2))
    assert sorted(picked) == sorted(np.flatnonzero(weights).tolist())
    # block_size: blocks of consecutive view positions.
    blocks = list(bcd.torch.Sampler(dataset, block_size=8, seed=4))
    assert sorted(blocks) == list(range(len(records)))
    assert all(abs(a - b) < 8 for a, b in zip(blocks[::8], blocks[1::8]))


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterable_dataset_over_a_view_splits_its_records_over_workers(stored, workers):
    path, labels, records = stored
    dataset = bcd.torch.IterableDataset(path, view="some", fields=["label"], seed=5, balance_by="label")
    dataset.set_epoch(0)
    options = {} if not workers else {"num_workers": workers, "multiprocessing_context": "fork"}
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, **options)
    got = [index_of(value) for value, label in loader]
    assert sorted(got) == records


def _an_epoch_in_persistent_workers(dataset, seed: int, directory):
    """The samples of one epoch of `dataset` (a shuffled Sampler, 2 persistent
    fork workers, batches of 16 as lists), and each worker's resident KiB of
    the shard files in `directory` after it."""
    sampler = bcd.torch.Sampler(dataset, seed=seed)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=16, sampler=sampler, num_workers=2, persistent_workers=True,
        multiprocessing_context="fork", collate_fn=lambda samples: samples,
    )
    seen = []
    for batch in loader:
        seen.extend(bytes(sample) for sample in batch)
    mapped = [_mapped_kib(worker.pid, directory) for worker in loader._iterator._workers]
    del loader
    return seen, mapped


def _mapped_kib(pid: int, directory) -> int:
    """The resident KiB of process `pid`'s mappings of the shard data files in
    `directory`."""
    inside, total = False, 0
    prefix = str(directory.resolve()) + "/"
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):
                name = line.split()[-1]
                inside = name.startswith(prefix) and name.endswith(".bin")
            elif inside and first == "Rss:":
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/smaps"), reason="needs /proc")
def test_persistent_workers_read_a_sparse_view_positionally_in_every_epoch(tmp_path):
    # A sparse view (1 record in 40): each persistent worker reads its share
    # of every epoch with positional reads, mapping none of the shards (its
    # memory holds no page of them, and its exit has nothing to unmap);
    # positional=False reads through the mappings. The samples are the same.
    values = [b"%06d" % i * 341 for i in range(3200)]
    bcd.Dataset.create(tmp_path / "d", compression="lz4", max_shard_size=256 << 10).extend(values)
    view = bcd.Dataset(tmp_path / "d").create_view("sparse", indices=list(range(3, 3200, 40)))
    records = view.indices.tolist()
    assert len(records) == 80
    for positional in (None, False):
        dataset = bcd.torch.MapDataset(tmp_path / "d", view="sparse", output="tensor", positional=positional)
        sampler = bcd.torch.Sampler(dataset, seed=4)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=8, sampler=sampler, num_workers=2, persistent_workers=True,
            multiprocessing_context="fork", collate_fn=bcd.torch.collate,
        )
        mapped = []
        for epoch in range(3):
            sampler.set_epoch(epoch)
            seen = []
            for batch in loader:
                seen.extend(bytes(batch[i].numpy()) for i in range(len(batch)))
            assert sorted(seen) == sorted(values[r] for r in records)
            pids = [worker.pid for worker in loader._iterator._workers]
            mapped.append([_mapped_kib(pid, tmp_path / "d") for pid in pids])
        if positional is None:
            assert mapped == [[0, 0]] * 3, mapped
        else:
            assert all(kib > 0 for kib in sum(mapped, [])), mapped
        del loader


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/smaps"), reason="needs /proc")
@pytest.mark.parametrize("transform", [None, bytes])
def test_workers_read_a_dense_view_as_a_dataset_positionally_unless_told_otherwise(tmp_path, transform):
    # A view of half the records (dense: no read-ahead) follows the workers'
    # rule for a whole dataset: positional reads by default, with or without a
    # transform, and through the mappings with positional=False.
    rng = np.random.default_rng(5)
    values = [rng.integers(0, 256, size=int(rng.integers(1, 20_000)), dtype=np.uint8).tobytes() for _ in range(400)]
    bcd.Dataset.create(tmp_path / "d", compression="lz4", max_shard_size=2 << 20).extend(values)
    view = bcd.Dataset(tmp_path / "d").create_view("half", indices=list(range(0, 400, 2)))
    assert not view._read_ahead
    for positional, expect_mapped in ((None, False), (False, True)):
        dataset = bcd.torch.MapDataset(tmp_path / "d", view="half", transform=transform, positional=positional)
        seen, mapped = _an_epoch_in_persistent_workers(dataset, seed=2, directory=tmp_path / "d")
        assert sorted(seen) == sorted(values[i] for i in range(0, 400, 2))
        assert all((kib > 0) == expect_mapped for kib in mapped), (positional, mapped)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/smaps"), reason="needs /proc")
@pytest.mark.parametrize("transform", [None, bytes])
def test_workers_read_batches_positionally_unless_told_otherwise(tmp_path, transform):
    # A whole dataset's epoch in DataLoader workers: by default each batch is
    # read with positional reads (a worker maps none of the shards' pages,
    # which would count in its memory), with or without a transform;
    # positional=False reads through the mappings. The samples are the same.
    rng = np.random.default_rng(3)
    values = [
        rng.integers(0, 256, size=int(rng.integers(1, 60_000)), dtype=np.uint8).tobytes() if i % 3 else b"%06d " % i * 300
        for i in range(400)
    ]
    bcd.Dataset.create(tmp_path / "d", compression="lz4", max_shard_size=2 << 20).extend(values)
    for positional, expect_mapped in ((None, False), (True, False), (False, True)):
        dataset = bcd.torch.MapDataset(tmp_path / "d", transform=transform, positional=positional)
        seen, mapped = _an_epoch_in_persistent_workers(dataset, seed=6, directory=tmp_path / "d")
        assert sorted(seen) == sorted(values)
        assert all((kib > 0) == expect_mapped for kib in mapped), (positional, mapped)
