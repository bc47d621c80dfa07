"""BeamJob: a Flink cluster (JobManager and TaskManagers) plus a batch/v1 submit Job.

No Flink operator is assumed: the JobManager and the TaskManagers are pods of the job, named
``<job>-flinkcluster-jobmanager-0`` and ``<job>-flinkcluster-taskmanager-<i>``, restarted
whenever they end (as a Deployment would), with a Service ``<job>-flinkcluster-jobmanager``
(ports rpc 6123, blob 6124, query 6125, ui 8081; its type from ``jobManager.accessScope``) and a
headless Service per TaskManager, named as its pod (data 6121, rpc 6122).
Once the cluster runs, the submit Job ``<job>-batchjob`` is created from ``jobTemplate`` with
``FLINK_MASTER=<jobmanager Service>:8081`` in every container; its ``Complete`` or ``Failed``
condition decides the BeamJob. ``runPolicy.cleanUpCluster`` deletes the cluster at the end.
"""

from __future__ import annotations

import copy
from datetime import datetime

from airflow_t9k.api.outcome import true_condition
from airflow_t9k.api.resources import RESOURCES
from airflow_t9k.kinds.base import (
    LABEL_JOB,
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_TYPE,
    MANAGED_BY,
    UNLIMITED,
    Children,
    InvalidSpec,
    JobKind,
    Obj,
    ReplicaSpec,
    RestartPolicy,
    Rule,
    set_env,
)

JOBMANAGER, TASKMANAGER = "jobmanager", "taskmanager"
JM_PORTS = {"rpc": 6123, "blob": 6124, "query": 6125, "ui": 8081}
TM_PORTS = {"data": 6121, "rpc": 6122}
# accessScope -> Service fields (flink-on-k8s-operator's scopes; VPC and External both need a load balancer).
ACCESS_SCOPES: dict[str, Obj] = {
    "Cluster": {},
    "Headless": {"clusterIP": "None", "publishNotReadyAddresses": True},
    "NodePort": {"type": "NodePort"},
    "VPC": {"type": "LoadBalancer"},
    "External": {"type": "LoadBalancer"},
}
# Scopes that open the JobManager outside the cluster. Flink's REST API (the ui port) has no
# authentication: whoever reaches it can upload and run a jar, in the job's pods, as the job's
# service account. The controller creates such a Service only when started with
# --allow-beam-external-service (Observed.beam_external_service); docs/kinds.md.
EXTERNAL_SCOPES = ("NodePort", "VPC", "External")
COPIED_POD_FIELDS = ("nodeSelector", "tolerations", "volumes", "affinity", "securityContext", "imagePullSecrets")


def _spec(job: Obj) -> Obj:
    return job.get("spec") or {}


def _cluster(job: Obj) -> Obj:
    return ((_spec(job).get("flinkClusterTemplate") or {}).get("spec")) or {}


def _condition(obj: Obj | None, type_: str) -> Obj | None:
    """A True condition of a child (the submit Job)."""
    return true_condition((obj or {}).get("status") or {}, type_)


class BeamJob(JobKind):
    resource = RESOURCES["BeamJob"]
    supports_debug = False  # Immediate mode only (seed 000)
    supports_pause = False

    # -- identity -------------------------------------------------------------------------
    def pod_name(self, job: Obj, rtype: str, rank: int) -> str:
        return f"{job['metadata']['name']}-flinkcluster-{rtype}-{rank}"

    def service_name(self, job: Obj, rtype: str, rank: int) -> str:
        # One JobManager Service (what clients address); one per TaskManager, named as its pod.
        base = f"{job['metadata']['name']}-flinkcluster-{rtype}"
        return base if rtype == JOBMANAGER else f"{base}-{rank}"

    def submit_name(self, job: Obj) -> str:
        return f"{job['metadata']['name']}-batchjob"

    def master(self, job: Obj) -> str:
        ui = self.ports(_cluster(job).get("jobManager") or {}, JM_PORTS)["ui"]
        return f"{self.service_name(job, JOBMANAGER, 0)}:{ui}"

    # -- spec -----------------------------------------------------------------------------
    @staticmethod
    def ports(section: Obj, defaults: dict[str, int]) -> dict[str, int]:
        given = section.get("ports") or {}
        out = {name: given.get(name, port) for name, port in defaults.items()}
        for name, port in out.items():
            if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
                raise InvalidSpec(f"Flink port {name} must be an integer from 1 to 65535, got {port!r}")
        return out

    def replica_specs(self, job: Obj) -> list[ReplicaSpec]:
        cluster = _cluster(job)
        image = (cluster.get("image") or {}).get("name")
        if not image:
            raise InvalidSpec(
                "flinkClusterTemplate.spec.image.name is required: the Flink image for the JobManager and TaskManagers"
            )
        replicas = (cluster.get("taskManager") or {}).get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise InvalidSpec(f"flinkClusterTemplate.spec.taskManager.replicas must be a positive integer, got {replicas!r}")
        always = RestartPolicy("Always", UNLIMITED)  # cluster pods come back whenever they end, as under a Deployment
        return [
            ReplicaSpec(JOBMANAGER, 1, self.flink_template(job, JOBMANAGER, JM_PORTS), always),
            ReplicaSpec(TASKMANAGER, replicas, self.flink_template(job, TASKMANAGER, TM_PORTS), always),
        ]

    def flink_template(self, job: Obj, role: str, defaults: dict[str, int]) -> Obj:
        cluster = _cluster(job)
        section = cluster.get("jobManager" if role == JOBMANAGER else "taskManager") or {}
        image = cluster.get("image") or {}
        container: Obj = {
            "name": role,
            "image": image["name"],
            "args": [role],
            "ports": [{"name": n, "containerPort": p} for n, p in self.ports(section, defaults).items()],
            "env": copy.deepcopy(cluster.get("envVars") or []),
        }
        if image.get("pullPolicy"):
            container["imagePullPolicy"] = image["pullPolicy"]
        for key in ("resources", "volumeMounts"):
            if section.get(key):
                container[key] = copy.deepcopy(section[key])
        properties = {"jobmanager.rpc.address": self.service_name(job, JOBMANAGER, 0), **(cluster.get("flinkProperties") or {})}
        set_env(container, {
            "JOB_MANAGER_RPC_ADDRESS": self.service_name(job, JOBMANAGER, 0),
            # The official Flink image appends FLINK_PROPERTIES to flink-conf.yaml.
            "FLINK_PROPERTIES": "".join(f"{k}: {v}\n" for k, v in sorted(properties.items())),
        })  # fmt: skip
        pod_spec: Obj = {"containers": [container], **{k: copy.deepcopy(section[k]) for k in COPIED_POD_FIELDS if k in section}}
        metadata = {"labels": dict(section.get("podLabels") or {}), "annotations": dict(section.get("podAnnotations") or {})}
        return {"metadata": metadata, "spec": pod_spec}

    def validate(self, job: Obj) -> None:
        super().validate(job)
        scope = (_cluster(job).get("jobManager") or {}).get("accessScope", "Cluster")
        if scope not in ACCESS_SCOPES:
            raise InvalidSpec(
                f"flinkClusterTemplate.spec.jobManager.accessScope must be one of {', '.join(ACCESS_SCOPES)}, got {scope!r}"
            )
        template = ((_spec(job).get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
        if not ((template.get("spec") or {}).get("containers")):
            raise InvalidSpec("jobTemplate.spec.template.spec.containers is empty: the submit job needs a container")

    def check_allowed(self, job: Obj, observed: Children) -> None:
        scope = (_cluster(job).get("jobManager") or {}).get("accessScope", "Cluster")
        if scope in EXTERNAL_SCOPES and not getattr(observed, "beam_external_service", False):
            service = ACCESS_SCOPES[scope]["type"]
            raise InvalidSpec(
                f"flinkClusterTemplate.spec.jobManager.accessScope {scope} asks for a {service} Service, which would open "
                "Flink's REST API (no authentication: anyone reaching it can run code in the job) outside the cluster; "
                "this controller creates none unless started with --allow-beam-external-service. Use Cluster or "
                "Headless, and reach the UI with kubectl port-forward"
            )

    def success_rules(self, job: Obj) -> list[Rule]:
        return []  # the submit Job decides (verdict)

    def failure_rules(self, job: Obj) -> list[Rule]:
        return []

    def cleanup_types(self, job: Obj) -> tuple[str, set[str]] | None:
        clean = bool((_spec(job).get("runPolicy") or {}).get("cleanUpCluster"))
        return ("All" if clean else "None"), {JOBMANAGER, TASKMANAGER}

    # -- children -------------------------------------------------------------------------
    def service_ports(self, job: Obj) -> list[Obj]:
        return self.ports_for(job, JOBMANAGER)

    def ports_for(self, job: Obj, rtype: str) -> list[Obj]:
        section, defaults = ("jobManager", JM_PORTS) if rtype == JOBMANAGER else ("taskManager", TM_PORTS)
        return [{"name": n, "port": p} for n, p in self.ports(_cluster(job).get(section) or {}, defaults).items()]

    def service_spec(self, job: Obj, rtype: str) -> Obj:
        if rtype == TASKMANAGER:
            return super().service_spec(job, rtype)  # headless: a stable DNS name per TaskManager
        return copy.deepcopy(ACCESS_SCOPES[(_cluster(job).get("jobManager") or {}).get("accessScope", "Cluster")])

    def cluster_running(self, job: Obj, observed: Children) -> bool:
        names = [self.pod_name(job, s.type, r) for s in self.replica_specs(job) for r in range(s.replicas)]
        return all(((observed.pods.get(n) or {}).get("status") or {}).get("phase") == "Running" for n in names)

    def extra_children(self, job: Obj, observed: Children) -> list[Obj]:
        """The submit Job, once the Flink cluster runs (a submit before that would only fail)."""
        if not self.cluster_running(job, observed):
            return []
        template = copy.deepcopy((_spec(job).get("jobTemplate") or {}).get("spec") or {})
        pod = template.setdefault("template", {})
        labels = pod.setdefault("metadata", {}).setdefault("labels", {})
        # Our labels on the submit pods let the Airflow task stream their logs; their owner is
        # the batch Job, so the controller never acts on them.
        labels.update(
            {LABEL_JOB: job["metadata"]["name"], LABEL_KIND: job["kind"], LABEL_MANAGED_BY: MANAGED_BY, LABEL_TYPE: "batchjob"}
        )
        pod_spec = pod.setdefault("spec", {})
        pod_spec.setdefault("restartPolicy", "OnFailure")  # batch/v1 refuses a Job without one (Always)
        for container in pod_spec.get("containers") or []:
            set_env(container, {"FLINK_MASTER": self.master(job)})
        return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": self.submit_name(job)}, "spec": template}]

    def verdict(self, job: Obj, observed: Children) -> tuple[str, str, str] | None:
        name = self.submit_name(job)
        submit = observed.jobs.get(name)
        if (c := _condition(submit, "Complete")) is not None:
            return "Succeeded", "JobComplete", f"The submit job {name} completed. {c.get('message') or ''}".strip()
        if (c := _condition(submit, "Failed")) is not None:
            return (
                "Failed",
                str(c.get("reason") or "JobFailed"),
                f"The submit job {name} failed: {c.get('message') or c.get('reason')}",
            )
        return None

    # -- status ---------------------------------------------------------------------------
    def core_status(self, status: Obj | None) -> Obj | None:
        if status and status.get("phase") == "Initializing":
            return {**status, "phase": "Pending"}
        return status

    def public_status(
        self, job: Obj, core: Obj, restarting: bool, now: datetime, observed: Children
    ) -> tuple[Obj, list[tuple[str, str, str]]]:
        """T9k's BeamJob status: Initializing until the cluster runs, ClusterRunning and JobRunning,
        jobURL, and the cluster's and the submit job's members."""
        status = copy.deepcopy(core)
        if status.get("phase") == "Pending":
            status["phase"] = "Initializing"
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in ("ClusterRunning", "JobRunning")]
        old = {c["type"]: c for c in (job.get("status") or {}).get("conditions") or []}
        submit = observed.jobs.get(self.submit_name(job))
        try:
            cluster_up, url = self.cluster_running(job, observed), self.master(job)
        except InvalidSpec:  # the core has already failed the job with the reason
            return status, []
        job_up = bool(submit) and not (_condition(submit, "Complete") or _condition(submit, "Failed"))
        for type_, value, yes, no in (
            ("ClusterRunning", cluster_up, "The JobManager and every TaskManager run.", "Not every Flink cluster pod runs."),
            ("JobRunning", job_up, f"The submit job {self.submit_name(job)} runs.",
             f"The submit job {self.submit_name(job)} does not run."),
        ):  # fmt: skip
            conditions.append(_flag(old.get(type_), type_, value, yes if value else no, now))
        status["conditions"] = conditions
        ns = job["metadata"].get("namespace") or "default"
        status["jobURL"] = f"http://{self.service_name(job, JOBMANAGER, 0)}.{ns}.svc:{url.rsplit(':', 1)[1]}"
        members: dict[str, list[Obj]] = {JOBMANAGER: [], TASKMANAGER: []}
        for task in status.get("tasks") or []:
            for r in task.get("status") or []:
                members.setdefault(task["type"], []).append(
                    {"phase": r.get("phase"), "reference": {"name": r.get("name"), "uid": r.get("uid")}}
                )
        status["flinkClusterStatus"] = {"jobManagerStatus": members[JOBMANAGER], "taskManagerStatus": members[TASKMANAGER]}
        status["jobStatus"] = [] if submit is None else [{"phase": _submit_phase(submit), "reference": {
            "name": submit["metadata"]["name"], "uid": submit["metadata"].get("uid")}}]  # fmt: skip
        return status, []


def _flag(old: Obj | None, type_: str, value: bool, message: str, now: datetime) -> Obj:
    status = "True" if value else "False"
    if old is not None and old.get("status") == status:
        return old
    return {"type": type_, "status": status, "reason": type_ if value else f"Not{type_}", "message": message,
            "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}  # fmt: skip


def _submit_phase(submit: Obj) -> str:
    if _condition(submit, "Complete"):
        return "Succeeded"
    if _condition(submit, "Failed"):
        return "Failed"
    return "Running" if ((submit.get("status") or {}).get("active") or 0) > 0 else "Pending"
