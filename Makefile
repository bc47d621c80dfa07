# The commands of the README: `make demo`, `make check` (before every `make test`) and `make test`.
VENV := .venv
PIP := $(VENV)/bin/pip
# The unit tests' collection reuses its compiled (and assertion-rewritten) modules (scripts/test.sh).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo demo-real check lint test unit real chaos cluster-up cluster-down deploy-local undeploy-local chart

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	REAL=$(REAL) scripts/demo.sh

# The retraining pipeline with a real 2-replica DDP training on the local cluster's real node.
demo-real: setup
	REAL=1 scripts/demo.sh

# The inner loop, no cluster: format, lint, types, then the unit tests on every core (docs/testing.md).
check: lint
	$(VENV)/bin/pytest -q -ra -n auto -m "not integration"

lint: setup
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/python scripts/gen_chart_values.py --check  # the chart's values.schema.json and docs table are values.yaml's

# Every tier on one local cluster: the parallel group on WORKERS pytest-xdist workers, then the
# serial group (scripts/test.sh; docs/testing.md, "Parallel workers").
WORKERS ?= 3
test: setup
	T9K_TEST_WORKERS=$(WORKERS) scripts/test.sh

unit: setup
	$(VENV)/bin/pytest -q -ra -m "not integration"

real: setup
	$(VENV)/bin/pytest -q -ra -m real

chaos: setup
	$(VENV)/bin/pytest -q -ra -s -m chaos

cluster-up:
	scripts/local-cluster.sh up

cluster-down:
	scripts/local-cluster.sh down

# The Helm chart on the local cluster (docs/install.md): the controller's image built and imported
# into the real node, release airflow-t9k in airflow-t9k-system, two pods on the real node.
deploy-local: setup
	scripts/deploy-local.sh up

undeploy-local:
	scripts/deploy-local.sh down

# After changing the chart or the CRDs: regenerate the chart's CRD templates and deploy/*.yaml.
chart: setup
	$(VENV)/bin/python scripts/gen_chart.py

# A release's artifacts in dist/ from the committed HEAD: sdist, wheel, the chart (.tgz), the controller's
# and Airflow's images (OCI archives) with their SBOMs, SHA256SUMS (scripts/dist.sh; docs/development.md,
# "Releases"). IMAGES=0 leaves the images out (they need root); ALLOW_DIRTY=1 builds HEAD past uncommitted changes.
.PHONY: dist
IMAGES ?= 1
IMAGE_REPO ?= ghcr.io/airflow-t9k/airflow-t9k
dist: setup
	IMAGES=$(IMAGES) IMAGE_REPO=$(IMAGE_REPO) ALLOW_DIRTY=$(ALLOW_DIRTY) scripts/dist.sh

# The Airflow layer against the next Airflow (3.4.0b2): its unit tests, then the end-to-end subset
# (deferrable operator, trigger, sensor, the UI plugin, a Task Loop) on the local cluster, from a
# virtualenv of its own, .venv-airflow-next, made on first use (scripts/test-airflow-next.sh;
# docs/airflow.md, "Supported Airflow versions"). LEG=unit or LEG=e2e runs one of them.
.PHONY: test-airflow-next
LEG ?= all
test-airflow-next:
	scripts/test-airflow-next.sh $(LEG)
