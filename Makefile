# Two commands on a fresh machine (Python 3.11+ with venv):
#   make run    install everything, start Hermes on 127.0.0.1:8000 with SQLite at ./var/hermes.db
#   make test   install everything (with dev tools), run lint, type checks and the whole test suite
#   make eval   the scenario evaluation (evals/) with hermes/local; fails below the targets
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# The gate CI holds on the whole set (the held-out set's is 0.90, forbidden writes 0):
# hermes/local passes 178 of 178 (2026-12-01); below 0.95 fails the build.
EVAL_MIN_SUCCESS ?= 0.95

.PHONY: run test eval install bench clean browser desk-screenshots

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
	$(BIN)/pytest -q

# Scenarios against an in-process service with the offline model, whatever the shell sets.
eval: install
	mkdir -p var
	HERMES_MODEL=hermes/local $(BIN)/hermes eval evals --quiet --json var/eval.json \
		--min-success $(EVAL_MIN_SUCCESS)

bench: install
	$(BIN)/python bench/turn_overhead.py

# The pictures in docs/desk.md, taken by the desk's browser tests.
desk-screenshots: install browser
	DESK_SCREENSHOTS=docs/desk $(BIN)/pytest -q tests/api/test_desk.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
