"""Bad input is rejected at admission or ends Failed with a condition that names the problem,
while the controller keeps serving the other jobs."""

from __future__ import annotations

import copy

import pytest
from kubernetes.client.exceptions import ApiException

from tests.support.manifests import manifest


def generic(name="bad", **spec):
    body = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name},
        "spec": {
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
            ],
            **spec,
        },
    }
    return body


def with_replica(**fields):
    job = generic()
    job["spec"]["replicaSpecs"][0].update(fields)
    return job


def colossal(**spec):
    job = manifest("colossalaijob-example")
    job["metadata"]["name"] = "bad"
    job["spec"].update(spec)
    return job


def without(job, *path):
    job = copy.deepcopy(job)
    target = job
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return job


ADMISSION = [
    ("wrong-type", with_replica(replicas="four"), "replicas"),
    ("negative-replicas", with_replica(replicas=-1), "replicas"),
    ("missing-template", without(generic(), "spec", "replicaSpecs", 0, "template"), "template"),
    ("duplicate-types", generic(replicaSpecs=[generic()["spec"]["replicaSpecs"][0]] * 2), "Duplicate value"),
    ("bad-restart-policy", with_replica(restartPolicy={"policy": "Sometimes"}), "policy"),
    ("negative-restart-limit", with_replica(restartPolicy={"policy": "OnFailure", "limit": -1}), "limit"),
    ("bad-cleanup-policy", generic(cleanUpPolicy="Sometimes"), "cleanUpPolicy"),
    ("no-containers", with_replica(template={"spec": {"containers": []}}), "containers"),
    ("port-out-of-range", generic(service={"ports": [{"name": "http", "port": 70000}]}), "port"),
    ("negative-rank-in-rule", generic(successRules=[{"worker": [-1]}]), "successRules"),
    ("uppercase-type", with_replica(type="Worker"), "type"),
    ("name-too-long", generic(name="x" * 64), "at most 63 characters"),
    ("no-replica-specs", generic(replicaSpecs=[]), "replicaSpecs"),
    ("colossalai-no-launcher", without(colossal(), "spec", "launcher"), "launcher"),
    ("colossalai-relative-sshd", colossal(ssh={"authMountPath": "/root/.ssh", "sshdPath": "usr/sbin/sshd"}), "sshdPath"),
    ("colossalai-zero-proc", colossal(worker={**manifest("colossalaijob-example")["spec"]["worker"], "procPerWorker": 0}),
     "procPerWorker"),
    ("pytorch-elastic-min-above-max", {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob",
                                       "metadata": {"name": "bad"},
                                       "spec": {"elastic": {"enabled": True, "minReplicas": 4, "maxReplicas": 2},
                                       "replicaSpecs": generic()["spec"]["replicaSpecs"]}}, "minReplicas"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "body", "needle"), ADMISSION, ids=[c[0] for c in ADMISSION])
def test_rejected_at_admission(jobs, case, body, needle):
    assert needle in jobs.rejected(body)


def test_changing_resume_specs_is_rejected(jobs):
    pause = {"enabled": False, "resumeSpecs": [{"type": "worker", "command": ["a"]}]}
    jobs.create(generic(runMode={"pause": pause}))
    with pytest.raises(ApiException) as exc:
        jobs.patch("GenericJob", "bad", {"spec": {"runMode": {"pause": {"resumeSpecs": [{"type": "worker", "command": ["b"]}]}}}})
    assert exc.value.status == 422
    assert "resumeSpecs is immutable" in exc.value.body
    jobs.patch("GenericJob", "bad", {"spec": {"runMode": {"pause": {"enabled": True}}}})  # toggling stays allowed


def _cmd(*command):
    return with_replica(template={"spec": {"containers": [{"name": "main", "image": "busybox", "command": list(command)}]}})


CONTROLLER = [
    ("unknown-type-in-rule", generic(successRules=[{"chief": [0]}]), "names replica type 'chief'"),
    ("rank-out-of-range", generic(failureRules=[{"worker": [2]}]), "has rank 2, but worker has 2 replica(s)"),
    ("unknown-type-in-variable", _cmd("echo", "$(replicas[ps])"), "$(replicas[ps]) names replica type 'ps'"),
    ("port-variables-without-service", _cmd("echo", "$(service.port[http])", "$(service.port[grpc])"),
     "names ports http, grpc that neither spec.service.ports nor a container port declares"),
    ("host-variable-rank-out-of-range", _cmd("echo", "$(service.worker[9].host)"), "$(service.worker[9].host) names rank 9"),
    ("debug-spec-for-unknown-type", generic(runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "chief"}]}}),
     "runMode.debug"),
    ("pod-rejected-by-api-server", with_replica(template={"spec": {"containers": [{"name": "main"}]}}),
     "rejected Pod bad-worker-0"),
    ("colossalai-no-worker-container",
     colossal(worker={**manifest("colossalaijob-example")["spec"]["worker"],
                      "template": {"spec": {"containers": [{"name": "x", "image": "i"}]}}}),
     "container named 'worker'"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "body", "needle"), CONTROLLER, ids=[c[0] for c in CONTROLLER])
def test_failed_with_a_condition_while_other_jobs_run(jobs, controller, case, body, needle):
    jobs.create(generic("healthy"))
    jobs.create(body)
    kind = body["kind"]
    jobs.wait_phase(kind, "bad", "Failed")
    failed = jobs.condition(kind, "bad", "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert needle in failed["message"], failed["message"]
    jobs.reasons("bad", "Failed")
    jobs.wait_phase("GenericJob", "healthy", "Running")
    assert sorted(jobs.pods("healthy")) == ["healthy-worker-0", "healthy-worker-1"]
    assert controller.proc.poll() is None  # still running
