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


class ReadAheadSpy:
    """Stands for the ``bcd.Dataset`` of a MapDataset in a sampler's eyes:
    records every ``read_ahead`` call."""

    def __init__(self, dataset):
        self._wrapped, self.calls = dataset, []

    def __len__(self):
        return len(self._wrapped)

    def read_ahead(self, records):
        self.calls.append(np.asarray(records).tolist())


def test_a_sampler_over_a_sparse_view_asks_for_the_pages_of_its_next_stretch(tmp_path, monkeypatch):
    import bcd.torch.sampler as sampler_module

    # 3,000 records, a view of 150 (1 in 20, under 1/16): sparse.
    path = tmp_path / "d"
    ds = bcd.Dataset.create(path)
    ds.extend(i.to_bytes(4, "little") for i in range(3000))
    view = ds.create_view("few", indices=np.arange(0, 3000, 20))
    assert view.sparse and not ds.select(np.arange(0, 3000, 10)).sparse
    monkeypatch.setattr(sampler_module, "READ_AHEAD", 16)
    dataset = bcd.torch.MapDataset(path, view="few")
    spy = ReadAheadSpy(dataset.dataset)
    dataset._dataset = spy
    sampler = bcd.torch.Sampler(dataset, seed=3)
    order = list(sampler)
    # The epoch is the one a sampler over a dense source of the same length yields.
    assert order == list(bcd.torch.Sampler(bcd.torch.MapDataset(path, view="few"), seed=3))
    assert sorted(order) == list(range(150))
    records = view.indices.tolist()
    expected = [[records[i] for i in order[0:32]]]
    expected += [[records[i] for i in order[at + 16:at + 32]] for at in range(16, 150, 16)]
    assert spy.calls == [call for call in expected if call]
    # Resumed mid-epoch: the stretches count from where it resumes.
    state = sampler.state_dict(consumed=40)
    spy.calls.clear()
    resumed = bcd.torch.Sampler(dataset, seed=3)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert rest == order[40:]
    assert spy.calls[0] == [records[i] for i in rest[0:32]]


def test_a_sampler_over_a_dense_view_or_dataset_asks_for_nothing_and_a_mix_only_for_its_sparse_source(tmp_path):
    path = tmp_path / "d"
    ds = bcd.Dataset.create(path)
    ds.extend(i.to_bytes(4, "little") for i in range(3000))
    ds.create_view("half", indices=np.arange(0, 3000, 2))
    ds.create_view("few", indices=np.arange(0, 3000, 100))
    spies = {}
    sources = []
    for view in (None, "half", "few"):
        dataset = bcd.torch.MapDataset(path, view=view)
        spies[view] = dataset._dataset = ReadAheadSpy(dataset.dataset)
        sources.append(dataset)
    for dataset in sources[:2]:
        assert len(list(bcd.torch.Sampler(dataset, seed=1))) == len(dataset)
    assert spies[None].calls == spies["half"].calls == []
    mix = bcd.torch.Mix(sources, weights=[1, 1, 1])
    order = list(bcd.torch.Sampler(mix))
    assert spies[None].calls == spies["half"].calls == []
    few = sources[2].records.tolist()
    asked = [record for call in spies["few"].calls for record in call]
    # The mix's samples from the sparse view, in the order drawn (in stretches
    # of the mix's indices, so each of them once).
    sources_of, records_of_mix = bcd.torch.mix.split_indices(mix.lengths, np.asarray(order))
    drawn = [few[r] for s, r in zip(sources_of.tolist(), records_of_mix.tolist()) if s == 2]
    assert asked == drawn
