# Two commands set up everything on a fresh machine with Python 3.11 and git:
#   make repro   create .venv, install the locked project, run the whole pipeline
#   make test    create .venv if needed, run the tests
# Both also vendor Vega for offline `dvc plots show` pages (npm; skipped, saying so, without it).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
UV_VERSION := 0.13.8
VENV := .venv
BIN := $(abspath $(VENV))/bin
ROOT := $(abspath .)
comma := ,

# Telemetry off and every store at an absolute path, whatever the shell says.
export DVC_NO_ANALYTICS := 1
export DO_NOT_TRACK := true
export MLFLOW_DISABLE_TELEMETRY := true
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_HOME ?= $(ROOT)/.prefect
export MLFLOW_TRACKING_URI ?= sqlite:///$(ROOT)/mlflow.db
export NO_PROXY := 127.0.0.1,localhost$(if $(NO_PROXY),$(comma)$(NO_PROXY))
export UV_COMPILE_BYTECODE := 1
export PATH := $(BIN):$(PATH)

.PHONY: repro test test-all plan lint lock venv vega ui prefect-server serve clean merge-driver

# `dvc repro` as the pipeline flow: one Prefect API server for every stage (heldout pipeline).
repro: $(VENV)/.installed vega merge-driver
	heldout pipeline

# As root, the docker backend's tests run against a Podman engine started here (CI starts it in
# .ci/run and exports DOCKER_HOST, so this starts nothing there); elsewhere they skip, saying why.
test: $(VENV)/.installed vega merge-driver
	@if [ "$$(id -u)" = 0 ] && [ -z "$${DOCKER_HOST:-}" ] && engine=$$(scripts/container-engine.sh); then \
		eval "$$engine"; trap 'scripts/container-engine.sh stop' EXIT; fi; \
	python -m pytest -q $(PYTEST_ARGS)

# Every tier: the tests above and the slow one (the whole pipeline's long integrations, the
# simulation grids at their full replications); run it before resolving an issue.
test-all:
	$(MAKE) test PYTEST_ARGS="-m 'slow or not slow' $(PYTEST_ARGS)"

# What `make repro` would cost, before it runs: episodes per stage, the resume cache's share, the
# expected wall time at the throughput `heldout probe` measured, the test access it needs.
plan: $(VENV)/.installed
	heldout plan

# The MLflow UI on this project's store, on loopback only: http://127.0.0.1:5000
ui: $(VENV)/.installed
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow ui --backend-store-uri $(MLFLOW_TRACKING_URI) \
		--host 127.0.0.1 --port 5000 --workers 1

# Prefect's UI and API over this project's flow runs, on loopback: http://127.0.0.1:4200. It
# reads .prefect/, where every pipeline and stage run is kept, so earlier runs show too.
prefect-server: $(VENV)/.installed
	prefect server start --host 127.0.0.1 --port 4200

# The nightly deployment (params.orchestration.nightly_cron), served against that server.
serve: $(VENV)/.installed
	PREFECT_API_URL=$${PREFECT_API_URL:-http://127.0.0.1:4200/api} heldout serve

lint: $(VENV)/.installed
	ruff check heldout stages flows tests benchmarks

venv: $(VENV)/.installed vega merge-driver

# git merges the ledger's export (ledger/test_access.jsonl) with heldout's driver, which keeps
# both sides' lines in chain order; git keeps a driver's command out of the repository, so each
# clone registers its own (docs/custody.md). Outside a git clone it says so and goes on.
merge-driver: $(VENV)/.installed
	@$(BIN)/heldout ledger setup --quiet

# The lock pins every package with its hashes; `make lock` refreshes it from pyproject.toml.
# uv's own output is a line per package, so it installs quietly between two lines of ours; a
# dry run first says what is missing (nothing: no line at all).
$(VENV)/.installed: pyproject.toml requirements.lock
	@test -x $(VENV)/bin/python || { echo "heldout: creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@$(VENV)/bin/python -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "heldout needs Python 3.11: run make PYTHON=/path/to/python3.11")'
	@test -x $(VENV)/bin/uv || { echo "heldout: installing uv $(UV_VERSION) into $(VENV)"; $(VENV)/bin/python -m pip install -q uv==$(UV_VERSION); }
	@uv="$(VENV)/bin/uv pip install -q --python $(VENV)/bin/python"; \
	count=$$($(VENV)/bin/uv pip install --dry-run --python $(VENV)/bin/python --require-hashes -r requirements.lock 2>&1 \
		| sed -n 's/^Would install \([0-9]*\) package.*/\1/p'); \
	if [ -n "$$count" ]; then \
		echo "heldout: installing $$count locked packages into $(VENV) (a minute or two on a first install)..."; \
	fi; \
	start=$$(date +%s); \
	$$uv --require-hashes -r requirements.lock && $$uv --no-deps -e . || exit 1; \
	if [ -n "$$count" ]; then echo "heldout: ... done in $$(( $$(date +%s) - start )) s"; fi
	@touch $@

# Vega, Vega-Lite and Vega-Embed from the npm registry (pinned, hash-checked) inlined into DVC's
# page template, so `dvc plots show` pages render offline; nothing to do when already there.
vega: $(VENV)/.installed
	@scripts/vendor_vega.sh

lock: $(VENV)/.installed
	uv pip compile --python-version 3.11 pyproject.toml --extra dev --generate-hashes --no-header -o requirements.lock

clean:
	rm -rf $(VENV) .prefect
