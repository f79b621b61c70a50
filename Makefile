# The routine checks. `make test` is the README's test command and what CI runs.
# A dataset written by the Python reference.
DEMO_DATASET ?= fixtures/reference/v0.3.0-keyed-lz4

.PHONY: test check python-env demo

# Everything: the Python test environment, formatting, lints, every test. The
# Python package (python/) is built by tests/run-all.sh after the Rust tests: a
# build error then costs no test results, and the venv is ready for the Rust
# interop tests without it.
test: check
	BCD_PYTHON_PACKAGE=no bash tests/python/setup-env.sh
	bash tests/run-all.sh

# Formatting and lints only.
check:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# A virtualenv (.venv) with pinned packages and the two reference releases.
python-env:
	bash tests/python/setup-env.sh

# The main job on data shipped in fixtures/: migrate an ImageFolder tree into a
# dataset, inspect and verify it, and export it back to tar.
DEMO_OUT ?= target/demo
demo:
	cargo build --release -q -p bcd-cli
	rm -rf $(DEMO_OUT) && mkdir -p $(DEMO_OUT)
	target/release/bcd ingest fixtures/imagefolder --into $(DEMO_OUT)/images
	target/release/bcd info $(DEMO_OUT)/images
	target/release/bcd verify $(DEMO_OUT)/images
	target/release/bcd ls $(DEMO_OUT)/images | head -n 3
	target/release/bcd export $(DEMO_OUT)/images --to $(DEMO_OUT)/images.tar
	target/release/bcd info $(DEMO_DATASET) --json
