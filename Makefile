# Two entry points for a fresh machine:
#   make run    installs into .venv and runs the main job: the default detector beside ROCKAD's
#               recipe on BasicMotions, then the quick study
#   make test   installs into .venv (with the test extra) and runs lint + the whole test suite
# and, on a machine with a CUDA GPU (its CUDA torch installed first):
#   make gpu-check   the tests marked gpu, CUDA Gram timings and exactness, the detector on
#                    CUDA; writes docs/gpu_check.json (without a GPU: one line, exit 0)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_CPU ?= torch==2.13.0

.PHONY: run test install install-test lint bench gpu-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Install the CPU build of torch first when the environment has none, so that the plain
# `torch` requirement never pulls a multi-GB CUDA build. GPU users install their torch first.
$(VENV)/.torch: $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_CPU)" \
	  || $(BIN)/python -m pip install -q "$(TORCH_CPU)" --index-url https://download.pytorch.org/whl/cpu
	touch $@

install: $(VENV)/.torch
	$(BIN)/python -m pip install -q -e .

install-test: $(VENV)/.torch
	$(BIN)/python -m pip install -q -e ".[test]"

run: install
	$(BIN)/python -m experiments.showcase
	$(BIN)/python -m experiments run --preset quick --store results/quick.sqlite --report results/quick_report

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: install-test lint
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile --durations=20

bench: install-test
	$(BIN)/python benchmarks/bench_gram.py

gpu-check: install-test
	$(BIN)/python benchmarks/gpu_check.py --out docs/gpu_check.json

clean:
	rm -rf $(VENV) build *.egg-info
