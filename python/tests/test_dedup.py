"""Duplicates by content and checked reads from Python: ``extend``,
``extend_arrow``, ``bcd.ingest`` and ``bcd.merge`` with ``dedup="content"``
leave out values seen before (the content hashes checked against Python's
``xxhash``, an independent XXH3-128), under small ``memory_limit`` values
too; ``Dataset(path, verify=True)`` refuses a value whose bytes changed on
disk, on every read path, and pickles with the setting."""

from __future__ import annotations

import json
import pickle
import re

import pyarrow as pa
import pytest
import xxhash

import bcd
from helpers import read_all, reference_class


def records(n: int, distinct: int, tag: str = "k") -> list:
    return [(f"{tag}{i:05d}".encode(), f"value {i % distinct} ".encode() * (1 + i % distinct % 4)) for i in range(n)]


def first_of_each_value(rows: list, seen: set) -> list:
    kept = []
    for key, value in rows:
        if value not in seen:
            seen.add(value)
            kept.append((key, value))
    return kept


def content_hashes(path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.glob("*.xxh128")))


@pytest.mark.parametrize("memory_limit", [None, "64K"])
def test_extend_leaves_out_repeated_values_within_a_call_and_across_calls(tmp_path, memory_limit):
    ds = bcd.Dataset.create(tmp_path / "ds", keyed=True, max_shard_size=2000)
    first = records(3000, 250)
    summary = ds.extend(iter(first), dedup="content", memory_limit=memory_limit)
    seen: set = set()
    expected = first_of_each_value(first, seen)
    assert summary["records"] == len(expected) == 250
    assert summary["skipped_values"] == 2750
    dup = summary["content_duplicates"][0]
    assert dup["key"] == "k00250" and dup["duplicate_of"] == {"index": 0, "key": "k00000"}
    assert dup["origin"] == "entry 250"
    second = records(500, 300, tag="n")
    summary = ds.extend(second, dedup="content", memory_limit=memory_limit)
    expected += first_of_each_value(second, seen)
    assert summary["records"] == 50
    assert read_all(ds) == expected
    # The hashes beside the shards are XXH3-128 of every value, in order.
    assert content_hashes(tmp_path / "ds") == b"".join(xxhash.xxh3_128(v).digest() for _, v in expected)
    assert not (tmp_path / "ds" / ".bcd-spill").exists()
    # Without dedup, extend returns None (as the reference's), and keeps the hashes.
    assert ds.extend([(b"plain", b"value 0 ")]) is None
    assert len(content_hashes(tmp_path / "ds")) == 16 * len(ds)


def test_keyless_extend_arrow_and_merge_with_dedup(tmp_path):
    values = [f"v{i % 40}".encode() * 9 for i in range(200)]
    target = bcd.Dataset.create(tmp_path / "target")
    summary = target.extend(values[:100], dedup="content")
    assert summary["records"] == 40 and summary["content_duplicates"][0] == {
        "index": 40,
        "origin": "entry 40",
        "duplicate_of": {"index": 0},
    }
    part = bcd.Dataset.create(tmp_path / "part")
    added = part.extend_arrow(pa.table({"value": values[100:] + [b"new"]}), dedup="content")
    assert added["records"] == 41 and added["skipped_values"] == 60
    assert added["content_duplicates"][0]["origin"] == "Arrow data: row 40"
    report = tmp_path / "dups.jsonl"
    merged = bcd.merge([tmp_path / "part"], tmp_path / "target", dedup="content", dedup_report=report)
    assert merged["records"] == 1 and merged["skipped_values"] == 40
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert lines == merged["content_duplicates"]
    assert all(str(tmp_path / "part") == line["origin"] for line in lines)
    assert read_all(bcd.Dataset(tmp_path / "target")) == values[:40] + [b"new"]


def test_ingest_with_dedup_report_and_memory_limit(tmp_path):
    tree = tmp_path / "tree"
    for i in range(30):
        (tree / f"d{i % 2}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 2}" / f"{i:03d}.bin").write_bytes(f"content {i % 7}".encode())
    report = tmp_path / "report.jsonl"
    summary = bcd.ingest([tree], tmp_path / "ds", dedup="content", dedup_report=report, memory_limit="1M")
    assert summary["records"] == 7 and summary["skipped_values"] == 23
    assert [json.loads(line) for line in report.read_text().splitlines()] == summary["content_duplicates"]
    with pytest.raises(ValueError, match="dedup_report applies only with"):
        bcd.ingest([tree], tmp_path / "other", dedup_report=report)
    with pytest.raises(ValueError, match="dedup"):
        bcd.ingest([tree], tmp_path / "other", dedup="values")
    with pytest.raises(ValueError, match="memory_limit"):
        bcd.ingest([tree], tmp_path / "other", memory_limit="lots")


def test_verify_true_refuses_a_value_whose_bytes_changed_on_every_read_path(tmp_path):
    import lz4.block

    # LZ4 record 20 ("value 20 ", 9 bytes) is a literal-only block, read in
    # place (a view of the shard, like an uncompressed value); record 23 (36
    # bytes of a repeated phrase) is compressed, read by decompressing.
    for compression, index in ((None, 20), ("lz4", 20), ("lz4", 23)):
        path = tmp_path / f"ds-{compression}-{index}"
        ds = bcd.Dataset.create(path, keyed=True, compression=compression)
        rows = records(50, 50)
        ds.extend(rows, dedup="content")
        key, value = rows[index]

        # Flip the last byte of the record's stored value (for LZ4, a literal:
        # extend without a level writes the reference's level-9 blocks).
        def stored_len(value: bytes) -> int:
            if compression is None:
                return len(value)
            return len(lz4.block.compress(value, mode="high_compression", store_size=True))

        if compression == "lz4":
            literal_only = stored_len(value) == 4 + 1 + len(value)
            assert literal_only == (index == 20), (index, stored_len(value))
        end = sum(len(k) + stored_len(v) for k, v in rows[: index + 1])
        verifying = bcd.Dataset(path, verify=True)
        assert verifying[key] == value
        del verifying
        shard = path / "000000.bin"
        data = bytearray(shard.read_bytes())
        data[end - 1] ^= 1
        shard.write_bytes(bytes(data))

        plain = bcd.Dataset(path)
        assert plain.at(index) != value  # read unchecked
        checked = bcd.Dataset(path, verify=True)
        message = re.escape(
            f"000000.bin: record {index} (dataset index {index}): the value does not match its content hash"
        )
        for read in (
            lambda: checked.at(index),
            lambda: checked[key],
            lambda: checked.get_batch([index - 1, index]),
            lambda: checked.get_batch_into([index], lambda n: bytearray(n)),
        ):
            with pytest.raises(ValueError, match=message):
                read()
        assert checked.at(index - 1) == rows[index - 1][1]
        assert checked.get_batch([index + 1]) == [rows[index + 1][1]]
        again = pickle.loads(pickle.dumps(checked))
        with pytest.raises(ValueError, match=message):
            again.at(index)


def test_verify_true_needs_content_hashes_which_the_reference_never_writes(tmp_path):
    reference = reference_class("0.3.0")
    reference.create(tmp_path / "ref", keyed=True, compression="lz4", max_shard_size=1 << 20)
    reference(tmp_path / "ref").extend(iter(records(10, 10)))
    with pytest.raises(ValueError, match="no content hashes"):
        bcd.Dataset(tmp_path / "ref", verify=True)
    with pytest.raises(ValueError, match="dedup-index"):
        bcd.Dataset(tmp_path / "ref").extend([(b"x", b"y")], dedup="content")
    # Opening without it reads as always; the reference still reads what bcd adds.
    ds = bcd.Dataset(tmp_path / "ref")
    ds.extend([(b"x", b"y")])
    assert read_all(reference(tmp_path / "ref")) == records(10, 10) + [(b"x", b"y")]
