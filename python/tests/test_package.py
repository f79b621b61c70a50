"""The package as users see it: its names, its type stub, its docstrings, and the
example of its module docstring."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import bcd
import bcd._bcd

PACKAGE = Path(bcd.__file__).parent
STUB = PACKAGE / "_bcd.pyi"


def stub_names() -> tuple[set[str], set[str]]:
    """The module-level names and the Dataset members the stub declares."""
    tree = ast.parse(STUB.read_text())
    module, members = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            module.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            module.add(node.target.id)
        if isinstance(node, ast.ClassDef) and node.name == "Dataset":
            members = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
    return module, members


def test_the_stub_declares_exactly_what_the_module_has():
    module, members = stub_names()
    runtime = {name for name in dir(bcd._bcd) if not name.startswith("_")} | {"__version__"}
    assert runtime <= module
    defined = {name for name, _ in inspect.getmembers(bcd.Dataset) if name in bcd.Dataset.__dict__}
    defined -= {"__doc__", "__module__", "__dict__", "__weakref__"}
    assert defined <= members, defined - members
    assert members <= defined, members - defined


def test_the_package_is_typed_and_exports_its_api():
    assert (PACKAGE / "py.typed").exists()
    assert set(bcd.__all__) == {
        "DEFAULT_MAX_SHARD_SIZE",
        "AudioOptions",
        "Dataset",
        "ImageOptions",
        "View",
        "__version__",
        "decode_audio",
        "decode_images",
        "gc",
        "ingest",
        "merge",
        "partition",
        "partition_mix",
    }
    assert bcd.DEFAULT_MAX_SHARD_SIZE == 1 << 30
    assert bcd.Dataset.__module__ == "bcd"  # so pickles name bcd.Dataset


def test_everything_public_has_a_docstring():
    assert bcd.__doc__ and bcd.ingest.__doc__ and bcd.Dataset.__doc__
    assert bcd.merge.__doc__ and bcd.gc.__doc__ and bcd.Dataset.extend_arrow.__doc__
    assert bcd.partition.__doc__ and bcd.sampling.__doc__ and bcd.sampling.EpochSampler.__doc__
    assert bcd.partition_mix.__doc__ and bcd.mixture.__doc__ and bcd.mixture.MixEpochSampler.__doc__
    for name in ("create", "extend", "at", "key_at", "get_batch", "get_batch_into", "get_images_into", "get_audio_into", "refresh", "path", "keyed", "compression", "max_shard_size"):
        assert getattr(bcd.Dataset, name).__doc__, name
    assert bcd.decode_images.__doc__ and bcd.ImageOptions.__doc__ and bcd.ImageOptions.crop_box.__doc__
    assert bcd.decode_audio.__doc__ and bcd.AudioOptions.__doc__


def test_the_module_docstring_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths = []
    for name in ("cat.jpg", "dog.jpg", "owl.jpg", "fox.jpg", "bee.jpg"):
        (tmp_path / name).write_bytes(name.encode() * 3)
        paths.append(tmp_path / name)
    lines = bcd.__doc__.split("::", 1)[1].splitlines()[1:]
    block = []
    for line in lines:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    code = "\n".join(block)
    namespace = {"paths": paths}
    exec(compile(code, "bcd.__doc__", "exec"), namespace)
    dataset = namespace["ds"]
    assert bytes(dataset[b"cat.jpg"]) == b"cat.jpg" * 3
    assert len(dataset) == 5
