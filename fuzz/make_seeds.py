#!/usr/bin/env python3
"""Writes the tiny seed corpora to fuzz/corpus/<target>/ (gitignored).

Run from anywhere: python3 fuzz/make_seeds.py
"""
import pathlib
import struct

corpus = pathlib.Path(__file__).resolve().parent / "corpus"


def write(target, name, data):
    path = corpus / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def section(data):
    assert len(data) < 256
    return bytes([len(data)]) + data


# Both reference manifest layouts.
write("manifest_parse", "v3", b'{"keyed": true, "compression": "lz4", "max_shard_size": 1073741824, "shards": 3}')
write("manifest_parse", "v2", b'{"keyed": false, "compression": null, "shards": 0}')

# Stored LZ4 values, built by hand: literals only, and a literal run + match.
literals = struct.pack("<I", 5) + bytes([0x50]) + b"hello"
match = struct.pack("<I", 21) + bytes([0x48]) + b"abcd" + bytes([4, 0, 0x50]) + b"efghi"
write("lz4_decode", "literals", literals)
write("lz4_decode", "match", match)
write("lz4_decode", "empty", b"")

# open_dataset inputs (layout in fuzz_targets/open_dataset.rs).
# Keyed lz4, 2 shards: ("k", literals) | ("", match), ("z", empty value).
idx0 = struct.pack("<II", 1, len(literals))
idx1 = struct.pack("<IIII", 0, len(match), 1, 0)
write("open_dataset", "keyed_lz4",
      bytes([1 | 2 | (2 << 2)]) + section(idx0) + section(b"k" + literals)
      + section(idx1) + section(match + b"z"))
# Keyless, uncompressed, 1 shard, repaired index (sizes 3, 0, 4, then the rest).
write("open_dataset", "keyless_repaired",
      bytes([(1 << 2) | 0x20]) + section(bytes([3, 0, 4])) + section(b"abcdefghij"))
# A verbatim 0.2.0 manifest, keyless lz4, 1 shard.
manifest = b'{"keyed": false, "compression": "lz4", "shards": 1}'
write("open_dataset", "verbatim_manifest",
      bytes([0x10]) + section(manifest) + section(struct.pack("<I", len(match))) + section(match))
