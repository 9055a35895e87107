# Two commands on a fresh machine with only Python: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
# CPU build of PyTorch, pinned; override e.g. `make test TORCH_SPEC="torch==2.14.1"`.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: demo test install install-test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.torch: $(BIN)/python
	$(PIP) install -q "$(TORCH_SPEC)"
	touch $@

install: $(VENV)/.torch
	$(PIP) install -q -e .

install-test: $(VENV)/.torch
	$(PIP) install -q -e ".[test]"

demo: install
	$(BIN)/python examples/demo.py

test: install-test
	$(BIN)/python -m pytest -x -q

lint: install-test
	$(BIN)/ruff check sksparse_nn tests examples benchmarks

bench: $(VENV)/.torch
	$(PIP) install -q -e ".[bench]"

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
