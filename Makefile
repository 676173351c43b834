# Every target sets itself up: a fresh clone needs only `make demo` or `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench soak clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/af-otel demo

# `make test` first installs the Debian packages its tests need (.ci/system-deps: as root, else it
# stops at once with the command to run), says so when this run builds the side venvs
# (tests/sidevenv.py), and runs the suite on two pytest-xdist workers, each test file whole on
# one worker so module and session fixtures are built once (`make test PYTEST_ARGS=`: one process).
PYTEST_ARGS ?= -n 2 --dist loadfile

test:
	@.ci/system-deps test
	@$(MAKE) --no-print-directory -s $(STAMP)
	@$(BIN)/python -m tests.sidevenv
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check af_otel tests benchmarks
	$(BIN)/ruff format --check af_otel tests benchmarks
	$(BIN)/mypy

# Every script runs and prints its figures; the target fails after them if any target failed.
# reader_instructions counts the reader's instructions under Valgrind (5 to 7 minutes):
# .ci/system-deps installs valgrind as root, else prints the command, and that line fails.
# audit reads days of 10k, 100k and 1M spans in chDB (docs/audit.md, Speed): its first run also
# records their 111,000 LLM calls, kept in the tests' cache folder for the next runs.
bench: $(STAMP)
	@status=0; .ci/system-deps bench || status=1; \
	for script in canonical mint processor reader wire reader_instructions audit; do \
		$(BIN)/python benchmarks/$$script.py || status=1; \
	done; exit $$status

# Long runs (load, memory over 10,000 runs, pathological input); prints measured figures.
soak: $(STAMP)
	$(BIN)/python benchmarks/soak.py
	$(BIN)/python benchmarks/audit.py --scales 1000000,10000000

# Side venvs and Hypothesis caches of the tests live outside the repository (tests/sidevenv.py).
TEST_CACHE ?= $(or $(AF_OTEL_TEST_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/af-otel-tests)

clean:
	rm -rf $(VENV) af-otel-demo .af_otel report.html .hypothesis .venv-openllmetry-* "$(TEST_CACHE)"
