# The first two commands of the README: `make demo` and `make test`.
# Both create .venv when it is missing; only python3 (3.11+) with venv is assumed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install install-dev native native-check bench clean interop

# the compiled core (native/, built by maturin into znippy_sql/_native*.so): rebuilt in release
# mode whenever a source of it changes
NATIVE_SRC := native/Cargo.toml $(wildcard native/Cargo.lock) $(shell find native/src -name '*.rs')

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@ $(VENV)/.installed

$(VENV)/.native: $(VENV)/.installed $(NATIVE_SRC)
	$(BIN)/pip install -q --no-deps -e .
	touch $@

install: $(VENV)/.native
install-dev: $(VENV)/.installed-dev $(VENV)/.native
native: $(VENV)/.native

# the crate's own tests and lints (issue 33 §1)
native-check:
	cd native && cargo fmt --check && cargo clippy --all-targets -q -- -D warnings && cargo test -q

demo: $(VENV)/.native
	$(BIN)/python -m znippy_sql.demo demo-out

# the modules whose tests run alone (marked solo: Ray's node start-up misses its timeout next
# to busy test workers); collecting only them saves the whole suite's collection (~15 s)
SOLO := $(shell grep -l 'mark.solo' tests/test_*.py)

# mypy (~50 s in a fresh clone) runs beside the solo part, which mostly waits on Ray
test: install-dev native-check
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not solo" --durations=25 $(PYTEST_ARGS)
	$(BIN)/python -m mypy > $(VENV)/mypy.out 2>&1 & pid=$$!; \
	  $(BIN)/python -m pytest -q -m solo $(SOLO) $(PYTEST_ARGS); rc=$$?; \
	  wait $$pid; typed=$$?; cat $(VENV)/mypy.out; test $$rc -eq 0 && test $$typed -eq 0

# both directions against the real Rust binaries (/opt/znippy-*/bin/znippy or $$ZNIPPY_RUST_BINS;
# docs/interop.md says how to install them), then the golden reads
interop: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_interop_real.py \
	  tests/test_interop_append_real.py tests/test_interop_iceberg.py \
	  tests/test_interop_compat09.py tests/test_interop_engines.py \
	  tests/test_interop_goldens.py $(PYTEST_ARGS)

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf demo-out bench/out .pytest_cache native/target
