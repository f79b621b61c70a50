#!/usr/bin/env bash
# The Python package's wheel as a user gets it. Builds it (or takes the one given
# as $1), checks its tags and contents (tests/python/wheel_smoke.py check, with the
# test environment's auditwheel), installs it into a fresh virtualenv with the
# pinned pyarrow and numpy of tests/python/requirements.txt, and runs
# tests/python/wheel_smoke.py there from a directory outside the repository, so
# that `import bcd` can only find the installed package.
#
# `make test` runs it with a wheel built in the dev profile (WHEEL_PROFILE=dev),
# which reuses what the Rust tests and the package's own build compiled; `make
# wheel` builds the release wheel users install. The checks are the same.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
out="$root/target/wheel-smoke"
mkdir -p "$out"
if [ $# -ge 1 ]; then
    wheel=$1
else
    rm -f "$out"/*.whl
    VIRTUAL_ENV="$root/.venv" PATH="$root/.venv/bin:$PATH" "$root/.venv/bin/maturin" build --quiet \
        --profile "${WHEEL_PROFILE:-dev}" --manifest-path "$root/python/Cargo.toml" --out "$out"
    wheel=$(ls "$out"/*.whl)
fi
"$root/.venv/bin/python" "$root/tests/python/wheel_smoke.py" check "$wheel"
venv="$out/venv"
rm -rf "$venv"
"$python" -m venv "$venv"
pins=$(grep -E '^(pyarrow|numpy)==' "$root/tests/python/requirements.txt")
# shellcheck disable=SC2086
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel" $pins
outside=$(mktemp -d)
trap 'rm -rf "$outside"' EXIT
cd "$outside"
"$venv/bin/python" "$root/tests/python/wheel_smoke.py" run "$root/fixtures"
