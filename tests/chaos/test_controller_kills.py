"""The controller SIGKILLed every 1-3 s under load while another client keeps editing the jobs.

Every label edit moves a job's resourceVersion, so the controller's status writes meet
Conflicts; every kill can fall between a decision and its action. Whatever happens, a
replica runs at most 1 + its restart limit times, a finished job never starts again, and
nothing is left behind. Pod runs are counted from a watch (one uid = one run).
"""

from __future__ import annotations

import os
import random
import threading
import time

from kubernetes.client.exceptions import ApiException

from tests.support.cluster import wait_until
from tests.support.ha import PodCreations

LIMIT = 2
JOBS_PER_SHAPE = int(os.environ.get("T9K_CHAOS_JOBS", "12"))
KILL_FOR = float(os.environ.get("T9K_CHAOS_SECONDS", "35"))
AFTER_FINISH = 4  # kills once every job has finished


def _job(name: str, annotations: dict[str, str], **spec: object) -> dict:
    template = {"metadata": {"annotations": annotations}, "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    replica = {"type": "worker", "replicas": 2, "restartPolicy": {"policy": "OnFailure", "limit": LIMIT}, "template": template}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": [replica], **spec}}  # fmt: skip


def failing(name: str) -> dict:
    """worker-0 fails every run: it runs 1 + LIMIT times, then the job fails."""
    return _job(name, {"sim.t9k.test/duration": "2s", "sim.t9k.test/fail-pods": "-worker-0$"})


def succeeding(name: str) -> dict:
    """Both workers succeed once; clean-up All deletes them; they must never come back."""
    return _job(name, {"sim.t9k.test/duration": "3s"}, cleanUpPolicy="All")


class LabelEditor(threading.Thread):
    """Edits every job's labels in a loop, as `kubectl label` or a GitOps tool would."""

    def __init__(self, jobs, names: list[str]) -> None:
        super().__init__(daemon=True)
        self.jobs, self.names = jobs, names
        self.edits = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for name in self.names:
                try:
                    self.jobs.patch("GenericJob", name, {"metadata": {"labels": {"chaos": str(self.edits)}}})
                    self.edits += 1
                except ApiException:
                    pass
                if self.stop.wait(0.01):
                    return


def test_kill_loop_with_conflicting_edits_runs_no_replica_twice(jobs, controller_factory, core, figures):
    seed = int(os.environ.get("T9K_CHAOS_SEED", str(int(time.time()))))
    rng = random.Random(seed)
    runs = PodCreations(core, jobs.ns)
    fail_names = [f"fail-{i}" for i in range(JOBS_PER_SHAPE)]
    ok_names = [f"ok-{i}" for i in range(JOBS_PER_SHAPE)]
    editor = LabelEditor(jobs, fail_names + ok_names)
    controller = controller_factory()
    for f, o in zip(fail_names, ok_names, strict=True):
        jobs.create(failing(f))
        jobs.create(succeeding(o))
    editor.start()
    kills = 0
    phases: dict[str, str | None] = {}

    def all_finished() -> bool:
        for name in fail_names + ok_names:
            phases[name] = jobs.phase("GenericJob", name)
        return all(p in ("Succeeded", "Failed") for p in phases.values())

    started = time.monotonic()
    kills_at_finish = None
    try:
        # Kills go on while the jobs work, then AFTER_FINISH more (a controller started again
        # over finished jobs must start nothing), for KILL_FOR seconds at most.
        while time.monotonic() - started < KILL_FOR:
            time.sleep(rng.uniform(1, 3))
            controller.kill()
            kills += 1
            controller = controller_factory(wait=False)
            if kills_at_finish is None and all_finished():
                kills_at_finish = kills
            if kills_at_finish is not None and kills - kills_at_finish >= AFTER_FINISH:
                break
        controller.wait_healthy(60)
        wait_until(all_finished, timeout=180, interval=1, what="every job finished")
        editor.stop.set()
        recovery_started = time.monotonic()
        wait_until(lambda: not any(jobs.live_pods(n) for n in ok_names), timeout=60, what="clean-up of succeeded jobs")
        cleanup_seconds = time.monotonic() - recovery_started
        time.sleep(3)  # anything a wrong pass would start shows up by now
        runs.caught_up()
    finally:
        editor.stop.set()
        runs.stop()

    allowed = {f"{n}-worker-0": 1 + LIMIT for n in fail_names}
    allowed |= {f"{n}-worker-1": 1 for n in fail_names}
    allowed |= {f"{n}-worker-{r}": 1 for n in ok_names for r in (0, 1)}
    extra = {pod: runs.count(pod) - n for pod, n in allowed.items() if runs.count(pod) > n}
    wrong = {n: p for n, p in phases.items() if p != ("Failed" if n.startswith("fail-") else "Succeeded")}
    orphans = [n for name in ok_names for n in jobs.live_pods(name)]
    short = {f"{n}-worker-0": runs.count(f"{n}-worker-0") for n in fail_names if runs.count(f"{n}-worker-0") < 1 + LIMIT}
    restarts = {n: jobs.get("GenericJob", n)["status"]["tasks"][0]["restartCount"] for n in fail_names}
    after_finish = kills - (kills_at_finish or kills)
    figures(f"seed={seed} kills={kills} kills_after_finish={after_finish} label_edits={editor.edits} jobs={2 * JOBS_PER_SHAPE} "
          f"pod_runs={runs.created()} duplicates={sum(extra.values())} "
          f"wrong_phases={len(wrong)} orphans={len(orphans)} cleanup_after_finish={cleanup_seconds:.1f}s")  # fmt: skip
    assert extra == {}, f"replicas ran beyond their policy: {extra}"
    assert wrong == {}, f"jobs in the wrong final phase: {wrong}"
    assert orphans == []
    assert short == {}, f"replicas restarted fewer times than the policy allows: {short}"
    assert set(restarts.values()) == {LIMIT}, restarts
