# Sprig's task runner: CI calls these same targets (see .ci/run).
CARGO ?= cargo

.PHONY: test lint fmt build demo fuzz-build doc

## test: everything CI checks — formatting, lints, the whole test suite, fuzz targets build.
test: lint
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc
	$(MAKE) fuzz-build

## lint: formatting and clippy with warnings as errors.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

build:
	$(CARGO) build --workspace --release

## demo: the README's main command.
demo:
	$(CARGO) run --release -p sprig-cli -- demo

## fuzz-build: the cargo-fuzz targets compile (they run with `cargo fuzz run <target>`).
fuzz-build:
	@if [ -d fuzz ]; then $(CARGO) build --manifest-path fuzz/Cargo.toml --bins; fi

doc:
	$(CARGO) doc --workspace --no-deps
