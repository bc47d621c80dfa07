"""Asset events from the job's result, through Airflow's own outlet event accessors."""

from __future__ import annotations

import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.sdk.execution_time.context import OutletEventAccessors

from tests.unit.airflow.test_operators import FakeTI, event, finishing_op

MODEL = Asset("s3://models/churn")
ALIAS = AssetAlias("churn-model")
JOB = {"kind": "GenericJob", "namespace": "ml", "name": "j", "uid": "u"}


def succeeded(message: str | None) -> dict:
    return event("success", phase="Succeeded", state={"phase": "Succeeded", "result_message": message})


def context() -> dict:
    return {"ti": FakeTI(), "outlet_events": OutletEventAccessors()}


def test_an_asset_outlets_event_carries_the_results_metrics_and_the_job():
    c = context()
    finishing_op(outlets=[MODEL]).execute_complete(c, succeeded('{"metric": 0.93, "loss": 0.2}'))
    assert c["outlet_events"][MODEL].extra == {"metric": 0.93, "loss": 0.2, "t9k_job": JOB}


def test_a_result_that_is_not_a_dict_is_under_result():
    c = context()
    finishing_op(outlets=[MODEL]).execute_complete(c, succeeded("0.91"))
    assert c["outlet_events"][MODEL].extra == {"result": 0.91, "t9k_job": JOB}


def test_asset_from_result_adds_the_results_uri_through_the_alias():
    c = context()
    message = '{"model_uri": "s3://models/churn/run-7", "metric": 0.93}'
    finishing_op(outlets=[ALIAS], asset_from_result="model_uri").execute_complete(c, succeeded(message))
    [added] = c["outlet_events"][ALIAS].asset_alias_events
    assert added.source_alias_name == "churn-model"
    assert added.dest_asset_key.uri == "s3://models/churn/run-7"
    assert added.extra == {"model_uri": "s3://models/churn/run-7", "metric": 0.93, "t9k_job": JOB}


def test_a_result_without_the_key_fails_the_task_without_retries():
    c = context()
    with pytest.raises(AirflowFailException, match="asset_from_result='model_uri': the job's result has no such key"):
        finishing_op(outlets=[ALIAS], asset_from_result="model_uri").execute_complete(c, succeeded('{"metric": 0.93}'))
    assert c["outlet_events"][ALIAS].asset_alias_events == []


def test_a_failed_job_emits_nothing():
    c = context()
    failed = event("failed", phase="Failed", state={"phase": "Failed", "result_message": '{"metric": 0.1}'})
    with pytest.raises(AirflowException, match="GenericJob ml/j: m"):
        finishing_op(outlets=[MODEL]).execute_complete(c, failed)
    assert len(c["outlet_events"]) == 0


@pytest.mark.parametrize(
    ("kw", "message"),
    [({"asset_from_result": "model_uri"}, "give outlets=\\[AssetAlias"),
     ({"asset_from_result": "model_uri", "outlets": [ALIAS], "wait_for_completion": False}, "wait_for_completion=False"),
     ({"asset_from_result": "", "outlets": [ALIAS]}, "must be a key"),
     # Issue 28, point 7: outlets updated at submission, and an asset named by a result nobody reads.
     ({"outlets": [MODEL], "wait_for_completion": False}, "outlets= with wait_for_completion=False"),
     ({"outlets": [ALIAS], "wait_for_completion": False}, "outlets= with wait_for_completion=False"),
     ({"asset_from_result": "model_uri", "outlets": [ALIAS], "result_from": None}, "result_from=None reads none")],
)  # fmt: skip
def test_asset_from_result_is_checked_when_the_dag_is_parsed(kw, message):
    with pytest.raises(ValueError, match=message):
        finishing_op(**kw)


def test_no_outlets_without_waiting_and_outlets_without_a_result_are_fine():
    finishing_op(wait_for_completion=False)
    finishing_op(outlets=[MODEL], result_from=None)  # an asset event without a result: allowed
