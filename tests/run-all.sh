#!/usr/bin/env bash
# Runs every Rust test of the workspace (unit, integration, doc) and ends with one
# line totalling them, since cargo prints a summary per test binary.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
cargo test --workspace 2>&1 | tee target/test-output.log
status=${PIPESTATUS[0]}
awk '/^test result:/ { passed += $4; failed += $6 }
     END { printf "all tests: %d passed, %d failed\n", passed, failed }' target/test-output.log
exit "$status"
