# niroc: ONNX -> Niro IR -> MLIR.  `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JOBS ?= 2
CONSTRAINTS := constraints.txt
LATEST := .venv-latest
TORCHVISION := .venv-tv
DETECTION := testdata/generated/detection
MODE ?= none

.PHONY: help install test test-latest zoo llm hf detection lint format bench bench-run bench-compile-growth conformance conformance-dynamic fuzz clean mlir-snapshot

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

install: ## create .venv, install niroc editable with its dev and llm extras at the tested versions (constraints.txt), byte-compile its modules
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e '.[dev,llm]'
	$(BIN)/python -m compileall -q ir frontends backends niroc

test: ## run the whole test suite (unit, property, golden lit tests); `make zoo` runs the model zoo, `make llm` the LLM builder models, `make hf` the Hugging Face exports
	$(BIN)/python -m pytest -n $(JOBS) tests --ignore=tests/backends/mlir/onnx_ops/test_model_zoo.py --ignore=tests/backends/mlir/test_real_models_zoo.py --ignore=tests/backends/mlir/onnx_ops/test_llm_builder.py --ignore=tests/backends/mlir/test_detection_models.py --ignore=tests/backends/mlir/test_hf_models.py

llm: ## transformers models vs onnxruntime: the genai builder's tiny Llama, Qwen2, Phi-3, Gemma, Mistral, Gemma 2 (fp32, int4, Llama fp16: prompt, decode, greedy generation), optimizer-fused BERT (and int8), GPT-2, BART and ViT (~2 min)
	$(BIN)/python -m pytest -n $(JOBS) tests/backends/mlir/onnx_ops/test_llm_builder.py

hf: ## Hugging Face architectures (58 tiny random-weight configs: BERT family, GPT/Llama-style decoders, T5, CLIP, ViTs, ConvNeXt, Swin, SegFormer, wav2vec2...) exported by TorchScript and by dynamo (testdata/hf/generate.py, into testdata/generated/hf), niroc+IREE vs onnxruntime at two sizes (~8 min)
	$(BIN)/python -m pytest -n $(JOBS) tests/backends/mlir/test_hf_models.py

test-latest: ## `make test` against the newest releases of every dependency (no pins), in .venv-latest
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/pip install --quiet --upgrade pip
	$(LATEST)/bin/pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev,llm]'
	$(LATEST)/bin/niroc --version
	$(MAKE) test VENV=$(LATEST)

zoo: ## the onnx wheel's model-zoo nets with random weights and whole generated real-model forms (YOLOv8n), niroc+IREE vs onnxruntime (slow: ~18 min)
	$(BIN)/python -m pytest -n $(JOBS) tests/backends/mlir/onnx_ops/test_model_zoo.py tests/backends/mlir/test_real_models_zoo.py

detection: ## torchvision's detection models (Faster R-CNN, Mask R-CNN, Keypoint R-CNN, RetinaNet, SSDlite; random weights, 3x320x320), niroc+IREE vs onnxruntime; exports them with torch 2.14.1 + torchvision 0.29.1 in .venv-tv (slow: 1-3 min of iree-compile per model on 2 shared cores, about 20 min in all with the exports and runs; report, a row per model, in testdata/generated/detection/report.md)
	test -x $(TORCHVISION)/bin/python || $(PYTHON) -m venv $(TORCHVISION)
	$(TORCHVISION)/bin/pip install --quiet torch==2.14.1 torchvision==0.29.1 onnx==1.23.2 onnxscript==0.7.2
	$(TORCHVISION)/bin/python testdata/detection/export.py $(DETECTION)
	rm -f $(DETECTION)/report.md
	$(BIN)/python -m pytest -n 1 tests/backends/mlir/test_detection_models.py

bench-run: ## run-time benchmark (slow, not in `make test`): niroc's compiled code vs iree-import-onnx's and onnxruntime (report in testdata/generated/bench/run-report.md and docs/performance.md); ARGS="--only resnet50_17 --runs 5"
	$(BIN)/python tests/bench/bench_run.py $(ARGS)

bench-compile-growth: ## compile CPU time (niroc + iree-compile) of the bench-run models now vs the revision before the run-time speed work (budget +20%; docs/compile-growth.md); ARGS="--only lstm gru" or "--base REV"
	$(BIN)/python tests/bench/bench_compile_growth.py $(ARGS)

lint: ## ruff check, and mypy on the typed packages (ir/, frontends/onnx/, backends/mlir/); CI runs it before the tests
	$(BIN)/ruff check .
	@mkdir -p build/mypy/niro && ln -sfn ../../../ir build/mypy/niro/ir && ln -sfn ../../../frontends build/mypy/niro/frontends
	$(BIN)/mypy

format: ## ruff format
	$(BIN)/ruff format .

mlir-snapshot: ## hash the MLIR of every node test and test model into SNAPSHOT (default testdata/generated/mlir-snapshot.json); compare two with `python -m tests.tools.mlir_snapshot compare A B`
	$(BIN)/python -m tests.tools.mlir_snapshot write $${SNAPSHOT:-testdata/generated/mlir-snapshot.json} --jobs $(JOBS)

clean: ## remove the venv and generated files
	rm -rf $(VENV) $(LATEST) $(TORCHVISION) build *.egg-info .pytest_cache testdata/generated

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
