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

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check af_otel tests benchmarks
	$(BIN)/ruff format --check af_otel tests benchmarks
	$(BIN)/mypy

# Every script runs and prints its figures; the target fails after them if any target failed.
bench: $(STAMP)
	@status=0; for script in canonical mint processor reader wire; do \
		$(BIN)/python benchmarks/$$script.py || status=1; \
	done; exit $$status

# Long runs (load, memory over 10,000 runs, pathological input); prints measured figures.
soak: $(STAMP)
	$(BIN)/python benchmarks/soak.py

# Side venvs and Hypothesis caches of the tests live outside the repository (tests/sidevenv.py).
TEST_CACHE ?= $(or $(AF_OTEL_TEST_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/af-otel-tests)

clean:
	rm -rf $(VENV) af-otel-demo .af_otel report.html .hypothesis .venv-openllmetry-* "$(TEST_CACHE)"
