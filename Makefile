# niroc: ONNX -> Niro IR -> MLIR.  `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JOBS ?= 2
MODE ?= none

.PHONY: help install test zoo lint format bench conformance conformance-dynamic fuzz clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

install: ## create .venv, install niroc editable with its dev extras, byte-compile its modules
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q ir frontends backends niroc

test: ## run the whole test suite (unit, property, golden lit tests); `make zoo` runs the model zoo
	$(BIN)/python -m pytest -n $(JOBS) tests --ignore=tests/backends/mlir/onnx_ops/test_model_zoo.py

zoo: ## the onnx wheel's model-zoo nets with random weights, niroc+IREE vs onnxruntime (slow: ~15 min)
	$(BIN)/python -m pytest -n $(JOBS) tests/backends/mlir/onnx_ops/test_model_zoo.py

lint: ## ruff check
	$(BIN)/ruff check .

format: ## ruff format
	$(BIN)/ruff format .

clean: ## remove the venv and generated files
	rm -rf $(VENV) build *.egg-info .pytest_cache testdata/generated

bench: ## benchmarks (slow, not in `make test`): niroc vs the floors and iree-import-onnx on generated models (report in testdata/generated/bench/report.md), then import/lower memory and verifier speed
	$(BIN)/python tests/bench/bench_models.py
	@for script in $(filter-out tests/bench/bench_models.py,$(wildcard tests/bench/bench_*.py)); do echo "== $$script"; $(BIN)/python $$script || exit 1; done

fuzz: ## long fuzzing run: mutated models and Niro text through import/parse, verify, lower (random seeds; NIROC_FUZZ_EXAMPLES, default 2000 per test)
	NIROC_FUZZ_EXAMPLES=$${NIROC_FUZZ_EXAMPLES:-2000} NIROC_FUZZ_RANDOM=1 $(BIN)/python -m pytest -n $(JOBS) -p no:cacheprovider tests/fuzz

conformance: ## every ONNX node test end to end (niroc -> iree-compile -> run -> compare); MODE=realistic|all makes input dims symbolic; writes testdata/generated/conformance-report[-MODE].md
	$(BIN)/python -m tests.conformance.run_all --jobs $(JOBS) --dynamic $(MODE)

conformance-dynamic: ## both dynamic-shape modes of `make conformance` (realistic: batch/spatial dims of the data input symbolic; all: every input dim), counts beside the static run's
	$(BIN)/python -m tests.conformance.run_all --jobs $(JOBS) --dynamic realistic
	$(BIN)/python -m tests.conformance.run_all --jobs $(JOBS) --dynamic all
