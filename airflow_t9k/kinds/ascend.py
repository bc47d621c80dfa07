"""MindCluster's AscendJob (``mindxdl.gitee.com/v1``, seed 002) on the shared core.

``replicaSpecs`` is a map: the label ``framework`` (mindspore, pytorch, tensorflow) decides
which types are allowed (Scheduler, Master or Chief as the one leader, plus Worker) and which
environment the container named ``ascend`` gets. The leader gets a Service with a cluster IP
on ``ascendjob-port`` (2222 unless the container names another), and every pod is given that
IP, as MindCluster's ascend-operator does. Restart policies are Kubeflow's (default Never;
ExitCode retries codes >= 128), ``runPolicy.backoffLimit`` is shared and unlimited when unset
or -1, and the job succeeds when every pod has succeeded (seed 002: ``successPolicy`` "" and
AllWorkers both mean that today). ``runPolicy.activeDeadlineSeconds`` and
``ttlSecondsAfterFinished`` are accepted and ignored (seed 002 calls them meaningless, to be
removed), with one Warning Event. When the job ends, pods are cleaned up as MindCluster's
``handleFinishedJob`` does: Pending pods are deleted, then ``runPolicy.cleanPodPolicy`` applies
(Running, the seed's default: Running pods and the Service go; All: every pod; None: started
pods stay). Succeeded and Failed pods stay under the default, so their logs can be read.
``spec.schedulerName`` and ``schedulingPolicy.priorityClass`` reach the pods
(a template's own ``schedulerName``/``priorityClassName`` wins). Status is Kubeflow's
``JobStatus`` (kubeflow_status.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds import ascend_gang, ascend_ranktable, ascend_verdict, kubeflow_status
from airflow_t9k.kinds.base import (
    TRAINING_RESTART_POLICIES,
    UNLIMITED,
    Children,
    InvalidSpec,
    JobKind,
    Obj,
    ReplicaSpec,
    RestartPolicy,
    container_named,
    set_env,
)

if TYPE_CHECKING:
    from airflow_t9k.kinds.verdict import Ended

CONTAINER = "ascend"
PORT_NAME = "ascendjob-port"
DEFAULT_PORT = 2222
NPU_PREFIX = "huawei.com/Ascend"
TYPE_ORDER = ("Master", "Scheduler", "Chief", "Worker")
LEADERS = {"pytorch": "Master", "tensorflow": "Chief", "mindspore": "Scheduler"}
# Seed 002: "currently meaningless, to be removed". cleanPodPolicy is too by the seed's word,
# but MindCluster's operator applies it when a job ends (CLEAN_POD_POLICY), so we do as well.
IGNORED_RUN_POLICY = ("activeDeadlineSeconds", "ttlSecondsAfterFinished")
# cleanPodPolicy -> the core's clean-up policy. Seed 002 gives Running as the default (the
# operator's code defaults to None although its comment says Running; the seed is our spec, and
# None would leave a failed job's Master holding its NPUs). Pending pods go under every policy.
CLEAN_POD_POLICY = {"Running": "Unfinished", "All": "All", "None": "Pending"}
DEFAULT_CLEAN_POD_POLICY = "Running"
# Kubeflow-common labels: the seed's podAntiAffinity selects on job-name.
KF_JOB, KF_TYPE, KF_INDEX = "job-name", "replica-type", "replica-index"
POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}


def run_policy(job: Obj) -> Obj:
    return (job.get("spec") or {}).get("runPolicy") or {}


def npus(template: Obj) -> int:
    """NPUs the ``ascend`` container asks for (0 for a CPU-only pod)."""
    container = container_named(template.get("spec") or {}, CONTAINER) or {}
    resources = container.get("resources") or {}
    for section in ("requests", "limits"):
        for name, value in (resources.get(section) or {}).items():
            if str(name).startswith(NPU_PREFIX):
                try:
                    return int(str(value))
                except ValueError:
                    raise InvalidSpec(f"{name} must be a whole number of NPUs, got {value!r}") from None
    return 0


class AscendJob(JobKind):
    resource = RESOURCES["AscendJob"]
    training_container = CONTAINER
    ttl_path = None  # runPolicy.ttlSecondsAfterFinished is ignored (IGNORED_RUN_POLICY): the job stays
    supports_debug = False  # not a T9k kind: no runMode
    supports_pause = False

    # -- identity -------------------------------------------------------------------------
    def pod_name(self, job: Obj, rtype: str, rank: int) -> str:
        return f"{job['metadata']['name']}-{rtype.lower()}-{rank}"

    def service_name(self, job: Obj, rtype: str, rank: int) -> str:
        return self.pod_name(job, rtype, rank)

    @staticmethod
    def framework(job: Obj) -> str:
        value = ((job.get("metadata") or {}).get("labels") or {}).get("framework")
        if value not in LEADERS:
            raise InvalidSpec(
                f"metadata.labels.framework must be one of {', '.join(sorted(LEADERS))} (it picks the environment "
                f"the ascend container gets), got {value!r}"
            )
        return str(value)

    # -- spec -----------------------------------------------------------------------------
    def backoff_limit(self, job: Obj) -> int | None:
        limit = run_policy(job).get("backoffLimit")
        if limit is None or limit == -1:
            return None
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise InvalidSpec(f"runPolicy.backoffLimit must be -1 (unlimited) or a non-negative integer, got {limit!r}")
        return limit

    def active_deadline(self, job: Obj) -> int | None:
        return None  # runPolicy.activeDeadlineSeconds is ignored (IGNORED_RUN_POLICY)

    def replica_specs(self, job: Obj) -> list[ReplicaSpec]:
        raw_specs = (job.get("spec") or {}).get("replicaSpecs")
        if not isinstance(raw_specs, dict) or not raw_specs:
            raise InvalidSpec("spec.replicaSpecs must map at least one replica type (Master, Scheduler, Chief, Worker) to a spec")
        unknown = sorted(set(raw_specs) - set(TYPE_ORDER))
        if unknown:
            raise InvalidSpec(f"spec.replicaSpecs has unknown replica type(s) {', '.join(unknown)}; use {', '.join(TYPE_ORDER)}")
        limit = self.backoff_limit(job)
        out = []
        for rtype in (t for t in TYPE_ORDER if t in raw_specs):
            raw = raw_specs[rtype]
            if not isinstance(raw, dict) or not isinstance(raw.get("template"), dict):
                raise InvalidSpec(f"replicaSpecs.{rtype}.template is required")
            policy = raw.get("restartPolicy") or "Never"
            if policy not in TRAINING_RESTART_POLICIES:
                raise InvalidSpec(
                    f"replicaSpecs.{rtype}.restartPolicy must be one of {', '.join(TRAINING_RESTART_POLICIES)}, got {policy!r}"
                )
            replicas = raw.get("replicas", 1)
            if not isinstance(replicas, int) or isinstance(replicas, bool):
                raise InvalidSpec(f"replicaSpecs.{rtype}.replicas must be an integer, got {replicas!r}")
            budget = UNLIMITED if limit is None else limit
            out.append(
                ReplicaSpec(rtype, replicas, raw["template"], RestartPolicy(policy, 0 if policy == "Never" else budget, True))
            )
        return out

    def decisive_replica(self, job: Obj) -> tuple[str, int] | None:
        """Every pod must succeed; the result comes from the leader (Master, Chief), but from
        worker 0 under MindSpore, whose Scheduler runs no training code."""
        types = {s.type for s in self.replica_specs(job) if s.replicas}
        leader = self.leader(job)
        if leader in types and self.framework(job) != "mindspore":
            return leader, 0
        return ("Worker", 0) if "Worker" in types else super().decisive_replica(job)

    def leader(self, job: Obj) -> str | None:
        """Master, Chief or Scheduler: the replica every other one connects to (None: a lone worker)."""
        wanted = LEADERS[self.framework(job)]
        return wanted if wanted in ((job.get("spec") or {}).get("replicaSpecs") or {}) else None

    def validate(self, job: Obj) -> None:
        framework = self.framework(job)
        specs = self.replica_specs(job)
        super().validate(job)
        allowed = (LEADERS[framework], "Worker")
        for spec in specs:
            if spec.type not in allowed:
                raise InvalidSpec(f"replica type {spec.type} is not used with framework {framework}; use {' and '.join(allowed)}")
            main = container_named(spec.template.get("spec") or {}, CONTAINER)
            if main is None:
                raise InvalidSpec(
                    f"replicaSpecs.{spec.type} needs a container named {CONTAINER!r}: it is the one that gets the environment"
                )
            if not main.get("image"):
                raise InvalidSpec(f"replicaSpecs.{spec.type}: the {CONTAINER} container has no image")
            npus(spec.template)  # a fractional NPU count is refused here, not mid-plan by the rank table
        leader = self.leader(job)
        if leader is not None and next(s for s in specs if s.type == leader).replicas != 1:
            raise InvalidSpec(f"replicaSpecs.{leader}.replicas must be 1: it is the job's only {leader}")
        if leader is None and framework != "mindspore":
            raise InvalidSpec(f"framework {framework} needs a {LEADERS[framework]} replica: the workers connect to it")
        if leader is None and sum(npus(s.template) * s.replicas for s in specs) > 1:
            raise InvalidSpec("a MindSpore job without a Scheduler may use only one NPU in all; add a Scheduler replica")
        self.clean_pod_policy(job)
        ascend_gang.podgroup_spec(job, specs)  # minAvailable and the quantities it sums must make sense
        if (job.get("spec") or {}).get("successPolicy", "") not in ("", "AllWorkers"):
            raise InvalidSpec(f'spec.successPolicy must be "" or AllWorkers, got {job["spec"]["successPolicy"]!r}')

    def clean_pod_policy(self, job: Obj) -> str:
        policy = run_policy(job).get("cleanPodPolicy") or DEFAULT_CLEAN_POD_POLICY
        if policy not in CLEAN_POD_POLICY:
            raise InvalidSpec(f"runPolicy.cleanPodPolicy must be one of {', '.join(CLEAN_POD_POLICY)}, got {policy!r}")
        return str(policy)

    def scheduler_names(self, job: Obj) -> set[str]:
        """The schedulers the pods ask for: a template's own, else spec.schedulerName."""
        default = (job.get("spec") or {}).get("schedulerName")
        try:
            specs = self.replica_specs(job)
        except InvalidSpec:
            return {str(default)} if default else set()  # an invalid job runs no pod; its status says why
        return {str((s.template.get("spec") or {}).get("schedulerName") or default) for s in specs} - {"None", ""}

    def podgroup_spec(self, job: Obj) -> Obj | None:
        # MindCluster's operator (gang scheduling on, as it is deployed) gives every AscendJob a PodGroup.
        return ascend_gang.podgroup_spec(job, self.replica_specs(job))

    def cleanup_types(self, job: Obj) -> tuple[str, set[str]] | None:
        types = set((job.get("spec") or {}).get("replicaSpecs") or {})
        return CLEAN_POD_POLICY[self.clean_pod_policy(job)], types

    # -- children -------------------------------------------------------------------------
    def port(self, job: Obj) -> int:
        leader = self.leader(job) or "Worker"
        template = ((job["spec"]["replicaSpecs"].get(leader) or {}).get("template")) or {}
        main = container_named(template.get("spec") or {}, CONTAINER) or {}
        for p in main.get("ports") or []:
            if p.get("name") == PORT_NAME:
                return int(p.get("containerPort", DEFAULT_PORT))
        return DEFAULT_PORT

    def service_ports(self, job: Obj) -> list[Obj]:
        return [{"name": PORT_NAME, "port": self.port(job)}]

    def wants_services(self, job: Obj, rtype: str) -> bool:
        return rtype == self.leader(job)

    def service_spec(self, job: Obj, rtype: str) -> Obj:
        return {}  # a cluster IP: MindCluster hands pods an IP, not a DNS name

    def pod_inputs(self, job: Obj, observed: Children) -> Obj | None:
        leader = self.leader(job)
        if leader is None:
            return {}
        svc = observed.services.get(self.service_name(job, leader, 0))
        ip = ((svc or {}).get("spec") or {}).get("clusterIP")
        return {"ip": ip} if ip and ip != "None" else None

    def rank_index(self, job: Obj, spec: ReplicaSpec, rank: int) -> int:
        """The pod's place in the rank table (annotation hccl/rankIndex): the operator puts workers
        after the leader only when the leader has NPUs of its own."""
        leader = self.leader(job)
        if spec.type == leader or leader is None:
            return rank
        leader_spec = next(s for s in self.replica_specs(job) if s.type == leader)
        return rank + (1 if npus(leader_spec.template) else 0)

    def extra_children(self, job: Obj, observed: Children) -> list[Obj]:
        """The rank table (seed 002's file configuration), for a job with NPUs."""
        servers = {self.pod_name(job, s.type, r): self.rank_index(job, s, r)
                   for s in self.replica_specs(job) if npus(s.template) for r in range(s.replicas)}  # fmt: skip
        if not servers:
            return []
        data = {ascend_ranktable.KEY: ascend_ranktable.table(observed.pods, servers)}
        return [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ascend_ranktable.configmap_name(job)}, "data": data}
        ]

    def global_rank(self, job: Obj, spec: ReplicaSpec, rank: int) -> int:
        """The leader is 0; workers follow it (MindSpore workers count from 0: its scheduler has no rank)."""
        leader = self.leader(job)
        if spec.type == leader or leader is None or self.framework(job) == "mindspore":
            return rank
        return rank + 1

    def customize_pod(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj) -> None:
        pod["metadata"]["labels"].update({KF_JOB: job["metadata"]["name"], KF_TYPE: spec.type.lower(), KF_INDEX: str(rank)})
        pod["metadata"].setdefault("annotations", {})[ascend_ranktable.RANK_INDEX] = str(self.rank_index(job, spec, rank))
        policy = run_policy(job).get("schedulingPolicy") or {}
        if policy.get("queue"):
            pod["metadata"]["labels"]["volcano.sh/queue-name"] = str(policy["queue"])
        scheduler = (job.get("spec") or {}).get("schedulerName")
        if scheduler and not pod["spec"].get("schedulerName"):
            pod["spec"]["schedulerName"] = str(scheduler)
        if policy.get("priorityClass") and not pod["spec"].get("priorityClassName"):
            pod["spec"]["priorityClassName"] = str(policy["priorityClass"])
        main = container_named(pod["spec"], CONTAINER)
        if main is None:
            return
        ports = main.setdefault("ports", [])
        if not any(p.get("name") == PORT_NAME for p in ports):
            ports.append({"name": PORT_NAME, "containerPort": DEFAULT_PORT})
        set_env(main, {"MINDX_TASK_ID": str(job["metadata"].get("uid", "")),
                       "HostNetwork": str(bool(pod["spec"].get("hostNetwork"))).lower()})  # fmt: skip

    def bind_inputs(self, job: Obj, spec: ReplicaSpec, rank: int, pod: Obj, inputs: Obj) -> None:
        main = container_named(pod["spec"], CONTAINER)
        if main is None:
            return
        framework = self.framework(job)
        specs = self.replica_specs(job)
        per_pod = max(npus(spec.template), 1)  # a CPU-only pod runs one process
        npu_pods = sum(s.replicas for s in specs if npus(s.template)) or sum(s.replicas for s in specs)
        world = str(per_pod * npu_pods)
        own_rank = str(self.global_rank(job, spec, rank))
        ip, port = inputs.get("ip", ""), str(self.port(job))
        is_leader = spec.type == self.leader(job)
        if framework == "pytorch":
            values = {"MASTER_ADDR": ip, "MASTER_PORT": port, "RANK": own_rank, "WORLD_SIZE": world,
                      "LOCAL_WORLD_SIZE": str(per_pod), "LOCAL_RANK": ",".join(map(str, range(per_pod)))}  # fmt: skip
            set_env(main, values)
        elif framework == "tensorflow":
            set_env(main, {"CM_CHIEF_PORT": port, "CM_CHIEF_DEVICE": "0", "CM_RANK": own_rank, "CM_WORKER_SIZE": world,
                           "CM_LOCAL_WORKER": str(per_pod)})  # fmt: skip
            _set_pod_ip(main, "CM_WORKER_IP")
            _set_address(main, "CM_CHIEF_IP", None if is_leader else ip)
        else:
            role = "MS_SCHED" if is_leader else "MS_WORKER"
            set_env(main, {"MS_SCHED_PORT": port, "MS_ROLE": role, "MS_NODE_RANK": own_rank, "MS_SERVER_NUM": "0",
                           "MS_LOCAL_WORKER": str(per_pod), "MS_WORKER_NUM": world,
                           "NPU_POD": str(npus(spec.template) > 0).lower()})  # fmt: skip
            if "ip" in inputs or is_leader:  # a lone MindSpore worker has no scheduler to find
                _set_address(main, "MS_SCHED_HOST", None if is_leader else ip)

    def rule_verdict(self, job: Obj, phase: str, ended: list[Ended]) -> tuple[str, str] | None:
        """What decided the end, in seed 002's terms: an AscendJob has no success or failure rules,
        only "every pod must succeed", restart policies and ``runPolicy.backoffLimit``."""
        return ascend_verdict.verdict(job, phase, ended, self.backoff_limit(job))

    # -- status ---------------------------------------------------------------------------
    def core_status(self, status: Obj | None) -> Obj | None:
        return kubeflow_status.to_core(status)

    def public_status(
        self, job: Obj, core: Obj, restarting: bool, now: datetime, observed: Children
    ) -> tuple[Obj, list[tuple[str, str, str]]]:
        selectors = {
            t: {"matchLabels": {KF_JOB: job["metadata"]["name"], KF_TYPE: t.lower()}}
            for t in (((job.get("spec") or {}).get("replicaSpecs")) or {})
        }
        status = kubeflow_status.from_core(job, core, restarting, now, selectors)
        events: list[tuple[str, str, str]] = []
        if (job.get("status") or {}).get("conditions"):
            return status, events  # said on the first pass only
        policy = run_policy(job).get("schedulingPolicy") or {}
        gang = {k: policy[k] for k in ("minAvailable", "queue", "minResources") if k in policy}
        wants_volcano = "volcano" in self.scheduler_names(job)
        # Kubernetes' own gang (reconcile/gang.py) places the pods all or nothing where it is served.
        native = getattr(observed, "gang_problem", "") is None and len(self.replica_specs(job)) > 0
        unenforced = {k: v for k, v in gang.items() if k != "minAvailable"} if native else gang
        if not getattr(observed, "volcano", False) and (unenforced or wants_volcano):
            # Where Volcano is served the PodGroup gangs the pods (reconcile/volcano.py); with a
            # Kueue LocalQueue the core drops this warning, since Kueue admits the whole gang.
            dropped = (" The pods asked for scheduler 'volcano', which does not exist here, so they go to the default "
                       "scheduler instead of staying Pending for ever.") if wants_volcano else ""  # fmt: skip
            enforced = ("kube-scheduler's gang (a PodGroup, scheduling.k8s.io/v1alpha2) places the pods all or nothing "
                        "(minAvailable), but the queue is only a pod label (volcano.sh/queue-name) and minResources is "
                        "not enforced." if native else "minAvailable is not enforced and the queue is only a pod label "
                        "(volcano.sh/queue-name).")  # fmt: skip
            events.append(("Warning", "GangSchedulingNotEnforced",
                           (f"runPolicy.schedulingPolicy {gang or {}} is recorded, but this cluster serves no Volcano PodGroups "
                            "(scheduling.volcano.sh/v1beta1) and the job is not admitted through a Kueue LocalQueue: "
                            f"{enforced}{dropped}")))  # fmt: skip
        ignored = [k for k in IGNORED_RUN_POLICY if k in run_policy(job)]
        if ignored:
            events.append(("Warning", "RunPolicyIgnored",
                           (f"runPolicy.{', runPolicy.'.join(ignored)} accepted and ignored: MindCluster calls them "
                            "meaningless and to be removed (seed 002). The job has no deadline and is not deleted "
                            "after it ends.")))  # fmt: skip
        return status, events


def _set_address(container: Obj, name: str, ip: str | None) -> None:
    """The leader's address: the leader reads its own pod IP (None), the others the Service's IP."""
    if ip is None:
        _set_pod_ip(container, name)
    else:
        set_env(container, {name: ip})


def _set_pod_ip(container: Obj, name: str) -> None:
    env = [e for e in container.get("env") or [] if e.get("name") != name]
    env.append({"name": name, "valueFrom": dict(POD_IP)})
    container["env"] = env
