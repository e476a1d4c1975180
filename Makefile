# MyTorch: `make book` builds the website, `make lab` opens the chapters in JupyterLab, `make test`
# runs everything, `make bench` prints the benchmark tables. Each target creates .venv and installs
# what it needs on first use.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: book lab test bench export clean-nbs check-clean nbtest pytest kernels clean

# The book environment: notebook tooling, the site builder, and mytorch itself (editable,
# with the Cython kernels compiled in place).
$(BIN)/.book-installed: pyproject.toml setup.py $(wildcard kernels/*.pyx)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "numpy>=1.26" "cython==3.3.1" "setuptools==84.2.1" wheel
	$(BIN)/pip install -q --no-build-isolation -e ".[book]"
	$(BIN)/python setup.py -q build_ext --inplace
	touch $@

# The Python side of the test environment: pytest, hypothesis, Playwright, build and torch (CPU,
# pinned: pip takes it from this machine's disk). `make lab` needs it too, for the chapters' cells
# that compare with PyTorch.
$(BIN)/.lab-installed: $(BIN)/.book-installed
	$(BIN)/pip install -q -e ".[book,test]" --no-build-isolation
	touch $@

# The test environment adds Debian's Chromium for the browser tests and Graphviz (`dot`) so that
# both of draw_graph's layouts are tested.
$(BIN)/.test-installed: $(BIN)/.lab-installed
	missing=""; command -v chromium >/dev/null || missing="chromium"; command -v dot >/dev/null || missing="$$missing graphviz"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "Missing Debian packages:$$missing. Run 'sudo apt-get install -y $$missing' (Chromium for the browser tests, Graphviz for draw_graph's dot tests)" >&2; exit 1; fi; fi
	touch $@

kernels: $(BIN)/.book-installed
	$(BIN)/python setup.py -q build_ext --inplace

export: $(BIN)/.book-installed
	$(BIN)/nbdev-export

book: $(BIN)/.book-installed
	$(BIN)/python docs/build.py

# JupyterLab on the chapters, served on localhost only (open the address it prints, token included).
# A chapter asks for the `python3` kernel: the environment's own (ipykernel's, which runs the Python
# that runs JupyterLab), preferred to any of that name in ~/.local. LAB_ARGS adds options, e.g.
# make lab LAB_ARGS="--port=8890 --no-browser".
LAB_ARGS ?=
lab: $(BIN)/.lab-installed
	JUPYTER_PREFER_ENV_PATH=1 $(BIN)/jupyter lab --notebook-dir=nbs --ServerApp.ip=localhost \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_ARGS)

# CI fails when the committed modules or notebooks are not what export/clean produce.
check-clean: $(BIN)/.book-installed
	$(BIN)/nbdev-export
	$(BIN)/nbdev-clean
	@changed=$$(git status --porcelain --untracked-files=all -- mytorch nbs); \
	if [ -n "$$changed" ]; then \
	  echo "nbdev-export / nbdev-clean changed these files; run them and commit the result:"; \
	  echo "$$changed"; git --no-pager diff --stat -- mytorch nbs; exit 1; fi

# Each chapter in a process of its own, two at a time: a chapter's exported cells attach its methods
# to the package's classes (`@patch`), as the module does, so a later chapter in the same process
# would meet the earlier chapter's notebook-defined versions. A reader's Jupyter kernel is one per chapter too.
nbtest: $(BIN)/.test-installed
	ls nbs/*.ipynb | xargs -P 2 -I{} $(BIN)/nbdev-test {} --flags torch

pytest: $(BIN)/.test-installed
	$(BIN)/python -m pytest

# One BLAS thread per process: nbdev-test already runs two notebooks at a time on two cores.
test: export OPENBLAS_NUM_THREADS := 1
test: $(BIN)/.test-installed
	$(MAKE) check-clean
	$(MAKE) nbtest
	$(MAKE) book
	@if [ -n "$$(git status --porcelain -- README.md)" ]; then \
	  echo "README.md is out of step with nbs/index.ipynb: run 'make book' and commit README.md"; exit 1; fi
	$(MAKE) pytest

bench: $(BIN)/.test-installed
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/compile.py
	$(BIN)/python benchmarks/scalar_vs_tensor.py
	$(BIN)/python benchmarks/mlp_step.py
	$(BIN)/python benchmarks/lstm.py
	$(BIN)/python benchmarks/conv.py
	$(BIN)/python benchmarks/cnn_step.py
	$(BIN)/python benchmarks/run_log.py
	$(BIN)/python benchmarks/soak.py
	$(BIN)/python benchmarks/checkpoint.py
	$(BIN)/python benchmarks/ddp.py

clean:
	rm -rf _proc _docs _site build dist *.egg-info mytorch/*.so kernels/*.c
