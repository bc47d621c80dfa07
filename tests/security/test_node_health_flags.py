"""What a typo, a tenant or a pod can do with bad-node avoidance (--avoid-bad-nodes,
--unhealthy-node-condition; reconcile/nodes.py).

- A typo in the platform's rule stops the controller at its flags (argparse exits 2) instead of
  judging nodes by a rule nobody meant; ``Ready=True``, which would make every healthy node a bad
  one, is refused too.
- A tenant's job can only narrow where its own pods go: whatever its status holds, the pass adds a
  ``NotIn`` to each of the template's own terms and nothing else (no node is let in, no toleration
  added), and another job's plan never reads it.
- A pod cannot write its node: the verdict reads only the Node object, which kubelets and the
  platform write (tests/integration/test_bad_nodes.py labels it as the platform would).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from airflow_t9k.cli import build_parser
from airflow_t9k.controller.reconcile import Create, Observed, plan
from tests.builders import NOW, evidence, generic, restart


@pytest.mark.parametrize(
    "typo",
    ["GPUHealthy", "GPUHealthy=", "label:gpu.health", "taint:", "=False", "GPU Healthy=False", "Ready=True", "Ready=False"],
)
def test_a_rule_nobody_could_mean_stops_the_controller_at_its_flags(typo, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["controller", "--unhealthy-node-condition", typo])
    assert exited.value.code == 2
    assert "--unhealthy-node-condition" in capsys.readouterr().err


def test_avoidance_off_is_a_flag_value_not_any_word():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["controller", "--avoid-bad-nodes", "no"])
    assert build_parser().parse_args(["controller", "--avoid-bad-nodes", "off"]).avoid_bad_nodes == "off"


def _pod(job: dict, avoided: object) -> dict:
    job = {**copy.deepcopy(job), "status": {"phase": "Running", "avoidedNodes": avoided}}
    observed = replace(Observed.of(evidence(job)), nodes={}, node_rules=())
    [created] = [a.manifest for a in plan(job, observed, NOW).actions if isinstance(a, Create) and a.kind == "Pod"]
    return created


HOSTILE = [{"node": "a"}, {"node": {"$ne": ""}}, {"node": "x", "operator": "In"}, {"node": "b", "values": ["*"]}]


def test_a_tenants_status_only_ever_narrows_its_own_pods():
    job = restart(generic("j", ("worker", 1)), "OnFailure", 3)
    spec = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    own = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [own]}}}
    pod = _pod(job, HOSTILE)
    [term] = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == own["matchExpressions"]  # the template's own term, kept
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "NotIn", "values": ["a", "b", "x"]}]
    assert "tolerations" not in pod["spec"]
    assert "nodeName" not in pod["spec"]


def test_another_jobs_list_never_reaches_this_jobs_pods():
    """plan() reads one job: a job with a list of its own and one without render different pods."""
    listed = _pod(restart(generic("a", ("worker", 1)), "OnFailure", 3), [{"node": "n1"}])
    other = _pod(restart(generic("b", ("worker", 1)), "OnFailure", 3), None)
    assert "affinity" in listed["spec"]
    assert "affinity" not in other["spec"]
