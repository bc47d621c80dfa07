"""DAGs for test_e2e_delivery.py's retraining runs (issue 48): overlapping runs (overlap=, item 3), each job's pod
held until the test releases it, so the first run's job still runs when the second starts; a cost over tries (item 6); a
predicted overrun (item 4); cache= (item 5); two promotions at once and a close win's approval (item 2)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset, task

from airflow_t9k.operators.kinds import GenericJobOperator
from airflow_t9k.operators.promote import PromoteOperator

START = datetime(2026, 1, 1)

for mode in ("skip", "wait", "supersede"):
    with DAG(f"t9k_overlap_{mode}", start_date=START, schedule=None, catchup=False, max_active_runs=4):
        GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True, log_events=False,
                           stream_logs=False, overlap=mode)  # fmt: skip

# A task instance's cost over its tries (issue 48, item 6): the first try's job fails, the retry's
# new job succeeds; XCom usage's task_total sums both.
with DAG("t9k_cost_tries", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=False, retries=1,
                       retry_delay=timedelta(seconds=1), container_resources={"limits": {"cpu": "2"}},
                       pod_annotations={"sim.t9k.test/duration": "2s", "sim.t9k.test/exit-code": "1",
                                        "sim.t9k.test/fail-pods": "{{ '.*' if ti.try_number == 1 else '^$' }}"})  # fmt: skip


def _overrun_seen(context, overrun):
    """on_predicted_overrun: the test counts these lines in the task log."""
    context["task"].log.warning("OVERRUN-CALLBACK source=%s predicted_end=%s deadline=%s", overrun.deadline_source,
                                overrun.predicted_end.isoformat(), overrun.deadline.isoformat())  # fmt: skip


# A job predicted to miss the try's execution_timeout (issue 48, item 4): its pod runs until the test
# releases it, and the test prints its progress (a step every 10 s of 100,000: days to go).
with DAG("t9k_overrun", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=True, log_events=False, stream_logs=False,
                       execution_timeout=timedelta(minutes=30), on_predicted_overrun=_overrun_seen)  # fmt: skip

# cache=True (issue 48, item 5): a second run of the same job on the same inputs trains nothing.
with DAG("t9k_cache", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(task_id="train", image="busybox", replicas=1, deferrable=False, cache=True,
                       pod_annotations={"sim.t9k.test/duration": "2s", "sim.t9k.test/message": '{"metric": 0.91}'})  # fmt: skip

# PromoteOperator (issue 48, item 2): two runs whose candidates are ready together. The test's
# subclass holds each decision 3 s between reading the champion and writing the winner, so two
# instances running at once would both read "no champion" and both win.
RACE_MODEL = Asset("s3://models/t9k-e2e-race")


class SlowPromote(PromoteOperator):
    def _push(self, context, key, value):
        time.sleep(3)
        super()._push(context, key, value)


with DAG("t9k_promote_race", start_date=START, schedule=None, catchup=False, params={"metric": 0.5}):

    @task
    def candidate(params=None, run_id=None):
        return {"metric": float(params["metric"]), "model_uri": f"s3://models/t9k-e2e-race/{run_id}"}

    candidate() >> SlowPromote(task_id="promote", asset=RACE_MODEL, metric="metric", candidate_task_id="candidate",
                               candidate_key="return_value")  # fmt: skip


# A close win waits for a person (approve_below=): a candidate within 0.05 of the champion parks its
# task in awaiting_input; the test answers through Airflow's REST API, or lets the 3 s timeout's
# default (keep) decide.
for name, timeout in (("t9k_promote_approval", timedelta(hours=1)), ("t9k_promote_approval_timeout", timedelta(seconds=3))):
    with DAG(name, start_date=START, schedule=None, catchup=False, max_active_runs=4, params={"metric": 0.5}):

        @task
        def candidate(params=None, run_id=None):
            return {"metric": float(params["metric"]), "model_uri": f"s3://models/t9k-e2e-approval/{run_id}"}

        candidate() >> PromoteOperator(task_id="promote", asset=Asset(f"s3://models/{name}"), metric="metric",
                                       candidate_task_id="candidate", candidate_key="return_value", approve_below=0.05,
                                       approval_timeout=timeout)  # fmt: skip
