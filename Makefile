# Thin wrappers: the real logic lives in the code. Two set-up commands on a
# fresh machine: `make run` and `make test`.
PYTHON ?= python3
# VENV and PYTHON may be given on the command line: `.ci/run` runs the fast
# suite on other interpreters as `make test-fast VENV=.venv-py3.12 PYTHON=...`.
VENV ?= .venv
BIN := $(VENV)/bin
MINISTACK_VENV := .venv-ministack
MINISTACK_VERSION := 1.5.33
# Two stamps: `make run` needs the runtime dependencies only (RUN_STAMP);
# the test, lint and bench targets add the dev and aws extras (DEV_STAMP).
RUN_STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# The Python client (clients/python) is a distribution of its own; the dev
# install adds it, editable, so its tests and the type checker see it.
PY_CLIENT := $(wildcard clients/python/pyproject.toml)
# The emulator and the HTTP server the tests serve it with (uvicorn's httptools
# parser costs about a third less CPU per request than ministack's own hypercorn).
MINISTACK_SERVER := uvicorn==0.55.0 httptools==0.9.0
MINISTACK := $(MINISTACK_VENV)/.installed-$(MINISTACK_VERSION)-uvicorn
# The peer bench/bench_peer.py measures beside the ledger, in an environment of
# its own so that it never enters the ledger's dependencies.
DBOS_VENV := .venv-dbos
DBOS_VERSION := 3.4.0
DBOS_STAMP := $(DBOS_VENV)/.installed-$(DBOS_VERSION)
# One and a half test workers per CPU: with one per CPU a fifth of the CPU time
# went unused while tests waited on the servers and workers they start (the
# whole suite on 2 CPUs: 733 s with 2 workers, 623 s with 3, same machine).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n + n / 2 )))
PYTEST_ARGS ?= -n $(TEST_WORKERS) --durations=25
comma := ,

.PHONY: $(DBOS_VENV) install-peer install install-run run test test-fast test-typescript typescript-types test-containers emulator-image e2e-aws lint bench chaos clean help

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# A virtual environment is installed whole or not at all. When venv or pip fails
# (a missing wheel, no network, a full disk) or the install is interrupted, the
# environment is removed and no stamp is written, so the next make starts afresh
# instead of trusting half an install. A venv cannot be built elsewhere and moved
# into place: its scripts name their interpreter by absolute path. A venv with
# no stamp at all is such a leftover (of an older Makefile, or a kill -9), so it
# is made anew too.
#   $(1): pip's arguments (what it installs); $(2): the stamps written once it has;
#   $(3): what it is.
define install_venv
	@echo "installing the ledger with $(3) into $(VENV) ($(PYTHON))"
	@removed() { rm -rf $(VENV); echo "make: installing $(3) into $(VENV) failed; $(VENV) was removed, so the next make starts afresh" >&2; exit 1; }; \
	trap removed INT TERM HUP; \
	if [ ! -f $(RUN_STAMP) ]; then rm -rf $(VENV); fi; \
	{ test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); } \
	  && $(BIN)/python -m pip install --quiet --upgrade pip \
	  && $(BIN)/python -m pip install --quiet $(1) \
	  || removed; \
	touch $(2)
endef

$(RUN_STAMP): pyproject.toml
	$(call install_venv,-e .,$(RUN_STAMP),its runtime dependencies)

$(DEV_STAMP): pyproject.toml $(PY_CLIENT)
	$(call install_venv,-e ".[dev$(comma)aws]" $(if $(PY_CLIENT),-e "./clients/python[openai-agents$(comma)langgraph]"),$(RUN_STAMP) $(DEV_STAMP),the dev and aws extras)

# ministack pins its own botocore, so it lives in its own virtual environment.
$(MINISTACK):
	if [ -L $(MINISTACK_VENV) ] && [ ! -e $(MINISTACK_VENV)/bin/python ]; then rm $(MINISTACK_VENV); fi
	test -x $(MINISTACK_VENV)/bin/python || $(PYTHON) -m venv $(MINISTACK_VENV)
	$(MINISTACK_VENV)/bin/python -m pip install --quiet ministack==$(MINISTACK_VERSION) $(MINISTACK_SERVER)
	touch $@

# DBOS Transact for bench/bench_peer.py, whole or not at all (as install_venv):
# a failed or interrupted install removes the environment and writes no stamp;
# another version's environment is made anew.
$(DBOS_STAMP):
	@echo "installing DBOS Transact $(DBOS_VERSION) into $(DBOS_VENV) ($(PYTHON)), the benchmark's peer"
	@removed() { rm -rf $(DBOS_VENV); echo "make: installing DBOS Transact into $(DBOS_VENV) failed; $(DBOS_VENV) was removed, so the next make starts afresh" >&2; exit 1; }; \
	trap removed INT TERM HUP; \
	rm -rf $(DBOS_VENV); \
	$(PYTHON) -m venv $(DBOS_VENV) \
	  && $(DBOS_VENV)/bin/python -m pip install --quiet --upgrade pip \
	  && $(DBOS_VENV)/bin/python -m pip install --quiet dbos==$(DBOS_VERSION) \
	  || removed; \
	touch $@

$(DBOS_VENV): $(DBOS_STAMP)
install-peer: $(DBOS_STAMP) ## create .venv-dbos with DBOS Transact, the peer bench/bench_peer.py measures (make bench does)

install: $(DEV_STAMP) ## create .venv and install the ledger with its dev and aws extras (what tests and lint need)

install-run: $(RUN_STAMP) ## create .venv and install the ledger with its runtime dependencies only

PORT ?= 8000
run: $(RUN_STAMP) ## run the ledger (API, worker, recovery) on the embedded store (PORT=8000)
	$(BIN)/ledger serve --port $(PORT)

lint: $(DEV_STAMP) ## ruff (lint and format), mypy (strict on domain/, projections/, adapters/, api/, channels/ and the Python client), import-linter
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy domain projections adapters api channels clients/python/src/ledger_client
	$(BIN)/lint-imports

# The project's modules compiled once before a run: with PYTHONDONTWRITEBYTECODE
# set, every process the tests start (servers, CLI commands, workers) would
# otherwise compile them again, about 0.15 s of CPU each.
COMPILE := $(BIN)/python -m compileall -q -j 0 domain projections adapters api channels tests bench examples clients/python >/dev/null

test: $(DEV_STAMP) $(MINISTACK) lint test-typescript ## install, start what tests need, run the whole suite
	$(COMPILE)
	$(BIN)/pytest $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory test-containers CONTAINERS_OPTIONAL=1

# The TypeScript client (clients/typescript): its npm dependencies from the
# committed package-lock.json, then its checks. Its types are generated from
# the server's OpenAPI document; a stale src/openapi.ts fails the check
# (`make typescript-types` regenerates it). Its tests start a `ledger serve`.
TS := clients/typescript
TS_STAMP := $(TS)/node_modules/.installed
NODE_CHECK := node -e 'const [major] = process.versions.node.split("."); if (+major < 20) { console.error("make: the TypeScript client needs Node.js 20 or newer; this is " + process.version); process.exit(1); }'

$(TS_STAMP): $(TS)/package.json $(TS)/package-lock.json
	@command -v npm >/dev/null || { echo "make: npm is not installed: the TypeScript client needs Node.js 20+ and npm" >&2; exit 1; }
	@$(NODE_CHECK)
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

typescript-types: $(DEV_STAMP) $(TS_STAMP) ## regenerate the TypeScript client's types (clients/typescript/src/openapi.ts) from the server's OpenAPI
	$(BIN)/python $(TS)/scripts/dump_openapi.py $(TS)/build/openapi.json
	cd $(TS) && npm run --silent generate

test-typescript: $(DEV_STAMP) $(TS_STAMP) ## the TypeScript client: types not stale, tsc build, its node --test suite against ledger serve
	$(BIN)/python $(TS)/scripts/dump_openapi.py $(TS)/build/openapi.json
	cd $(TS) && npm run --silent check-types && npm run --silent build
	cd $(TS) && LEDGER_BIN="$(abspath $(BIN))/ledger" npm test --silent

# The DynamoDB-marked tests a second time, on the emulator in a container
# (testcontainers), when a Docker engine answers and has the image; otherwise
# one line says why they were skipped. Then no emulator container may be left.
# The socket check first keeps a machine without Docker from paying for the probe.
EMULATOR_PROBE := $(BIN)/python -m tests.support.emulator_container
test-containers: $(DEV_STAMP) ## the DynamoDB suite on the emulator in a container (needs Docker)
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
e2e-aws: $(DEV_STAMP) $(MINISTACK) ## deploy the SAM stack into the emulator and drive it end to end
	$(BIN)/python -m tests.support.aws_stack

test-fast: $(DEV_STAMP) $(MINISTACK) ## the inner loop: every test not marked slow, in parallel
	$(COMPILE)
	$(BIN)/pytest -n $(TEST_WORKERS) -m "not slow"

# Arguments of one script in the same loop: bench_application also records the
# profile that says where a lifecycle's time goes.
bench: $(DEV_STAMP) $(MINISTACK) $(DBOS_STAMP) ## run the benchmarks and write bench/results/
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

chaos: $(DEV_STAMP) $(MINISTACK) ## randomized schedules checking I1-I9 (SEED=<n> replays one)
ifdef SEED
	PYTHONHASHSEED=0 $(BIN)/python -m tests.chaos --seed $(SEED) --store $(or $(STORE),mixed) --trace
else
	PYTHONHASHSEED=0 $(BIN)/python -m tests.chaos --schedules $(CHAOS_SCHEDULES) --jobs $(CHAOS_JOBS)
	PYTHONHASHSEED=0 $(BIN)/python -m tests.chaos --store dynamodb --schedules $(CHAOS_DYNAMODB)
	$(BIN)/python -m tests.hardening.load --proposals $(LOAD_PROPOSALS)
endif

clean: ## remove the virtual environments (the other Pythons' too) and local state
	rm -rf $(VENV) .venv-py3.* $(MINISTACK_VENV) $(DBOS_VENV) var .pytest_cache .mypy_cache .ruff_cache \
	  $(TS)/node_modules $(TS)/build $(TS)/dist
