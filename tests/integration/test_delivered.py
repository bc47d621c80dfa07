"""A retry never trains a job that succeeded again (issue 28, point 1): the try that delivers a
success marks it delivered last; a retry of the same series (one after a try that failed after
its job succeeded: an XCom backend error, a lost worker, apache/airflow#72716) delivers that
job's result again, also when ``delete_on_finish`` deleted the job since; a Clear (a new series,
``max_tries = try_number + retries``) runs it anew.

The Airflow side is the stand-in task instance and state store of test_operator_rerun.py, with
Airflow's ``max_tries``; tests/integration/test_e2e_delivery.py runs the same under a real
scheduler with an identity that may not delete jobs.
"""

from __future__ import annotations

import pytest

from tests.integration.test_operator_trigger import conn, make_op  # noqa: F401
from tests.support.task import FakeTI, Store, context

RETRIES = 2
RESULT = {"metric": 0.91}
DONE = {"sim.t9k.test/duration": "1s", "sim.t9k.test/message": '{"metric": 0.91}'}


def _uids(jobs):
    items = jobs.api.list_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", jobs.ns, "genericjobs")["items"]
    return sorted(i["metadata"]["uid"] for i in items)


class XComDown(FakeTI):
    """A task instance whose XCom backend fails on the result, after the job succeeded."""

    def xcom_push(self, key, value):
        if key == "result":
            raise RuntimeError("XCom backend unavailable")
        super().xcom_push(key, value)


def _op(**kw):
    return make_op(sim=DONE, deferrable=False, retries=RETRIES, **kw)


def test_a_retry_after_a_failed_delivery_delivers_the_same_jobs_result(conn, jobs, controller):
    store = Store()
    with pytest.raises(RuntimeError, match="XCom backend"):
        _op().execute({"ti": XComDown(try_number=1, max_tries=RETRIES), "task_state_store": store})
    first = store["t9k_job"]
    retry = context(store, try_number=2, max_tries=RETRIES)
    out = _op().execute(retry)
    assert (out["uid"], out["result"]) == (first["uid"], RESULT)  # that job's result, not a second training
    assert retry["ti"].xcom["result"] == RESULT
    assert _uids(jobs) == [first["uid"]]
    assert jobs.get("GenericJob", first["name"])["metadata"]["annotations"]["airflow-t9k.io/delivered-by-try"] == "2"


def test_a_retry_of_a_try_that_delivered_delivers_again_and_a_clear_runs_anew(conn, jobs, controller):
    store = Store()
    first = _op().execute(context(store, try_number=1, max_tries=RETRIES))
    # The scheduler failed try 1 after it delivered (apache/airflow#72716): its retry, same series.
    again = _op().execute(context(store, try_number=2, max_tries=RETRIES))
    assert (again["uid"], again["result"]) == (first["uid"], RESULT)
    assert _uids(jobs) == [first["uid"]]
    # A Clear: Airflow sets max_tries = try_number + retries, a new series: the training runs again.
    cleared = _op().execute(context(store, try_number=3, max_tries=2 + RETRIES))
    assert (cleared["name"], len(_uids(jobs))) == (f"{first['name']}-t3", 2)


def test_a_retry_delivers_a_success_whose_job_delete_on_finish_deleted(conn, jobs, controller):
    store = Store()
    first = _op(delete_on_finish="on_success").execute(context(store, try_number=1, max_tries=RETRIES))
    from tests.support.cluster import wait_until

    wait_until(lambda: _uids(jobs) == [], what="the job deleted on success")
    retry = context(store, try_number=2, max_tries=RETRIES)
    again = _op(delete_on_finish="on_success").execute(retry)
    assert (again["uid"], again["phase"], again["result"]) == (first["uid"], "Succeeded", RESULT)
    assert retry["ti"].xcom["result"] == RESULT
    assert _uids(jobs) == []  # delivered from the record: nothing submitted
