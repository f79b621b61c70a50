"""bcd.torch over a dataset in object storage (moto's S3 server behind the
tests' counting proxy, as python/tests/test_remote.py runs it): a DataLoader
with two fork workers reads every sample and its stored label exactly once,
equal to the local dataset's, and the workers share one shard cache, so each
shard is downloaded once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch.utils.data

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import bcd  # noqa: E402
import bcd.torch  # noqa: E402
from helpers import ROOT  # noqa: E402
from test_remote import BUCKET, Proxy, s3  # noqa: E402,F401  (the server fixture)


def test_a_dataloader_reads_an_s3_dataset_through_one_shared_cache(s3, tmp_path):
    local_path = tmp_path / "local"
    local = bcd.Dataset.create(local_path, keyed=True, compression="lz4", max_shard_size=4096)
    local.extend({"key": b"k%04d" % i, "value": b"%04d|" % i * (3 + i % 40), "label": i % 5} for i in range(400))
    binary = ROOT / "target" / "debug" / "bcd"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "bcd-cli"], cwd=ROOT, check=True)
    uri = f"s3://{BUCKET}/torch"
    subprocess.run([str(binary), "push", str(local_path), uri], check=True, capture_output=True)
    s3.reset()

    dataset = bcd.torch.MapDataset(uri, fields=["label"], cache_dir=tmp_path / "cache")
    assert len(dataset) == 400
    sampler = bcd.torch.Sampler(dataset, shuffle=True, seed=3)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=32, sampler=sampler, num_workers=2, multiprocessing_context="fork"
    )
    seen = {}
    for values, labels in loader:
        for value, label in zip(values, labels.tolist()):
            index = int(bytes(value)[:4])
            assert index not in seen
            seen[index] = (bytes(value), label)
    assert sorted(seen) == list(range(400))
    assert all(seen[i] == (bytes(local.at(i)), i % 5) for i in range(400))
    downloads = s3.shard_downloads("torch")
    shards = len(list(local_path.glob("*.bin")))
    assert shards >= 3 and len(downloads) == shards and set(downloads.values()) == {1}, downloads
