# hetray developer entry points. The README's two set-up commands are `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.hetray-installed

export RAY_USAGE_STATS_ENABLED := 0

.PHONY: install demo test test-deploy test-cluster test-main lint clean

# Create the venv when missing and install hetray editable with the dev extras.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --quiet pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The main job on an embedded local Ray.
demo: $(STAMP)
	$(VENV)/bin/hetray demo

# Lint, then three pytest runs: tests that start and stop Ray processes with the CLI (`ray stop` and
# `ray down` end every Ray process of the user, so they run alone), multi-node
# cluster_utils tests, then the main suite with one shared local Ray and the doctests.
test: $(STAMP) lint test-deploy test-cluster test-main

test-deploy: $(STAMP)
	bash tests/deploy/install_deps.sh
	$(PY) -m pytest tests/deploy -m deploy

test-cluster: $(STAMP)
	$(PY) -m pytest tests/cluster -m cluster

test-main: $(STAMP)
	$(PY) -m pytest tests hetray --doctest-modules -m "not deploy and not cluster"

lint: $(STAMP)
	$(VENV)/bin/ruff check hetray actors examples tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
