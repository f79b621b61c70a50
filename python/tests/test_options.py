"""Options mean in Python what the command's flags mean, parsed by the same
pipeline code: `level` (Dataset.extend, bcd.ingest), `max_shard_size`
(Dataset.create, bcd.ingest), and the summary bcd.ingest returns."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

import bcd
from helpers import ROOT, read_all, reference_class, shard_files

# Random bytes: what a quick probe finds incompressible (over 16 KiB).
NOISE = random.Random(9).randbytes(200_000)
TEXT = b"the quick brown fox jumps over the lazy dog; " * 5000


def literal_block(value: bytes) -> bytes:
    """`value` stored as an LZ4 block of literals only (FORMAT.md): the 4-byte
    little-endian size, a token of 15 literals, the length's 255s and rest, the value."""
    rest = len(value) - 15
    return len(value).to_bytes(4, "little") + b"\xf0" + b"\xff" * (rest // 255) + bytes([rest % 255]) + value


def test_extend_at_a_numbered_level_stores_incompressible_values_as_literal_blocks(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d")
    dataset.extend([NOISE, TEXT], level=5)
    (shard,) = [data for name, data in shard_files(tmp_path / "d").items() if name.endswith(".bin")]
    assert literal_block(NOISE) in shard
    # Compressible values are still compressed.
    assert len(shard) < len(literal_block(NOISE)) + len(TEXT) // 10
    assert read_all(reference_class("0.3.0")(tmp_path / "d")) == [NOISE, TEXT]
    assert read_all(bcd.Dataset(tmp_path / "d")) == [NOISE, TEXT]


@pytest.mark.parametrize("level", [None, "reference"])
def test_extend_without_a_level_or_at_reference_writes_the_references_bytes(tmp_path, level):
    reference = reference_class("0.3.0")
    reference.create(tmp_path / "ref", compression="lz4")
    reference(tmp_path / "ref").extend([NOISE, TEXT])
    mine = bcd.Dataset.create(tmp_path / "bcd")
    mine.extend([NOISE, TEXT], **({} if level is None else {"level": level}))
    assert shard_files(tmp_path / "bcd") == shard_files(tmp_path / "ref")
    assert not any(literal_block(NOISE) in data for data in shard_files(tmp_path / "bcd").values())


@pytest.mark.parametrize("level", ["fast", 1, 12, "7"])
def test_extend_accepts_every_level_ingest_accepts(tmp_path, level):
    dataset = bcd.Dataset.create(tmp_path / "d", keyed=True)
    dataset.extend([(b"noise", NOISE), (b"text", TEXT)], level=level)
    assert read_all(reference_class("0.3.0")(tmp_path / "d")) == [(b"noise", NOISE), (b"text", TEXT)]


def test_extend_and_ingest_store_the_same_bytes_at_the_same_level(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "noise").write_bytes(NOISE)
    (source / "text").write_bytes(TEXT)
    bcd.ingest([source], tmp_path / "ingested", level=5, jobs=1)
    bcd.Dataset.create(tmp_path / "extended", keyed=True).extend([(b"noise", NOISE), (b"text", TEXT)], level=5)
    assert shard_files(tmp_path / "extended") == shard_files(tmp_path / "ingested")


@pytest.mark.parametrize("size, expected", [("64K", 64 << 10), ("1.5GiB", 3 << 29), ("10MB", 10_000_000), ("4096", 4096), (4096, 4096)])
def test_max_shard_size_takes_an_int_or_a_size_string(tmp_path, size, expected):
    assert bcd.Dataset.create(tmp_path / "created", max_shard_size=size).max_shard_size == expected
    source = tmp_path / "source"
    source.mkdir()
    (source / "a").write_bytes(b"a")
    bcd.ingest([source], tmp_path / "ingested", max_shard_size=size)
    assert bcd.Dataset(tmp_path / "ingested").max_shard_size == expected


def test_a_small_max_shard_size_string_splits_shards(tmp_path):
    dataset = bcd.Dataset.create(tmp_path / "d", compression=None, max_shard_size="1K")
    dataset.extend([b"x" * 600, b"y" * 600, b"z" * 600])
    assert len(list((tmp_path / "d").glob("*.bin"))) == 3


def test_ingest_returns_the_summary_bcd_ingest_json_prints(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "noise").write_bytes(NOISE)
    (source / "text").write_bytes(TEXT)
    summary = bcd.ingest([source], tmp_path / "d", jobs=1)
    assert sorted(summary) == sorted([
        "dataset", "created", "records", "skipped", "skipped_members", "bytes_in",
        "bytes_stored", "compression_ratio", "shards", "seconds", "mb_per_s",
        "skipped_values", "content_duplicates",
    ])
    assert (summary["skipped_values"], summary["content_duplicates"]) == (0, [])
    assert (summary["records"], summary["bytes_in"], summary["created"]) == (2, len(NOISE) + len(TEXT), True)
    assert summary["compression_ratio"] == summary["bytes_in"] / summary["bytes_stored"]
    assert summary["mb_per_s"] == (summary["bytes_in"] / 1e6 / summary["seconds"] if summary["seconds"] > 0 else 0.0)

    command = ROOT / "target" / "debug" / "bcd"
    if not command.exists():
        pytest.skip("the bcd command is not built (cargo build -p bcd-cli)")
    done = subprocess.run(
        [command, "ingest", source, "--into", tmp_path / "cli", "--jobs", "1", "--json"],
        capture_output=True, timeout=60, check=True,
    )
    printed = json.loads(done.stdout)
    assert list(printed) == list(summary)
    timing = ("dataset", "seconds", "mb_per_s")
    assert {k: v for k, v in printed.items() if k not in timing} == {k: v for k, v in summary.items() if k not in timing}
