"""Views (``Dataset.view``, ``create_view``, ``select``): the records an
expression selects are those DuckDB's and polars' SQL select over
``ds.fields()`` (equal index lists), for every type of field the sources
produce; a view reads like a dataset of its records; views hold through
appends, refresh and merges, travel with copies, and a view of a dataset
rewritten underneath is refused."""

from __future__ import annotations

import math
import os
import pickle
import shutil
import subprocess

import numpy as np
import pyarrow as pa
import pytest

import bcd
from bcd.views import View
from helpers import ROOT

ROWS = 400


def table(rows: int = ROWS, start: int = 0) -> pa.Table:
    """Every kind of field the sources produce: integers of several widths,
    floats (with NaN), text, booleans, lists, a field of nulls, a dictionary, a
    struct; most with nulls."""
    i = np.arange(start, start + rows)
    null = (i % 11) == 3

    def masked(values, type_):
        return pa.array([None if n else v for v, n in zip(values, null)], type=type_)

    labels = ["cat", "dog", "ant", "a dog", "50%", "x_y", "Cat", "caf\u00e9"]
    return pa.table(
        {
            "key": [f"{'train' if n % 3 else 'val'}/{n:05}".encode() for n in i],
            "value": [b"v" * (n % 37) for n in i],
            "n": masked((i * 7919) % 1000 - 500, pa.int64()),
            "small": pa.array(((i * 31) % 200 - 100).astype(np.int8), type=pa.int8()),
            "big": pa.array([(int(n) * 0x9E3779B97F4A7C15) % (1 << 64) for n in i], type=pa.uint64()),
            "score": masked([math.nan if n % 50 == 7 else (n % 97) / 8 - 4 for n in i], pa.float64()),
            "caption": masked([labels[n % len(labels)] + (" dog" if n % 4 == 0 else "") for n in i], pa.string()),
            "ok": masked([n % 3 == 0 for n in i], pa.bool_()),
            "tags": masked([list(range(n % 4)) for n in i], pa.list_(pa.int64())),
            "nothing": pa.nulls(rows),
            "label": pa.array([labels[n % 3] if n % 13 else None for n in i]).dictionary_encode(),
            "meta": masked([{"w": int(n % 500), "h": int((n * 3) % 400)} for n in i],
                           pa.struct([("w", pa.int64()), ("h", pa.int64())])),
        }
    )


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("views") / "ds"
    dataset = bcd.Dataset.create(path, keyed=True, max_shard_size=4096)
    dataset.extend_arrow(table(), value_column="value", key_column="key")
    return dataset


# Expressions both engines read the same way (DuckDB's LIKE has no escape
# character unless ESCAPE gives one, as here; its len() is the list's length).
EXPRESSIONS = [
    "n = 5",
    "n > 100 AND n <= 300",
    "n <> 0",
    "n BETWEEN -10 AND 10",
    "n NOT BETWEEN -400 AND 400",
    "n IN (1, 2, 3, -500, 499)",
    "n NOT IN (1, 2, 3)",
    "n IN (1, NULL)",
    "n NOT IN (1, NULL)",
    "n IS NULL",
    "n IS NOT NULL AND small < 0",
    "small >= -5 AND small < 300",
    "small > n",
    "big > 9223372036854775808",
    "big < 1000000000",
    "score > 2.5",
    "score < 0 OR score IS NULL",
    "score = 0.5",
    "score > n",
    "n > 2.5",
    "caption = 'cat'",
    "caption LIKE '%dog%'",
    "caption NOT LIKE '%dog%'",
    "caption ILIKE 'cat%'",
    "caption LIKE '50\\%' ESCAPE '\\'",
    "caption LIKE 'x_y%'",
    "caption > 'b'",
    "caption = 'caf\u00e9'",
    "ok",
    "NOT ok",
    "ok = FALSE",
    "ok IS NOT TRUE",
    "ok IS FALSE",
    "label = 'dog'",
    "label IN ('ant', 'cat')",
    "label LIKE 'c%'",
    "label IS NULL",
    "nothing IS NULL",
    "nothing = 1 OR n = 5",
    "tags IS NULL",
    "array_has(tags, 2)",
    "NOT array_has(tags, 0)",
    "len(tags) = 0",
    "len(tags) >= 2",
    "meta.w > 250 AND meta.h < 100",
    "meta.w IS NULL",
    "(n > 0 OR caption LIKE 'a%') AND NOT (ok OR label = 'ant')",
]


def nan_free(rows: list) -> list:
    """Rows with NaN made comparable (NaN != NaN)."""
    return [{k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()} for row in rows]


def reference_rows(fields: pa.Table, expression: str, engine: str) -> list:
    """The row numbers `expression` selects, by DuckDB or polars over the fields."""
    numbered = fields.append_column("__row", pa.array(np.arange(fields.num_rows)))
    if engine == "duckdb":
        import duckdb

        connection = duckdb.connect()
        connection.register("t", numbered)
        result = connection.execute(f'SELECT "__row" FROM t WHERE {expression} ORDER BY "__row"').fetchall()
        return [row[0] for row in result]
    import polars as pl

    frame = pl.from_arrow(numbered)
    context = pl.SQLContext(t=frame)
    out = context.execute(f"SELECT __row FROM t WHERE {expression} ORDER BY __row", eager=True)
    return out["__row"].to_list()


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_selection_is_what_duckdb_selects_over_the_fields(ds, expression):
    got = ds.select(where=expression).indices.tolist()
    assert got == reference_rows(ds.fields(), expression, "duckdb"), expression


# polars' SQL has no LIKE ... ESCAPE, len() of lists, array_has, struct access
# by dots nor LIKE on a categorical column, and its IS NOT TRUE leaves nulls
# unknown (the standard, and DuckDB, make it true there).
POLARS = [
    e
    for e in EXPRESSIONS
    if not any(word in e for word in ("ESCAPE", "len(", "meta.", "array_has", "nothing", "IS NOT TRUE", "label LIKE"))
]


@pytest.mark.parametrize("expression", POLARS)
def test_a_selection_is_what_polars_selects_over_the_fields(ds, expression):
    got = ds.select(where=expression).indices.tolist()
    assert got == reference_rows(ds.fields(), expression, "polars"), expression


def test_the_pseudo_columns_index_key_and_size(ds):
    keys = [bytes(ds.key_at(i)) for i in range(len(ds))]
    sizes = [len(ds.at(i)) for i in range(len(ds))]
    assert ds.select(where="index >= 390").indices.tolist() == list(range(390, 400))
    assert ds.select(where="key LIKE 'val/%'").indices.tolist() == [i for i, k in enumerate(keys) if k.startswith(b"val/")]
    assert ds.select(where="size > 30 AND key LIKE 'train/%'").indices.tolist() == [
        i for i in range(len(ds)) if sizes[i] > 30 and keys[i].startswith(b"train/")
    ]


def test_mistakes_are_value_errors_naming_the_field(ds):
    with pytest.raises(ValueError, match='no field "lable"'):
        ds.select(where="lable = 'cat'")
    with pytest.raises(ValueError, match='field "caption": is Utf8; it cannot be compared with the integer 3'):
        ds.create_view("bad", where="caption = 3")
    with pytest.raises(ValueError, match='field "tags"'):
        ds.select(where="tags = 1")
    with pytest.raises(ValueError, match="invalid expression"):
        ds.select(where="n = = 1")
    with pytest.raises(TypeError, match="one of them"):
        ds.select([1], where="n = 1")
    with pytest.raises(KeyError, match="no view named"):
        ds.view("bad")


def test_a_view_reads_as_a_dataset_of_its_records(ds, tmp_path):
    view = ds.create_view("dogs", where="caption LIKE '%dog%'", replace=True)
    expected = reference_rows(ds.fields(), "caption LIKE '%dog%'", "duckdb")
    assert view.name == "dogs" and view.expression == "caption LIKE '%dog%'"
    assert view.evaluated_over == len(ds) and len(view) == len(expected)
    assert view.indices.dtype == np.uint32 and not view.indices.flags.writeable
    assert [bytes(view.at(i)) for i in range(len(view))] == [bytes(ds.at(i)) for i in expected]
    assert bytes(view.at(-1)) == bytes(ds.at(expected[-1]))
    assert bytes(view.key_at(2)) == bytes(ds.key_at(expected[2]))
    with pytest.raises(IndexError):
        view.at(len(view))
    inside, outside = ds.key_at(expected[3]), ds.key_at(expected[3] + 1)
    assert bytes(view[inside]) == bytes(ds[inside]) and inside in view
    if expected[3] + 1 not in expected:
        assert outside not in view
        with pytest.raises(KeyError):
            view[outside]
    batch = view.get_batch([0, 5, -1])
    assert [bytes(v) for v in batch] == [bytes(ds.at(expected[i])) for i in (0, 5, -1)]
    assert nan_free(view.fields().to_pylist()) == nan_free(ds.fields().take(expected).to_pylist())
    assert view.sample(1) == ds.sample(expected[1])
    stats = view.stats()
    assert stats["records"] == len(expected)
    assert stats["fields"]["n"]["count"] == sum(1 for i in expected if ds.sample(i)["n"] is not None)
    assert stats == ds.select(expected).stats()
    # Pickles as the dataset and the view's name.
    copy = pickle.loads(pickle.dumps(view))
    assert copy.name == "dogs" and copy.indices.tolist() == expected
    assert {v["name"]: v["records"] for v in ds.views()}["dogs"] == len(expected)


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_read_ahead_reads_the_same_values_whatever_it_is_set_to(tmp_path, compression):
    # Small, large and empty values, over several shards, in a scattered order
    # with repeats: the read-ahead asks the kernel for pages, it never changes
    # what is read.
    rng = np.random.default_rng(5)
    values = [rng.integers(0, 256, size=int(n), dtype=np.uint8).tobytes() for n in rng.choice([0, 7, 2048, 40_000], size=120)]
    dataset = bcd.Dataset.create(tmp_path / "d", compression=compression, max_shard_size=100_000)
    dataset.extend(values)
    assert len(list((tmp_path / "d").glob("*.bin"))) > 3
    order = [int(i) for i in rng.integers(0, len(values), size=200)] + [0, 0, -1]
    expected = [values[i] for i in order]
    for read_ahead in (None, True, False):
        assert [bytes(v) for v in dataset.get_batch(order, read_ahead=read_ahead)] == expected
        buffer = bytearray()

        def allocate(n):
            buffer.extend(bytes(n))
            return buffer

        offsets = dataset.get_batch_into(order, allocate, read_ahead=read_ahead)
        assert [bytes(buffer[a:b]) for a, b in zip(offsets[:-1], offsets[1:])] == expected
    with pytest.raises(TypeError):
        dataset.get_batch(order, read_ahead="yes")
    with pytest.raises(IndexError):
        dataset.get_batch([len(values)], read_ahead=True)


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_a_batch_reads_the_same_values_on_any_number_of_threads(tmp_path, compression):
    # Batches past the size read on several threads (256 KiB stored), and
    # small ones, compressible and not, over several shards: Dataset.threads
    # (1 in a DataLoader worker) changes who decodes, never what.
    rng = np.random.default_rng(8)
    words = [b"alpha ", b"beta ", b"gamma ", b"delta "]
    values = [
        b"".join(words[int(i)] for i in rng.integers(0, 4, size=int(n)))
        if k % 2
        else rng.integers(0, 256, size=int(n) * 6, dtype=np.uint8).tobytes()
        for k, n in enumerate(rng.integers(0, 12_000, size=150))
    ]
    dataset = bcd.Dataset.create(tmp_path / "d", compression=compression, max_shard_size=1_000_000)
    dataset.extend(values)
    assert len(list((tmp_path / "d").glob("*.bin"))) > 2
    assert dataset.threads >= 1
    orders = [list(range(len(values))), [int(i) for i in rng.permutation(len(values))[:40]], [3]]
    for threads in (1, 2, 3, 8):
        dataset.threads = threads
        assert dataset.threads == threads
        for order in orders:
            assert [bytes(v) for v in dataset.get_batch(order)] == [values[i] for i in order]
            buffer = bytearray()

            def allocate(n):
                buffer.extend(bytes(n))
                return buffer

            offsets = dataset.get_batch_into(order, allocate)
            assert [bytes(buffer[a:b]) for a, b in zip(offsets[:-1], offsets[1:])] == [values[i] for i in order]
    for bad in (0, -1):
        with pytest.raises((ValueError, OverflowError)):
            dataset.threads = bad
    assert dataset.threads == 8


def _mapped_kib(directory):
    """The resident size, in KiB, of this process's mappings of the shard data
    files in `directory`."""
    inside, total = False, 0
    prefix = str(directory.resolve()) + "/"
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):
                name = line.split()[-1]
                inside = name.startswith(prefix) and name.endswith(".bin")
            elif inside and first == "Rss:":
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps")
@pytest.mark.parametrize("compression", [None, "lz4"])
def test_a_sparse_batch_is_read_without_mapping_the_shards(tmp_path, compression):
    # read_ahead=True (a small view's batches) reads each value with a
    # positional read of its shard file: the process maps none of the shards'
    # pages, which a fault would map by the large folio (and a DataLoader
    # worker would unmap again at its exit). A dense read maps them.
    rng = np.random.default_rng(11)
    values = [rng.integers(0, 256, size=3000, dtype=np.uint8).tobytes() if i % 2 else b"text %d " % i * 400 for i in range(400)]
    bcd.Dataset.create(tmp_path / "d", compression=compression, max_shard_size=200_000).extend(values)
    assert len(list((tmp_path / "d").glob("*.bin"))) > 3
    dataset = bcd.Dataset(tmp_path / "d")
    order = [int(i) for i in rng.permutation(len(values))[:64]]
    for threads in (1, 2):
        dataset.threads = threads
        buffer = bytearray()

        def allocate(n):
            buffer[:] = bytes(n)
            return buffer

        offsets = dataset.get_batch_into(order, allocate, read_ahead=True)
        assert [bytes(buffer[a:b]) for a, b in zip(offsets[:-1], offsets[1:])] == [values[i] for i in order]
        assert _mapped_kib(tmp_path / "d") == 0
    dataset.get_batch_into(order, allocate)
    assert _mapped_kib(tmp_path / "d") > 0


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_a_shard_cut_short_under_a_sparse_reader_is_an_error_naming_it(tmp_path, compression):
    # Read through a mapping, a value past the end of a file cut short would
    # be a SIGBUS; read positionally it is an error naming the shard, and the
    # values before the cut still read.
    rng = np.random.default_rng(12)
    values = [rng.integers(0, 256, size=3000, dtype=np.uint8).tobytes() for _ in range(200)]
    bcd.Dataset.create(tmp_path / "d", compression=compression, max_shard_size=200_000).extend(values)
    dataset = bcd.Dataset(tmp_path / "d")
    allocate = lambda n: bytearray(n)  # noqa: E731
    dataset.get_batch_into([0], allocate, read_ahead=True)
    shard = tmp_path / "d" / "000000.bin"
    os.truncate(shard, shard.stat().st_size // 2)
    with pytest.raises(ValueError, match="000000.bin"):
        dataset.get_batch_into([0, 40], allocate, read_ahead=True)
    buffer = bytearray()

    def into(n):
        buffer[:] = bytes(n)
        return buffer

    dataset.get_batch_into([1, 2], into, read_ahead=True)
    assert bytes(buffer) == values[1] + values[2]


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_positional_batches_equal_the_mapped_ones_over_random_index_sets(tmp_path, compression):
    # Every kind of value a positional batch reads its own way (small ones in
    # runs of neighbours, large verbatim ones straight into the buffer, large
    # compressed ones decoded), over shards, in random orders with repeats:
    # the same bytes and offsets as through the mappings, and nothing mapped;
    # get_batch(positional=True) gives the same values as bytes.
    rng = np.random.default_rng(13)

    def value(i):
        kind = i % 5
        if kind == 0:
            return b""
        if kind == 1:
            return b"text %d " % i * int(rng.integers(10, 3000))
        if kind == 2:
            return rng.integers(0, 256, size=int(rng.integers(1, 30_000)), dtype=np.uint8).tobytes()
        if kind == 3:
            return rng.integers(0, 256, size=int(rng.integers(33_000, 120_000)), dtype=np.uint8).tobytes()
        return rng.integers(0, 256, size=50_000, dtype=np.uint8).tobytes() + b"tail %d " % i * 4000

    values = [value(i) for i in range(300)]
    bcd.Dataset.create(tmp_path / "d", compression=compression, max_shard_size=1 << 20).extend(values)
    mapped = bcd.Dataset(tmp_path / "d")
    positional = bcd.Dataset(tmp_path / "d")

    def read(dataset, order, **how):
        buffer = bytearray()

        def allocate(n):
            buffer[:] = b"\xa5" * n
            return buffer

        offsets = dataset.get_batch_into(order, allocate, **how)
        return offsets.tolist(), bytes(buffer)

    orders, read_positionally = [], []
    for round in range(60):
        count = int(rng.integers(0, 80))
        if round % 3 == 0:
            start = int(rng.integers(0, len(values)))
            order = list(range(start, min(start + count, len(values))))
        else:
            order = [int(i) for i in rng.integers(0, len(values), size=count)]
        if round % 2:
            order = order[::-1]
        positional.threads = 1 + round % 2
        orders.append(order)
        read_positionally.append(read(positional, order, positional=True))
        as_bytes = positional.get_batch(order, positional=True)
        assert all(type(value) is bytes for value in as_bytes)
        assert as_bytes == [values[i] for i in order], round
    assert _mapped_kib(tmp_path / "d") == 0
    for round, (order, (offsets, data)) in enumerate(zip(orders, read_positionally)):
        assert (offsets, data) == read(mapped, order, positional=False), round
        assert [data[a:b] for a, b in zip(offsets[:-1], offsets[1:])] == [values[i] for i in order]


def test_a_view_of_under_a_sixteenth_of_the_records_reads_ahead(ds):
    # What a view asks its dataset for: the read-ahead only when it holds few
    # of the records (scattered sparsely over the files).
    class Spy:
        def __init__(self, dataset):
            self.dataset, self.calls = dataset, []

        def __len__(self):
            return len(self.dataset)

        def get_batch(self, indices, **options):
            self.calls.append(options)
            return self.dataset.get_batch(indices, **options)

        def get_batch_into(self, indices, allocate, **options):
            self.calls.append(options)
            return self.dataset.get_batch_into(indices, allocate, **options)

    n = len(ds)
    for records, read_ahead in [(n // 16 - 1, True), (n // 16 + 1, None), (n, None)]:
        spy = Spy(ds)
        view = View(spy, np.arange(records, dtype=np.uint64))
        values = view.get_batch([0, records - 1])
        assert [bytes(v) for v in values] == [bytes(ds.at(0)), bytes(ds.at(records - 1))]
        view.get_batch_into([1], lambda size: bytearray(size))
        positional = True if read_ahead else None
        assert spy.calls == [{"read_ahead": read_ahead, "positional": False}, {"read_ahead": read_ahead, "positional": positional}], records


def test_a_sparse_view_reads_positionally_however_often_it_is_read(tmp_path):
    # A sparse view's batches are read with positional reads of the shard
    # files in every pass (a persistent worker's later epochs too): nothing
    # of the shards is mapped into the process. positional=False reads
    # through the mappings.
    values = [b"%06d" % i * 500 for i in range(400)]
    bcd.Dataset.create(tmp_path / "d", compression=None, max_shard_size=200_000).extend(values)
    dataset = bcd.Dataset(tmp_path / "d")
    view = dataset.select(list(range(0, 400, 20)))
    assert len(view) == 20 and view._read_ahead
    buffer = bytearray()

    def allocate(n):
        buffer[:] = bytes(n)
        return buffer

    def read(positions, **options):
        offsets = view.get_batch_into(positions, allocate, **options)
        return [bytes(buffer[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]

    for _ in range(3):
        assert read(range(0, 12)) == [values[i] for i in range(0, 240, 20)]
        assert read(range(12, 20)) == [values[i] for i in range(240, 400, 20)]
        assert read([3, 19, 0]) == [values[60], values[380], values[0]]
    assert view.get_batch([19, 2], positional=True) == [values[380], values[40]]
    if os.path.exists("/proc/self/smaps"):
        assert _mapped_kib(tmp_path / "d") == 0
    assert read([3, 19, 0], positional=False) == [values[60], values[380], values[0]]
    if os.path.exists("/proc/self/smaps"):
        assert _mapped_kib(tmp_path / "d") > 0


def test_views_from_indices_of_any_integer_type(ds):
    for indices in [np.array([9, 1, 1, 4], dtype=np.int16), np.array([9, 4, 1], dtype=np.uint64), [4, 1, 9], pa.array([1, 4, 9])]:
        view = ds.create_view("picked", indices=indices, replace=True)
        assert view.indices.tolist() == [1, 4, 9] and view.expression is None
        assert ds.select(indices).indices.tolist() == [1, 4, 9]
    with pytest.raises(ValueError, match="negative"):
        ds.create_view("picked", indices=[3, -1], replace=True)
    with pytest.raises(IndexError, match="out of range"):
        ds.create_view("picked", indices=[len(ds)], replace=True)
    with pytest.raises(TypeError, match="integers"):
        ds.select([1.5])
    with pytest.raises(FileExistsError):
        ds.create_view("picked", indices=[1])
    with pytest.raises(ValueError, match="made from a list of indices"):
        ds.refresh_view("picked")
    ds.drop_view("picked")
    with pytest.raises(KeyError):
        ds.view("picked")


def test_a_view_after_appends_and_refresh_is_the_selection_over_everything(tmp_path):
    path = tmp_path / "grows"
    dataset = bcd.Dataset.create(path, keyed=True, max_shard_size=4096)
    dataset.extend_arrow(table(200), value_column="value", key_column="key")
    expression = "n > 0 AND caption LIKE '%dog%'"
    view = dataset.create_view("v", where=expression)
    before = view.indices.tolist()
    dataset.extend_arrow(table(150, start=200), value_column="value", key_column="key")
    reopened = bcd.Dataset(path)
    # A snapshot: the appended records are not in it until it is refreshed.
    assert reopened.view("v").indices.tolist() == before
    refreshed = reopened.refresh_view("v")
    assert refreshed.evaluated_over == 350
    assert refreshed.indices.tolist() == reference_rows(reopened.fields(), expression, "duckdb")
    assert refreshed.indices.tolist()[: len(before)] == before


def test_a_view_of_a_dataset_rewritten_underneath_is_refused(tmp_path):
    path = tmp_path / "rewritten"
    dataset = bcd.Dataset.create(path, keyed=True, max_shard_size=4096)
    dataset.extend_arrow(table(100), value_column="value", key_column="key")
    dataset.create_view("v", where="n > 0")
    kept = (path / "view.v").read_bytes()
    shutil.rmtree(path)
    other = bcd.Dataset.create(path, keyed=True, max_shard_size=4096)
    other.extend_arrow(table(100, start=1000), value_column="value", key_column="key")
    (path / "view.v").write_bytes(kept)
    with pytest.raises(ValueError, match="does not belong to this dataset"):
        bcd.Dataset(path).view("v")
    assert "does not belong" in bcd.Dataset(path).views()[0]["problem"]


def test_views_survive_a_merge_and_travel_with_a_copy(tmp_path):
    target = tmp_path / "target"
    dataset = bcd.Dataset.create(target, keyed=True, max_shard_size=4096)
    dataset.extend_arrow(table(100), value_column="value", key_column="key")
    view = dataset.create_view("v", where="ok")
    part = tmp_path / "part"
    bcd.Dataset.create(part, keyed=True, max_shard_size=4096).extend_arrow(table(50, start=100), value_column="value", key_column="key")
    bcd.merge([part], target)
    merged = bcd.Dataset(target)
    assert len(merged) == 150 and merged.view("v").indices.tolist() == view.indices.tolist()
    # `bcd export --into` carries views, remapped to the records copied.
    binary = ROOT / "target" / "debug" / "bcd"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "bcd-cli"], cwd=ROOT, check=True)
    copy = tmp_path / "copy"
    subprocess.run([str(binary), "export", str(target), "--where", "n > 0", "--into", str(copy)], check=True, capture_output=True)
    copied = bcd.Dataset(copy)
    selected = merged.select(where="n > 0").indices.tolist()
    carried = copied.view("v")
    assert [bytes(copied.key_at(i)) for i in carried.indices] == [
        bytes(merged.key_at(i)) for i in selected if i in set(view.indices.tolist())
    ]
