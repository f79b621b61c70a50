#!/usr/bin/env bash
# Creates .venv with the pinned test dependencies and the two reference releases
# of bitcask-dataset (0.2.0 and 0.3.0), each in its own directory so the tests can
# load either. Idempotent: re-running only installs what is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/.venv"
python=${PYTHON:-python3}

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
