"""When a job has not started, since when, and when it never will (airflow_t9k.api.startup)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from airflow_t9k.api.startup import DEFAULT_STARTUP_TIMEOUT, StartupErrors, fatal_waiting, startup_remaining

CREATED = "2026-11-25T12:00:00Z"
AT = datetime(2026, 11, 25, 12, 1, 0, tzinfo=timezone.utc).timestamp()  # 60 s after creation


def job(phase=None, resumed=None, paused=None, waiting=None):
    status: dict = {"phase": phase} if phase else {}
    if resumed or paused:
        status["conditions"] = [
            {"type": "Paused", "status": "True" if paused else "False", "lastTransitionTime": resumed or paused}
        ]
    if waiting:
        status["tasks"] = [{"type": "worker", "status": [
            {"name": pod, "phase": "Pending", "containers": [{"name": "main", "state": "Waiting", "reason": reason}]}
            for pod, reason in waiting.items()]}]  # fmt: skip
    return {"kind": "GenericJob", "metadata": {"creationTimestamp": CREATED}, "status": status}


@pytest.mark.parametrize(
    ("the_job", "left"),
    [(job("Pending"), -30),
     (job("Running"), None),
     (job("Paused", paused="2026-11-25T12:00:40Z"), None),  # paused on purpose: no clock
     (job("Resuming", resumed="2026-11-25T12:00:50Z"), 20),  # counts from the resume, not the creation
     (job("Resuming", resumed="2026-11-25T11:00:00Z"), -30),  # a resume before creation cannot move it back
     (job("Running", resumed="2026-11-25T12:00:50Z"), None)],
    ids=["pending", "running", "paused", "resuming", "old-resume", "running-after-resume"],
)  # fmt: skip
def test_startup_timeout_applies_again_after_a_resume(the_job, left):
    assert startup_remaining(the_job, 30, now=AT) == left


@pytest.mark.parametrize(
    ("the_job", "expected"),
    [(job("Pending", waiting={"j-worker-0": "ImagePullBackOff"}), {"j-worker-0": "ImagePullBackOff"}),
     (job("Pending", waiting={"j-worker-0": "ErrImagePull", "j-worker-1": "ContainerCreating"}), {"j-worker-0": "ErrImagePull"}),
     (job(None, waiting={"j-worker-0": "InvalidImageName"}), {"j-worker-0": "InvalidImageName"}),
     (job("Resuming", resumed=CREATED, waiting={"j-worker-0": "CreateContainerConfigError"}),
      {"j-worker-0": "CreateContainerConfigError"}),
     (job("Running", waiting={"j-worker-1": "ImagePullBackOff"}), {}),  # a restart of a running job: not startup's
     (job("Pending", waiting={"j-worker-0": "ContainerCreating"}), {})],
    ids=["backoff", "one-of-two", "no-phase-yet", "resuming", "running", "creating"],
)  # fmt: skip
def test_waiting_reasons_that_waiting_does_not_fix(the_job, expected):
    assert fatal_waiting(the_job) == expected


BAD = job("Pending", waiting={"j-worker-0": "ImagePullBackOff"})
FINE = job("Pending")


@pytest.mark.parametrize(
    ("grace", "seen", "due", "next_in"),
    [(120, [(0, BAD)], {}, 120),
     (120, [(0, BAD), (119, BAD)], {}, 1),
     (120, [(0, BAD), (120, BAD)], {"j-worker-0": "ImagePullBackOff"}, None),
     (120, [(0, BAD), (60, FINE), (130, BAD)], {}, 120),  # it passed (a registry hiccup): the grace starts again
     (0, [(0, BAD)], {"j-worker-0": "ImagePullBackOff"}, None),
     (None, [(0, BAD), (1000, BAD)], {}, None)],
    ids=["first-sight", "within-grace", "past-grace", "went-away", "no-grace", "off"],
)  # fmt: skip
def test_a_fatal_reason_fails_the_wait_once_it_outlasts_the_grace(grace, seen, due, next_in):
    errors = StartupErrors(grace)
    for now, the_job in seen:
        got = errors.observe(the_job, float(now))
    assert got == (due, next_in)


def test_operators_have_a_default_startup_timeout_and_grace_and_hand_them_to_the_trigger():
    from tests.unit.airflow.test_operators import op

    o = op()
    assert (o.startup_timeout, o.startup_error_grace) == (DEFAULT_STARTUP_TIMEOUT, 120.0)
    trigger = o._trigger({"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u"}, None)
    assert (trigger.policy.startup_timeout, trigger.policy.startup_error_grace) == (DEFAULT_STARTUP_TIMEOUT, 120.0)
    assert op(startup_timeout=None, startup_error_grace=None).startup_timeout is None


def test_the_detail_is_the_kubelets_message_for_the_replicas_that_cannot_start():
    from airflow_t9k.api.startup import waiting_detail

    def pod(name, reason, message):
        return {
            "metadata": {"name": name},
            "status": {"containerStatuses": [{"state": {"waiting": {"reason": reason, "message": message}}}]},
        }

    pods = [
        pod("j-worker-0", "ImagePullBackOff", 'Back-off pulling image "busybox:typo"'),
        pod("j-worker-1", "ContainerCreating", ""),
    ]
    assert (
        waiting_detail(pods, {"j-worker-0": "ImagePullBackOff"})
        == 'j-worker-0: ImagePullBackOff: Back-off pulling image "busybox:typo"'
    )
    assert waiting_detail(pods, {}) == ""
