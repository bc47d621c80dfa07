# The two commands of the README: `make demo` and `make test`.
VENV := .venv
PIP := $(VENV)/bin/pip

.PHONY: setup demo test unit chaos cluster-up cluster-down

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	scripts/demo.sh

test: setup
	$(VENV)/bin/pytest -q -ra

unit: setup
	$(VENV)/bin/pytest -q -ra -m "not integration"

chaos: setup
	$(VENV)/bin/pytest -q -ra -s -m chaos

cluster-up:
	scripts/local-cluster.sh up

cluster-down:
	scripts/local-cluster.sh down
