"""Dataset.refresh: records committed by another process after the open (bcd, or
the Python reference) become readable; nothing changes when nothing was
committed. And Dataset.get_batch_into: a batch read back to back into one
buffer the caller allocates."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import bcd
from helpers import ROOT, records, reference_class

APPEND_WITH_BCD = """
import sys, bcd
dataset = bcd.Dataset(sys.argv[1])
dataset.extend([(b"late-%d" % i, b"value %d" % i) for i in range(int(sys.argv[2]))])
"""

APPEND_WITH_REFERENCE = """
import sys
sys.path.insert(0, sys.argv[3])
import reference
Reference = reference.load("0.3.0")
Reference(sys.argv[1]).extend([(b"ref-%d" % i, b"ref value %d" % i) for i in range(int(sys.argv[2]))])
"""


@pytest.mark.parametrize("compression", ["lz4", None])
@pytest.mark.parametrize("writer", ["bcd", "reference"])
def test_refresh_sees_records_another_process_appended(tmp_path, compression, writer):
    path = tmp_path / "d"
    dataset = bcd.Dataset.create(path, keyed=True, compression=compression)
    dataset.extend(records(20, keyed=True, seed=1))
    script = APPEND_WITH_BCD if writer == "bcd" else APPEND_WITH_REFERENCE
    subprocess.run([sys.executable, "-c", script, str(path), "7", str(ROOT / "tests" / "python")], check=True)
    # Not seen until refreshed.
    assert len(dataset) == 20
    assert dataset.refresh() == 7
    assert len(dataset) == 27
    prefix = b"late-" if writer == "bcd" else b"ref-"
    value = b"value " if writer == "bcd" else b"ref value "
    assert bytes(dataset.key_at(20)) == prefix + b"0"
    assert bytes(dataset[prefix + b"6"]) == value + b"6"
    assert [bytes(v) for v in dataset.get_batch([20, -1])] == [value + b"0", value + b"6"]
    # Nothing new: nothing changes.
    assert dataset.refresh() == 0
    assert len(dataset) == 27


def test_refresh_after_the_reference_appended_to_what_it_created(tmp_path):
    path = tmp_path / "d"
    reference = reference_class("0.3.0")
    reference.create(path, keyed=False, compression="lz4")
    reference(path).extend([b"a", b"b"])
    dataset = bcd.Dataset(path)
    reference(path).extend([b"c"])
    assert dataset.refresh() == 1
    assert [bytes(v) for v in dataset.get_batch(range(3))] == [b"a", b"b", b"c"]


def test_refresh_refuses_a_dataset_replaced_by_another(tmp_path):
    path = tmp_path / "d"
    dataset = bcd.Dataset.create(path, keyed=True)
    dataset.extend([(b"k", b"v")])
    (path / "manifest.json").write_text('{"keyed": false, "compression": "lz4", "max_shard_size": 1073741824, "shards": 2}')
    with pytest.raises(RuntimeError, match="keyed or compression setting differs"):
        dataset.refresh()
    assert len(dataset) == 1


@pytest.mark.parametrize("compression", ["lz4", None])
def test_get_batch_into_writes_the_values_back_to_back(tmp_path, compression):
    dataset = bcd.Dataset.create(tmp_path / "d", keyed=False, compression=compression, max_shard_size=4096)
    values = records(300, keyed=False, seed=3)
    dataset.extend(values)
    indices = [5, 0, 299, 5, -1, 17]
    allocated = []

    def allocate(size):
        allocated.append(size)
        return np.empty(size + 3, dtype=np.uint8)  # larger than needed is fine

    offsets = dataset.get_batch_into(indices, allocate)
    assert offsets.dtype == np.int64 and offsets.tolist()[0] == 0
    wanted = [bytes(values[i]) for i in indices]
    assert allocated == [sum(map(len, wanted))]
    assert offsets.tolist() == np.cumsum([0] + [len(v) for v in wanted]).tolist()
    # The buffer the callback returned now holds them.
    out = bytearray(allocated[0])
    dataset.get_batch_into(indices, lambda size: out)
    assert [bytes(out[a:b]) for a, b in zip(offsets[:-1], offsets[1:])] == wanted
    # A large batch (decoded on several threads) gives the same bytes as get_batch.
    everything = list(range(len(dataset))) * 20
    holder = {}
    offsets = dataset.get_batch_into(everything, lambda size: holder.setdefault("out", bytearray(size)))
    big = holder["out"]
    assert [bytes(big[a:b]) for a, b in zip(offsets[:-1], offsets[1:])] == [bytes(values[i]) for i in everything]


def test_get_batch_into_refuses_unusable_buffers(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d")
    dataset.extend([b"abc", b"defg"])
    with pytest.raises(ValueError, match="at least 7 bytes"):
        dataset.get_batch_into([0, 1], lambda size: bytearray(size - 1))
    with pytest.raises(TypeError, match="writable, C-contiguous buffer"):
        dataset.get_batch_into([0, 1], lambda size: "not a buffer")
    with pytest.raises(ValueError, match="at least 7 bytes"):
        dataset.get_batch_into([0, 1], lambda size: bytes(size))
    with pytest.raises(IndexError):
        dataset.get_batch_into([0, 2], lambda size: bytearray(size))
    with pytest.raises(ZeroDivisionError):
        dataset.get_batch_into([0], lambda size: 1 / 0)
    assert dataset.get_batch_into([], lambda size: bytearray(size)).tolist() == [0]
