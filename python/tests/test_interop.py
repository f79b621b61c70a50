"""bcd and the Python reference (bitcask-dataset 0.2.0 and 0.3.0) read each
other's datasets, record for record, and write the same bytes."""

from __future__ import annotations

import json

import pytest

import bcd
from helpers import FIXTURES, read_all, records, reference_class, shard_files

SETTINGS = [
    pytest.param(keyed, compression, id=f"{'keyed' if keyed else 'keyless'}-{compression or 'none'}")
    for keyed in (True, False)
    for compression in ("lz4", None)
]


def as_expected(case: dict) -> list:
    if case["keyed"]:
        return [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in case["records"]]
    return [bytes.fromhex(v) for v in case["records"]]


@pytest.mark.parametrize("name", sorted(json.loads((FIXTURES / "reference" / "expected.json").read_text())))
def test_reads_the_golden_datasets_the_reference_wrote(name):
    case = json.loads((FIXTURES / "reference" / "expected.json").read_text())[name]
    dataset = bcd.Dataset(FIXTURES / "reference" / name)
    assert (dataset.keyed, dataset.compression) == (case["keyed"], case["compression"])
    assert read_all(dataset) == as_expected(case)
    if dataset.keyed:
        for key, value in as_expected(case):
            assert key in dataset
            assert bytes(dataset[key]) == value
    else:
        assert len(dataset.get_batch(range(len(dataset)))) == len(case["records"])


@pytest.mark.parametrize("version", ["0.2.0", "0.3.0"])
@pytest.mark.parametrize("keyed, compression", SETTINGS)
def test_reads_what_the_reference_writes_across_many_shards(tmp_path, version, keyed, compression):
    reference = reference_class(version)
    entries = records(40, keyed=keyed, seed=1)
    path = tmp_path / "written-by-reference"
    if version == "0.2.0":  # takes max_shard_size per extend
        reference.create(path, keyed=keyed, compression=compression)
        reference(path).extend(iter(entries), max_shard_size=2048)
    else:
        reference.create(path, keyed=keyed, compression=compression, max_shard_size=2048)
        reference(path).extend(iter(entries))

    dataset = bcd.Dataset(path)
    assert len(list(path.glob("*.bin"))) > 5
    assert read_all(dataset) == entries
    values = [entry[1] if keyed else entry for entry in entries]
    assert [bytes(v) for v in dataset.get_batch(range(len(entries)))] == values
    assert [bytes(v) for v in dataset.get_batch(range(-1, -len(entries) - 1, -1))] == values[::-1]
    if keyed:
        assert all(bytes(dataset[key]) == value for key, value in entries)


@pytest.mark.parametrize("version", ["0.2.0", "0.3.0"])
@pytest.mark.parametrize("keyed, compression", SETTINGS)
def test_the_reference_reads_what_bcd_writes(tmp_path, version, keyed, compression):
    entries = records(40, keyed=keyed, seed=2)
    path = tmp_path / "written-by-bcd"
    dataset = bcd.Dataset.create(path, keyed=keyed, compression=compression, max_shard_size=2048)
    dataset.extend(iter(entries[:25]))
    dataset.extend(entries[25:])

    theirs = reference_class(version)(path)
    assert (theirs.keyed, theirs.compression) == (keyed, compression)
    assert read_all(theirs) == entries
    if keyed:
        assert all(bytes(theirs[key]) == value for key, value in entries)


@pytest.mark.parametrize("keyed, compression", SETTINGS)
def test_shard_files_are_byte_identical_to_the_references(tmp_path, keyed, compression):
    entries = records(40, keyed=keyed, seed=3)
    reference = reference_class("0.3.0")
    reference.create(tmp_path / "ref", keyed=keyed, compression=compression, max_shard_size=2048)
    reference(tmp_path / "ref").extend(iter(entries))
    mine = bcd.Dataset.create(tmp_path / "bcd", keyed=keyed, compression=compression, max_shard_size=2048)
    mine.extend(iter(entries))

    theirs = shard_files(tmp_path / "ref")
    assert len(theirs) > 10
    assert shard_files(tmp_path / "bcd") == theirs
    assert (tmp_path / "bcd" / "manifest.json").read_bytes() == (tmp_path / "ref" / "manifest.json").read_bytes()


def test_shard_files_match_reference_0_2_0_at_its_default_shard_size(tmp_path):
    entries = records(30, keyed=True, seed=4)
    reference = reference_class("0.2.0")
    reference.create(tmp_path / "ref", keyed=True, compression="lz4")
    reference(tmp_path / "ref").extend(iter(entries))
    mine = bcd.Dataset.create(tmp_path / "bcd", keyed=True)
    mine.extend(entries)
    assert shard_files(tmp_path / "bcd") == shard_files(tmp_path / "ref")


def test_numpy_values_are_stored_as_their_raw_bytes_like_the_reference(tmp_path):
    np = pytest.importorskip("numpy")
    arrays = [np.arange(100, dtype=np.int64), np.linspace(0, 1, 33, dtype=np.float32), np.eye(3)]
    reference = reference_class("0.3.0")
    reference.create(tmp_path / "ref", compression="lz4")
    reference(tmp_path / "ref").extend(arrays)
    bcd.Dataset.create(tmp_path / "bcd").extend(arrays)
    assert shard_files(tmp_path / "bcd") == shard_files(tmp_path / "ref")


def test_a_handle_picks_up_shards_another_handle_committed_before_extending(tmp_path):
    first = bcd.Dataset.create(tmp_path / "d", keyed=True, compression=None)
    second = bcd.Dataset(tmp_path / "d")
    second.extend([(b"a", b"1")])
    reference_class("0.3.0")(tmp_path / "d").extend([(b"b", b"2")])
    assert len(first) == 0  # as the reference: a handle sees new shards when it extends
    first.extend([(b"c", b"3")])
    assert read_all(first) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    with pytest.raises(ValueError, match="duplicate key"):
        first.extend([(b"a", b"again")])
