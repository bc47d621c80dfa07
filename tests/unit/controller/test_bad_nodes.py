"""Bad nodes avoided (reconcile/nodes.py, issue 47 item 2): what makes a node unhealthy, the rule
flag, the affinity a new pod gets, and the passes: two retried failures on one node, a replica on
an unhealthy node, the failure that was the node's doing spending nothing, the job that waits
rather than fails, the list dropped when the job ends, and a repeated pass adding nothing."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

import pytest

from airflow_t9k.controller.reconcile import Create, Delete, Observed, plan
from airflow_t9k.controller.reconcile.nodes import NodeRule, exclude, parse_rule, unhealthy
from tests.builders import NOW, cond, evidence, generic, pod, pytorch, restart

Obj = dict[str, Any]
GPU = (parse_rule("GPUHealthy=False"), parse_rule("taint:nvidia.com/gpu.unhealthy"), parse_rule("label:gpu.health=bad"))


def node(name: str, ready: str = "True", cordoned: bool = False, conditions: list[Obj] | None = None,
         taints: list[Obj] | None = None, labels: Obj | None = None) -> Obj:  # fmt: skip
    reason = "KubeletReady" if ready == "True" else "NodeStatusUnknown"
    status = {"conditions": [{"type": "Ready", "status": ready, "reason": reason}, *(conditions or [])]}
    spec: Obj = {"taints": taints or []}
    if cordoned:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("n", "why"),
    [
        (node("a"), None),
        (None, None),  # not known: not judged
        (node("a", ready="Unknown"), "the node is not Ready (NodeStatusUnknown)"),
        (node("a", ready="False"), "the node is not Ready (NodeStatusUnknown)"),
        (node("a", cordoned=True), "the node is cordoned (unschedulable; being drained)"),
        (node("a", conditions=[{"type": "GPUHealthy", "status": "False", "message": "XID 79"}]),
         "the node shows condition GPUHealthy=False: XID 79"),
        (node("a", conditions=[{"type": "GPUHealthy", "status": "True"}]), None),
        (node("a", taints=[{"key": "nvidia.com/gpu.unhealthy", "effect": "NoSchedule"}]),
         "the node shows taint nvidia.com/gpu.unhealthy"),
        (node("a", taints=[{"key": "other", "effect": "NoSchedule"}]), None),
        (node("a", labels={"gpu.health": "bad"}), "the node shows label gpu.health=bad"),
        (node("a", labels={"gpu.health": "good"}), None),
    ],
    ids=["healthy", "unknown", "not-ready-unknown", "not-ready", "cordoned", "condition", "condition-other-status",
         "taint", "other-taint", "label", "label-other-value"],
)  # fmt: skip
def test_what_makes_a_node_unhealthy(n, why):
    assert unhealthy(n, GPU) == why


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("GPUHealthy=False", NodeRule("condition", "GPUHealthy", "False")),
        ("taint:nvidia.com/gpu.unhealthy", NodeRule("taint", "nvidia.com/gpu.unhealthy", None)),
        ("taint:example.com/bad=yes", NodeRule("taint", "example.com/bad", "yes")),
        ("label:nvidia.com/gpu.health=unhealthy", NodeRule("label", "nvidia.com/gpu.health", "unhealthy")),
        ("example.com/x:Y=Z", NodeRule("condition", "example.com/x:Y", "Z")),  # a ':' that names no source
    ],
)
def test_rules_parse(text, rule):
    assert parse_rule(text) == rule


@pytest.mark.parametrize("text", ["GPUHealthy", "=False", "label:gpu.health", "label:=x", "a b=c", "taint:"])
def test_bad_rules_are_refused_with_what_to_write(text):
    with pytest.raises(ValueError, match="^" + re.escape(repr(text))):
        parse_rule(text)


@pytest.mark.parametrize(
    ("affinity", "terms"),
    [
        (None, [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a", "b"]}]}]),
        ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}],
             "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "c"]}]}]}}},
         [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}],
           "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a", "b"]}]},
          {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}],
           "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "c"]},
                           {"key": "metadata.name", "operator": "NotIn", "values": ["a", "b"]}]}]),
    ],
    ids=["none", "every-term-keeps-its-own"],
)  # fmt: skip
def test_the_exclusion_is_added_to_every_term_of_the_templates_own_affinity(affinity, terms):
    spec: Obj = {"containers": []}
    if affinity is not None:
        spec["affinity"] = affinity
    before = copy.deepcopy(affinity)
    pod_ = {"spec": spec}
    exclude(pod_, ["a", "b"])
    required = pod_["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"] == terms
    assert affinity == before  # the template the pod came from is not changed


# -- passes -----------------------------------------------------------------------------------


def on(p: Obj, node_name: str, uid: str | None = None) -> Obj:
    p["spec"] = {**(p.get("spec") or {}), "nodeName": node_name}
    if uid:  # a replica created again is a new pod
        p["metadata"]["uid"] = uid
    return p


def passes(job: Obj, *objects: Obj, status: Obj | None = None, nodes: tuple[Obj, ...] = (), rules=GPU):
    job = copy.deepcopy(job)
    if status is not None:
        job["status"] = status
    observed = replace(Observed.of(*objects, evidence(job)), nodes={n["metadata"]["name"]: n for n in nodes}, node_rules=rules)
    return plan(job, observed, NOW)


HEALTHY = (node("a"), node("b"))


def test_the_second_retried_failure_on_one_node_avoids_it_and_is_still_counted():
    job = restart(generic("j", ("worker", 1)), "OnFailure", 5)
    first = passes(job, on(pod("j-worker-0", "Failed", 1), "a"), status={"phase": "Running"}, nodes=HEALTHY)
    [h] = first.status["restartHistory"]
    assert (h["counted"], h["node"]) == (True, "a")  # the first: the program's, as far as anyone knows
    assert "avoidedNodes" not in first.status
    again = passes(job, on(pod("j-worker-0", "Failed", 1, restarts=1), "a", "second"), status=first.status, nodes=HEALTHY)
    [entry] = again.status["avoidedNodes"]
    assert (entry["node"], entry["reason"]) == ("a", "RepeatedFailures")
    assert "2 replica failures on this node" in entry["message"]
    second = again.status["restartHistory"][-1]
    assert (second["counted"], second["node"]) == (True, "a")  # a program failing everywhere must still end
    task = next(e for t in again.status["tasks"] for e in t["status"] if e["name"] == "j-worker-0")
    assert task["restartCount"] == 2
    assert [a.name for a in again.actions if isinstance(a, Delete)] == ["j-worker-0"]
    assert any(e.reason == "NodeAvoided" for e in again.events)
    c = cond(again, "AvoidingNodes")
    assert (c["status"], c["reason"]) == ("True", "NodesAvoided")
    # Repeated (a conflict, a crash): nothing twice.
    repeat = passes(job, on(pod("j-worker-0", "Failed", 1, restarts=1), "a", "second"), status=again.status, nodes=HEALTHY)
    assert repeat.status["restartHistory"] == again.status["restartHistory"]
    assert repeat.status["avoidedNodes"] == again.status["avoidedNodes"]
    assert not [e for e in repeat.events if e.reason == "NodeAvoided"]
    # Gone: the new pod keeps off node a, under the same count.
    back = passes(job, status=repeat.status, nodes=HEALTHY)
    [created] = [a for a in back.actions if isinstance(a, Create) and a.kind == "Pod"]
    terms = created.manifest["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]}]
    assert created.manifest["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "2"


def test_failures_on_two_nodes_avoid_neither():
    job = restart(generic("j", ("worker", 1)), "OnFailure", 5)
    first = passes(job, on(pod("j-worker-0", "Failed", 1), "a"), status={"phase": "Running"}, nodes=HEALTHY)
    second = passes(job, on(pod("j-worker-0", "Failed", 1, restarts=1), "b", "second"), status=first.status, nodes=HEALTHY)
    assert "avoidedNodes" not in second.status
    assert [h["counted"] for h in second.status["restartHistory"]] == [True, True]


def test_a_failure_the_policy_does_not_retry_blames_no_node():
    job = restart(generic("j", ("worker", 1)), "Never")
    p = passes(job, on(pod("j-worker-0", "Failed", 1), "a"), status={"phase": "Running"}, nodes=(node("a", ready="False"),))
    # The node is unhealthy and the replica was on it: a failure there is the node's doing.
    assert p.status["phase"] == "Running"
    assert p.status["avoidedNodes"][0]["reason"] == "NodeUnhealthy"
    healthy = passes(job, on(pod("j-worker-0", "Failed", 1), "a"), status={"phase": "Running"}, nodes=HEALTHY)
    assert healthy.status["phase"] == "Failed"
    assert "avoidedNodes" not in healthy.status


@pytest.mark.parametrize(
    "bad",
    [node("a", ready="Unknown"), node("a", cordoned=True), node("a", conditions=[{"type": "GPUHealthy", "status": "False"}]),
     node("a", taints=[{"key": "nvidia.com/gpu.unhealthy", "effect": "NoExecute"}])],
    ids=["not-ready", "cordoned", "condition", "taint"],
)  # fmt: skip
def test_a_replica_on_an_unhealthy_node_makes_the_job_avoid_it_and_its_failure_there_is_free(bad):
    job = restart(generic("j", ("worker", 2)), "OnFailure", 0)  # no restart left: only a free one goes on
    running = passes(job, on(pod("j-worker-0"), "a"), on(pod("j-worker-1"), "b"), status={"phase": "Running"},
                     nodes=(bad, node("b")))  # fmt: skip
    assert [e["node"] for e in running.status["avoidedNodes"]] == ["a"]
    assert not [a for a in running.actions if isinstance(a, Delete)]  # a running replica is left where it runs
    failed = passes(job, on(pod("j-worker-0", "Failed", 1), "a"), on(pod("j-worker-1"), "b"), status=running.status,
                    nodes=(bad, node("b")))  # fmt: skip
    assert failed.status["phase"] == "Running"
    [h] = failed.status["restartHistory"]
    assert (h["counted"], h["node"]) == (False, "a")


def test_without_node_health_nothing_is_avoided():
    job = restart(generic("j", ("worker", 1)), "OnFailure", 5)
    observed = Observed.of(on(pod("j-worker-0", "Failed", 1, restarts=1), "a", "second"), evidence(job))
    job = {**job, "status": {"phase": "Running", "restartHistory": [{"node": "a", "podUID": "x", "counted": True}]}}
    p = plan(job, observed, NOW)  # Observed.nodes None: --avoid-bad-nodes off
    assert "avoidedNodes" not in p.status
    assert p.status["restartHistory"][-1]["counted"] is True


def test_a_job_that_only_fits_on_avoided_nodes_waits_and_says_so():
    job = restart(generic("j", ("worker", 1)), "OnFailure", 5)
    waiting = pod("j-worker-0", "Pending")
    said = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    waiting["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": said}]
    status = {"phase": "Running", "avoidedNodes": [{"node": "a", "reason": "RepeatedFailures", "message": "m", "time": "t"}]}
    p = passes(job, waiting, status=status, nodes=HEALTHY)
    c = cond(p, "AvoidingNodes")
    assert (c["status"], c["reason"]) == ("True", "OnlyAvoidedNodesFit")
    assert "didn't match Pod's node affinity" in c["message"]
    assert p.status["phase"] == "Running"
    assert not [a for a in p.actions if isinstance(a, Delete)]


def test_the_list_is_dropped_when_the_job_ends():
    job = restart(generic("j", ("worker", 1)), "OnFailure", 5)
    status = {"phase": "Running", "avoidedNodes": [{"node": "a", "reason": "RepeatedFailures", "message": "m", "time": "t"}],
              "conditions": [{"type": "AvoidingNodes", "status": "True", "reason": "NodesAvoided", "message": "m"}]}  # fmt: skip
    p = passes(job, on(pod("j-worker-0", "Succeeded", 0), "b"), status=status, nodes=HEALTHY)
    assert p.status["phase"] == "Succeeded"
    assert "avoidedNodes" not in p.status
    assert cond(p, "AvoidingNodes") is None


def test_a_fixed_world_launch_restarts_as_a_group_for_a_failure_on_an_avoided_node():
    job = pytorch("pt", ("master", 1), ("worker", 1), policy="OnFailure", runPolicy={"backoffLimit": 0})
    status = {"phase": "Running", "avoidedNodes": [{"node": "a", "reason": "NodeUnhealthy", "message": "m", "time": "t"}]}
    p = passes(job, on(pod("pt-master-0", "Failed", 1), "a"), on(pod("pt-worker-0"), "b"), status=status,
               nodes=(node("a", ready="False"), node("b")))  # fmt: skip
    assert p.status["phase"] == "Running"
    assert p.status["restartHistory"][-1]["counted"] is False


@pytest.mark.parametrize(
    "junk",
    [
        "a",  # not a list
        [{"node": 3}, None, "b", {"reason": "x"}, {"node": ""}],  # entries that name no node
        [{"node": f"n{i}", "reason": "RepeatedFailures"} for i in range(5000)],  # far past the bound
    ],
    ids=["not-a-list", "malformed-entries", "huge"],
)
def test_a_status_list_written_by_someone_else_neither_crashes_the_pass_nor_grows_the_pods(junk):
    job = restart(generic("j", ("worker", 1)), "OnFailure", 5)
    p = passes(job, status={"phase": "Running", "avoidedNodes": junk}, nodes=HEALTHY)
    [created] = [a for a in p.actions if isinstance(a, Create) and a.kind == "Pod"]
    affinity = created.manifest["spec"].get("affinity") or {}
    terms = (
        affinity.get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    )
    assert sum(len(f["values"]) for t in terms for f in t["matchFields"]) <= 32


@pytest.mark.parametrize("where", ["a", "b"])
def test_a_program_that_fails_everywhere_still_spends_its_budget_and_ends(where):
    """Repeated failures move the job, they do not pay for it: with no restart left it fails,
    on the avoided node as elsewhere (only an unhealthy node's failures are free)."""
    job = restart(generic("j", ("worker", 1)), "OnFailure", 2)
    history = [{"node": "a", "podUID": f"u{i}", "counted": True, "replica": "j-worker-0"} for i in range(2)]
    status = {"phase": "Running", "restartHistory": history,
              "avoidedNodes": [{"node": "a", "reason": "RepeatedFailures", "message": "m", "time": "t"}]}  # fmt: skip
    p = passes(job, on(pod("j-worker-0", "Failed", 1, restarts=2), where, "third"), status=status, nodes=HEALTHY)
    assert p.status["phase"] == "Failed"
