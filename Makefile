# Two commands on a fresh machine (Python 3.11+ with venv):
#   make run    install everything, start Hermes on 127.0.0.1:8000 with SQLite at ./var/hermes.db
#   make test   install everything (with dev tools), run lint, type checks, the dead-code check
#               and the whole test suite
#   make eval   the scenario evaluation (evals/) with hermes/local; fails below the targets
#   make fuzz   schemathesis over every operation of a live service; fails on any 5xx or mismatch
#   make load-ci  the locust profile (locustfile.py), bounded; fails on any failure or slow p95
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# The gate CI holds on the whole set (the held-out set's is 0.90, forbidden writes 0):
# hermes/local passes 178 of 178 (2026-12-01); below 0.95 fails the build.
EVAL_MIN_SUCCESS ?= 0.95

# CI's fuzz stage: its time budget (seconds, the whole schemathesis run) and cases per operation;
# about 2 minutes with start-up on 2 cores (docs/operations.md#fuzzing-the-api).
FUZZ_SECONDS ?= 100
FUZZ_EXAMPLES ?= 40

# CI's load stage: 50 customers for 60 s against one process (fake model, 300 ms per call).
# A turn entry's p95 above this fails the build; see docs/operations.md#load-test-in-ci for
# what the stage measured when the threshold was set.
LOAD_USERS ?= 50
LOAD_SECONDS ?= 60
LOAD_MAX_P95_MS ?= 2500

.PHONY: run test eval fuzz load-ci install bench bench-knowledge clean browser desk-screenshots

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	mkdir -p var
	$(BIN)/hermes serve --host 127.0.0.1 --port 8000 --db ./var/hermes.db

# The desk's browser tests drive Debian's chromium through Playwright (never its own download).
CHROMIUM ?= /usr/bin/chromium

browser:
	@test -x $(CHROMIUM) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium >/dev/null; }

test: install browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/vulture
	$(BIN)/pytest -q

# Scenarios against an in-process service with the offline model, whatever the shell sets.
eval: install
	mkdir -p var
	HERMES_MODEL=hermes/local $(BIN)/hermes eval evals --quiet --json var/eval.json \
		--min-success $(EVAL_MIN_SUCCESS)

fuzz: install
	$(BIN)/python -m bench.fuzz_api --max-time $(FUZZ_SECONDS) --max-examples $(FUZZ_EXAMPLES)

load-ci: install
	$(BIN)/python bench/load_ci.py --users $(LOAD_USERS) --duration $(LOAD_SECONDS) \
		--max-p95-ms $(LOAD_MAX_P95_MS)

bench: install
	$(BIN)/python bench/turn_overhead.py

# Knowledge search at 10,000 and 100,000 chunks on SQLite and PostgreSQL, ingestion, and a
# knowledge turn against a plain one (issue 27); KB_BENCH_ARGS=--quick for 2,000 and 10,000.
bench-knowledge: install
	$(BIN)/python bench/knowledge.py $(KB_BENCH_ARGS)

# The pictures in docs/desk.md, taken by the desk's browser tests.
desk-screenshots: install browser
	DESK_SCREENSHOTS=docs/desk $(BIN)/pytest -q tests/api/test_desk.py tests/api/test_desk_knowledge.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
