#!/usr/bin/env bash
# Creates .venv with the pinned test dependencies and the two reference releases
# of bitcask-dataset (0.2.0 and 0.3.0), each in its own directory so the tests can
# load either, then builds and installs this project's Python package (python/).
# Idempotent: re-running only installs what is missing (and rebuilds what changed).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/.venv"
python=${PYTHON:-python3}

if [ "${BCD_PYTHON_PACKAGE:-yes}" != only ]; then
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$root/tests/python/requirements.txt"
    for version in 0.2.0 0.3.0; do
        target="$venv/reference/$version"
        if [ ! -f "$target/bitcask_dataset/dataset.py" ]; then
            # The releases declare Requires-Python >= 3.14; tests/python/reference.py
            # shims the four newer idioms they use so they run on older Pythons.
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                --no-deps --ignore-requires-python --target "$target" \
                "bitcask-dataset==$version"
        fi
    done
fi

# The Python package (python/), for its tests (python/tests): built by maturin in
# the dev profile into target/ and installed into the venv in editable mode.
# BCD_PYTHON_PACKAGE=no skips it and =only does nothing else: `make test` builds it
# after the Rust tests (tests/run-all.sh). The dev build shares target/ with them;
# dependencies whose features differ from those of `cargo test --workspace` (libc,
# through the CLI's ctrlc, and what depends on it) are built once more either way.
if [ "${BCD_PYTHON_PACKAGE:-yes}" != no ]; then
    VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --quiet \
        --manifest-path "$root/python/Cargo.toml"
fi
