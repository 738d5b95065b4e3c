# Thin wrappers: the real logic lives in the code. Two set-up commands on a
# fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
MINISTACK_VENV := .venv-ministack
MINISTACK_VERSION := 1.5.33
STAMP := $(VENV)/.installed
MINISTACK := $(MINISTACK_VENV)/bin/ministack
PYTEST_ARGS ?= -n auto

.PHONY: install run test lint bench chaos clean help

help: ## list targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,aws]"
	touch $(STAMP)

# ministack pins its own botocore, so it lives in its own virtual environment.
$(MINISTACK):
	test -x $(MINISTACK_VENV)/bin/python || $(PYTHON) -m venv $(MINISTACK_VENV)
	$(MINISTACK_VENV)/bin/python -m pip install --quiet ministack==$(MINISTACK_VERSION)

install: $(STAMP) ## create .venv and install the ledger with its dev extras

run: $(STAMP) ## run the ledger (API, worker, recovery) on the embedded store
	$(BIN)/ledger serve

lint: $(STAMP) ## ruff, mypy (strict on domain/ and projections/), import-linter
	$(BIN)/ruff check .
	$(BIN)/mypy domain projections
	$(BIN)/lint-imports

test: $(STAMP) $(MINISTACK) lint ## install, start what tests need, run the whole suite
	$(BIN)/pytest $(PYTEST_ARGS)

bench: $(STAMP) $(MINISTACK) ## run the benchmarks and write bench/results/
	@for script in bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean: ## remove virtual environments and local state
	rm -rf $(VENV) $(MINISTACK_VENV) var .pytest_cache .mypy_cache .ruff_cache
