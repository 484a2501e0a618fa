# Set-up is part of every target: a fresh clone needs only `make bench` or `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 3

.PHONY: bench test data report clean

$(INSTALLED): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	$(BIN)/pip check
	touch $@

data: $(INSTALLED)
	$(BIN)/privboard data install

bench: data
	$(BIN)/privboard run --suite quick
	$(BIN)/privboard report

report: $(INSTALLED)
	$(BIN)/privboard report

test: data
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) reports/site *.egg-info
