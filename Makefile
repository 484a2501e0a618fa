# Set-up is part of every target: a fresh clone needs only `make bench` or `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# GPU=1 (`make bench GPU=1`) adds TensorFlow's CUDA libraries, for an NVIDIA GPU.
COMMA := ,
GPU_EXTRA := $(if $(filter 1,$(GPU)),$(COMMA)gpu)
INSTALLED := $(VENV)/.installed$(if $(GPU_EXTRA),-gpu)
export TF_CPP_MIN_LOG_LEVEL ?= 3

.PHONY: bench test test-integration test-paper-suite data report publish browser clean

# tensorflow-privacy 0.9.0 needs Python < 3.12, and the pinned stack needs 3.11.
NO_PYTHON := no $(PYTHON) here: privboard needs Python 3.11 (tensorflow-privacy 0.9.0 \
  requires Python < 3.12); get it with pyenv (pyenv install 3.11), the deadsnakes PPA \
  (apt install python3.11-venv), conda (conda create -n py311 python=3.11) or uv \
  (uv python install 3.11), then run make PYTHON=/path/to/python3.11

# The opacus extra's PyTorch is its CPU build, pinned in constraints.txt (2.13.0+cpu), so
# pip never takes PyPI's CUDA build: it finds it on PyTorch's CPU index when that host
# resolves, else in pip's own configured wheels (or stops with an error).
TORCH_INDEX ?= $(shell getent hosts download.pytorch.org >/dev/null 2>&1 \
                 && echo --extra-index-url https://download.pytorch.org/whl/cpu)

$(INSTALLED): pyproject.toml constraints.txt
	@test -x $(BIN)/python || command -v $(PYTHON) >/dev/null || { echo '$(NO_PYTHON)' >&2; exit 2; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,ray$(GPU_EXTRA)]'
	$(BIN)/pip check
	touch $@

# The tests also submit PyTorch (Opacus) methods: only `make test` installs that extra.
OPACUS_INSTALLED := $(VENV)/.installed-opacus
$(OPACUS_INSTALLED): $(INSTALLED)
	$(BIN)/pip install --quiet -c constraints.txt $(TORCH_INDEX) -e '.[opacus]'
	$(BIN)/pip check
	touch $@

data: $(INSTALLED)
	$(BIN)/privboard data install

bench: data
	$(BIN)/privboard run --suite quick
	$(BIN)/privboard report

report: $(INSTALLED)
	$(BIN)/privboard report

# The browser test drives Debian's chromium: installed by apt when run as root, a quick
# no-op when it is there; without it the browser test is skipped, never failed.
CHROMIUM := /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	     --no-install-recommends chromium \
	  || echo "no $(CHROMIUM) (needs root and apt): the browser test will be skipped"; }

# Two pytest workers (pytest-xdist): each test module stays on one worker, so its shared
# fixtures are built once; the paper suite's tiny steps are spread (tests/conftest.py).
# `make test` leaves out the tests marked integration (pyproject.toml says which):
# `make test-integration` runs them; CI runs `make test` and `make test-paper-suite`.
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadgroup
test: data $(OPACUS_INSTALLED)
	$(PYTEST) -m 'not integration'

test-integration: data browser $(OPACUS_INSTALLED)
	$(PYTEST) -m integration

# The GPU-sized paper suite's tiny steps alone (part of test-integration): CI runs them
# beside `make test`, so no setting of that suite can break unseen.
test-paper-suite: data
	$(PYTEST) -m integration tests/test_paper_suite_settings.py

# The leaderboard as one folder for any static host (or to open from the file system): the
# archive, results/ when there is one, and the bundles of privboard submit named in BUNDLES
# (make publish BUNDLES="a.bundle b.bundle"). report refuses an existing $(SITE)/ that is
# not a site it wrote, rather than replace it.
SITE := public
RESULTS = $(strip $(wildcard results) $(BUNDLES))
publish: $(INSTALLED)
	$(BIN)/privboard report $(if $(RESULTS),--results $(RESULTS) )--out $(SITE)
	@echo "site ready for static hosting: $(CURDIR)/$(SITE)/ (open $(SITE)/index.html)"

clean:
	rm -rf $(VENV) reports/site $(SITE) *.egg-info
