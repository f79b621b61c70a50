"""The README's section on views, run as written: its shell commands (with the
`bcd` built for the tests) and its Python example, over a dataset with the
fields they name."""

from __future__ import annotations

import os
import re
import subprocess

import pyarrow as pa

import bcd
from helpers import ROOT

SECTION = "## Views: training on a subset without copying it"


def blocks(language: str) -> list:
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start + len(SECTION))]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def make_train(path):
    rows = 60
    labels = ["cat", "dog", "bird"]
    table = pa.table(
        {
            "key": [f"img/{i:03}.jpg".encode() for i in range(rows)],
            "image": [bytes([i]) * (100 + i) for i in range(rows)],
            "label": [labels[i % 3] for i in range(rows)],
            "label_index": [i % 10 for i in range(rows)],
            "width": [128 + 16 * (i % 20) for i in range(rows)],
            "caption": [f"a {labels[i % 3]} on grass" for i in range(rows)],
            "score": [None if i % 7 == 0 else (i % 10) / 10 for i in range(rows)],
        }
    )
    dataset = bcd.Dataset.create(path, keyed=True, max_shard_size=2048)
    dataset.extend_arrow(table, value_column="image", key_column="key")
    return dataset


def test_the_shell_examples_run(tmp_path):
    make_train(tmp_path / "train.bcd")
    binary = ROOT / "target" / "debug" / "bcd"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "bcd-cli"], cwd=ROOT, check=True)
    env = dict(os.environ, PATH=f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
    [script] = blocks("sh")
    run = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    dataset = bcd.Dataset(tmp_path / "train.bcd")
    cats = dataset.view("cats")
    assert [dataset.sample(int(i))["label"] for i in cats.indices] == ["cat"] * len(cats)
    assert all(dataset.sample(int(i))["width"] >= 256 for i in cats.indices)
    assert (tmp_path / "first-cat.jpg").read_bytes() == bytes(cats.at(0))
    assert (tmp_path / "dogs.tar").stat().st_size > 0
    assert [v["name"] for v in dataset.views()] == ["cats"]


def test_the_python_example_runs(tmp_path, monkeypatch):
    make_train(tmp_path / "train.bcd")
    monkeypatch.chdir(tmp_path)
    bcd.Dataset("train.bcd").create_view("cats", where="label = 'cat' AND width >= 256")
    [example] = blocks("python")
    scope: dict = {}
    exec(compile(example, "README.md (views)", "exec"), scope)
    ds = scope["ds"]
    assert scope["big"].indices.tolist() == ds.select(where="width >= 256").indices.tolist()
    assert scope["picked"].indices.tolist() == ds.select(where="score > 0.5").indices.tolist()
    assert scope["unsaved"].indices.tolist() == scope["picked"].indices.tolist()[:10]
