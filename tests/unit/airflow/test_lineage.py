"""OpenLineage facets, with apache-airflow-providers-openlineage installed (the test extra), and
the operators without it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.providers.openlineage.extractors.base import DefaultExtractor
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors
from openlineage.client.serde import Serde

from tests.unit.airflow.test_operators import FakeTI, complete, event, finishing_op

DATA = Asset("s3://ml-data/clicks/2026-11-25")
ALIAS = AssetAlias("churn-model")
# What the event's state carries and XCom ``usage`` holds (api/outcome.py usage_of: status.usage's totals).
USAGE = {
    "accelerator_seconds": {"nvidia.com/gpu": 7200},
    "wasted_accelerator_seconds": {},
    "cpu_seconds": 14400,
    "runs": 2,
    "wall_seconds": 3600,
}


def ran(op, status="success", message='{"model_uri": "s3://models/churn/run-7", "metric": 0.93}', usage=None):
    phase = "Succeeded" if status == "success" else "Failed"
    c = {"ti": FakeTI(), "outlet_events": OutletEventAccessors()}
    op.render_template_fields(c)  # the manifest as submitted (rendered_job), as on a worker
    state = {"phase": phase, "result_message": message, **({"usage": usage} if usage else {})}
    complete(op, c, event(status, kind=op.kind, phase=phase, state=state))
    return op


def training(status="success", usage=None, **kw):
    kw = {"image": "pytorch:2.4", "replicas": 3, "inlets": [DATA], "outlets": [ALIAS], "asset_from_result": "model_uri", **kw}
    from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator

    return ran(finishing_op(cls=PyTorchTrainingJobOperator, **kw), status=status, usage=usage)


def test_on_complete_reports_inputs_the_model_image_replicas_uid_and_usage():
    op = training(usage=USAGE)
    lineage = op.get_openlineage_facets_on_complete(FakeTI())
    assert isinstance(lineage, OperatorLineage)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("s3://ml-data", "clicks/2026-11-25")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("s3://models", "churn/run-7")]
    facet = lineage.run_facets["t9k_job"]
    assert (facet.kind, facet.namespace, facet.name, facet.uid, facet.phase) == (
        "PyTorchTrainingJob",
        "ml",
        "j",
        "u",
        "Succeeded",
    )
    assert facet.images == ["pytorch:2.4"]
    assert facet.replicas == {"worker": 3}
    assert facet.usage == USAGE
    # it serialises as the listener sends it
    sent = json.loads(Serde.to_json(facet))  # as the listener sends it
    assert sent["replicas"] == {"worker": 3}
    assert sent["usage"] == USAGE
    assert sent["_schemaURL"].endswith("#/$defs/RunFacet")


def test_on_failure_reports_the_job_without_the_model_and_no_usage_when_status_has_none():
    op = training(status="failed")  # its message names a model, but no model was made; no usage in its status
    lineage = op.get_openlineage_facets_on_failure(FakeTI())
    facet = lineage.run_facets["t9k_job"]
    assert facet.phase == "Failed"
    assert facet.usage is None
    assert facet.uid == "u"
    assert lineage.outputs == []
    assert [d.name for d in lineage.inputs] == ["clicks/2026-11-25"]


def test_static_asset_outlets_are_outputs_and_usage_of_a_failed_job_is_reported():
    model = Asset("s3://models/churn")
    op = training(status="failed", usage=USAGE, outlets=[model], asset_from_result=None, inlets=[])
    lineage = op.get_openlineage_facets_on_failure(FakeTI())
    assert lineage.inputs == []
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("s3://models", "churn")]
    assert lineage.run_facets["t9k_job"].usage == USAGE  # a failed run used GPUs too


def test_the_providers_default_extractor_takes_the_operators_facets():
    op = training(usage=USAGE)
    lineage = DefaultExtractor(op).extract_on_complete(FakeTI())
    assert lineage is not None
    assert lineage.run_facets["t9k_job"].uid == "u"
    assert [d.name for d in lineage.outputs] == ["churn/run-7"]


BLOCK = textwrap.dedent("""
    # As if OpenLineage were not installed: its modules cannot be imported and its distributions
    # (and so the provider's entry point) are not listed.
    import importlib.abc, importlib.metadata, sys
    import importlib_metadata
    BLOCKED = ("openlineage", "airflow.providers.openlineage")
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
    sys.meta_path.insert(0, Block())
    def unlisted(real):
        def distributions(**kw):
            for d in real(**kw):
                n = (d.metadata["Name"] or "").lower().replace("_", "-")
                if not (n.startswith("openlineage") or n == "apache-airflow-providers-openlineage"):
                    yield d
        return distributions
    importlib.metadata.distributions = unlisted(importlib.metadata.distributions)
    importlib_metadata.distributions = unlisted(importlib_metadata.distributions)
""")


@pytest.mark.parametrize("kind", ["GenericJobOperator", "PyTorchTrainingJobOperator"])
def test_the_operators_import_and_finish_without_openlineage(kind):
    code = BLOCK + textwrap.dedent(f"""
        from airflow.sdk import Asset
        from airflow.sdk.execution_time.context import OutletEventAccessors
        from airflow_t9k.operators.kinds import {kind}
        from tests.unit.airflow.test_operators import FakeTI, event, finishing_op
        op = finishing_op(cls={kind}, outlets=[Asset("s3://models/m")])
        c = {{"ti": FakeTI(), "outlet_events": OutletEventAccessors()}}
        op.execute_complete(c, event("success", phase="Succeeded",
                                     state={{"phase": "Succeeded", "result_message": '{{"metric": 1}}'}}))
        assert c["outlet_events"][Asset("s3://models/m")].extra["metric"] == 1
        assert not [m for m in sys.modules if m.startswith(("openlineage", "airflow.providers.openlineage"))]
        try:
            op.get_openlineage_facets_on_complete(FakeTI())
        except ModuleNotFoundError as exc:
            print("no-openlineage:", exc.name)
    """)
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "no-openlineage: " in out.stdout  # the block was real: the facets need the package


@pytest.mark.parametrize("uri", ["file:///data/clicks.csv", "s3://ml-data/clicks/2026-11-25"])
def test_an_asset_is_named_as_the_openlineage_provider_names_it(uri):
    """One Asset, one lineage node: the operator's datasets are the provider's own for the same
    Asset (issue 28, point 7), through its converters where a provider registered one (``file``
    here: namespace ``file``, the path as name), and its object-store naming otherwise."""
    from airflow.providers.openlineage.extractors.manager import ExtractorManager

    from airflow_t9k.operators.openlineage import dataset

    mgr = ExtractorManager
    provider = mgr.convert_to_ol_dataset(Asset(uri)) or mgr.convert_to_ol_dataset_from_object_storage_uri(uri)
    ours = dataset(Asset(uri))
    assert (ours.namespace, ours.name) == (provider.namespace, provider.name)


def test_an_asset_no_provider_converts_keeps_openlineages_naming():
    from airflow_t9k.operators.openlineage import dataset

    ours = dataset(Asset("postgres://db:5432/ml/public/clicks"))
    assert (ours.namespace, ours.name) == ("postgres://db:5432", "ml/public/clicks")
