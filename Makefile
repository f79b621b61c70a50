# The routine checks. `make test` is the README's test command and what CI runs.
# A dataset written by the Python reference.
DEMO_DATASET ?= fixtures/reference/v0.3.0-keyed-lz4

.PHONY: test test-torch check strace nasm python-env wheel demo soak soak-model

# Everything: the Python test environment, formatting, lints, every test. The
# Python package (python/) is built by tests/run-all.sh after the Rust tests: a
# build error then costs no test results, and the venv is ready for the Rust
# interop tests without it.
test: nasm check strace
	BCD_PYTHON_PACKAGE=no bash tests/python/setup-env.sh
	bash tests/run-all.sh

# The PyTorch tests (python/tests_torch: DataLoader with fork and spawn workers,
# several simulated ranks, resuming in a new process, torchdata's
# StatefulDataLoader). Installs the pinned torch of
# tests/python/requirements-torch.txt into .venv first (about 4 GB with its CUDA
# libraries, once); `make test` never needs torch.
test-torch: nasm
	BCD_PYTHON_PACKAGE=no bash tests/python/setup-env.sh
	.venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/python/requirements-torch.txt
	BCD_PYTHON_PACKAGE=only bash tests/python/setup-env.sh
	.venv/bin/python -m pytest python/tests_torch -q -p no:cacheprovider

# The fault-injection tests (cli/tests/fault_injection.rs) run bcd under strace:
# installed with apt-get when missing and running as root (as CI does), else
# named as missing (they fail without it unless BCD_TEST_NO_STRACE=1).
strace:
	@command -v strace >/dev/null 2>&1 || { \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	        apt-get install -y -qq strace >/dev/null 2>&1 || \
	            { apt-get update -qq && apt-get install -y -qq strace; }; \
	    else \
	        echo "strace is missing: install it, or set BCD_TEST_NO_STRACE=1 to skip the fault-injection tests" >&2; \
	    fi; }

# The image decoder (images/: libjpeg-turbo's, through mozjpeg-sys) is built
# with its SIMD code, which needs the nasm assembler: installed with apt-get when
# missing and running as root (as CI does). Without it the build still works but
# decodes JPEGs several times slower (mozjpeg-sys says so in a cargo warning).
nasm:
	@command -v nasm >/dev/null 2>&1 || { \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	        apt-get install -y -qq nasm >/dev/null 2>&1 || \
	            { apt-get update -qq && apt-get install -y -qq nasm; }; \
	    else \
	        echo "nasm is missing: install it, or JPEG decoding (bcd.ImageOptions) runs without SIMD" >&2; \
	    fi; }

# Formatting and lints only.
check:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# A virtualenv (.venv) with pinned packages and the two reference releases.
python-env:
	bash tests/python/setup-env.sh

# The Python package as one wheel for CPython >= 3.11 (abi3) on Linux, a release
# build tagged with the oldest manylinux its glibc symbols allow:
# target/wheels/bcd_python-VERSION-cp311-abi3-manylinux_X_Y_ARCH.whl, to `pip
# install` anywhere. Needs only cargo and a python3: maturin (the version
# python/pyproject.toml pins) goes into target/maturin-venv. `make test` builds
# the same wheel in the dev profile, reusing what its other steps compiled, and
# checks its tags and contents and runs it in a fresh virtualenv
# (tests/python/wheel-smoke.sh); `bash tests/python/wheel-smoke.sh WHEEL` does
# that for this one (after `make python-env`).
MATURIN_PIN := $(shell sed -n 's/^requires = \["\(maturin==[^"]*\)"\]/\1/p' python/pyproject.toml)
wheel:
	@test -x target/maturin-venv/bin/maturin || { python3 -m venv target/maturin-venv && \
	    target/maturin-venv/bin/python -m pip install --quiet --disable-pip-version-check "$(MATURIN_PIN)"; }
	rm -f target/wheels/bcd_python-*.whl
	target/maturin-venv/bin/maturin build --release --manifest-path python/Cargo.toml --out target/wheels
	@ls target/wheels/bcd_python-*.whl

# The main job on data shipped in fixtures/, as a user runs it: migrate the
# ImageFolder splits into datasets with their class labels, inspect and verify
# them (the class counts come from the statistics kept at write time), and
# export the training split back to WebDataset samples (each image with its
# `label` and `label_index` members) and to Parquet.
DEMO_OUT ?= target/demo
demo:
	cargo build --release -q -p bcd-cli
	rm -rf $(DEMO_OUT) && mkdir -p $(DEMO_OUT)
	target/release/bcd ingest fixtures/imagefolder/train --into $(DEMO_OUT)/train --labels folder
	target/release/bcd ingest fixtures/imagefolder/val --into $(DEMO_OUT)/val --labels folder
	target/release/bcd info $(DEMO_OUT)/train
	target/release/bcd stats $(DEMO_OUT)/train
	target/release/bcd verify $(DEMO_OUT)/train
	target/release/bcd ls $(DEMO_OUT)/train --fields | head -n 3
	target/release/bcd export $(DEMO_OUT)/train --to $(DEMO_OUT)/train.tar --samples
	tar -tf $(DEMO_OUT)/train.tar | head -n 4
	target/release/bcd export $(DEMO_OUT)/train --to $(DEMO_OUT)/train.parquet
	target/release/bcd info $(DEMO_DATASET) --json

# The property tests with a fresh random seed and many more cases than `make
# test` runs (which fixes the seed in .cargo/config.toml, so a commit passes or
# fails the same way every time). The seed is printed first; a failure is also
# kept by proptest in the test's .proptest-regressions file, to be committed.
# SOAK_CASES: cases per sampler property (epochs, mixtures, elastic resumes);
# SOAK_STORE_CASES: per property of the
# store and the fields codec (each case builds and damages datasets on disk).
SOAK_CASES ?= 100000
SOAK_STORE_CASES ?= 5000
soak:
	@seed=$${SOAK_SEED:-$$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}; \
	echo "soak seed: $$seed (SOAK_SEED=$$seed make soak repeats it)"; \
	PROPTEST_RNG_SEED=$$seed PROPTEST_CASES=$(SOAK_CASES) \
	    cargo test --release -p bcd-sampling --test epochs --test mixtures && \
	PROPTEST_RNG_SEED=$$seed PROPTEST_CASES=$(SOAK_STORE_CASES) \
	    cargo test --release -p bcd-fields --test properties && \
	PROPTEST_RNG_SEED=$$seed PROPTEST_CASES=$(SOAK_STORE_CASES) \
	    cargo test --release -p bcd --test corrupt_input --test hostile_index_file --test index_file

# The model-based test of the whole toolkit (cli/tests/model.rs: ingests with
# labels, appends, merges, export --into, push and pull through a local S3
# server, gc, killed ingests) with a fresh random seed, SOAK_MODEL_CASES cases.
SOAK_MODEL_CASES ?= 300
soak-model: strace
	BCD_PYTHON_PACKAGE=no bash tests/python/setup-env.sh
	@seed=$${SOAK_SEED:-$$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}; \
	echo "soak seed: $$seed (SOAK_SEED=$$seed make soak-model repeats it)"; \
	PROPTEST_RNG_SEED=$$seed PROPTEST_CASES=$(SOAK_MODEL_CASES) \
	    cargo test --release -p bcd-cli --test model -- --nocapture
