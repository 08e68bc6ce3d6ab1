# Every target installs what it needs: a fresh clone needs only Python 3.11+, Java 17+ and the gcloud CLI.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: help install test lint bench clean

help:
	@echo "make test   - install into $(VENV) if needed, run ruff and the whole pytest suite"
	@echo "make lint   - ruff and mypy"
	@echo "make bench  - run the benchmarks, each printing one JSON object"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the project's dependencies change.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	@for b in bench/*.py; do \
	  case $$b in */_*) continue;; esac; \
	  echo "== $$b" >&2; \
	  $(BIN)/python -m bench.$$(basename $$b .py) || exit 1; \
	done

clean:
	rm -rf $(VENV) build *.egg-info
