# Two commands on a fresh machine with only Python: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
# CPU build of PyTorch, pinned; override e.g. `make test TORCH_SPEC="torch==2.14.1"`.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: demo test install install-test install-docs docs bench lint dist dist-check clean

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

# The suite once (one torch thread), then the tests marked `numerics` (comparisons of two
# computations of the same numbers: sparse vs dense, solvers vs references, units, n_jobs)
# again with 2 torch intra-op and BLAS threads, so that no tolerance relies on one summation
# order. The marker (pyproject.toml) keeps the second pass to ~160 fast tests (~30 s on 2
# cores); `-m` replaces addopts' `not slow`, hence `and not slow`.
test: install-test
	$(BIN)/python -m pytest -x -q
	SKSPARSE_NN_TEST_THREADS=2 OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2 \
		$(BIN)/python -m pytest -x -q -m "numerics and not slow"

install-docs: $(VENV)/.torch
	$(PIP) install -q -e ".[docs]"

# The documentation site into docs/_build/html; warnings are errors. The gallery runs the
# examples (SKSPARSE_NN_DOCS_PLOT=False builds it without running them). Then every
# internal link and #anchor of the built pages must resolve (docs/check_links.py, ~1 s).
docs: install-docs
	$(BIN)/python -m sphinx -b html -W --keep-going -n docs docs/_build/html
	$(BIN)/python docs/check_links.py docs/_build/html

lint: install-test
	$(BIN)/ruff check sksparse_nn tests examples benchmarks .ci

# A wheel and an sdist into dist/ (the build backend in an isolated environment).
dist: $(BIN)/python
	rm -rf dist
	$(PIP) install -q build
	$(BIN)/python -m build -q --outdir dist .

# The distributions as a user receives them: their contents (nothing built or cached
# here), then the wheel in fresh environments with and without the export extra, the
# installed package read-only: the demo and every family fit, nothing written inside it
# (.ci/check_dist.py).
dist-check: dist
	TORCH_SPEC="$(TORCH_SPEC)" $(BIN)/python .ci/check_dist.py dist

bench: $(VENV)/.torch
	$(PIP) install -q -e ".[bench]"

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
