"""Every failure is the natural Python exception with a message that names what
is wrong, a failed extend leaves the directory exactly as it was, and no input
makes Rust panic."""

from __future__ import annotations

import json
import os
import re
import threading

import numpy as np
import pytest

import bcd
from helpers import read_all, snapshot


@pytest.fixture
def keyed(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "keyed", keyed=True, max_shard_size=64)
    dataset.extend([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    return dataset


@pytest.fixture
def keyless(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "keyless", compression=None)
    dataset.extend([b"x", b"y"])
    return dataset


# Reads


@pytest.mark.parametrize("index", [3, -4, 2**63 - 1, -(2**63), 2**64, -(2**200)])
def test_an_index_past_either_end_is_an_index_error(keyed, index):
    for read in (keyed.at, keyed.key_at):
        with pytest.raises(IndexError, match="out of range"):
            read(index)


def test_get_batch_checks_every_index_first_and_names_the_bad_one(keyed):
    with pytest.raises(IndexError, match="index 7 out of range for a dataset of 3 records"):
        keyed.get_batch([0, 1, 7, 2])
    with pytest.raises(IndexError, match="index -9 out of range"):
        keyed.get_batch(np.array([0, -9]))


@pytest.mark.parametrize("index", ["0", 1.0, None, b"0", [0]])
def test_an_index_that_is_not_an_integer_is_a_type_error(keyed, index):
    with pytest.raises(TypeError):
        keyed.at(index)
    with pytest.raises(TypeError):
        keyed.get_batch([0, index])


def test_get_batch_needs_an_iterable(keyed):
    with pytest.raises(TypeError):
        keyed.get_batch(3)


def test_a_missing_key_is_a_key_error_holding_the_key(keyed):
    with pytest.raises(KeyError) as raised:
        keyed[b"missing"]
    assert raised.value.args == (b"missing",)
    assert b"missing" not in keyed


def test_key_operations_on_a_keyless_dataset(keyless):
    with pytest.raises(TypeError, match="keyless"):
        keyless[b"x"]
    with pytest.raises(TypeError, match="keyless"):
        keyless.key_at(0)
    assert b"x" not in keyless  # as the reference: False, not an error
    assert "x" not in keyless


def test_a_key_that_is_not_a_buffer_is_a_type_error(keyed):
    for key in ("a", 1, None):
        with pytest.raises(TypeError, match="buffer protocol"):
            keyed[key]
        assert key not in keyed


# Extends that fail change nothing


def test_a_duplicate_key_within_one_extend_commits_nothing(keyed):
    before = snapshot(keyed.path)
    with pytest.raises(ValueError, match=r'duplicate key "new"'):
        keyed.extend([(b"new", b"1"), (b"other", b"2"), (b"new", b"3")])
    assert snapshot(keyed.path) == before
    assert len(keyed) == 3 and b"new" not in keyed


def test_a_key_already_in_the_dataset_commits_nothing(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", keyed=True, max_shard_size=100_000)
    dataset.extend([(b"a", b"1"), (b"b", b"2")])
    before = snapshot(dataset.path)
    entries = [(b"k%d" % i, b"v" * 50) for i in range(5000)] + [(b"b", b"again")]
    with pytest.raises(ValueError, match=r'duplicate key "b"'):
        dataset.extend(iter(entries))  # spans several batches and shards, written already
    assert snapshot(dataset.path) == before
    assert read_all(dataset) == [(b"a", b"1"), (b"b", b"2")]
    assert read_all(bcd.Dataset(dataset.path)) == read_all(dataset)


class Boom(Exception):
    pass


def test_an_exception_from_the_entries_propagates_and_commits_nothing(keyless):
    before = snapshot(keyless.path)
    boom = Boom("from the generator")

    def entries():
        for i in range(5000):  # a few batches are written before it raises
            yield b"value %d" % i
        raise boom

    with pytest.raises(Boom) as raised:
        keyless.extend(entries())
    assert raised.value is boom
    assert snapshot(keyless.path) == before
    assert [bytes(v) for v in keyless.get_batch([0, 1])] == [b"x", b"y"]
    keyless.extend([b"z"])  # the dataset is still usable
    assert len(bcd.Dataset(keyless.path)) == 3


def test_a_keyboard_interrupt_in_the_entries_commits_nothing(keyless):
    before = snapshot(keyless.path)

    def entries():
        yield b"one"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        keyless.extend(entries())
    assert snapshot(keyless.path) == before


def test_the_entries_may_read_the_dataset_being_extended(keyed):
    items = [(b"a", b"dup"), (b"d", b"4"), (b"b", b"dup"), (b"e", b"5")]
    keyed.extend((key, value) for key, value in items if key not in keyed and len(keyed) == 3)
    assert read_all(keyed)[3:] == [(b"d", b"4"), (b"e", b"5")]


def test_extending_the_same_object_from_its_own_entries_is_refused(keyless):
    before = snapshot(keyless.path)

    def entries():
        yield b"outer"
        keyless.extend([b"inner"])

    with pytest.raises(RuntimeError, match="extend"):
        keyless.extend(entries())
    assert snapshot(keyless.path) == before


def test_a_second_writer_is_refused_while_one_extends(keyless):
    other = bcd.Dataset(keyless.path)

    def entries():
        yield b"first"
        other.extend([b"second writer"])

    with pytest.raises(BlockingIOError, match=r"another writer .*\.bcd\.lock"):
        keyless.extend(entries())
    assert len(bcd.Dataset(keyless.path)) == 2


def test_threads_extend_one_object_in_turn(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", keyed=True, compression=None)

    def add(thread):
        for round in range(5):
            dataset.extend((b"%d-%d-%d" % (thread, round, i), b"v") for i in range(200))
            assert len(dataset) >= 200

    threads = [threading.Thread(target=add, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(dataset) == len(bcd.Dataset(dataset.path)) == 4 * 5 * 200


def test_level_must_be_a_level_ingest_accepts(keyless):
    # The same levels as bcd.ingest and `bcd ingest --level`, parsed by the same code.
    before = len(keyless)
    for level in (0, 13, -1, 2**40, "13", "Fast", "", True):
        with pytest.raises(ValueError, match=re.escape(f'level: "{level}": expected 1..12, fast or reference')):
            keyless.extend([b"x"], level=level)
    for level in (5.0, b"fast", [5]):
        with pytest.raises(TypeError, match="level must be an int or a str"):
            keyless.extend([b"x"], level=level)
    assert len(keyless) == before


# Creating and opening


def test_create_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "something").write_bytes(b"")
    with pytest.raises(FileExistsError, match="not empty"):
        bcd.Dataset.create(tmp_path / "full")


@pytest.mark.parametrize("compression", ["zstd", "LZ4", "", 4, b"lz4", "none"])
def test_create_refuses_an_unknown_compression(tmp_path, compression):
    with pytest.raises(ValueError, match="unsupported compression"):
        bcd.Dataset.create(tmp_path / "d", compression=compression)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("size, error", [(0, ValueError), (-5, ValueError), (2**64, ValueError), (2**70, ValueError), (-(2**70), ValueError), ("0", ValueError), ("12X", ValueError), ("", ValueError), ("99999999999T", ValueError), (b"1", TypeError), (1.5, TypeError)])
def test_create_refuses_a_bad_max_shard_size(tmp_path, size, error):
    with pytest.raises(error, match="max_shard_size"):
        bcd.Dataset.create(tmp_path / "d", max_shard_size=size)
    assert not (tmp_path / "d").exists()


def test_opening_a_directory_without_a_dataset(tmp_path):
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        bcd.Dataset(tmp_path)
    with pytest.raises(FileNotFoundError):
        bcd.Dataset(tmp_path / "missing")


CORRUPT_MANIFESTS = [
    b"",
    b"{not json",
    b"[]",
    b'{"keyed": "false", "compression": null, "max_shard_size": 10, "shards": 0}',
    b'{"keyed": false, "compression": "zstd", "max_shard_size": 10, "shards": 0}',
    b'{"keyed": false, "compression": null, "max_shard_size": 0, "shards": 0}',
    b'{"keyed": false, "compression": null, "max_shard_size": 10, "shards": -1}',
    b'{"keyed": false, "compression": null, "max_shard_size": 10, "shards": 1.0}',
    b'{"keyed": false, "compression": null, "max_shard_size": 10, "shards": 99999999999999999999999}',
    b'{"keyed": false, "compression": null, "max_shard_size": 10, "shards": 0, "extra": 1}',
    b"\xff\xfe\x00",
]


@pytest.mark.parametrize("manifest", CORRUPT_MANIFESTS)
def test_a_corrupt_manifest_is_a_value_error_naming_the_file(tmp_path, manifest):
    (tmp_path / "manifest.json").write_bytes(manifest)
    with pytest.raises(ValueError, match=r"manifest\.json: invalid manifest"):
        bcd.Dataset(tmp_path)


def test_a_manifest_counting_missing_shards_is_file_not_found(keyed):
    manifest = json.loads((keyed.path / "manifest.json").read_text())
    manifest["shards"] += 5
    (keyed.path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FileNotFoundError, match="missing shard file"):
        bcd.Dataset(keyed.path)


def test_a_corrupt_index_is_a_value_error_naming_the_file(keyed):
    index = keyed.path / "000000.idx"
    index.write_bytes(index.read_bytes() + b"\x01\x00")
    with pytest.raises(ValueError, match=r"000000\.idx"):
        bcd.Dataset(keyed.path)


def test_an_index_that_disagrees_with_the_data_is_a_value_error(keyed):
    index = keyed.path / "000000.idx"
    index.write_bytes(b"\x01\x00\x00\x00\xff\xff\xff\xff")
    with pytest.raises(ValueError, match=r"000000\.(idx|bin)"):
        bcd.Dataset(keyed.path)


def test_a_corrupt_compressed_value_is_a_value_error_naming_the_record(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d")
    dataset.extend([b"hello hello hello hello", b"fine"])
    data = tmp_path / "d" / "000000.bin"
    stored = bytearray(data.read_bytes())
    stored[0:4] = (1 << 30).to_bytes(4, "little")  # a declared size its block cannot reach
    data.write_bytes(bytes(stored))
    dataset = bcd.Dataset(tmp_path / "d")
    with pytest.raises(ValueError, match=r"000000\.bin: record 0"):
        dataset.at(0)
    with pytest.raises(ValueError, match=r"000000\.bin: record 0"):
        dataset.get_batch([1, 0])
    assert bytes(dataset.at(1)) == b"fine"


def test_a_shard_truncated_after_opening_is_a_value_error(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", compression=None)
    dataset.extend([b"0123456789"])
    os.truncate(tmp_path / "d" / "000000.bin", 4)  # not mapped yet: mapped on first read
    with pytest.raises(ValueError, match="changed on disk"):
        dataset.at(0)


def test_no_error_is_a_rust_panic(keyed, keyless):
    # PyO3 turns a Rust panic into pyo3_runtime.PanicException, a BaseException.
    hostile = [
        lambda: keyed.at(2**100),
        lambda: keyed.get_batch(iter([0, 2**100])),
        lambda: keyed.extend([(memoryview(b"abc")[::-1], b"")]),
        lambda: keyed.extend([(b"", b"")] * 2),
        lambda: keyless.extend([np.empty((0, 3))] * 3),
        lambda: bcd.Dataset("\x00"),
        lambda: bcd.Dataset.create(keyless.path / "manifest.json"),
    ]
    for call in hostile:
        try:
            call()
        except Exception:
            pass
        except BaseException as error:  # noqa: BLE001
            pytest.fail(f"{type(error).__name__}: {error}")
