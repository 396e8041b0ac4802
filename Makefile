# Bytes to Logits — every entry point a learner, instructor or CI needs.
# `make lab` and `make test` are the two commands of the quick start; both set up what is missing first
# and do nothing twice.

PYTHON   ?= python3.11
VENV     ?= .venv
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.bytes2logits-installed
# Extra arguments for JupyterLab, e.g. make lab LAB_ARGS="--no-browser --port=8899"
LAB_ARGS ?=
# Extra arguments for the chat, e.g. make chat CHAT_ARGS="-p 'Hello' --greedy"
CHAT_ARGS ?=
# Extra arguments for pytest, e.g. make test PYTEST_ARGS="-x -k stream"
PYTEST_ARGS ?=
LAB      ?= lab01
# Jupyter refuses to run as root without this flag (CI and containers run as root).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

export PYTHONDONTWRITEBYTECODE := 1
# nbgrader runs helpers such as `alembic` by name: the venv must come first on PATH.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# llama.cpp, the yardstick of `make bench`, is compiled from source by pip (about 10 minutes, once). A
# plain build enables every instruction set the compiler can target, including Intel AMX, which some
# hypervisors forbid (SIGILL on the first evaluation): list the CPU features explicitly, from /proc/cpuinfo.
LLAMA_CPP_PYTHON := llama-cpp-python==0.3.36
cpu_has = $(if $(shell grep -m1 -ow $(1) /proc/cpuinfo 2>/dev/null),ON,OFF)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=$(call cpu_has,avx) -DGGML_AVX2=$(call cpu_has,avx2) \
  -DGGML_FMA=$(call cpu_has,fma) -DGGML_F16C=$(call cpu_has,f16c) -DGGML_BMI2=$(call cpu_has,bmi2) \
  -DGGML_AVX512=$(call cpu_has,avx512f) -DGGML_AVX512_VBMI=$(call cpu_has,avx512vbmi) \
  -DGGML_AVX512_VNNI=$(call cpu_has,avx512_vnni) -DGGML_AVX512_BF16=$(call cpu_has,avx512_bf16) \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
BENCH_STAMP := $(VENV)/.bytes2logits-bench-installed

.PHONY: setup sandbox assets lab test labs check grade bench chat clean help

help:
	@echo "make lab     set up (if needed) and start JupyterLab at the repo root"
	@echo "make test    set up (if needed) and run the whole test suite"
	@echo "make labs    regenerate solutions/ answer cells and the labs/ release"
	@echo "make check LAB=lab01   grade your copy of a lab with its hidden suite"
	@echo "make grade   run the nbgrader cycle for a class (see docs/instructor-guide.md)"
	@echo "make chat    chat with SmolLM2-135M-Instruct in the terminal (CHAT_ARGS=\"-p 'Hi' --greedy\")"
	@echo "make bench   speed ratios against llama.cpp and gguf-py (installs llama-cpp-python once)"

setup: $(STAMP) sandbox

# Grading runs submissions in a bubblewrap sandbox (docs/instructor-guide.md). Install it where we can (root
# with apt, as on CI); elsewhere say loudly that grading will run with reduced isolation.
sandbox:
	@if ! command -v bwrap >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing bubblewrap (the grading sandbox) with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else \
	    echo "WARNING: bubblewrap (bwrap) is not installed, and this user cannot install it here."; \
	    echo "WARNING: grading (make check, make grade) will run submissions with REDUCED ISOLATION."; \
	    echo "WARNING: install it with your package manager (Debian/Ubuntu: sudo apt-get install bubblewrap)."; \
	  fi; \
	fi

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

chat: assets
	$(BIN)/python -m bytes2logits chat $(CHAT_ARGS)

$(BENCH_STAMP): $(STAMP) Makefile
	@echo "Installing the benchmark's yardsticks: $(LLAMA_CPP_PYTHON) (compiled once, about 10 minutes) and tiktoken"
	CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
	  $(BIN)/python -m pip install --disable-pip-version-check "$(LLAMA_CPP_PYTHON)" "tiktoken==0.14.0"
	@touch $@

bench: assets $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) build src/*.egg-info
