"""The smoke test of the Python package's wheel (run by tests/python/wheel-smoke.sh).

``wheel_smoke.py check WHEEL`` (in the test environment, which has auditwheel):
the wheel's file name says ``abi3`` and a ``manylinux_X_Y`` tag no older than
the glibc its extension needs (as ``auditwheel show`` reads its symbol
versions), and the wheel carries ``py.typed`` and the type stubs.

``wheel_smoke.py run FIXTURES`` (in a fresh virtualenv where only the wheel,
pyarrow and numpy are installed, from a directory outside the repository):
what a user of ``pip install bcd_python-...whl`` gets: ``import bcd`` imports
no torch, ray, pyspark, pyarrow or numpy, datasets the reference wrote read as its expected.json says, and
``bcd.ingest`` of the ImageFolder fixture makes a dataset whose values are the
files and whose ``label`` field is each file's folder, and images and WAV clips
decode in the wheel's native code.

Prints ``N passed, M failed`` last; exits non-zero on a failure.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import traceback
import zipfile
from pathlib import Path

CHECKS = []


def check(function):
    CHECKS.append(function)
    return function


def glibc(tag: str):
    """(major, minor) of a ``manylinux_X_Y_arch`` tag (or a legacy alias)."""
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
    match = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    if match:
        return int(match.group(1)), int(match.group(2))
    return legacy.get(tag.split("_")[0])


def check_wheel(wheel: Path) -> None:
    # name-version-python-abi-platform.whl; the platform part may hold several
    # tags joined by dots.
    _, _, python_tag, abi_tag, platform = wheel.stem.split("-")
    assert python_tag == "cp311" and abi_tag == "abi3", wheel.name
    claimed = [glibc(tag) for tag in platform.split(".") if tag.startswith("manylinux")]
    assert claimed and all(claimed), f"no manylinux tag: {wheel.name}"
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "auditwheel"), "show", str(wheel)],
        capture_output=True, text=True, check=True,
    ).stdout
    found = re.search(r'consistent\s+with\s+the\s+following\s+platform\s+tag:\s+"([^"]+)"', shown)
    assert found, shown
    needed = glibc(found.group(1))
    assert needed, f"auditwheel finds no manylinux policy the wheel meets:\n{shown}"
    # A tag claiming an older glibc than the symbols need would install where
    # the extension cannot load.
    assert min(claimed) >= needed, f"{wheel.name} claims {min(claimed)}, its symbols need {needed}"
    names = zipfile.ZipFile(wheel).namelist()
    for member in ["bcd/py.typed", "bcd/_bcd.pyi", "bcd/__init__.py", "bcd/torch/__init__.py"]:
        assert member in names, f"{member} missing from {wheel.name}"
    assert any(re.fullmatch(r"bcd/_bcd\.abi3\.so", n) for n in names), names
    assert not any(n.startswith(("tests/", "bcd/tests")) for n in names), names
    print(f"{wheel.name}: abi3, glibc {min(claimed)} claimed, {needed} needed")


def run(fixtures: Path) -> int:
    import bcd

    @check
    def import_bcd_imports_no_framework_and_comes_from_the_wheel():
        # The frameworks a submodule (bcd.torch, bcd.ray, bcd.spark) or a call
        # needs: none comes in with the package itself.
        imported = [m for m in ("torch", "ray", "pyspark", "pyarrow", "numpy") if m in sys.modules]
        assert not imported, imported
        location = Path(bcd.__file__).resolve()
        assert "site-packages" in location.parts, location
        package = Path(bcd.__file__).parent
        assert (package / "py.typed").is_file() and (package / "_bcd.pyi").is_file()

    @check
    def datasets_written_by_the_reference_read_as_it_wrote_them():
        expected = json.loads((fixtures / "reference" / "expected.json").read_text())
        assert len(expected) == 8
        for name, want in expected.items():
            dataset = bcd.Dataset(fixtures / "reference" / name)
            assert (dataset.keyed, dataset.compression) == (want["keyed"], want["compression"]), name
            assert len(dataset) == len(want["records"]), name
            for index, record in enumerate(want["records"]):
                if want["keyed"]:
                    key, value = (bytes.fromhex(part) for part in record)
                    assert bytes(dataset.key_at(index)) == key and bytes(dataset[key]) == value, name
                else:
                    value = bytes.fromhex(record)
                assert bytes(dataset.at(index)) == value, (name, index)
            assert [bytes(v) for v in dataset.get_batch([0, -1])] == [
                bytes(dataset.at(0)), bytes(dataset.at(len(dataset) - 1))
            ]

    @check
    def an_ingested_fixture_has_its_files_as_values_and_folders_as_labels():
        source = fixtures / "imagefolder" / "train"
        files = sorted(p for p in source.rglob("*") if p.is_file())
        with tempfile.TemporaryDirectory() as tmp:
            summary = bcd.ingest([str(source)], str(Path(tmp) / "train"), labels="folder")
            assert summary["records"] == len(files), summary
            dataset = bcd.Dataset(Path(tmp) / "train")
            table = dataset.fields(["label"])
            assert table.num_rows == len(dataset) == len(files)
            labels = table.column("label").to_pylist()
            for index in range(len(dataset)):
                key = bytes(dataset.key_at(index)).decode()
                path = source / key
                assert bytes(dataset.at(index)) == path.read_bytes(), key
                assert labels[index] == path.parent.name, (key, labels[index])

    @check
    def images_and_clips_decode_in_the_wheels_native_code():
        # libjpeg-turbo and the WAV decoder are compiled into the extension:
        # the fixture's JPEGs decode, and a WAV written by Python's wave module
        # gives its samples back scaled.
        import io
        import wave

        import numpy as np

        jpegs = sorted((fixtures / "imagefolder").rglob("*.jpg"))[:3]
        assert jpegs, fixtures
        options = bcd.ImageOptions(32, crop="center")
        images = np.zeros((len(jpegs), *options.shape), dtype=np.uint8)
        assert bcd.decode_images([p.read_bytes() for p in jpegs], images, options) == []
        assert all(image.any() for image in images)
        samples = np.array([0, 16384, -16384, 32767, -32768], dtype="<i2")
        out = io.BytesIO()
        with wave.open(out, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16_000)
            w.writeframes(samples.tobytes())
        clips = np.full((1, 1, 8), np.nan, dtype=np.float32)
        frames, failures = bcd.decode_audio([out.getvalue()], clips, bcd.AudioOptions(8, crop="start"))
        assert (frames, failures) == ([5], []), (frames, failures)
        assert clips[0, 0].tolist() == (samples / 32768).tolist() + [0.0, 0.0, 0.0]

    passed = failed = 0
    for function in CHECKS:
        try:
            function()
            passed += 1
            print(f"ok {function.__name__}")
        except Exception:
            failed += 1
            print(f"FAILED {function.__name__}")
            traceback.print_exc()
    print(f"wheel: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    mode, argument = sys.argv[1], Path(sys.argv[2])
    if mode == "check":
        check_wheel(argument)
    else:
        sys.exit(run(argument))
