"""Deadlines and budgets that survive queues and pauses (issue 30, item 2), against the real API server.

- ``activeDeadlineSeconds`` counts running time since the last resume: a job paused past its
  deadline runs again after the resume and fails only a full deadline later.
- Deleting a finished job's pods and Services never brings the job back, and deleting a
  running job's pods never gives back the restarts it spent (Kubeflow Trainer #3779's class of
  bug). The Workload half is in tests/integration/test_kueue.py.
"""

from __future__ import annotations

from datetime import datetime

from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated

PT, GJ = "PyTorchTrainingJob", "GenericJob"
RESTARTS = "batch.tensorstack.dev/restart-count"


def pytorch(name: str, deadline: int) -> dict:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "busybox", "command": ["sleep", "3600"]}]}}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": PT, "metadata": {"name": name},
        "spec": {"runPolicy": {"activeDeadlineSeconds": deadline},
                 "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": "Never", "template": template}]},
    }  # fmt: skip


def gjob(name: str) -> dict:
    template = {"spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": name},
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "OnFailure", "limit": 3},
                                   "template": template}]},
    }  # fmt: skip


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def condition(job: dict, type_: str) -> dict:
    return next(c for c in job["status"]["conditions"] if c["type"] == type_)


def test_a_paused_job_gets_its_whole_deadline_again_after_the_resume(jobs, controller):
    jobs.create(pytorch("dl", deadline=8))
    jobs.wait_phase(PT, "dl", "Running")
    jobs.patch(PT, "dl", {"spec": {"runMode": {"pause": {"enabled": True}}}})
    jobs.wait_phase(PT, "dl", "Paused")
    wait_until(lambda: not jobs.pods("dl"), timeout=60, what="the paused job's pods gone")
    # Past the deadline while paused: before issue 30 the resume failed the job at once.
    wait_until(lambda: (datetime.now().astimezone() - when(jobs.get(PT, "dl")["status"]["startTime"])).total_seconds() > 10,
               timeout=30, interval=0.5, what="the deadline passed while paused")  # fmt: skip
    jobs.patch(PT, "dl", {"spec": {"runMode": {"pause": {"enabled": False}}}})
    resumed = jobs.wait_phase(PT, "dl", "Running", timeout=60)
    assert resumed["status"].get("lastResumeTime"), resumed["status"]
    assert not any(c["type"] == "Failed" and c["status"] == "True" for c in resumed["status"]["conditions"])
    failed = jobs.wait_phase(PT, "dl", "Failed", timeout=60)
    cond = condition(failed, "Failed")
    assert cond["reason"] == "DeadlineExceeded"
    assert "since it resumed" in cond["message"]
    ran = (when(cond["lastTransitionTime"]) - when(failed["status"]["lastResumeTime"])).total_seconds()
    assert ran >= 8, failed["status"]


def restart_counts(job: dict) -> dict[str, int]:
    return {e["name"]: e["restartCount"] for t in job["status"]["tasks"] for e in t["status"]}


def children_created(controller) -> float:
    """Pods and Services the controller has created (its Events are creates too, and the one for
    a job's end is written just after its status)."""
    return sum(controller.metric_sum("airflow_t9k_api_writes_total", verb="create", resource=r) for r in ("pods", "services"))


def settled(controller, before: float) -> bool:
    """The controller has planned at least once more since ``before`` and has nothing queued."""
    return (controller.metric_sum("controller_runtime_reconcile_total") > before
            and controller.metric_sum("workqueue_depth") == 0)  # fmt: skip


def test_deleting_a_running_jobs_pods_keeps_the_restarts_it_spent(jobs, controller):
    jobs.create(gjob("rb"))
    jobs.wait_phase(GJ, "rb", "Running")
    wait_until(lambda: all(p.status.phase == "Running" for p in jobs.live_pods("rb").values()) and len(jobs.live_pods("rb")) == 2,
               what="both replicas running")  # fmt: skip
    old = jobs.pods("rb")["rb-worker-0"].metadata.uid
    set_pod_terminated(jobs.core, jobs.ns, "rb-worker-0", phase="Failed", exit_code=1)
    wait_until(lambda: restart_counts(jobs.get(GJ, "rb")).get("rb-worker-0") == 1, what="one restart counted")
    wait_until(lambda: (p := jobs.live_pods("rb").get("rb-worker-0")) is not None and p.metadata.uid != old,
               what="worker-0 recreated")  # fmt: skip
    gone = {p.metadata.uid for p in jobs.pods("rb").values()}
    for name in list(jobs.pods("rb")):
        jobs.core.delete_namespaced_pod(name, jobs.ns, grace_period_seconds=0)

    def back() -> dict | None:
        live = jobs.live_pods("rb")
        return live if len(live) == 2 and not gone & {x.metadata.uid for x in live.values()} else None

    pods = wait_until(back, timeout=60, what="both pods back")
    assert pods["rb-worker-0"].metadata.annotations[RESTARTS] == "1"
    assert pods["rb-worker-1"].metadata.annotations[RESTARTS] == "0"
    job = jobs.get(GJ, "rb")
    assert restart_counts(job) == {"rb-worker-0": 1, "rb-worker-1": 0}
    assert [e["counted"] for e in job["status"].get("restartHistory") or []] == [True]


def test_deleting_a_finished_jobs_pods_and_services_never_resurrects_it(jobs, controller):
    jobs.create(gjob("fin"))
    jobs.wait_phase(GJ, "fin", "Running")
    wait_until(lambda: len([p for p in jobs.live_pods("fin").values() if p.status.phase == "Running"]) == 2,
               what="both replicas running")  # fmt: skip
    set_pod_terminated(jobs.core, jobs.ns, "fin-worker-0", phase="Failed", exit_code=1)
    wait_until(lambda: restart_counts(jobs.get(GJ, "fin")).get("fin-worker-0") == 1, what="one restart counted")
    wait_until(lambda: (p := jobs.live_pods("fin").get("fin-worker-0")) is not None and p.status.phase == "Running",
               timeout=60, what="worker-0 running again")  # fmt: skip
    for name in ("fin-worker-0", "fin-worker-1"):
        set_pod_terminated(jobs.core, jobs.ns, name, phase="Succeeded", exit_code=0)
    done = jobs.wait_phase(GJ, "fin", "Succeeded")
    creates = children_created(controller)
    before = controller.metric_sum("controller_runtime_reconcile_total")
    for name in jobs.pods("fin"):
        jobs.core.delete_namespaced_pod(name, jobs.ns, grace_period_seconds=0)
    for svc in jobs.core.list_namespaced_service(jobs.ns, label_selector="batch.tensorstack.dev/job-name=fin").items:
        jobs.core.delete_namespaced_service(svc.metadata.name, jobs.ns)
    wait_until(lambda: not jobs.pods("fin"), what="the finished job's pods gone")
    wait_until(lambda: settled(controller, before), what="the controller planned the job again")
    after = jobs.get(GJ, "fin")
    assert after["status"]["phase"] == "Succeeded"
    assert restart_counts(after) == restart_counts(done) == {"fin-worker-0": 1, "fin-worker-1": 0}
    assert after["status"].get("restartHistory") == done["status"].get("restartHistory")
    assert children_created(controller) == creates > 0
    assert not jobs.pods("fin")
    assert not jobs.core.list_namespaced_service(jobs.ns, label_selector="batch.tensorstack.dev/job-name=fin").items
