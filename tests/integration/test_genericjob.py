"""GenericJob against a real API server, with the controller running as a process."""

from __future__ import annotations

import copy

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated
from tests.support.manifests import manifest

SIM = "sim.t9k.test"


def job(name: str = "gj", replicas: int = 2, annotations: dict | None = None, **spec) -> dict:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name},
        "spec": {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": annotations or {}},
                        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo $(rank)"]}]},
                    },
                }
            ],
            **spec,
        },
    }


def test_seed_example_produces_the_documented_pods(jobs, controller):
    example = manifest("genericjob-example")
    jobs.create(example)
    status = jobs.wait_phase("GenericJob", "generic-example", "Running")["status"]
    pods = jobs.pods("generic-example")
    assert sorted(pods) == [f"generic-example-worker-{i}" for i in range(4)]
    for name, pod in pods.items():
        rank = name.rsplit("-", 1)[1]
        assert pod.metadata.labels["batch.tensorstack.dev/replica-type"] == "worker"
        assert pod.metadata.labels["batch.tensorstack.dev/replica-index"] == rank
        ref = pod.metadata.owner_references[0]
        assert (ref.kind, ref.name, ref.controller) == ("GenericJob", "generic-example", True)
        assert pod.spec.containers[0].command == ["sleep", "365"]
        assert pod.spec.restart_policy == "Never"
    assert status["aggregate"]["running"] == 4
    assert [t["type"] for t in status["tasks"]] == ["worker"]
    assert {c["type"] for c in status["conditions"]} >= {"Initializing", "Running", "ReplicaFailure"}
    reasons = jobs.reasons("generic-example", "Pending", "Running")
    assert "Pending" in reasons
    assert "Running" in reasons


def test_seed_tf_config_example_as_printed_runs_on_the_seeds_port(jobs, controller):
    example = manifest("genericjob-tf-config")
    assert "service" not in example["spec"]  # as the specification prints it: $(service.port[http]) never declared
    jobs.create(example)
    jobs.wait_phase("GenericJob", "generic-tf-example", "Running")
    env = {e.name: e.value for e in jobs.pods("generic-tf-example")["generic-tf-example-worker-0"].spec.containers[0].env}
    assert '"generic-tf-example-worker-3:2222"' in env["TF_CONFIG"]


def test_variables_and_services_read_back_from_the_api(jobs, controller):
    jobs.create(manifest("genericjob-tf-config"))
    jobs.wait_phase("GenericJob", "generic-tf-example", "Running")
    pods = jobs.pods("generic-tf-example")
    env = {e.name: e.value for e in pods["generic-tf-example-worker-2"].spec.containers[0].env}
    hosts = ",".join(f'"generic-tf-example-worker-{i}:2222"' for i in range(4))
    assert env["TF_CONFIG"] == '{"task":{"type":"worker","index":2},"cluster":{"worker":[' + hosts + "]}}"
    services = {s.metadata.name: s for s in jobs.core.list_namespaced_service(jobs.ns).items}
    svc = services["generic-tf-example-worker-2"]
    assert svc.spec.cluster_ip == "None"
    assert [(p.name, p.port) for p in svc.spec.ports] == [("http", 2222)]
    assert svc.spec.selector["batch.tensorstack.dev/replica-index"] == "2"


def test_success_rule_through_pod_outcomes(jobs, controller):
    sim = {f"{SIM}/duration": "1s", f"{SIM}/fail-pods": "-worker-1$"}
    jobs.create(job(annotations=sim, successRules=[{"worker": [0]}], failureRules=[{"worker": [0]}]))
    done = jobs.wait_phase("GenericJob", "gj", "Succeeded", "Failed")
    assert done["status"]["phase"] == "Succeeded"
    completed = jobs.condition("GenericJob", "gj", "Completed")
    assert completed["status"] == "True"
    assert '{ "worker": [0] }' in completed["message"]


def test_failure_rule_names_the_rule(jobs, controller):
    sim = {f"{SIM}/duration": "1s", f"{SIM}/fail-pods": "-worker-1$", f"{SIM}/exit-code": "3"}
    jobs.create(job(annotations=sim, successRules=[{"worker": [0, 1]}], failureRules=[{"worker": [1]}]))
    jobs.wait_phase("GenericJob", "gj", "Failed")
    failed = jobs.condition("GenericJob", "gj", "Failed")
    assert failed["message"] == 'The job is failed with rule: { "worker": [1] }'
    assert "exit code 3" in jobs.condition("GenericJob", "gj", "ReplicaFailure")["message"]


def test_on_failure_restarts_up_to_the_limit_then_fails(jobs, controller):
    spec = job(replicas=1)
    spec["spec"]["replicaSpecs"][0]["restartPolicy"] = {"policy": "OnFailure", "limit": 2}
    jobs.create(spec)
    jobs.wait_phase("GenericJob", "gj", "Running")
    uids = set()
    for attempt in range(3):
        pod = wait_until(lambda: _running(jobs, "gj-worker-0"), timeout=30, what=f"pod attempt {attempt}")
        uids.add(pod.metadata.uid)
        assert pod.metadata.annotations["batch.tensorstack.dev/restart-count"] == str(attempt)
        set_pod_terminated(jobs.core, jobs.ns, "gj-worker-0", phase="Failed", exit_code=137, reason="OOMKilled")
        if attempt < 2:
            wait_until(lambda u=pod.metadata.uid: _uid(jobs, "gj-worker-0") not in (None, u), timeout=30, what="recreated pod")
    status = jobs.wait_phase("GenericJob", "gj", "Failed")["status"]
    assert len(uids) == 3
    assert status["tasks"][0]["restartCount"] == 2
    assert jobs.reasons("gj", "ReplicaRestarting", count=2).count("ReplicaRestarting") == 2


def test_always_restarts_a_completed_replica(jobs, controller):
    spec = job(replicas=2, successRules=[{"worker": [1]}])
    spec["spec"]["replicaSpecs"][0]["restartPolicy"] = {"policy": "Always", "limit": 1}
    jobs.create(spec)
    jobs.wait_phase("GenericJob", "gj", "Running")
    first = jobs.pods("gj")["gj-worker-0"].metadata.uid
    set_pod_terminated(jobs.core, jobs.ns, "gj-worker-0", phase="Succeeded", exit_code=0)
    wait_until(lambda: _uid(jobs, "gj-worker-0") not in (None, first), timeout=30, what="restart after success")
    assert jobs.phase("GenericJob", "gj") == "Running"


def _running(jobs, name):
    pod = jobs.live_pods("gj").get(name)
    return pod if pod is not None and pod.status.phase == "Running" else None


def _uid(jobs, name):
    pod = jobs.live_pods("gj").get(name)
    return pod.metadata.uid if pod is not None else None


def test_cleanup_all_removes_pods_and_services(jobs, controller):
    sim = {f"{SIM}/duration": "1s"}
    jobs.create(job(annotations=sim, cleanUpPolicy="All", service={"ports": [{"name": "p", "port": 80}]}))
    jobs.wait_phase("GenericJob", "gj", "Succeeded")
    wait_until(lambda: jobs.pods("gj") == {}, timeout=30, what="pods cleaned up")
    wait_until(lambda: not jobs.core.list_namespaced_service(jobs.ns).items, timeout=30, what="services cleaned up")
    status = jobs.get("GenericJob", "gj")["status"]
    wait_until(lambda: jobs.get("GenericJob", "gj")["status"]["aggregate"]["deleted"] == 2, what="replicas reported Deleted")
    assert status["phase"] == "Succeeded"


def test_cleanup_unfinished_keeps_finished_pods(jobs, controller):
    sim = {f"{SIM}/duration": "1s", f"{SIM}/fail-pods": "-worker-0$"}
    spec = job(annotations=sim, cleanUpPolicy="Unfinished", failureRules=[{"worker": [0]}])
    spec["spec"]["replicaSpecs"].append(copy.deepcopy(spec["spec"]["replicaSpecs"][0]) | {"type": "ps", "replicas": 1})
    spec["spec"]["replicaSpecs"][1]["template"]["metadata"]["annotations"] = {}  # ps runs forever
    jobs.create(spec)
    jobs.wait_phase("GenericJob", "gj", "Failed")
    wait_until(lambda: "gj-ps-0" not in jobs.live_pods("gj"), timeout=30, what="running ps deleted")
    remaining = jobs.live_pods("gj")
    assert "gj-worker-0" in remaining
    assert remaining["gj-worker-0"].status.phase == "Failed"


def test_cleanup_none_leaves_everything(jobs, controller):
    spec = job(annotations={f"{SIM}/duration": "1s"}, successRules=[{"worker": [0]}], cleanUpPolicy="None")
    spec["spec"]["replicaSpecs"][0]["replicas"] = 1
    spec["spec"]["replicaSpecs"].append(
        {"type": "ps", "replicas": 1, "template": copy.deepcopy(spec["spec"]["replicaSpecs"][0]["template"])}
    )
    spec["spec"]["replicaSpecs"][1]["template"]["metadata"]["annotations"] = {}
    jobs.create(spec)
    jobs.wait_phase("GenericJob", "gj", "Succeeded")
    assert jobs.live_pods("gj")["gj-ps-0"].status.phase == "Running"


def test_a_failed_job_without_a_policy_stops_what_runs_and_keeps_what_ended(jobs, controller):
    # Seed 001: the controller cleans up after a job fails; Unfinished is the default (docs/design.md).
    def replica(rtype: str, annotations: dict) -> dict:
        return {"type": rtype, "replicas": 1,
                "template": {"metadata": {"annotations": annotations},
                             "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}}  # fmt: skip

    spec = job(successRules=[{"worker": [0]}], failureRules=[{"worker": [0]}])
    spec["spec"]["replicaSpecs"] = [
        replica("worker", {f"{SIM}/duration": "4s", f"{SIM}/fail-pods": "-worker-0$", f"{SIM}/exit-code": "3"}),
        replica("done", {f"{SIM}/duration": "1s"}),  # ends first, by itself
        replica("ps", {}),  # runs until someone stops it
    ]
    assert "cleanUpPolicy" not in spec["spec"]
    jobs.create(spec)
    jobs.wait_phase("GenericJob", "gj", "Failed")
    wait_until(lambda: "gj-ps-0" not in jobs.live_pods("gj"), timeout=30, what="the running ps deleted")
    wait_until(lambda: not jobs.core.list_namespaced_service(jobs.ns).items, timeout=30, what="services deleted")
    remaining = jobs.live_pods("gj")
    assert {n: p.status.phase for n, p in remaining.items()} == {"gj-worker-0": "Failed", "gj-done-0": "Succeeded"}
    assert remaining["gj-worker-0"].status.container_statuses[0].state.terminated.exit_code == 3
    status = wait_until(lambda: _deleted(jobs, "gj", "gj-ps-0"), timeout=30, what="ps reported Deleted")
    assert status["phase"] == "Failed"


def _deleted(jobs, job_name: str, replica: str):
    status = jobs.get("GenericJob", job_name)["status"]
    phases = {e["name"]: e["phase"] for t in status["tasks"] for e in t["status"]}
    return status if phases.get(replica) == "Deleted" else None


def test_debug_mode_runs_the_debug_command_and_decides_nothing(jobs, controller):
    spec = job(annotations={f"{SIM}/duration": "1s"}, runMode={"debug": {"enabled": True}})
    jobs.create(spec)
    jobs.wait_phase("GenericJob", "gj", "Running")
    pods = jobs.pods("gj")
    assert {tuple(p.spec.containers[0].command) for p in pods.values()} == {("sleep", "inf")}
    wait_until(lambda: all(p.status.phase == "Succeeded" for p in jobs.pods("gj").values()), what="pods end")
    assert jobs.phase("GenericJob", "gj") == "Running"


def test_pause_and_resume_with_resume_specs(jobs, controller):
    spec = job(
        runMode={"pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "command": ["resume.sh"], "args": ["--ckpt"]}]}}
    )
    jobs.create(spec)
    jobs.wait_phase("GenericJob", "gj", "Running")
    jobs.patch("GenericJob", "gj", {"spec": {"runMode": {"pause": {"enabled": True}}}})
    jobs.wait_phase("GenericJob", "gj", "Paused")
    wait_until(lambda: jobs.pods("gj") == {}, timeout=30, what="pods deleted on pause")
    assert jobs.condition("GenericJob", "gj", "Paused")["status"] == "True"
    jobs.patch("GenericJob", "gj", {"spec": {"runMode": {"pause": {"enabled": False}}}})
    jobs.wait_phase("GenericJob", "gj", "Running", timeout=30)
    pods = jobs.pods("gj")
    assert {(tuple(p.spec.containers[0].command), tuple(p.spec.containers[0].args)) for p in pods.values()} == {
        (("resume.sh",), ("--ckpt",))
    }
    reasons = jobs.reasons("gj", "Paused", "Resuming")
    assert "Paused" in reasons
    assert "Resuming" in reasons


def test_t9k_scheduler_is_recorded_with_a_condition_and_event(jobs, controller):
    jobs.create(job(scheduler={"t9kScheduler": {"queue": "gpu-queue", "priority": 50}}))
    jobs.wait_phase("GenericJob", "gj", "Running")
    pod = jobs.pods("gj")["gj-worker-0"]
    assert pod.metadata.labels["scheduler.tensorstack.dev/queue"] == "gpu-queue"
    assert pod.metadata.annotations["scheduler.tensorstack.dev/priority"] == "50"
    cond = jobs.condition("GenericJob", "gj", "QueueAdmission")
    assert (cond["status"], cond["reason"]) == ("False", "NotEnforced")
    jobs.reasons("gj", "QueueNotEnforced")


def test_deleting_the_job_garbage_collects_its_children(jobs, controller):
    jobs.create(job(service={"ports": [{"name": "p", "port": 80}]}))
    jobs.wait_phase("GenericJob", "gj", "Running")
    jobs.delete("GenericJob", "gj")
    wait_until(lambda: jobs.pods("gj") == {} and not jobs.core.list_namespaced_service(jobs.ns).items, timeout=60, what="GC")
