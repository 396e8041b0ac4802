# Bytes to Logits — every entry point a learner, instructor or CI needs.
# `make lab` and `make test` are the two commands of the quick start; both set up what is missing first
# and do nothing twice.

PYTHON   ?= python3.11
VENV     ?= .venv
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.bytes2logits-installed
# Extra arguments for JupyterLab, e.g. make lab LAB_ARGS="--no-browser --port=8899"
LAB_ARGS ?=
# Extra arguments for pytest, e.g. make test PYTEST_ARGS="-x -k stream"
PYTEST_ARGS ?=
LAB      ?= lab01
# Jupyter refuses to run as root without this flag (CI and containers run as root).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

export PYTHONDONTWRITEBYTECODE := 1
# nbgrader runs helpers such as `alembic` by name: the venv must come first on PATH.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup assets lab test labs check grade bench clean help

help:
	@echo "make lab     set up (if needed) and start JupyterLab at the repo root"
	@echo "make test    set up (if needed) and run the whole test suite"
	@echo "make labs    regenerate solutions/ answer cells and the labs/ release"
	@echo "make check LAB=lab01   grade your copy of a lab with its hidden suite"
	@echo "make grade   run the nbgrader cycle for a class (see docs/instructor-guide.md)"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[course,test]'
	@touch $@

assets: setup
	@$(BIN)/python -m bytes2logits.assets fetch

lab: assets
	@echo "Starting JupyterLab; open the URL printed below (course/ holds the chapters, labs/ the labs)."
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" $(ROOT_FLAG) $(LAB_ARGS)

test: assets
	$(BIN)/python -m pytest $(PYTEST_ARGS)

labs: setup
	$(BIN)/python -m bytes2logits build-labs

check: setup
	$(BIN)/python -m bytes2logits check labs/$(LAB)*/$(LAB)*.ipynb

grade: setup
	$(BIN)/python -m bytes2logits grade $(GRADE_ARGS)

clean:
	rm -rf $(VENV) build src/*.egg-info
