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

.PHONY: install run test test-fast test-containers emulator-image e2e-aws lint bench chaos clean help

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,aws]"
	touch $(STAMP)

# ministack pins its own botocore, so it lives in its own virtual environment.
$(MINISTACK):
	if [ -L $(MINISTACK_VENV) ] && [ ! -e $(MINISTACK_VENV)/bin/python ]; then rm $(MINISTACK_VENV); fi
	test -x $(MINISTACK_VENV)/bin/python || $(PYTHON) -m venv $(MINISTACK_VENV)
	$(MINISTACK_VENV)/bin/python -m pip install --quiet ministack==$(MINISTACK_VERSION)

install: $(STAMP) ## create .venv and install the ledger with its dev extras

run: $(STAMP) ## run the ledger (API, worker, recovery) on the embedded store
	$(BIN)/ledger serve

lint: $(STAMP) ## ruff (lint and format), mypy (strict on domain/, projections/, adapters/ and api/), import-linter
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy domain projections adapters api
	$(BIN)/lint-imports

test: $(STAMP) $(MINISTACK) lint ## install, start what tests need, run the whole suite
	$(BIN)/pytest $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory test-containers CONTAINERS_OPTIONAL=1

# The DynamoDB-marked tests a second time, on the emulator in a container
# (testcontainers), when a Docker engine answers and has the image; otherwise
# one line says why they were skipped. Then no emulator container may be left.
# The socket check first keeps a machine without Docker from paying for the probe.
EMULATOR_PROBE := $(BIN)/python -m tests.support.emulator_container
test-containers: $(STAMP) ## the DynamoDB suite on the emulator in a container (needs Docker)
	@if [ -z "$$DOCKER_HOST" ] && [ ! -S /var/run/docker.sock ]; then \
	  echo "SKIPPED: the DynamoDB suite on containers: no Docker engine (no DOCKER_HOST, no /var/run/docker.sock)"; \
	  [ -n "$(CONTAINERS_OPTIONAL)" ]; exit $$?; \
	fi; \
	if ! image=$$($(EMULATOR_PROBE) probe 2>&1); then \
	  echo "SKIPPED: the DynamoDB suite on containers: $$image"; \
	  [ -n "$(CONTAINERS_OPTIONAL)" ]; exit $$?; \
	fi; \
	echo "== the DynamoDB suite on containers ($$image)"; \
	status=0; started=$$(date +%s); \
	LEDGER_TEST_DYNAMODB=container LEDGER_TEST_DYNAMODB_ENDPOINT= \
	  $(BIN)/pytest $(PYTEST_ARGS) -m dynamodb || status=$$?; \
	$(EMULATOR_PROBE) leftovers || status=1; \
	echo "the DynamoDB suite on containers took $$(( $$(date +%s) - started )) s"; \
	exit $$status

emulator-image: ## build the emulator's image locally (root, Docker; no image registry)
	MINISTACK_VERSION=$(MINISTACK_VERSION) PYTHON=$(PYTHON) tests/support/build_emulator_image.sh

# The SAM stack packaged (wheels for this machine), translated, deployed into
# ministack with CloudFormation and driven end to end: the HTTP API, the stream,
# the worker with the http executor, the projector, the recovery schedule, the
# audit checkpoint. Needs the package registry for the functions' wheels.
# See docs/aws-emulator.md.
e2e-aws: $(STAMP) $(MINISTACK) ## deploy the SAM stack into the emulator and drive it end to end
	$(BIN)/python -m tests.support.aws_stack

test-fast: $(STAMP) $(MINISTACK) ## the inner loop: every test not marked slow, in parallel
	$(BIN)/pytest -n auto -m "not slow"

# Arguments of one script in the same loop: bench_application also records the
# profile that says where a lifecycle's time goes.
bench: $(STAMP) $(MINISTACK) ## run the benchmarks and write bench/results/
	@for script in bench/bench_*.py; do \
	  case $$script in bench/bench_application.py) args=--profile;; *) args=;; esac; \
	  echo "== $$script $$args"; $(BIN)/python $$script $$args || exit 1; \
	done

# `make chaos`: >= 10,000 randomized schedules on memory + SQLite (one in four), then
# CHAOS_DYNAMODB schedules and the LOAD_PROPOSALS x 25 approvals load run on ministack.
# `make chaos SEED=<n> [STORE=dynamodb]` replays one schedule.
CHAOS_SCHEDULES ?= 10000
CHAOS_DYNAMODB ?= 50
LOAD_PROPOSALS ?= 100
CHAOS_JOBS ?= $(shell nproc 2>/dev/null || echo 2)

chaos: $(STAMP) $(MINISTACK) ## randomized schedules checking I1-I9 (SEED=<n> replays one)
ifdef SEED
	PYTHONHASHSEED=0 $(BIN)/python -m tests.chaos --seed $(SEED) --store $(or $(STORE),mixed) --trace
else
	PYTHONHASHSEED=0 $(BIN)/python -m tests.chaos --schedules $(CHAOS_SCHEDULES) --jobs $(CHAOS_JOBS)
	PYTHONHASHSEED=0 $(BIN)/python -m tests.chaos --store dynamodb --schedules $(CHAOS_DYNAMODB)
	$(BIN)/python -m tests.hardening.load --proposals $(LOAD_PROPOSALS)
endif

clean: ## remove virtual environments and local state
	rm -rf $(VENV) $(MINISTACK_VENV) var .pytest_cache .mypy_cache .ruff_cache
