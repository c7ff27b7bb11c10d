# niroc: ONNX -> Niro IR -> MLIR.  `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JOBS ?= 2

.PHONY: help install test lint format bench conformance fuzz clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

install: ## create .venv and install niroc editable with its dev extras
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'

test: ## run the whole test suite (unit, property, golden lit tests)
	$(BIN)/python -m pytest -n $(JOBS) tests

lint: ## ruff check
	$(BIN)/ruff check .

format: ## ruff format
	$(BIN)/ruff format .

clean: ## remove the venv and generated files
	rm -rf $(VENV) build *.egg-info .pytest_cache testdata/generated

bench: ## benchmarks: import/lower memory and speed on generated models (slow, not in `make test`)
	@for script in tests/bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

conformance: ## every ONNX node test end to end (niroc -> iree-compile -> run -> compare); writes testdata/generated/conformance-report.md
	$(BIN)/python -m tests.conformance.run_all --jobs $(JOBS)
