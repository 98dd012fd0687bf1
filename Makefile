# gambit-explorer: `make lab` (JupyterLab on the tutorials) and `make test` (everything CI runs).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Jupyter refuses to run as root unless told; containers often are root.
LAB_ARGS ?= $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
PYTEST_ARGS ?=
NBVAL = $(PY) -m pytest --nbval notebooks/ --nbval-current-env --nbval-sanitize-with notebooks/nbval-sanitize.cfg -p no:xdist

.PHONY: lab test fuzz bench lint system-deps clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# Debian packages the tools need: graphviz's `dot` for rendering graphs.
system-deps:
	@command -v dot >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q graphviz; }

lab: $(STAMP) system-deps
	$(VENV)/bin/jupyter lab $(LAB_ARGS) notebooks/

# Everything CI runs: lint, the front-end bundle check and unit tests, then pytest (unit,
# golden, property, fuzz at normal scale, real-browser tests) and the tutorials under nbval.
test: $(STAMP) system-deps
	scripts/ensure-ui-deps.sh
	$(VENV)/bin/ruff check explorer tests bench
	cd extension && npm run --silent check && npm run --silent typecheck && npm test --silent
	$(PY) -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS) tests
	$(NBVAL)

# The fuzz tests at full scale; the differential fuzz (tests/corpora/fuzz_programs.py) as one
# process, 10,000 programs, ending with its summary line (programs, mismatches by backend,
# crashes, RSS), then the same 10,000 over f64 and i64 under jax.enable_x64(True).
fuzz: $(STAMP)
	GAMBIT_FUZZ=full $(PY) -m pytest -n 2 -m fuzz --ignore=tests/test_differential.py tests
	GAMBIT_FUZZ=full $(PY) -m tests.corpora.fuzz_programs 10000
	GAMBIT_FUZZ=full $(PY) -m tests.corpora.fuzz_programs 10000 0 --x64

bench: $(STAMP)
	for f in bench/*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
