"""plan() for GenericJob: one row per rule, policy and mode path."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile import Create
from airflow_t9k.controller.reconcile.desired import RESTART_COUNT_ENV
from tests.builders import cond, generic, pod, restart, run, service, settle

W0, W1 = "job-worker-0", "job-worker-1"
SVC = (service(W0), service(W1))  # every replica has its Service (seed 001's DNS names)
RULES = {"successRules": [{"worker": [0]}], "failureRules": [{"worker": [0]}, {"worker": [1]}]}


# -- lifecycle --------------------------------------------------------------------------


def test_new_job_creates_every_replica_and_is_pending():
    p = run(generic())
    assert p.creates("Pod") == [W0, W1]
    assert p.status["phase"] == "Pending"
    assert p.status["aggregate"]["creating"] == 2
    assert cond(p, "Initializing")["status"] == "False"
    assert [e.reason for e in p.events] == ["Pending"]


def test_created_pods_carry_labels_owner_and_never_restart_policy():
    manifest = next(a.manifest for a in run(generic()).actions if isinstance(a, Create) and a.kind == "Pod")
    meta = manifest["metadata"]
    assert meta["labels"]["batch.tensorstack.dev/job-name"] == "job"
    assert meta["labels"]["batch.tensorstack.dev/replica-type"] == "worker"
    assert meta["labels"]["batch.tensorstack.dev/replica-index"] == "0"
    assert meta["ownerReferences"] == [
        {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "name": "job", "uid": "uid-job",
         "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip
    assert manifest["spec"]["restartPolicy"] == "Never"


def test_all_pods_running_makes_the_job_running_and_initialized():
    p = run(generic(), pod(W0), pod(W1), *SVC)
    assert p.actions == ()
    assert p.status["phase"] == "Running"
    assert cond(p, "Initializing")["status"] == "True"
    assert cond(p, "Running")["status"] == "True"
    assert p.status["aggregate"]["running"] == 2


def test_one_pod_still_pending_keeps_the_job_pending():
    assert run(generic(), pod(W0), pod(W1, "Pending")).status["phase"] == "Pending"


def test_same_observation_twice_changes_nothing():
    job = generic(**RULES)
    first = run(job, pod(W0), pod(W1), *SVC)
    second = run(job, pod(W0), pod(W1), *SVC, status=first.status)
    assert second.status == first.status
    assert second.actions == ()
    assert second.events == ()


# -- success and failure rules ------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "pods", "phase", "reason"),
    [
        (RULES, [pod(W0, "Succeeded", 0), pod(W1)], "Succeeded", "Succeeded"),
        (RULES, [pod(W0), pod(W1, "Failed", 1)], "Failed", "Failed"),
        (RULES, [pod(W0, "Failed", 1), pod(W1, "Succeeded", 0)], "Failed", "Failed"),
        ({}, [pod(W0, "Succeeded", 0), pod(W1)], "Running", None),
        ({}, [pod(W0, "Succeeded", 0), pod(W1, "Succeeded", 0)], "Succeeded", "Succeeded"),
        ({}, [pod(W0, "Failed", 2), pod(W1)], "Failed", "Failed"),
        ({"successRules": [{"worker": [0, 1]}], "failureRules": [{"worker": [0, 1]}]},
         [pod(W0, "Failed", 1), pod(W1, "Succeeded", 0)], "Failed", "NoRuleSatisfied"),
        ({"successRules": [{"worker": [0, 1]}], "failureRules": [{"worker": [0, 1]}]},
         [pod(W0, "Failed", 1), pod(W1)], "Running", None),
    ],
    ids=["success-rule", "failure-rule-second", "failure-before-success", "default-needs-all",
         "default-all-succeeded", "default-any-failed", "all-ended-no-rule", "partial-failure-rule-waits"],
)  # fmt: skip
def test_rules(spec, pods, phase, reason):
    p = run(generic(**spec), *pods, status={"phase": "Running"})
    assert p.status["phase"] == phase
    if reason:
        finished = cond(p, "Completed" if phase == "Succeeded" else "Failed")
        assert (finished["status"], finished["reason"]) == ("True", reason)


def test_failure_message_names_the_rule_and_event_is_a_warning():
    p = run(generic(**RULES), pod(W0), pod(W1, "Failed", 137, reason="OOMKilled"), status={"phase": "Running"})
    assert cond(p, "Failed")["message"] == 'The job is failed with rule: { "worker": [1] }'
    assert cond(p, "Completed")["status"] == "False"
    assert (p.events[0].type, p.events[0].reason) == ("Warning", "Failed")
    assert "job-worker-1: container main exit code 137 (OOMKilled)" in cond(p, "ReplicaFailure")["message"]


def test_multi_type_rule_needs_every_listed_replica():
    job = generic("job", ("master", 3), ("worker", 2), successRules=[{"master": [2], "worker": [0, 1]}])
    partial = [pod("job-master-0"), pod("job-master-1"), pod("job-master-2", "Succeeded", 0), pod(W0, "Succeeded", 0), pod(W1)]
    assert run(job, *partial, status={"phase": "Running"}).status["phase"] == "Running"
    partial[-1] = pod(W1, "Succeeded", 0)
    assert run(job, *partial, status={"phase": "Running"}).status["phase"] == "Succeeded"


# -- restart policies --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "limit", "pod_phase", "code", "done", "restarts"),
    [
        ("OnFailure", 2, "Failed", 1, 0, True),
        ("OnFailure", 2, "Failed", 1, 1, True),
        ("OnFailure", 2, "Failed", 1, 2, False),
        ("OnFailure", None, "Failed", 1, 2, True),  # default limit is 3
        ("OnFailure", 2, "Succeeded", 0, 0, False),
        ("Always", 2, "Succeeded", 0, 0, True),
        ("Always", 1, "Succeeded", 0, 1, False),
        ("Never", None, "Failed", 1, 0, False),
    ],
    ids=["onfailure-first", "onfailure-second", "onfailure-exhausted", "onfailure-default-limit",
         "onfailure-not-on-success", "always-on-success", "always-exhausted", "never"],
)  # fmt: skip
def test_restart_policy(policy, limit, pod_phase, code, done, restarts):
    # worker-1 runs on, and the rules only look at worker-1, so worker-0's fate is the policy's.
    job = restart(generic(successRules=[{"worker": [1]}], failureRules=[{"worker": [1]}]), policy, limit)
    p = run(job, pod(W0, pod_phase, code, restarts=done), pod(W1), status={"phase": "Running"})
    assert (W0 in p.deletes("Pod")) is restarts
    entry = p.status["tasks"][0]["status"][0]
    assert entry["restartCount"] == done + (1 if restarts else 0)
    assert p.status["tasks"][0]["restartCount"] == entry["restartCount"]
    if restarts:
        assert any(e.reason == "ReplicaRestarting" for e in p.events)


def test_restart_count_survives_recreation():
    job = restart(generic(), "OnFailure", 3)
    deleted = run(job, pod(W0, "Failed", 1), pod(W1), status={"phase": "Running"})
    recreate = run(job, pod(W1), status=deleted.status)
    created = next(a.manifest for a in recreate.actions if isinstance(a, Create) and a.kind == "Pod")
    assert created["metadata"]["name"] == W0
    assert created["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "1"
    assert recreate.status["phase"] == "Running"  # a restart does not send the job back to Pending


def test_exhausted_restarts_fail_the_job_by_default_rules():
    job = restart(generic(), "OnFailure", 1)
    p = run(job, pod(W0, "Failed", 1, restarts=1), pod(W1), status={"phase": "Running"})
    assert p.status["phase"] == "Failed"
    # Nothing is restarted; the default clean-up (Unfinished) deletes the replica still running.
    assert p.deletes("Pod") == [W1]


# -- clean-up ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "pods_deleted", "services_deleted"),
    [("All", [W0, W1], [W0, W1]), ("Unfinished", [W1], [W0, W1]), ("None", [], []), (None, [W1], [W0, W1])],
    ids=["all", "unfinished", "none", "default-unfinished"],
)
def test_cleanup_policy_on_finish(policy, pods_deleted, services_deleted):
    spec = {**RULES, "service": {"ports": [{"name": "http", "port": 2222}]}}
    if policy:
        spec["cleanUpPolicy"] = policy
    p = run(generic(**spec), pod(W0, "Succeeded", 0), pod(W1), service(W0), service(W1), status={"phase": "Running"})
    assert p.status["phase"] == "Succeeded"
    assert p.deletes("Pod") == pods_deleted
    assert p.deletes("Service") == services_deleted


def test_finished_job_is_only_cleaned_up_and_never_changes_phase():
    job = generic(cleanUpPolicy="All", **RULES)
    finished = run(job, pod(W0, "Succeeded", 0), pod(W1), status={"phase": "Running"})
    later = run(job, pod(W1, "Failed", 1), status=finished.status)
    assert later.status["phase"] == "Succeeded"
    assert later.deletes("Pod") == [W1]
    assert later.creates() == []
    assert {e["phase"] for e in later.status["tasks"][0]["status"]} == {"Deleted", "Failed"}


# -- services and variables -------------------------------------------------------------


def test_service_per_replica_with_named_ports_headless():
    p = run(generic(service={"ports": [{"name": "http", "port": 2222}]}))
    services = [a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Service"]
    assert [s["metadata"]["name"] for s in services] == [W0, W1]
    assert services[1]["spec"]["ports"] == [{"name": "http", "port": 2222, "targetPort": 2222, "protocol": "TCP"}]
    assert services[1]["spec"]["clusterIP"] == "None"
    assert services[1]["spec"]["selector"]["batch.tensorstack.dev/replica-index"] == "1"


def test_variables_are_substituted_in_command_args_and_env():
    job = generic("job", ("ps", 1), ("worker", 2), service={"ports": [{"name": "http", "port": 2222}]})
    c = job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]
    c["command"] = ["run", "$(type)", "$(rank)"]
    c["args"] = ["--ps=$(service.ps[0].host):$(service.port[http])", "--n=$(replicas[worker])", "$(HOME)", "$$(type)"]
    c["env"] = [{"name": "TF", "value": '{"task":{"type":"$(type)","index":$(rank)}}'}]
    w1 = next(a.manifest for a in run(job).actions if isinstance(a, Create) and a.kind == "Pod" and a.name == W1)
    main = w1["spec"]["containers"][0]
    assert main["command"] == ["run", "worker", "1"]
    assert main["args"] == ["--ps=job-ps-0:2222", "--n=2", "$(HOME)", "$$(type)"]
    assert main["env"] == [{"name": "TF", "value": '{"task":{"type":"worker","index":1}}'}, RESTART_COUNT_ENV]


# -- modes ------------------------------------------------------------------------------


def test_pause_deletes_every_pod_and_reports_paused():
    job = generic(runMode={"pause": {"enabled": True}})
    p = run(job, pod(W0), pod(W1), status={"phase": "Running"})
    assert p.deletes("Pod") == [W0, W1]
    assert p.status["phase"] == "Paused"
    assert cond(p, "Paused")["status"] == "True"
    assert p.events[0].reason == "Paused"


def test_paused_at_creation_creates_nothing():
    p = run(generic(runMode={"pause": {"enabled": True}}))
    assert p.creates("Pod") == []
    assert p.status["phase"] == "Paused"


def test_resume_goes_through_resuming_and_applies_resume_specs():
    job = generic(runMode={"pause": {"enabled": False, "resumeSpecs": [
        {"type": "worker", "skipInitContainer": True, "command": ["resume.sh"], "args": ["--from-checkpoint"]}]}})  # fmt: skip
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["initContainers"] = [{"name": "init", "image": "i"}]
    paused = run(generic(runMode={"pause": {"enabled": True}}), pod(W0), pod(W1), status={"phase": "Running"})
    resuming = run(job, status=paused.status)
    assert resuming.status["phase"] == "Resuming"
    assert cond(resuming, "Paused")["status"] == "False"
    created = [a.manifest for a in resuming.actions if isinstance(a, Create) and a.kind == "Pod"]
    assert created[0]["spec"]["containers"][0]["command"] == ["resume.sh"]
    assert created[0]["spec"]["containers"][0]["args"] == ["--from-checkpoint"]
    assert "initContainers" not in created[0]["spec"]
    running = run(job, pod(W0), pod(W1), status=resuming.status)
    assert running.status["phase"] == "Running"
    assert [e.reason for e in running.events] == ["Running"]


@pytest.mark.parametrize(
    ("debug", "command", "has_init"),
    [
        ({"enabled": True}, ["sleep", "inf"], True),
        ({"enabled": True, "replicaSpecs": [{"type": "worker", "skipInitContainer": True, "command": ["/usr/bin/sshd"]}]},
         ["/usr/bin/sshd"], False),
    ],
    ids=["default", "custom"],
)  # fmt: skip
def test_debug_mode_replaces_the_entrypoint(debug, command, has_init):
    job = generic(runMode={"debug": debug})
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["initContainers"] = [{"name": "init", "image": "i"}]
    created = next(a.manifest for a in run(job).actions if isinstance(a, Create) and a.kind == "Pod")
    assert created["spec"]["containers"][0]["command"] == command
    assert ("initContainers" in created["spec"]) is has_init


def test_debug_mode_evaluates_no_rules_and_restarts_nothing():
    job = restart(generic(runMode={"debug": {"enabled": True}}, **RULES), "OnFailure", 3)
    p = run(job, pod(W0, "Succeeded", 0), pod(W1, "Failed", 1), *SVC, status={"phase": "Running"})
    assert p.status["phase"] == "Running"
    assert p.actions == ()


# -- scheduler, strays, deletion ------------------------------------------------------------


def test_t9k_scheduler_is_recorded_and_not_silently_ignored():
    p = settle(generic(scheduler={"t9kScheduler": {"queue": "gpu", "priority": 50}}))
    first = run(generic(scheduler={"t9kScheduler": {"queue": "gpu", "priority": 50}}))
    manifest = next(a.manifest for a in first.actions if isinstance(a, Create) and a.kind == "Pod")
    assert manifest["metadata"]["labels"]["scheduler.tensorstack.dev/queue"] == "gpu"
    assert manifest["metadata"]["annotations"]["scheduler.tensorstack.dev/priority"] == "50"
    assert (cond(first, "QueueAdmission")["status"], cond(first, "QueueAdmission")["reason"]) == ("False", "NotEnforced")
    assert [e.reason for e in first.events] == ["Pending", "GangSchedulingNotEnforced", "QueueNotEnforced"]
    assert [e.reason for e in p.events] == []  # said once, not on every pass


def test_pods_of_removed_replicas_are_deleted():
    p = run(generic("job", ("worker", 1)), pod(W0), pod(W1), status={"phase": "Running"})
    assert p.deletes("Pod") == [W1]


def test_pod_being_deleted_is_waited_for_not_recreated():
    p = run(generic(), pod(W0), pod(W1, deleting=True), *SVC, status={"phase": "Running"})
    assert p.actions == ()
    assert p.status["tasks"][0]["status"][1]["phase"] == "Deleted"


def test_job_being_deleted_is_left_alone():
    job = generic()
    job["metadata"]["deletionTimestamp"] = "2026-11-25T12:00:00Z"
    assert run(job).actions == ()


def test_transition_time_is_kept_while_status_does_not_change():
    first = run(generic(), pod(W0), pod(W1))
    later = run(generic(), pod(W0), pod(W1), status=first.status)
    assert cond(later, "Running")["lastTransitionTime"] == cond(first, "Running")["lastTransitionTime"]


# -- services and substitution (fidelity issue, items 5-7) ------------------------------------


def _manifests(p, kind):
    return {a.name: a.manifest for a in p.actions if isinstance(a, Create) and a.kind == kind}


@pytest.mark.parametrize(
    ("service_spec", "ports"),
    [(None, []), ({}, []), ({"ports": []}, []), ({"ports": [{"name": "http", "port": 2222}]}, [("http", 2222)])],
    ids=["no-service", "empty-service", "no-ports", "with-port"],
)
def test_every_replica_gets_a_headless_service_backing_its_host_name(service_spec, ports):
    job = generic() if service_spec is None else generic(service=service_spec)
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"] = ["ping", "$(service.worker[1].host)"]
    p = run(job)
    services = _manifests(p, "Service")
    assert sorted(services) == [W0, W1]
    for svc in services.values():
        assert svc["spec"]["clusterIP"] == "None"
        assert [(x["name"], x["port"]) for x in svc["spec"]["ports"]] == ports
    assert _manifests(p, "Pod")[W0]["spec"]["containers"][0]["command"] == ["ping", W1]


@pytest.mark.parametrize(
    ("extra", "port"),
    [({}, 2222), ({"service": {"ports": [{"name": "http", "port": 8080}]}}, 8080), ({"container_port": 9000}, 9000)],
    ids=["as-printed-seed-port", "spec-service-wins", "container-port-named-http"],
)  # fmt: skip
def test_seed_tf_config_example_as_printed_runs(extra, port):
    # Seed 001's example as printed has $(service.port[http]) and no spec.service; the seed's
    # "暴露副本的服务" section gives the same job (generic-example) port http 2222.
    env = ('{"task":{"type":"$(type)","index":$(rank)},"cluster":{"worker":["$(service.worker[0].host):$(service.port[http])",'
           '"$(service.worker[1].host):$(service.port[http])"]}}')  # fmt: skip
    job = generic(**({"service": extra["service"]} if "service" in extra else {}))
    container = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "TF_CONFIG", "value": env}]
    if "container_port" in extra:
        container["ports"] = [{"name": "http", "containerPort": extra["container_port"]}]
    p = run(job)
    assert cond(p, "Failed") is None
    assert _manifests(p, "Pod")[W0]["spec"]["containers"][0]["env"][0]["value"] == (
        f'{{"task":{{"type":"worker","index":0}},"cluster":{{"worker":["job-worker-0:{port}","job-worker-1:{port}"]}}}}'
    )
    assert [(x["name"], x["port"]) for x in _manifests(p, "Service")[W1]["spec"]["ports"]] == [("http", port)]


def test_shell_substitution_reaches_the_pod_untouched_and_ours_inside_it_is_expanded():
    job = generic()
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"] = [
        "sh",
        "-c",
        "exec $(type -P python3) train.py --rank $(($(rank)+1)) --of $(replicas[worker])",
    ]
    p = run(job)
    assert p.status["phase"] == "Pending"
    assert (
        _manifests(p, "Pod")[W1]["spec"]["containers"][0]["command"][2]
        == "exec $(type -P python3) train.py --rank $((1+1)) --of 2"
    )


def test_init_containers_are_substituted_too():
    # Seed 001 lists command, args and env of the replica's containers; an init container that
    # fetches its shard needs $(rank) as much (docs/kinds.md).
    job = generic()
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["initContainers"] = [
        {"name": "fetch", "image": "busybox", "args": ["get", "shard-$(rank)"], "env": [{"name": "TYPE", "value": "$(type)"}]}
    ]
    init = _manifests(run(job), "Pod")[W1]["spec"]["initContainers"][0]
    assert (init["args"], init["env"]) == (["get", "shard-1"], [{"name": "TYPE", "value": "worker"}, RESTART_COUNT_ENV])


@pytest.mark.parametrize(
    ("pods", "phase"),
    [
        ((pod(W0), pod(W1)), "Running"),
        ((pod(W0, "Succeeded", 0), pod(W1)), "Running"),
        ((pod(W0, "Failed", 1), pod(W1)), "Running"),
        ((pod(W0, "Pending"), pod(W1, "Succeeded", 0)), "Resuming"),
        ((pod(W1),), "Resuming"),
    ],
    ids=["all-running", "one-completed", "one-failed", "one-pending", "one-missing"],
)
def test_resuming_ends_once_every_replica_is_back_even_if_it_already_ended(pods, phase):
    # Fidelity issue, item 2: a replica that completed right after the resume kept the job Resuming.
    job = generic(successRules=[{"worker": [0, 1]}], failureRules=[{"worker": [0, 1]}],
                  runMode={"pause": {"enabled": False}})  # fmt: skip
    paused = run(generic(runMode={"pause": {"enabled": True}}), *SVC, status={"phase": "Running"})
    resuming = run(job, *SVC, status=paused.status)
    assert resuming.status["phase"] == "Resuming"
    p = run(job, *pods, *SVC, status=resuming.status)
    assert p.status["phase"] == phase


# -- seeds 001/003: the Unknown phase and the printed condition messages ----------------------


@pytest.mark.parametrize(
    ("phases", "phase", "running"),
    [(("Running", "Unknown"), "Unknown", "False"), (("Running", "Running"), "Running", "True"),
     (("Pending", "Unknown"), "Unknown", "False")],
    ids=["a-pod-unknown", "all-running", "still-starting"],
)  # fmt: skip
def test_a_pod_whose_state_cannot_be_obtained_makes_the_job_unknown(phases, phase, running):
    old = "Pending" if "Pending" in phases else "Running"
    p = run(generic(), pod(W0, phases[0]), pod(W1, phases[1]), service(W0), service(W1), status={"phase": old})
    assert p.status["phase"] == phase
    assert cond(p, "Running")["status"] == running
    if phase == "Unknown":
        assert W1 in cond(p, "Running")["message"]
        assert p.deletes() == []


def test_the_job_leaves_unknown_when_its_pods_report_again():
    unknown = run(generic(), pod(W0), pod(W1, "Unknown"), service(W0), service(W1), status={"phase": "Running"})
    back = run(generic(), pod(W0), pod(W1), service(W0), service(W1), status=unknown.status)
    assert back.status["phase"] == "Running"
    assert cond(back, "Running")["message"] == "All pods are running normally."  # seed 001's message


def test_colossalai_launcher_failure_reads_as_seed_003_prints_it():
    from tests.builders import colossal

    objs = [pod("cai-launcher", "Failed", 1, rtype="launcher"), pod("cai-worker-0"), pod("cai-worker-1"),
            service("cai-worker-0"), service("cai-worker-1")]  # fmt: skip
    p = run(colossal(), *objs, status={"phase": "Running"})
    failed = cond(p, "Failed")
    assert (failed["reason"], failed["message"]) == ("Failed", "The job exited with an error code.")
