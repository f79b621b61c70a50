"""Datasets in DataLoader-style worker processes: pickled as their path and
reopened, with 'fork' and 'spawn', and reading in parallel after a fork."""

from __future__ import annotations

import multiprocessing
import pickle

import pytest

import bcd
import workers
from helpers import records

# A worker that hangs (a thread pool inherited dead across fork) fails the test
# instead of the run.
TIMEOUT = 60


@pytest.fixture(params=["lz4", None], ids=["lz4", "none"])
def dataset(request, tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", keyed=True, compression=request.param, max_shard_size=1 << 16)
    # Enough stored bytes that get_batch decodes on several threads.
    dataset.extend(records(800, keyed=True, seed=7))
    return dataset


def test_a_dataset_pickles_as_its_path(dataset):
    state = dataset.__reduce__()
    assert state == (bcd.Dataset, (str(dataset.path),))
    copy = pickle.loads(pickle.dumps(dataset))
    assert isinstance(copy, bcd.Dataset) and copy is not dataset
    assert copy.path == dataset.path
    assert [bytes(v) for v in copy.get_batch(range(len(copy)))] == [bytes(v) for v in dataset.get_batch(range(len(dataset)))]


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_pool_workers_read_what_the_parent_reads(dataset, start_method):
    expected = [(bytes(dataset.at(i)), bytes(dataset.key_at(i))) for i in range(len(dataset))]
    context = multiprocessing.get_context(start_method)
    with context.Pool(2, initializer=workers.init, initargs=(dataset,)) as pool:
        got = pool.map_async(workers.read, range(len(dataset)), chunksize=50).get(TIMEOUT)
        batches = [list(range(i, min(i + 64, len(dataset)))) for i in range(0, len(dataset), 64)]
        batch_values = pool.map_async(workers.read_batch, batches).get(TIMEOUT)
        carried = pool.starmap_async(workers.read_pickled_batch, [(dataset, b) for b in batches]).get(TIMEOUT)
    assert [(value, key) for value, key in got] == expected
    flat = [value for batch in batch_values for value in batch]
    assert flat == [value for value, _ in expected]
    assert [value for batch in carried for value in batch] == flat


def test_get_batch_works_in_a_child_forked_after_the_parent_used_it(dataset):
    indices = list(range(len(dataset)))[::-1]
    in_parent = [bytes(v) for v in dataset.get_batch(indices)]
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        # The child inherits the parent's handle as it is, not a pickled copy.
        in_child = pool.apply_async(_batch_of_inherited, (indices,)).get(TIMEOUT)
    assert in_child == in_parent


_inherited = None


def _batch_of_inherited(indices):
    return [bytes(v) for v in _inherited.get_batch(indices)]


@pytest.fixture(autouse=True)
def _share_with_forked_children(request):
    global _inherited
    if "dataset" in request.fixturenames:
        _inherited = request.getfixturevalue("dataset")
    yield
    _inherited = None
