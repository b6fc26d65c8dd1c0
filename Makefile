# Sprig's task runner: CI calls these same targets (see .ci/run).
CARGO ?= cargo

.PHONY: test tests io-backend doctests lint fmt build demo fuzz-build nostd doc examples ffi-header python-test

# The Python package: its own workspace (built by maturin), its own target directory, and a
# virtual environment under target/ for its tests.
PYTHON ?= python3
PY_MANIFEST = --manifest-path bindings/python/Cargo.toml
PY_TARGET = $(CURDIR)/target/python
PY_VENV = target/py-venv

# The no_std check of sprig-core: its own workspace, its own target directory.
NOSTD_MANIFEST = --manifest-path crates/core/nostd-check/Cargo.toml
NOSTD_CHECK = $(NOSTD_MANIFEST) --target-dir target/nostd-check

## test: everything CI checks — formatting, lints, the whole test suite (and the I/O backend
## this machine gives a database, named in the log), sprig-core without std, fuzz targets build.
## Each step's time is printed after it (CI's whole run must stay under 25 minutes).
test:
	$(call timed,lint)
	$(call timed,tests)
	$(call timed,io-backend)
	$(call timed,doctests)
	$(call timed,examples)
	$(call timed,python-test)
	$(call timed,doc)
	$(call timed,nostd)
	$(call timed,fuzz-build)

# Run the target $(1), then print how long it took.
timed = @s=$$(date +%s); $(MAKE) --no-print-directory $(1) || exit $$?; \
	echo "== make $(1): $$(( $$(date +%s) - s )) s"

## doctests: the examples in the API docs.
doctests:
	$(CARGO) test --workspace --doc

## tests: the workspace's tests, with cargo-nextest where it is installed (every test in its
## own process, so the few long single-test binaries run beside the rest instead of one after
## another), else with `cargo test`. Both build the same test profile. The examples are not
## built here (`make examples` builds and runs them; clippy checks every target).
TEST_TARGETS = --workspace --lib --bins --tests
tests:
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  echo "$(CARGO) nextest run $(TEST_TARGETS) --no-fail-fast"; \
	  $(CARGO) nextest run $(TEST_TARGETS) --no-fail-fast; \
	else \
	  echo "$(CARGO) test $(TEST_TARGETS) (cargo-nextest not installed)"; \
	  $(CARGO) test $(TEST_TARGETS); \
	fi

## io-backend: the I/O backend a new database gets on this machine, as `sprig stats` names it
## (io_uring or the reason it was refused; direct I/O or the reason), so the log says what the
## tests ran on. Runs the `sprig` binary the tests built (`cargo run -p sprig-cli` would build
## sprig again, without the features its tests turn on); builds it if it is missing.
SPRIG_TEST_BIN = $(or $(CARGO_TARGET_DIR),target)/debug/sprig
io-backend:
	@test -x $(SPRIG_TEST_BIN) || $(CARGO) build -q -p sprig-cli
	@d=$$(mktemp -d) && \
	  $(SPRIG_TEST_BIN) --db $$d/db init >/dev/null && \
	  $(SPRIG_TEST_BIN) --db $$d/db stats | grep "^I/O backend"; \
	  rc=$$?; rm -rf $$d; exit $$rc

## lint: formatting and clippy with warnings as errors.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt $(NOSTD_MANIFEST) -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy $(NOSTD_CHECK) -- -D warnings
	$(CARGO) fmt $(PY_MANIFEST) -- --check
	CARGO_TARGET_DIR=$(PY_TARGET) $(CARGO) clippy $(PY_MANIFEST) --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

build:
	$(CARGO) build --workspace --release

## demo: the README's main command.
demo:
	$(CARGO) run --release -p sprig-cli -- demo

## nostd: sprig-core builds without std. crates/core/nostd-check is a #![no_std] static
## library with its own panic handler on sprig-core without default features: any std in the
## dependency graph fails its build (duplicate lang item). Then the same build with
## sprig-core's `std` feature must fail that way, which shows the check can fail.
nostd:
	$(CARGO) build $(NOSTD_CHECK)
	@if $(CARGO) build $(NOSTD_CHECK) --features sprig-core/std >target/nostd-check/with-std.log 2>&1; then \
	  echo "nostd: the check built with std linked, so it cannot detect std"; exit 1; \
	elif grep -q "duplicate lang item" target/nostd-check/with-std.log; then \
	  echo "nostd: sprig-core builds without std (and the check fails when std is linked)"; \
	else \
	  cat target/nostd-check/with-std.log; echo "nostd: the build with std failed for another reason"; exit 1; \
	fi

## fuzz-build: the cargo-fuzz targets compile (they run with `cargo fuzz run <target>`).
fuzz-build:
	@if [ -d fuzz ]; then $(CARGO) build --manifest-path fuzz/Cargo.toml --bins; fi

## doc: the API docs build without a warning (broken links included).
doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

## examples: every example of crates/sprig/examples runs to success (each asserts what it
## shows). Built with the test profile and the whole workspace's features, so they reuse the
## sprig the tests compiled (`cargo run -p sprig --example` would build it again: ~100 s).
EXAMPLES = basic forks stateless tables snapshots_sync prometheus
EXAMPLES_DIR = $(or $(CARGO_TARGET_DIR),target)/debug/examples
examples:
	$(CARGO) build -q --profile test --workspace $(EXAMPLES:%=--example %)
	@for e in $(EXAMPLES); do \
	  echo "example $$e"; \
	  $(EXAMPLES_DIR)/$$e >target/example-$$e.log 2>&1 \
	    || { cat target/example-$$e.log; echo "example $$e failed"; exit 1; }; \
	done

## ffi-header: rewrite crates/ffi/include/sprig.h from the sources (cbindgen).
ffi-header:
	SPRIG_BLESS=1 $(CARGO) test -p sprig-ffi --test header

## python-test: build and install the Python package (`pip install ./bindings/python`, as a
## user would) into a virtual environment under target/, then run its pytest suite.
python-test:
	@test -x $(PY_VENV)/bin/python || $(PYTHON) -m venv $(PY_VENV)
	$(PY_VENV)/bin/python -m pip install -q --upgrade pip maturin pytest
	CARGO_TARGET_DIR=$(PY_TARGET) $(PY_VENV)/bin/python -m pip install -q --force-reinstall --no-deps ./bindings/python
	$(PY_VENV)/bin/python -m pytest -q bindings/python/tests
