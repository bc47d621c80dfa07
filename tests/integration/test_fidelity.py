"""The fidelity issue against the real API server: seed 000's mode table and the replica
ceilings at admission, services and substitution, and jobs that used to hang."""

from __future__ import annotations

import pytest
from kubernetes import client

from airflow_t9k.kinds.base import MAX_REPLICAS_PER_TYPE, MAX_REPLICAS_TOTAL
from tests.builders import generic
from tests.kind_jobs import MODES, minimal, with_mode, with_replicas
from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated
from tests.support.manifests import manifest

ALL_KINDS = [*MODES, "AscendJob"]


def body(job: dict) -> dict:
    """A kind_jobs body as a user would write it (the API server assigns uid and generation)."""
    job["metadata"] = {k: v for k, v in job["metadata"].items() if k in ("name", "labels")}
    return job


CELLS = [(kind, mode) for kind in MODES for mode in ("immediate", "debug", "pause", "elastic")]


@pytest.mark.parametrize(("kind", "mode"), CELLS, ids=[f"{k}-{m}" for k, m in CELLS])
def test_every_cell_of_the_mode_table_at_admission(jobs, kind, mode):
    job = body(minimal(kind, f"m-{mode}") if mode == "immediate" else with_mode(minimal(kind, f"m-{mode}"), mode))
    if mode == "immediate" or mode in MODES[kind]:
        created = jobs.create(job)
        assert created["metadata"]["name"] == f"m-{mode}"
        return
    refusal = jobs.rejected(job)
    if mode == "elastic":
        assert "Elastic mode is supported only by PyTorchTrainingJob and DeepSpeedJob" in refusal
    else:
        assert "BeamJob supports only Immediate mode" in refusal


@pytest.mark.parametrize("kind", [k for k in MODES if k != "BeamJob"])
def test_run_mode_elastic_is_no_field_of_any_kind(jobs, kind):
    job = body(minimal(kind, "rm-elastic"))
    job["spec"]["runMode"] = {"elastic": {"enabled": True}}
    assert "runMode.elastic is not a field" in jobs.rejected(job)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_replica_ceiling_per_type_at_admission(jobs, kind):
    refusal = jobs.rejected(body(with_replicas(minimal(kind, "too-many"), MAX_REPLICAS_PER_TYPE + 1)))
    assert f"less than or equal to {MAX_REPLICAS_PER_TYPE}" in refusal
    # At the ceiling the job is admitted (no controller runs here, so nothing is created).
    jobs.create(body(with_replicas(minimal(kind, "at-ceiling"), MAX_REPLICAS_PER_TYPE)))


def test_replica_ceiling_in_total_at_admission(jobs):
    job = body(generic("total", ("a", MAX_REPLICAS_PER_TYPE), ("b", MAX_REPLICAS_PER_TYPE), ("c", 1)))
    assert f"at most {MAX_REPLICAS_TOTAL} replicas in all" in jobs.rejected(job)
    job["spec"]["replicaSpecs"][2]["replicas"] = 0
    jobs.create(job)


def test_ascend_replica_ceiling_in_total_at_admission(jobs):
    job = body(minimal("AscendJob", "ac-total"))
    job["metadata"]["labels"] = {"framework": "mindspore"}
    job["spec"]["replicaSpecs"] = {
        "Scheduler": {"replicas": 1, "template": job["spec"]["replicaSpecs"]["Master"]["template"]},
        "Worker": {"replicas": MAX_REPLICAS_PER_TYPE, "template": job["spec"]["replicaSpecs"]["Worker"]["template"]},
        "Master": {"replicas": MAX_REPLICAS_PER_TYPE, "template": job["spec"]["replicaSpecs"]["Master"]["template"]},
    }
    assert f"at most {MAX_REPLICAS_TOTAL} replicas in all" in jobs.rejected(job)


def test_elastic_xgboost_never_scales_when_the_crd_is_bypassed(jobs, controller):
    # An XGBoost job with elastic enabled once ran 5 masters. The CRD refuses spec.elastic now;
    # the pure core refuses it too, which a CRD applied by hand would need. Here: the field
    # removed, the job runs exactly its declared replicas.
    job = body(minimal("XGBoostTrainingJob", "xgb"))
    jobs.create(job)
    wait_until(lambda: len(jobs.pods("xgb")) == 2, timeout=30, what="two pods")
    assert sorted(jobs.pods("xgb")) == ["xgb-master-0", "xgb-worker-0"]


# -- GenericJob services and substitution (items 5-7) ----------------------------------------


def test_hosts_resolve_to_port_less_headless_services_without_spec_service(jobs, controller):
    job = body(generic("hosts"))
    container = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container["command"] = ["sh", "-c", "ping -c1 $(service.worker[1].host) && echo $(($(rank)+1)) $(type -P sh)"]
    jobs.create(job)
    jobs.wait_phase("GenericJob", "hosts", "Running")
    pods = jobs.pods("hosts")
    assert pods["hosts-worker-0"].spec.containers[0].command[2] == "ping -c1 hosts-worker-1 && echo $((0+1)) $(type -P sh)"
    services = {s.metadata.name: s for s in jobs.core.list_namespaced_service(jobs.ns).items}
    assert sorted(services) == ["hosts-worker-0", "hosts-worker-1"]
    svc = services["hosts-worker-1"]
    assert (svc.spec.cluster_ip, svc.spec.ports) == ("None", None)
    assert svc.spec.selector["batch.tensorstack.dev/replica-index"] == "1"


# -- jobs that never ended (items 1 and 2) -------------------------------------------------


@pytest.mark.parametrize("kind", ["ColossalAIJob", "MPIJob"])
def test_a_worker_failing_before_the_launch_fails_the_job(jobs, controller, kind):
    job = body(minimal(kind, "hang"))
    jobs.create(job)
    wait_until(lambda: len(jobs.pods("hang")) == 3, timeout=30, what="launcher and two workers")
    set_pod_terminated(jobs.core, jobs.ns, "hang-worker-1", phase="Failed", exit_code=255)
    failed = jobs.wait_phase(kind, "hang", "Failed", timeout=30)
    reason = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert reason["reason"] == "WorkerFailed"
    assert reason["message"].startswith("Worker hang-worker-1 failed (container")
    # The Event follows the status write (status first, then act), so it may come a moment later.
    wait_until(lambda: any(e.reason == "Failed" and "hang-worker-1" in e.message for e in jobs.events("hang")),
               timeout=10, what="the Failed Event naming the worker")  # fmt: skip


def test_resuming_ends_when_a_replica_completed_after_the_resume(jobs, controller_factory):
    # "late" is held Pending by a scheduling gate until "fast" has completed, so the job never
    # sees every replica Running at once: it used to stay Resuming forever. Pods placed one by
    # one (no gang): in a gang, kube-scheduler binds neither pod while one is gated, and a lone
    # pod of a gang whose other member ended never reaches minCount (docs/queueing.md).
    controller_factory("--gang-scheduling", "off")
    job = body(generic("res", ("fast", 1), ("late", 1), successRules=[{"late": [0]}], failureRules=[{"late": [0]}],
                       runMode={"pause": {"enabled": True}}))  # fmt: skip
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["schedulingGates"] = [{"name": "t9k.test/hold"}]
    jobs.create(job)
    jobs.wait_phase("GenericJob", "res", "Paused")
    jobs.patch("GenericJob", "res", {"spec": {"runMode": {"pause": {"enabled": False}}}})
    wait_until(lambda: len(jobs.live_pods("res")) == 2, timeout=30, what="pods created on resume")
    assert jobs.phase("GenericJob", "res") == "Resuming"
    set_pod_terminated(jobs.core, jobs.ns, "res-fast-0", phase="Succeeded", exit_code=0)
    wait_until(lambda: jobs.get("GenericJob", "res")["status"]["tasks"][0]["status"][0]["phase"] == "Succeeded",
               timeout=30, what="fast replica seen as succeeded")  # fmt: skip
    assert jobs.phase("GenericJob", "res") == "Resuming"
    jobs.core.patch_namespaced_pod("res-late-0", jobs.ns, {"spec": {"schedulingGates": None}})
    jobs.wait_phase("GenericJob", "res", "Running", timeout=30)


# -- AscendJob (items 13 and 14) --------------------------------------------------------------


@pytest.fixture
def priority_class(api_client):
    api = client.SchedulingV1Api(api_client)
    name = "t9k-fidelity-high"
    try:
        api.create_priority_class({"metadata": {"name": name}, "value": 1000})
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    yield name
    api.delete_priority_class(name)


def test_ascend_without_volcano_runs_on_the_default_scheduler_and_says_so(jobs, controller, priority_class):
    job = body(minimal("AscendJob", "acsched"))
    job["spec"]["schedulerName"] = "volcano"
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": priority_class, "minAvailable": 2}}
    jobs.create(job)
    wait_until(lambda: len(jobs.pods("acsched")) == 2, timeout=30, what="two pods")
    # No Volcano here: a pod sent to the "volcano" scheduler would sit Pending for ever, so it
    # goes to the default scheduler; the priority class still applies.
    wait_until(lambda: all(p.spec.node_name for p in jobs.pods("acsched").values()), timeout=30, what="pods scheduled")
    for pod in jobs.pods("acsched").values():
        assert (pod.spec.scheduler_name, pod.spec.priority_class_name, pod.spec.priority) == (
            "default-scheduler",
            priority_class,
            1000,
        )
    reasons = jobs.reasons("acsched", "GangSchedulingNotEnforced")
    assert "GangSchedulingNotEnforced" in reasons
    assert "RunPolicyIgnored" not in reasons


def test_ascend_deadline_is_ignored_with_one_warning_and_clean_pod_policy_applies(jobs, controller):
    job = body(minimal("AscendJob", "acpol"))
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 1, "cleanPodPolicy": "All"}
    jobs.create(job)
    jobs.wait_condition("AscendJob", "acpol", "Running")
    wait_until(lambda: "RunPolicyIgnored" in [e.reason for e in jobs.events("acpol")], timeout=30, what="warning")
    set_pod_terminated(jobs.core, jobs.ns, "acpol-worker-0", phase="Failed", exit_code=1)
    jobs.wait_condition("AscendJob", "acpol", "Failed", timeout=30)
    failed = next(c for c in jobs.get("AscendJob", "acpol")["status"]["conditions"] if c["type"] == "Failed")
    assert "Deadline" not in failed["reason"]
    # cleanPodPolicy All is applied when the job ends, as MindCluster's handleFinishedJob does.
    wait_until(lambda: not jobs.live_pods("acpol"), timeout=30, what="every pod cleaned up")
    assert jobs.reasons("acpol", "RunPolicyIgnored").count("RunPolicyIgnored") == 1


# -- round 3: the Unknown phase, and the seeds' examples against the real API server ---------


def test_a_pod_reported_unknown_makes_the_job_unknown_until_it_reports_again(jobs, controller):
    jobs.create(generic("unk", ("worker", 2)))
    jobs.wait_phase("GenericJob", "unk", "Running")
    jobs.core.patch_namespaced_pod_status("unk-worker-1", jobs.ns, {"status": {"phase": "Unknown"}})
    jobs.wait_phase("GenericJob", "unk", "Unknown", timeout=30)
    running = jobs.condition("GenericJob", "unk", "Running")
    assert running["reason"] == "Unknown"
    assert "unk-worker-1" in running["message"]
    jobs.core.patch_namespaced_pod_status("unk-worker-1", jobs.ns, {"status": {"phase": "Running"}})
    jobs.wait_phase("GenericJob", "unk", "Running", timeout=30)


@pytest.mark.parametrize("name", ["seed001-01", "seed001-05", "seed002-01", "seed003-01"])
def test_the_seeds_whole_examples_are_admitted_as_printed(jobs, controller, name):
    job = manifest(f"seeds/{name}")
    created = jobs.create(job)
    assert created["metadata"]["name"] == job["metadata"]["name"]
    wait_until(lambda: jobs.live_pods(job["metadata"]["name"]) or jobs.core.list_namespaced_service(jobs.ns).items,
               timeout=30, what="children")  # fmt: skip


@pytest.mark.parametrize("name", ["seed001-02", "seed003-02"])
def test_a_seed_excerpt_without_a_container_name_is_refused_by_the_api_server(jobs, controller, name):
    from airflow_t9k.cli import check_text
    from tests.support.manifests import MANIFESTS

    assert "name" in jobs.rejected(manifest(f"seeds/{name}"))  # the pod template's schema requires it
    assert "give each container its name, image and command" in check_text((MANIFESTS / "seeds" / f"{name}.yaml").read_text())[0]
