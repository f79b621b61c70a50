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

# The converters' readers: seeds from the repository's fixtures (fixtures/).
fixtures = corpus.parent.parent / "fixtures"


def masked_crc(data):
    # CRC32C (Castagnoli), then TensorFlow's mask.
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    crc ^= 0xFFFFFFFF
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tf_frame(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def field(number, payload):
    out = bytes([number << 3 | 2])
    n = len(payload)
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n]) + payload


def example(features):
    entries = b"".join(
        field(1, field(1, name) + field(2, field(1, field(1, value)))) for name, value in features
    )
    return field(1, entries)


# tfrecord_source: flag byte (bit 0 gzip, bit 1 feature "f", bit 2 key "k"), then the file.
record = example([(b"f", b"value bytes"), (b"k", b"key-1")])
write("tfrecord_source", "plain", bytes([0]) + tf_frame(b"first") + tf_frame(b""))
write("tfrecord_source", "features_gzip", bytes([1 | 2 | 4]) + tf_frame(record) * 2)
for path in sorted((fixtures / "tfrecord").glob("*.tfrecord*")):
    write("tfrecord_source", "fixture-" + path.name, bytes([0]) + path.read_bytes())

# megatron_index: the .bin size (u64 LE), then the .idx (Megatron Core's own files).
for path in sorted((fixtures / "megatron").glob("*.idx")):
    size = path.with_suffix(".bin").stat().st_size
    write("megatron_index", "fixture-" + path.name, size.to_bytes(8, "little") + path.read_bytes())

# tf_example: a byte n, n % 16 bytes of name, the message.
write("tf_example", "two_features", bytes([1]) + b"f" + record)
write("tf_example", "two_values", bytes([1]) + b"x" + example([(b"x", b"a")]) + field(1, field(1, field(1, b"x"))))

# csv_source: flag byte (bits 0-1 delimiter , ; tab |; bit 2 key column id), the CSV.
write("csv_source", "plain", bytes([0]) + b"path\na\nb\nd/c\nl\n")
write("csv_source", "keyed", bytes([4]) + b'id,path\n1,a\n2,"d/c"\n3,l\n')
write("csv_source", "specials", bytes([1]) + b"path;x\np;1\nz;2\nd;3\ns;4\n")

# parquet_source: the file itself.
for path in sorted((fixtures / "parquet").glob("*.parquet")):
    write("parquet_source", path.name, path.read_bytes())

# mds_source: a flag byte (0 plain, 1 zstd-compressed by the target, 0x80 the
# bytes are index.json), then the shards of every-encoding and its index.
for path in sorted((fixtures / "mds" / "every-encoding").glob("shard.*.mds")):
    write("mds_source", path.name, b"\x00" + path.read_bytes())
    write("mds_source", path.name + ".zstd", b"\x01" + path.read_bytes())
for name in ("every-encoding", "zstd", "snappy"):
    write("mds_source", name + "-index.json", b"\x80" + (fixtures / "mds" / name / "index.json").read_bytes())

# litdata_source: a flag byte (the fixture whose config reads the chunk: 0 dict,
# 1 zstd-batch, 2 zstd-sample, 3 zstd-chunk, given decompressed, 4 text and
# 5 text-zstd, rows kept as an Arrow footer; 0x80 the bytes are index.json),
# then a chunk.
for flag, name in ((0, "dict"), (1, "zstd-batch"), (2, "zstd-sample"), (4, "text"), (5, "text-zstd")):
    for path in sorted((fixtures / "litdata" / name).glob("chunk-*.bin")):
        write("litdata_source", name + "-" + path.name, bytes([flag]) + path.read_bytes())
    write("litdata_source", name + "-index.json", b"\x80" + (fixtures / "litdata" / name / "index.json").read_bytes())

# hf_disk_source: a data file of a save_to_disk directory.
for path in sorted((fixtures / "hf_disk" / "photos").glob("*.arrow")):
    write("hf_disk_source", path.name, path.read_bytes())

# tar_source inputs (layout in fuzz_targets/tar_source.rs): a flag byte, then an
# archive. The committed fixtures (trailing padding trimmed to the two end
# blocks), and small archives with a GNU long name, PAX records and a GNU
# sparse member with an extension block.
import io
import tarfile

fixtures = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "tar"


def trimmed(data):
    return data.rstrip(b"\0").ljust(-(-len(data.rstrip(b"\0")) // 512) * 512, b"\0") + bytes(1024)


for name in ["gnu.tar", "pax.tar", "shards-000000.tar"]:
    write("tar_source", name, b"\x00" + trimmed((fixtures / name).read_bytes()))
for name in ["gnu.tar.gz", "pax.tgz"]:
    write("tar_source", name, b"\x00" + (fixtures / name).read_bytes())


def small(tar_format):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tar_format) as tar:
        for name, body in [("d/" + "n" * 120, b"long"), ("x.txt", b"x"), ("e", b"")]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        link = tarfile.TarInfo("l" * 110)
        link.type = tarfile.SYMTYPE
        link.linkname = "t" * 120
        tar.addfile(link)
    return trimmed(buffer.getvalue())


write("tar_source", "small_gnu", b"\x00" + small(tarfile.GNU_FORMAT))
write("tar_source", "small_pax", b"\x00" + small(tarfile.PAX_FORMAT))
write("tar_source", "small_pax_zstd_gzip", b"\x06" + small(tarfile.PAX_FORMAT))

# An old-GNU sparse member whose map continues in one extension block, then a file.
def gnu_header(name, type_flag, size, extended=False):
    block = bytearray(512)
    block[: len(name)] = name
    block[100:108] = b"0000644\0"
    block[124:136] = b"%011o\0" % size
    block[156] = type_flag
    block[257:265] = b"ustar  \0"
    block[482] = 1 if extended else 0
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


extension = bytearray(512)
extension[0:24] = b"00000000000\0" + b"00000001000\0"
sparse = (gnu_header(b"sparse", ord("S"), 512, extended=True) + bytes(extension) + bytes(512)
          + gnu_header(b"after", ord("0"), 5) + b"after".ljust(512, b"\0") + bytes(1024))
write("tar_source", "sparse", b"\x00" + sparse)

# image_decode: flag byte, side, record, then the fixtures' JPEGs (written by
# Pillow) and a PNG, each under a few crops.
imagefolder = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "imagefolder"
jpegs = sorted(imagefolder.rglob("*.jpg"))[:4]
assert jpegs, f"no JPEGs under {imagefolder}"
for number, jpeg in enumerate(jpegs):
    for flags in (0x00, 0x15, 0x1E, 0x03):
        write("image_decode", f"jpeg{number}-{flags:02x}", bytes([flags, 31, number]) + jpeg.read_bytes())
png = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000020000000108020000007b40e8dd0000000f49444154789c63f8cfc0c0"
    "c0f01f00070001ff7e08b1d00000000049454e44ae426082"
)
write("image_decode", "png", bytes([0x02, 7, 0]) + png)

# audio_decode: flag byte, frames, record, then WAV files: 8-, 16- and 24-bit PCM
# written by Python's wave, and 32-bit floats with a fmt chunk made here.
import wave  # noqa: E402

for width, channels in ((1, 1), (2, 2), (3, 1)):
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(16_000)
        w.writeframes(bytes(range(256))[: 60 * width * channels])
    for flags in (0x00, 0x05, 0x1A):
        write("audio_decode", f"pcm{8 * width}x{channels}-{flags:02x}", bytes([flags, 40, width]) + out.getvalue())
floats = struct.pack("<8f", 0.0, 0.5, -0.5, 1.0, -1.0, 0.25, -0.25, 0.125)
fmt = struct.pack("<HHIIHH", 3, 1, 16_000, 64_000, 4, 32)
body = b"WAVEfmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(floats)) + floats
write("audio_decode", "float32", bytes([0x02, 5, 0]) + b"RIFF" + struct.pack("<I", len(body)) + body)

# lmdb_source: a mode byte (0 raw, 1 pickle, 2 caffe-datum), then a data file py-lmdb wrote.
lmdb = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "lmdb"
for mode, name in [(0, "raw/data.mdb"), (1, "pickle-tuple.lmdb"), (1, "pickle-dict/data.mdb"),
                   (2, "caffe-datum/data.mdb"), (0, "named/data.mdb")]:
    write("lmdb_source", name.replace("/", "-"), bytes([mode]) + (lmdb / name).read_bytes())

# pickle: pickles of every protocol, of the layouts the LMDB source decodes.
import pickle as _pickle
for protocol in range(0, _pickle.HIGHEST_PROTOCOL + 1):
    for name, obj in [("tuple", (b"\xff\xd8jpeg", 3)),
                      ("dict", {"image": b"png", "label": 1, "box": [1, 2.5], "note": None, "ok": True}),
                      ("shared", [[b"x"] * 2] * 2)]:
        write("pickle", f"{name}-{protocol}", _pickle.dumps(obj, protocol=protocol))

# view_file: a flag byte (1: the target fixes the checksum), then view files of
# 100 records: narrow with an expression, and one made from indices.
def view_file(records, indices, expression, shards=2):
    wide = records > 1 << 32
    flags = (1 if wide else 0) | (2 if expression is not None else 0)
    text = (expression or "").encode()
    header = b"BCDVIEW1" + struct.pack("<II", 1, flags)
    header += struct.pack("<QQQQ", records, shards, len(indices), len(text))
    header += struct.pack("<QQQQ", 60, 4000, 0x1234, 0x5678) + bytes(16)
    padded = text + bytes(-len(text) % 8)
    return header + padded + b"".join(struct.pack("<Q" if wide else "<I", i) for i in indices)


write("view_file", "cats", b"\x01" + view_file(100, [0, 3, 42, 99], "label = 'cat'"))
write("view_file", "indices", b"\x01" + view_file(100, list(range(0, 100, 9)), None))
write("view_file", "wide", b"\x01" + view_file(5 << 32, [1, 1 << 33], "size > 1"))
