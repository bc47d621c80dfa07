"""Bad input the CRD schema cannot catch ends Failed with a condition naming the problem."""

from __future__ import annotations

import copy

import pytest

from tests.builders import colossal, cond, generic, pod, run, service


def _with(job, path, value):
    job = copy.deepcopy(job)
    target = job
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return job


def _cmd(value):
    return _with(generic(), ["spec", "replicaSpecs", 0, "template", "spec", "containers", 0, "command"], value)


CASES = [
    (generic(successRules=[{"chief": [0]}]), "names replica type 'chief'"),
    (generic(failureRules=[{"worker": [5]}]), "has rank 5, but worker has 2 replica(s)"),
    (generic(successRules=[{"worker": []}]), "must be a non-empty list of ranks"),
    (generic(successRules=[{}]), "must be a non-empty map"),
    (_cmd(["echo", "$(replicas[chief])"]), "names replica type 'chief'"),
    (_cmd(["echo", "$(service.port[http])", "$(service.port[grpc])"]), "names ports http, grpc that neither spec.service.ports"),
    (_with(_cmd(["echo", "$(service.port[http])"]), ["spec", "service"], {}), "spec.service.ports declares none"),
    (
        _with(_cmd(["echo", "$(service.port[http])"]), ["spec", "service"], {"ports": [{"name": "grpc", "port": 1}]}),
        "names port 'http', but spec.service.ports has grpc",
    ),
    (_cmd(["echo", "$(service.worker[7].host)"]), None),  # needs a service: see below
    (generic("job", ("worker", 1), ("worker", 1)), "appears more than once"),
    (_with(generic(), ["spec", "replicaSpecs", 0, "replicas"], -1), "must be >= 0"),
    (_with(generic(), ["spec", "replicaSpecs", 0, "replicas"], "four"), "must be an integer"),
    (_with(generic(), ["spec", "replicaSpecs", 0, "template"], None), "template is required"),
    (_with(generic(), ["spec", "replicaSpecs", 0, "template", "spec", "containers"], []), "containers is empty"),
    (_with(generic(), ["spec", "replicaSpecs"], []), "at least one replica type"),
    (_with(generic(), ["spec", "replicaSpecs", 0, "restartPolicy"], {"policy": "Sometimes"}), "restartPolicy.policy"),
    (_with(generic(), ["spec", "replicaSpecs", 0, "restartPolicy"], {"policy": "OnFailure", "limit": -1}), "restartPolicy.limit"),
    (generic(runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "chief"}]}}), "runMode.debug.replicaSpecs"),
    (generic(runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "chief"}]}}), "runMode.pause.resumeSpecs"),
    (generic("x" * 64), "at most 63 characters"),
    (generic("x" * 60, service={"ports": [{"name": "a", "port": 1}]}), "longer than 63 characters"),
    (generic(service={"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}), "duplicate port names"),
    # Smaller items of the fidelity issue: what the CRD blocks must not crash plan() either.
    (generic(service={"ports": [{"port": 80}]}), "spec.service.ports[0].name is required"),
    (generic(service={"ports": [{"name": "http"}]}), "spec.service.ports[0].port must be an integer"),
    (generic("job", ("worker", 0), ("ps", 0)), "every replica type has 0 replicas: the job has nothing to run"),
    # Replica ceilings (reliability issue): a job past them is Failed, not run.
    (generic("job", ("worker", 1001)), "replicaSpecs[worker].replicas is 1001; at most 1000 per replica type"),
    (generic("job", ("a", 1000), ("b", 1000), ("c", 1)), "the job has 2001 replicas in all; at most 2000 per job"),
    # Seed 000's mode table: GenericJob has no Elastic mode.
    (generic(elastic={"enabled": True}), "GenericJob does not support Elastic mode"),
    (generic(runMode={"elastic": {"enabled": True}}), "runMode.elastic is not a field"),
]
CASES[8] = (
    _with(_cmd(["echo", "$(service.worker[7].host)"]), ["spec", "service"], {"ports": [{"name": "http", "port": 1}]}),
    "names rank 7, but worker has 2",
)


@pytest.mark.parametrize(("job", "needle"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_invalid_generic_job_fails_with_a_condition_naming_the_problem(job, needle):
    p = run(job)
    failed = cond(p, "Failed")
    assert p.status["phase"] == "Failed"
    assert failed["reason"] == "InvalidSpec"
    assert needle in failed["message"]
    assert p.actions == ()
    assert (p.events[0].type, p.events[0].reason) == ("Warning", "Failed")


@pytest.mark.parametrize(
    ("job", "needle"),
    [
        (
            _with(colossal(), ["spec", "worker", "template", "spec", "containers", 0, "name"], "trainer"),
            "container named 'worker'",
        ),
        (_with(colossal(), ["spec", "launcher", "image"], ""), "spec.launcher.image is required"),
        (_with(colossal(), ["spec", "worker", "procPerWorker"], 0), "procPerWorker"),
        (_with(colossal(), ["spec", "worker", "command"], []), "spec.worker.command is required"),
        (_with(colossal(), ["spec", "ssh", "sshdPath"], "sshd"), "absolute path"),
        (_with(colossal(), ["spec", "worker", "replicas"], 0), "spec.worker.replicas"),
    ],
    ids=["no-worker-container", "no-launcher-image", "proc-per-worker", "no-command", "relative-sshd", "zero-workers"],
)
def test_invalid_colossalai_job(job, needle):
    p = run(job)
    assert (p.status["phase"], cond(p, "Failed")["reason"]) == ("Failed", "InvalidSpec")
    assert needle in cond(p, "Failed")["message"]
    assert p.actions == ()


def test_spec_broken_after_finishing_keeps_the_finished_status():
    finished = run(
        generic(), pod("job-worker-0", "Succeeded", 0), pod("job-worker-1", "Succeeded", 0), status={"phase": "Running"}
    )
    broken = run(generic(successRules=[{"chief": [0]}]), status=finished.status)
    assert broken.status == finished.status


def test_only_pods_about_to_be_created_are_rendered():
    # Pods are immutable: a template edited after they exist is not rendered (or judged) again
    # until a pod has to be created from it.
    edited = generic()
    edited["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"] = ["echo", "$(replicas[ps])"]
    svc = (service("job-worker-0"), service("job-worker-1"))
    running = run(edited, pod("job-worker-0"), pod("job-worker-1"), *svc, status={"phase": "Running"})
    assert running.status["phase"] == "Running"
    assert running.actions == ()
    recreate = run(edited, pod("job-worker-0"), *svc, status={"phase": "Running"})
    assert recreate.status["phase"] == "Failed"
    assert "names replica type 'ps'" in cond(recreate, "Failed")["message"]
