# Bytes to Logits — every entry point a learner, instructor or CI needs.
# `make lab` and `make test` are the two commands of the quick start; both set up what is missing first
# and do nothing twice.

# The interpreter the venv is made from: the first of these that is a supported CPython (3.11 to 3.13,
# what the pinned dependencies support), or say PYTHON=/path/to/python. `make` stops with a clear message
# when there is none.
SUPPORTED_PYTHONS := python3.11 python3.12 python3.13 python3
ifeq ($(origin PYTHON),undefined)
PYTHON := $(firstword $(foreach p,$(SUPPORTED_PYTHONS),$(shell command -v $(p) >/dev/null 2>&1 && \
            $(p) -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null && echo $(p))))
endif
VENV     ?= .venv
# What the venv gets: the course and the test oracles (make smoke EXTRAS=course installs just the course).
EXTRAS   ?= course,test
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.bytes2logits-installed
# Extra arguments for JupyterLab, e.g. make lab LAB_ARGS="--no-browser --port=8899"
LAB_ARGS ?=
# Extra arguments for the chat, e.g. make chat CHAT_ARGS="-p 'Hello' --greedy"
CHAT_ARGS ?=
# Extra arguments for pytest, e.g. make test PYTEST_ARGS="-x -k stream"
PYTEST_ARGS ?=
# pytest-xdist workers: one per core, at most 4 (each holds its own models and notebook kernels in memory).
# Whole test files go to one worker (--dist loadfile), so a module's expensive fixture is built once.
# --no-loadscope-reorder keeps tests/conftest.py's order (the longest files first; xdist would otherwise
# sort files by their number of tests). --max-worker-restart 0: a worker that dies fails the run at once,
# naming the test it was running and how it died (tests/conftest.py); pytest-xdist 3.8 can hang for good
# after replacing a crashed worker under --dist loadfile (pytest-xdist issues 1323, 1327).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
LAB      ?= lab01
# Jupyter refuses to run as root without this flag (CI and containers run as root).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

export PYTHONDONTWRITEBYTECODE := 1
# nbgrader runs helpers such as `alembic` by name: the venv must come first on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)

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

.PHONY: setup python sandbox browser hub-proxy assets lab test lint smoke labs start check grade bench bench-class chat site clean help

help:
	@echo "make lab     set up (if needed) and start JupyterLab at the repo root"
	@echo "make test    set up (if needed), lint, and run the whole test suite"
	@echo "make lint    ruff over src, tests, tools and benchmarks"
	@echo "make smoke   install, one chapter, one lab check, one chat turn (e.g. PYTHON=python3.13 VENV=.venv-3.13)"
	@echo "make labs    (instructors) regenerate solutions/ answer cells and the labs/ release; overwrites labs/"
	@echo "             (BUILD_ARGS=\"--lab lab01 --force\": one lab; overwrite hand-edited answer cells, keeping a copy)"
	@echo "make start LAB=lab01   copy a lab to work/lab01_.../, your own copy (git pull and make labs leave it alone)"
	@echo "make check LAB=lab01   grade your copy of a lab (work/ if you started one, else labs/) with its hidden suite"
	@echo "make grade   run the nbgrader cycle for a class (JOBS=2: two worker processes; see docs/instructor-guide.md)"
	@echo "make chat    chat with SmolLM2-135M-Instruct in the terminal (CHAT_ARGS=\"-p 'Hi' --greedy\")"
	@echo "make bench   speed ratios against llama.cpp and gguf-py (installs llama-cpp-python once)"
	@echo "make bench-class   (instructors) submissions graded per minute: serial nbgrader, JOBS=2, Dask (20 min)"
	@echo "make site    build the static course site into build/site/html (executes every chapter; see docs/site.md)"

setup: $(STAMP) sandbox

# A system package the project needs, installed with apt where we can (root with apt-get, as on CI);
# elsewhere three loud warning lines. $(1): the command that shows it is there, $(2): the Debian package,
# $(3): what it is for, $(4): what happens without it, $(5): how to get it.
define system_package
	@if ! command -v $(strip $(1)) >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing $(strip $(2)) ($(strip $(3))) with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(strip $(2)) >/dev/null; \
	  else \
	    echo "WARNING: $(strip $(1)) is not installed (Debian: $(strip $(2))), and this user cannot install it here."; \
	    echo "WARNING: $(strip $(4))"; \
	    echo "WARNING: $(strip $(5))"; \
	  fi; \
	fi
endef

# Grading runs submissions in a bubblewrap sandbox (docs/instructor-guide.md); without it, say loudly that
# grading will run with reduced isolation.
sandbox:
	$(call system_package,bwrap,bubblewrap,the grading sandbox,grading (make check and make grade) will run \
	submissions with REDUCED ISOLATION.,install it with your package manager (Debian/Ubuntu: sudo apt-get \
	install bubblewrap).)

# The browser tests (JupyterLab and the course site, in make test) drive Chromium through Playwright, which
# cannot download a browser of its own here. Without one they are skipped, loudly (CI fails instead).
# B2L_CHROMIUM=/path/to/chrome names another Chromium.
browser:
	$(if $(B2L_CHROMIUM),@echo "Browser tests use B2L_CHROMIUM=$(B2L_CHROMIUM)",$(call system_package,chromium,\
	chromium fonts-noto-color-emoji,the browser tests' browser,the browser tests of JupyterLab and the course site will be SKIPPED.,\
	install it (Debian/Ubuntu: sudo apt-get install chromium) or set B2L_CHROMIUM=/path/to/chrome.))

# JupyterHub's proxy, configurable-http-proxy from npm, pinned by deploy/jupyterhub/package-lock.json: the
# classroom test (tests/test_classroom_hub.py) and a class on one machine use it. npm ci runs only when
# node_modules is missing or older than the lock. Without npm, a loud warning: the hub test is then skipped
# (CI fails instead).
HUB_DIR  := deploy/jupyterhub
HUB_LOCK := $(HUB_DIR)/node_modules/.package-lock.json
hub-proxy:
	@if [ -f $(HUB_LOCK) ] && [ ! $(HUB_DIR)/package-lock.json -nt $(HUB_LOCK) ]; then :; \
	elif command -v npm >/dev/null 2>&1; then \
	  echo "Installing JupyterHub's proxy (npm ci --prefix $(HUB_DIR))"; \
	  npm ci --prefix $(HUB_DIR) --no-audit --no-fund --loglevel=error && touch $(HUB_LOCK); \
	else \
	  echo "WARNING: npm is not installed (Debian: npm), so JupyterHub's proxy (configurable-http-proxy) cannot be installed."; \
	  echo "WARNING: the JupyterHub classroom test (tests/test_classroom_hub.py) will be SKIPPED (it fails under CI)."; \
	  echo "WARNING: install Node.js 20 or later with npm (Debian/Ubuntu: sudo apt-get install npm), then run make hub-proxy."; \
	fi

# Say which Python is used, or why none can be.
python:
	@if [ -z "$(PYTHON)" ]; then \
	  echo "ERROR: no supported Python found: this course needs CPython 3.11, 3.12 or 3.13 (looked for $(SUPPORTED_PYTHONS))."; \
	  echo "ERROR: install one (Debian/Ubuntu: sudo apt-get install python3 python3-venv), or run make PYTHON=/path/to/python3.x"; \
	  exit 1; \
	fi

$(STAMP): pyproject.toml | python
	@test -x $(BIN)/python || { echo "Creating $(VENV) with $(PYTHON) ($$($(PYTHON) -c 'import sys; print(sys.version.split()[0])'))"; \
	  $(PYTHON) -m venv $(VENV) || { echo "ERROR: '$(PYTHON) -m venv' failed; on Debian/Ubuntu install the venv module: sudo apt-get install python3-venv"; exit 1; }; }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[$(EXTRAS)]'
	@touch $@

assets: setup
	@$(BIN)/python -m bytes2logits.assets fetch

lab: assets
	@echo "Starting JupyterLab; open the URL printed below (course/ holds the chapters, labs/ the labs)."
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" $(ROOT_FLAG) $(LAB_ARGS)

test: assets lint browser hub-proxy
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --max-worker-restart 0 \
	  $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check src tests tools benchmarks

# A quick proof that another Python works: install the course, run one chapter, check one lab, chat once.
smoke: assets
	$(BIN)/python tools/smoke.py

labs: setup
	$(BIN)/python -m bytes2logits build-labs $(BUILD_ARGS)

# A learner's own copy of a lab, in the git-ignored work/ folder (git pull and make labs never touch it).
start: setup
	$(BIN)/python -m bytes2logits start $(LAB)

# Grades work/<lab>/ when make start made it, else the release in labs/ (LAB=lab01 or lab01_tokenizers).
check: assets
	$(BIN)/python -m bytes2logits check --lab $(LAB) $(CHECK_ARGS)

# make grade JOBS=2 grades in two worker processes; BUDGET=600 gives each submission 600 s in all (grading and
# feedback run); GRADE_ARGS="--dask tcp://host:8786" on a Dask cluster, "--db postgresql://..." into a
# PostgreSQL gradebook (docs/instructor-guide.md).
grade: assets
	$(BIN)/python -m bytes2logits grade $(if $(JOBS),--jobs $(JOBS)) $(if $(BUDGET),--budget $(BUDGET)) $(GRADE_ARGS)

chat: assets
	$(BIN)/python -m bytes2logits chat $(CHAT_ARGS)

$(BENCH_STAMP): $(STAMP) Makefile
	@echo "Installing the benchmark's yardsticks: $(LLAMA_CPP_PYTHON) (compiled once, about 10 minutes) and tiktoken"
	CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
	  $(BIN)/python -m pip install --disable-pip-version-check "$(LLAMA_CPP_PYTHON)" "tiktoken==0.14.0"
	@touch $@

bench: assets $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py

# A class of STUDENTS lab 01 submissions graded four ways (serial nbgrader, one worker, JOBS workers, a local
# Dask cluster of JOBS workers): submissions per minute and the ratios to serial nbgrader. About 20 minutes.
STUDENTS ?= 60
bench-class: assets
	$(BIN)/python benchmarks/bench_class_grading.py --students $(STUDENTS) --jobs $(or $(JOBS),2)

# The static course site: every chapter executed, rendered by Sphinx + myst-nb into build/site/html.
site: assets
	$(BIN)/python -m bytes2logits site $(SITE_ARGS)

clean:
	rm -rf $(VENV) .venv-3.* build src/*.egg-info
