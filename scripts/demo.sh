#!/usr/bin/env bash
# The README's first command (`make demo`): bring the local cluster up, install the CRDs,
# start the bundled controller, run the retraining DAG with `airflow dags test`, print the
# training job's phase transitions as they happen and the result, then shut it all down.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=.venv/bin/python
DEMO=$ROOT/.demo
NS=t9k-demo
KC=$ROOT/.local-cluster/kubeconfig
say() { echo "==> $*"; }

rm -rf "$DEMO"
mkdir -p "$DEMO"
started=0
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if ((started)) && [[ -z ${T9K_KEEP_CLUSTER:-} ]]; then scripts/local-cluster.sh down; fi
}
trap cleanup EXIT

# REAL=1 (make demo-real): the training runs for real on the cluster's real node.
REAL=${REAL:-0}
DAG=retraining_pipeline
((REAL)) && DAG=retraining_pipeline_real
if ! scripts/local-cluster.sh status >/dev/null 2>&1; then
  if ((REAL)); then
    say "starting the local cluster with its real node (the first run builds Kubernetes and the training image: many minutes)"
    scripts/local-cluster.sh up --real-node
  else
    say "starting the local cluster (the first run builds Kubernetes from source: several minutes)"
    scripts/local-cluster.sh up
  fi
  started=1
fi
BIN=$(scripts/local-cluster.sh bin)
kubectl_() { "$BIN/kubectl" --kubeconfig "$KC" "$@"; }
kubectl_ get nodes

say "installing the CRDs"
.venv/bin/airflow-t9k crds | kubectl_ apply --server-side -f - >/dev/null
kubectl_ create namespace "$NS" --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
if ((REAL)); then
  kubectl_ get node real-node-0 >/dev/null 2>&1 ||
    { echo "the running cluster has no real node: 'scripts/local-cluster.sh down', then run this again" >&2; exit 1; }
  # The training program, mounted by the DAG's operator at /code.
  kubectl_ -n "$NS" create configmap retraining-code --from-file=dags_examples/jobs/train_ddp.py \
    --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
fi

say "starting the controller (log: .demo/controller.log)"
.venv/bin/airflow-t9k controller --kubeconfig "$KC" -n "$NS" --health-port 0 --metrics-port 0 >"$DEMO/controller.log" 2>&1 &
pids+=($!)

say "setting up Airflow (SQLite in .demo/airflow)"
export AIRFLOW_HOME=$DEMO/airflow
export AIRFLOW__CORE__DAGS_FOLDER=$ROOT/dags_examples
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=sqlite:///$DEMO/airflow/airflow.db
export AIRFLOW_CONN_KUBERNETES_DEFAULT="{\"conn_type\": \"kubernetes\", \"extra\": {\"kube_config_path\": \"$KC\", \"namespace\": \"$NS\"}}"
export PYTHONPATH=$ROOT
mkdir -p "$AIRFLOW_HOME"
.venv/bin/airflow db migrate >"$DEMO/airflow-db.log" 2>&1

say "phase transitions of the training job, as they happen:"
$PY scripts/demo_watch.py "$KC" "$NS" PyTorchTrainingJob &
pids+=($!)

if ((REAL)); then
  say "running $DAG: prepare data -> train (2 replicas, DDP on the real node, deferred) -> evaluate -> promote"
else
  say "running $DAG: prepare data -> train (PyTorchTrainingJob, deferred) -> evaluate -> promote"
  # kwok runs no code: write a few "training" lines into the pods' log file while it runs.
  (
    for _ in $(seq 240); do
      kubectl_ -n "$NS" get pytorchtrainingjobs -o jsonpath='{.items[*].status.phase}' 2>/dev/null | grep Running >/dev/null && break
      sleep 0.5
    done
    sleep 1  # the trigger attaches to the running replicas' logs
    for epoch in 1 2 3; do
      printf '%s stdout F epoch %s loss %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" "$epoch" "0.$((9 - 2 * epoch))" \
        >>"$ROOT/.local-cluster/pod-logs/all.log"
      sleep 0.5
    done
  ) &
  pids+=($!)
fi
status=0
.venv/bin/airflow dags test "$DAG" >"$DEMO/dag-run.log" 2>&1 || status=$?
sleep 1

say "result"
grep -oE "\[event\] [A-Za-z]+ [A-Za-z]+ [A-Za-z]+/[^:]+: [^[]*" "$DEMO/dag-run.log" | sed 's/^/  /' | head -20 || true
grep -oE "\[train-[a-z0-9]+-(worker|master)-0\] (epoch|rank) [^[]*" "$DEMO/dag-run.log" | sed 's/^/  log /' || true
grep -oE "(metric from the training job: [0-9.]+|candidate [0-9.]+ vs production [0-9.]+|Returned value was: (promoted|kept)[^[]*)" "$DEMO/dag-run.log" | sed 's/^/  /' || true
grep -oE "DagRun Finished: dag_id=$DAG.*state=[a-z]+" "$DEMO/dag-run.log" | grep -oE "state=[a-z]+" | sed 's/^/  DAG run /' || true
if ((status)); then
  echo "  the DAG run failed; see .demo/dag-run.log" >&2
  exit "$status"
fi
say "done (logs in .demo/)"
