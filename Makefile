# Developer and CI entry points. Everything runs from the project venv in .venv.

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
ARGS ?=

.PHONY: venv install test test-fast check docs demo bench screenshots clean ci

venv: $(STAMP)
install: $(STAMP)

# Reinstall only when the project's dependencies may have changed.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	touch $(STAMP)

# The suite runs on two pytest-xdist workers, each with its own session servers; the
# `fault` tests form one group (tests/conftest.py), run in turn on one worker while the
# other takes the light tests. The `serial` tests (server time, measured by SLOWLOG) run
# afterwards, alone. Exit status 5 is pytest's "no test selected" (ARGS may pick a
# folder without serial tests, or with only those). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
PARALLEL = -n $(TEST_WORKERS) --dist loadgroup

test: $(STAMP)
	@a=0; b=0; \
	$(BIN)/python -m pytest $(PARALLEL) -m "not serial" $(ARGS) || a=$$?; \
	$(BIN)/python -m pytest -m serial $(ARGS) || b=$$?; \
	[ $$a -eq 0 -o $$a -eq 5 ] && [ $$b -eq 0 -o $$b -eq 5 ] && [ $$a -eq 0 -o $$b -eq 0 ]

# The daily loop: one server flavor (Valkey), without the fault, slow, browser, Cluster
# and Django 6 tests (`make test` and CI run them all). Under two minutes.
FAST = not fault and not slow and not serial and not browser and not cluster and not django6
test-fast: $(STAMP)
	DURQ_TEST_SERVERS=valkey $(BIN)/python -m pytest $(PARALLEL) -m "$(FAST)" $(ARGS)

check: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/mypy
	$(BENCH_MYPY)
	$(BIN)/python scripts/unasync.py --check
	$(BIN)/python scripts/gen_script_docs.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	$(BIN)/lint-imports --no-cache  # the import contracts in pyproject.toml
	$(BENCH_TEST)

# The documentation site (mkdocs.yml) into site/; `make check` builds it in strict mode,
# where a broken link or a public name without a docstring fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build

demo: $(STAMP)
	$(BIN)/durq demo

# Refresh docs/screenshots/ from the dashboard's browser test (needs Debian's chromium).
screenshots: $(STAMP)
	DURQ_SCREENSHOTS_DIR=docs/screenshots $(BIN)/python -m pytest tests/dashboard/test_browser.py -k screenshots

bench: $(STAMP)
	$(BIN)/python bench/run.py $(ARGS)

# The benchmark's own tests (bench/tests/: its order, ratios, report and floor), apart
# from the product suite that `make test` runs; `make check` runs them too. Seconds.
BENCH_TEST = $(BIN)/python -m pytest bench/tests -q
# bench/'s scripts, typed apart: their plain module names (cluster, flow, workflows) are
# test packages' names in the main run; peers/ is left out (each needs its peer's library).
BENCH_MYPY = MYPYPATH=bench $(BIN)/mypy --cache-dir .mypy_cache/bench bench/*.py
.PHONY: bench-test
bench-test: $(STAMP)
	$(BENCH_TEST) $(ARGS)

ci: check test

clean:
	rm -rf $(VENV) .venv-django6 site build dist .mypy_cache .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
