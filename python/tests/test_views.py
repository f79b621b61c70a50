"""Values come out as read-only memoryviews: zero-copy views of the shard mapping
for uncompressed datasets, valid for as long as they are held."""

from __future__ import annotations

import gc
import random

import numpy as np
import pytest

import bcd

VALUES = [np.arange(n, dtype=np.float32).tobytes() for n in (0, 1, 100, 5000)]


@pytest.fixture(params=["lz4", None], ids=["lz4", "none"])
def dataset(request, tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", keyed=True, compression=request.param, max_shard_size=4096)
    dataset.extend((b"k%d" % i, value) for i, value in enumerate(VALUES))
    return dataset


def every_read(dataset):
    """Each way of reading a value: by position, by key, in a batch."""
    return [
        *(dataset.at(i) for i in range(len(VALUES))),
        *(dataset[b"k%d" % i] for i in range(len(VALUES))),
        *dataset.get_batch(range(len(VALUES))),
        dataset.key_at(1),
    ]


def test_every_value_and_key_is_a_read_only_memoryview(dataset):
    for view in every_read(dataset):
        assert isinstance(view, memoryview)
        assert view.readonly
        assert view.format == "B" and view.ndim == 1
        with pytest.raises(TypeError):
            view[0:1] = b"x"


def test_uncompressed_values_are_views_of_the_shard_mapping(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", compression=None)
    dataset.extend(VALUES)
    value = dataset.at(3)
    # The exporter is the package's view of the shard Rust mapped, not a copy.
    assert type(value.obj).__name__ == "_ShardValue"
    array = np.frombuffer(value, dtype=np.float32)
    assert array.base is value or array.base.obj is value.obj  # no copy on the way
    assert not array.flags.writeable
    np.testing.assert_array_equal(array, np.arange(5000, dtype=np.float32))
    # Two reads of the same record are the same memory: nothing was copied.
    assert np.shares_memory(array, np.frombuffer(dataset.at(3), dtype=np.float32))
    assert np.shares_memory(array, np.frombuffer(dataset.get_batch([3])[0], dtype=np.float32))


def test_compressed_values_are_fresh_bytes_each_time(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", compression="lz4")
    dataset.extend(VALUES)
    first, second = dataset.at(3), dataset.at(3)
    assert isinstance(first.obj, bytes)
    assert not np.shares_memory(np.frombuffer(first, np.uint8), np.frombuffer(second, np.uint8))
    assert first == second == VALUES[3]


def test_views_stay_valid_after_the_dataset_is_gone(dataset):
    views = every_read(dataset)
    expected = [*VALUES, *VALUES, *VALUES, b"k1"]
    arrays = [np.frombuffer(view, dtype=np.uint8) for view in views]
    del dataset
    gc.collect()
    assert [bytes(view) for view in views] == expected
    assert [array.tobytes() for array in arrays] == expected


def test_an_empty_shard_file_is_read_as_empty_values(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", compression=None)
    dataset.extend([b"", b""])  # a shard whose data file is empty: it cannot be mapped
    assert (tmp_path / "d" / "000000.bin").stat().st_size == 0
    assert [bytes(v) for v in dataset.get_batch([0, 1])] == [b"", b""]
    assert dataset.at(-1).readonly


def test_large_batches_decode_in_parallel_in_order(tmp_path):
    rng = np.random.default_rng(5)
    values = [rng.integers(0, 4, size=int(n), dtype=np.uint8).tobytes() for n in rng.integers(1, 20000, 300)]
    dataset = bcd.Dataset.create(tmp_path / "d", compression="lz4")
    dataset.extend(values)
    order = rng.permutation(len(values)).tolist()
    assert [bytes(v) for v in dataset.get_batch(order)] == [values[i] for i in order]
    assert [bytes(v) for v in dataset.get_batch(np.array(order))] == [values[i] for i in order]
    assert dataset.get_batch([]) == []


def test_a_numpy_index_works_like_an_int(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", keyed=True)
    dataset.extend([(b"a", b"1"), (b"b", b"2")])
    assert bytes(dataset.at(np.int64(-1))) == b"2"
    assert bytes(dataset.key_at(np.uint8(0))) == b"a"


def test_a_batch_shares_one_view_per_shard_and_each_value_stays_its_own(tmp_path):
    # Several values per shard (sliced from one view of the shard) and shards
    # with a single value of the batch (a view of their own), in shuffled order.
    values = [b"%04d" % i * (i % 5) for i in range(300)]
    dataset = bcd.Dataset.create(tmp_path / "d", compression=None, max_shard_size=200)
    dataset.extend(values)
    order = list(range(300))
    random.Random(7).shuffle(order)
    batch = dataset.get_batch(order[:150] + [order[0], 299])
    assert [bytes(v) for v in batch] == [values[i] for i in order[:150]] + [values[order[0]], values[299]]
    for view in batch:
        assert isinstance(view, memoryview) and view.readonly
        assert type(view.obj).__name__ == "_ShardValue"
        with pytest.raises(TypeError):
            view[:1] = b"x"
    del dataset
    gc.collect()
    assert [bytes(v) for v in batch[:150]] == [values[i] for i in order[:150]]
