# The routine checks. `make test` is the README's test command and what CI runs.
DEMO_DATASET ?= fixtures/reference/v0.3.0-keyed-lz4

.PHONY: test check python-env demo

# Everything: the Python reference environment, formatting, lints, every test.
test: python-env check
	cargo test --workspace

# Formatting and lints only.
check:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# A virtualenv (.venv) with pinned packages and the two reference releases.
python-env:
	bash tests/python/setup-env.sh

# The main job on data shipped in fixtures/.
demo:
	cargo build --release -q -p bcd-cli
	target/release/bcd info $(DEMO_DATASET)
	target/release/bcd verify $(DEMO_DATASET)
	target/release/bcd ls $(DEMO_DATASET) | head -n 3
	target/release/bcd get $(DEMO_DATASET) 0/train/0001.bin -o /tmp/bcd-demo-value.bin
	@echo "wrote the value of 0/train/0001.bin to /tmp/bcd-demo-value.bin ($$(wc -c < /tmp/bcd-demo-value.bin) bytes)"
