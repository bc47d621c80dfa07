#!/usr/bin/env bash
# `make test-airflow-next`: the Airflow layer's tests against the next Airflow release
# (docs/airflow.md, "Supported Airflow versions"), in a virtualenv of its own beside .venv:
#   unit  the unit tests of the Airflow layer (below); no cluster.
#   e2e   the end-to-end subset that runs a deferrable operator, a trigger, a sensor, the UI
#         plugin's pages and a Task Loop on a real Airflow (api-server, scheduler, dag-processor,
#         triggerer) started from this virtualenv; needs the local cluster (the tests' fixture
#         starts one when none runs and stops it at the end, as for `make test`).
#   all   both (the default).
# Usage: scripts/test-airflow-next.sh [unit|e2e|all] [pytest arguments...]
#
# The virtualenv is made on first use and installed again only when pyproject.toml or
# AIRFLOW_NEXT changes (as the Makefile's .venv/.installed): this package's dependencies and its
# `test` extra's with the `apache-airflow` requirement replaced by AIRFLOW_NEXT, so the leg runs
# before the pin admits that release, then the package itself (editable, without dependencies:
# its entry points, the provider and the UI plugin, are the ones Airflow finds).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
AIRFLOW_NEXT=${AIRFLOW_NEXT:-apache-airflow==3.4.0b2}
VENV=${VENV_NEXT:-$ROOT/.venv-airflow-next}
PY=$VENV/bin/python
# As scripts/test.sh: bytecode written and reused by the collections and the Airflow processes.
unset PYTHONDONTWRITEBYTECODE
export PIP_DISABLE_PIP_VERSION_CHECK=1

# The unit tests of the Airflow layer: tests/unit/airflow, tests/unit/ui, and the other unit tests
# whose run imports Airflow (found by running each unit test file alone and looking for airflow in
# sys.modules afterwards; the rest, controller, Kubernetes client, chart, never import it).
UNIT=(tests/unit/airflow tests/unit/ui tests/unit/test_checkpoint.py tests/unit/test_log_limits.py)
# The end-to-end subset, each on a real Airflow started from this virtualenv (tests/support/airflow.py
# runs `<dir of sys.executable>/airflow`, and the scheduler with sys.executable):
#   a deferrable operator to success, the triggerer watching its job (T9kJobTrigger)
#   a deferred sensor ending at its target phase (T9kJobSensor and its trigger)
#   the UI plugin: the T9k Jobs page and the task's T9k Job tab in a browser (Debian's chromium)
#   a Task Loop of two iterations, two jobs (Airflow 3.4 only; skipped on 3.3)
E2E=(
  tests/integration/test_e2e_airflow.py::test_task_defers_the_triggerer_watches_and_the_task_resumes
  tests/integration/test_e2e_trigger.py::test_a_deferred_sensor_ends_when_the_job_runs
  tests/integration/test_ui.py::test_browser_jobs_page_updates_live_and_the_task_tab_shows_the_job
  tests/integration/test_e2e_loops.py
)

install() {
  local stamp=$VENV/.installed
  # Installed for this pyproject.toml and this release: nothing to do.
  if [[ -f $stamp && $stamp -nt pyproject.toml && $(cat "$stamp") == "$AIRFLOW_NEXT" ]]; then
    return
  fi
  echo "[airflow-next] installing $AIRFLOW_NEXT into $VENV"
  [[ -x $PY ]] || python3 -m venv "$VENV"
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "[airflow-next] Airflow 3.4 needs Python 3.11 or later" >&2; exit 1; }
  "$PY" -m pip install -q --upgrade pip
  local reqs=$VENV/requirements.txt
  "$PY" - "$AIRFLOW_NEXT" >"$reqs" <<'EOF'
"""This package's dependencies with the `test` extra's (expanded through its own extras), the
apache-airflow requirement replaced by the one given."""
import re
import sys
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
name, extras = project["name"], project["optional-dependencies"]
out, todo, seen = list(project["dependencies"]), ["test"], set()
while todo:
    extra = todo.pop()
    if extra in seen:
        continue
    seen.add(extra)
    for req in extras[extra]:
        own = re.fullmatch(rf"{name}\[([^\]]+)\]", req.replace(" ", ""))
        if own:
            todo.extend(own.group(1).split(","))
        else:
            out.append(req)
bare = re.compile(r"apache-airflow\s*(?=[<>=!~;\[]|$)")
out = [sys.argv[1] if bare.match(r) else r for r in out]
print("\n".join(out))
EOF
  "$PY" -m pip install -q -r "$reqs"
  "$PY" -m pip install -q --no-deps -e .
  "$PY" -m pip check || true  # told, not fatal: the package's own pin may not admit the release yet
  echo "$AIRFLOW_NEXT" >"$stamp"
}

versions() {
  "$PY" -c 'import importlib.metadata as m; print("[airflow-next]", ", ".join(f"{n} {m.version(n)}" for n in
            ("apache-airflow", "apache-airflow-task-sdk", "apache-airflow-providers-cncf-kubernetes")))'
}

unit() {  # on every core, as `make check` runs the unit tests
  local t0=$SECONDS rc=0
  versions
  "$PY" -m pytest -q -ra -p no:cacheprovider -n auto -m "not integration" "${UNIT[@]}" "$@" || rc=$?
  echo "[airflow-next] unit took $((SECONDS - t0))s (exit $rc)"
  return "$rc"
}

e2e() {
  local t0=$SECONDS rc=0
  versions
  "$PY" -m pytest -q -ra -p no:cacheprovider "${E2E[@]}" "$@" || rc=$?
  echo "[airflow-next] e2e took $((SECONDS - t0))s (exit $rc)"
  return "$rc"
}

leg=${1:-all}
case $leg in
  unit | e2e | all) shift || true ;;
  *) leg=all ;;
esac
install
case $leg in
  unit) unit "$@" ;;
  e2e) e2e "$@" ;;
  all) unit "$@" && e2e "$@" ;;
esac
