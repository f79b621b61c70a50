"""The persisted index (.bcd-index) seen from Python: a dataset large enough gets
one, workers open through it, and the reference extending the dataset past it
is picked up. (That enough records after the file get it rewritten is tested in
tests/index_file.rs and tests/interop/index_file.rs.)"""

from __future__ import annotations

import multiprocessing
import sys

import pytest

import bcd
import workers
from helpers import reference_class

RECORDS = 120_000  # over the 100,000-record threshold
TIMEOUT = 60


def key(i: int) -> bytes:
    return b"%09d" % i


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    path = tmp_path_factory.mktemp("index") / "d"
    dataset = bcd.Dataset.create(path, keyed=True, compression=None)
    dataset.extend((key(i), b"v" * (i % 13)) for i in range(RECORDS))
    return path


def test_a_large_dataset_gets_an_index_file_that_reopens_right(large):
    assert (large / ".bcd-index").is_file()
    dataset = bcd.Dataset(large)
    assert len(dataset) == RECORDS
    for i in (0, 1, RECORDS // 2, RECORDS - 1):
        assert bytes(dataset[key(i)]) == b"v" * (i % 13)
        assert bytes(dataset.key_at(i)) == key(i)
    assert key(RECORDS) not in dataset
    with pytest.raises(KeyError):
        dataset[key(RECORDS)]


@pytest.mark.skipif(sys.platform != "linux", reason="measures the heap with glibc's mallinfo2")
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_workers_open_through_the_file_without_a_private_key_table(large, start_method):
    probe = key(RECORDS // 3)
    context = multiprocessing.get_context(start_method)
    with context.Pool(1, maxtasksperchild=1) as pool:
        added, length = pool.apply_async(workers.open_and_measure, (str(large), probe)).get(TIMEOUT)
        assert length == (RECORDS // 3) % 13
        # Through the file, opening maps it and allocates next to nothing.
        assert added < 1536, f"{added} KiB"

        # Without it (here: a directory in its way, so it cannot be rewritten),
        # the open builds the index on the heap: about 26 bytes a key, 3 MB
        # (against a few KiB through the file).
        saved = (large / ".bcd-index").read_bytes()
        (large / ".bcd-index").unlink()
        (large / ".bcd-index").mkdir()
        try:
            added, _ = pool.apply_async(workers.open_and_measure, (str(large), probe)).get(TIMEOUT)
        finally:
            (large / ".bcd-index").rmdir()
            (large / ".bcd-index").write_bytes(saved)
        assert added > 2048, f"{added} KiB"


def test_the_reference_extending_past_the_file(tmp_path):
    path = tmp_path / "d"
    first = [(key(i), b"first %d" % i) for i in range(RECORDS)]
    bcd.Dataset.create(path, keyed=True, compression="lz4").extend(first)
    stale = (path / ".bcd-index").read_bytes()

    second = [(key(i), b"second %d" % i) for i in range(RECORDS, RECORDS + 500)]
    reference_class("0.3.0")(path).extend(second)
    assert (path / ".bcd-index").read_bytes() == stale

    dataset = bcd.Dataset(path)
    assert len(dataset) == RECORDS + 500
    for k, v in first[::4999] + second[::50]:
        assert bytes(dataset[k]) == v
    # 500 records after the file are indexed from their shard at each open; the
    # file is rewritten only once 65,536 have accumulated.
    assert (path / ".bcd-index").read_bytes() == stale
    with pytest.raises(ValueError, match="duplicate"):
        dataset.extend([(key(3), b"again")])  # covered by the file
    with pytest.raises(ValueError, match="duplicate"):
        dataset.extend([(key(RECORDS + 7), b"again")])  # after it
