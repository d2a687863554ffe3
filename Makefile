# tileforge: `make serve` and `make test` are the two set-up commands.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv serve test lint bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,client]'
	touch $(STAMP)

venv: $(STAMP)

serve: $(STAMP)
	$(BIN)/tileforge serve --with-worker

lint: $(STAMP)
	$(BIN)/ruff check compiler server worker migrations tests scripts tileforge
	$(BIN)/lint-imports

test: $(STAMP)
	$(BIN)/ruff check compiler server worker migrations tests scripts tileforge
	$(BIN)/lint-imports
	bash tests/run.sh

bench: $(STAMP)
	$(BIN)/python -m compiler.bench.report --out docs/BENCHMARKS.md

clean:
	rm -rf $(VENV) build *.egg-info
