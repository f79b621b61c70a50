#!/usr/bin/env bash
# Runs every Rust test of the workspace (unit, integration, doc), then builds the
# Python package and runs its tests (python/tests, pytest), then builds its wheel
# (in the dev profile, reusing what was compiled) and runs the wheel's smoke test
# in a fresh virtualenv (tests/python/wheel-smoke.sh), and ends with one line
# totalling them all, since cargo prints a summary per test binary. Exits non-zero
# if any test failed or the package or its wheel did not build.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
cargo test --workspace --no-fail-fast 2>&1 | tee target/test-output.log
cargo_status=${PIPESTATUS[0]}

# The package is built here, after the Rust tests (see tests/python/setup-env.sh).
BCD_PYTHON_PACKAGE=only bash tests/python/setup-env.sh 2>&1 | tee target/python-build.log
build_status=${PIPESTATUS[0]}
if [ "$build_status" -eq 0 ]; then
    .venv/bin/python -m pytest python/tests -q -p no:cacheprovider 2>&1 \
        | tee target/pytest-output.log
    pytest_status=${PIPESTATUS[0]}
else
    echo "building the Python package failed; its tests did not run" | tee target/pytest-output.log
    pytest_status=1
fi

# The wheel users install, as they install it.
if [ "$build_status" -eq 0 ]; then
    WHEEL_PROFILE=dev bash tests/python/wheel-smoke.sh 2>&1 | tee target/wheel-output.log
    wheel_status=${PIPESTATUS[0]}
else
    echo "building the Python package failed; the wheel was not tested" | tee target/wheel-output.log
    wheel_status=1
fi

# cargo: one "test result: ok. N passed; M failed; ..." line per test binary.
# pytest: one closing line, "N failed, M passed, K errors in 1.23s" (each part
# optional); errors (in fixtures, collection) count as failures, and so does a
# package that did not build. The wheel: "wheel: N passed, M failed", or one
# failure if it failed before its checks ran (its build, its tags).
awk -v build_failed=$((build_status != 0)) -v wheel_failed=$((wheel_status != 0)) '
    FILENAME ~ /test-output/ && /^test result:/ { passed += $4; failed += $6 }
    FILENAME ~ /pytest-output/ && / in [0-9.]+s( \([0-9:]+\))?( =+)?$/ { closing = $0 }
    FILENAME ~ /wheel-output/ && /^wheel: [0-9]+ passed, [0-9]+ failed$/ { wheel_passed = $2; wheel_failures = $4 }
    END {
        n = split(closing, words, /[ ,=]+/)
        for (i = 2; i <= n; i++) {
            if (words[i] == "passed") passed += words[i - 1]
            if (words[i] ~ /^(failed|error|errors)$/) failed += words[i - 1]
        }
        passed += wheel_passed
        failed += (wheel_failures > 0 ? wheel_failures : wheel_failed)
        printf "all tests: %d passed, %d failed\n", passed, failed + build_failed
    }
' target/test-output.log target/pytest-output.log target/wheel-output.log
[ "$cargo_status" -eq 0 ] && [ "$pytest_status" -eq 0 ] && [ "$wheel_status" -eq 0 ]
