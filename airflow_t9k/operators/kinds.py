"""One operator per job kind: the same base, plus typed conveniences for the common case.

Give either ``job=`` (the full resource, as for ``T9kJobOperator``) or the conveniences
(``image``, ``command``, ``args``, ``replicas``, ``env``, ``container_resources`` (named as
in Airflow's KubernetesPodOperator, since ``resources`` is taken by BaseOperator) or
``machine_type="2U8G1P"``, ``pod_annotations``, ``spec``, and the pod-level options in
``POD_OPTIONS``); not both. With ``template=``/``cluster_template=`` (a job template,
docs/templates.md) ``image`` may be left out: the template's container of the same name gives it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar

from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.machine import InvalidMachineType, parse_machine_type
from airflow_t9k.operators.job import T9kJobOperator
from airflow_t9k.operators.manifest import _plain, split_command
from airflow_t9k.operators.pod import POD_OPTIONS, SHM_VOLUME, pod_template, shm  # noqa: F401 - SHM_VOLUME: its old home

Obj = dict[str, Any]


def _templated(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def _replicas(value: Any) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if isinstance(value, bool) or n < 1 or (isinstance(value, float) and value != n):
        raise AirflowException(f"replicas must be a positive integer, got {value!r}")
    return n


class TypedJobOperator(T9kJobOperator):
    template_fields: Sequence[str] = (
        *T9kJobOperator.template_fields, "image", "command", "args", "env", "spec", "replicas", "machine_type",
        "container_resources", "pod_annotations", *POD_OPTIONS,
    )  # fmt: skip
    container_name: ClassVar[str] = "main"
    # Set from POD_OPTIONS in __init__.
    labels: dict[str, Any] | None
    annotations: dict[str, Any] | None
    volumes: Any
    volume_mounts: Any
    tolerations: Any
    node_selector: dict[str, str] | None
    affinity: Obj | None
    service_account_name: str | None
    image_pull_secrets: Any
    env_from: Any
    priority_class_name: str | None
    shm_size: str | None

    def __init__(
        self,
        *,
        image: str | None = None,
        command: list[str] | str | None = None,
        args: list[str] | str | None = None,
        replicas: int | str = 1,
        env: dict[str, str] | list[Any] | None = None,
        container_resources: Obj | Any | None = None,
        machine_type: str | None = None,
        pod_annotations: dict[str, str] | None = None,
        spec: Obj | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        volumes: list[Any] | None = None,
        volume_mounts: list[Any] | None = None,
        tolerations: list[Any] | None = None,
        node_selector: dict[str, str] | None = None,
        affinity: Any = None,
        service_account_name: str | None = None,
        image_pull_secrets: list[Any] | str | None = None,
        env_from: list[Any] | None = None,
        priority_class_name: str | None = None,
        shm_size: str | None = None,
        security_context: Obj | Any | None = None,
        container_security_context: Obj | Any | None = None,
        init_containers: list[Any] | None = None,
        host_aliases: list[Any] | None = None,
        runtime_class_name: str | None = None,
        scheduler_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        pod = {"labels": labels, "annotations": annotations, "volumes": volumes, "volume_mounts": volume_mounts,
               "tolerations": tolerations, "node_selector": node_selector, "affinity": affinity,
               "service_account_name": service_account_name, "image_pull_secrets": image_pull_secrets,
               "env_from": env_from, "priority_class_name": priority_class_name, "shm_size": shm_size,
               "security_context": security_context, "container_security_context": container_security_context,
               "init_containers": init_containers, "host_aliases": host_aliases,
               "runtime_class_name": runtime_class_name, "scheduler_name": scheduler_name}  # fmt: skip
        given = {k for k, v in {"image": image, "command": command, "args": args, "env": env,
                                "container_resources": container_resources, "machine_type": machine_type, "spec": spec,
                                **pod}.items() if v is not None}  # fmt: skip
        if self.job is not None and given:
            raise ValueError(f"give either job= or the conveniences ({', '.join(sorted(given))}), not both")
        if self.job is None and not image and not (self.job_template or self.cluster_job_template):
            raise ValueError(f"{type(self).__name__} needs job=, image=, or a job template (template=, cluster_template=)")
        if machine_type is not None and container_resources is not None:
            raise ValueError("give either machine_type= or container_resources=, not both")
        if container_resources is not None and not isinstance(_plain(container_resources), dict):
            raise ValueError("container_resources must be a dict ({'limits': ..., 'requests': ...}) or a "
                             f"kubernetes.client V1ResourceRequirements, got {type(container_resources).__name__}")  # fmt: skip
        # Checked now when given as values, at render time when templated.
        try:
            if machine_type is not None and not _templated(machine_type):
                parse_machine_type(machine_type)
            if not _templated(replicas):
                _replicas(replicas)
            if shm_size is not None and not _templated(shm_size):
                shm(shm_size)
            for name in ("command", "args"):
                value = {"command": command, "args": args}[name]
                if not _templated(value):
                    split_command(value, name)
        except (InvalidMachineType, AirflowException) as exc:
            raise ValueError(str(exc)) from None
        self.image = image
        self.command = command
        self.args = args
        self.replicas = replicas
        # Kubernetes client models (what the cncf-kubernetes provider's KubernetesPodOperator
        # takes: V1ResourceRequirements, V1EnvVar, ...) become the API's dicts now, so that a
        # wrong one fails at parse and templates inside them render like any dict's.
        self.env = _plain(env)
        self.container_resources = _plain(container_resources)
        self.machine_type = machine_type
        self.pod_annotations = pod_annotations
        self.spec = spec
        for name, value in pod.items():
            setattr(self, name, _plain(value))

    @property
    def replica_count(self) -> int:
        return _replicas(self.replicas)

    def _resources(self) -> Obj | None:
        if self.machine_type:
            try:
                return parse_machine_type(self.machine_type).resources()
            except InvalidMachineType as exc:
                raise AirflowException(str(exc)) from None
        if not self.container_resources:
            return None
        # A quantity is a string or an integer in the Pod schema; 0.5 (as Python writes it) is
        # refused by the API server, so it goes as the string "0.5".
        return {
            section: {k: str(v) if isinstance(v, float) else v for k, v in values.items()} if isinstance(values, dict) else values
            for section, values in copy.deepcopy(self.container_resources).items()
        }

    def container(self, name: str | None = None) -> Obj:
        c: Obj = {"name": name or self.container_name}
        if self.image:  # else the job template's container of this name gives it (docs/templates.md)
            c["image"] = self.image
        command, args = split_command(self.command, "command"), split_command(self.args, "args")
        if command is not None:
            c["command"] = command
        if args is not None:
            c["args"] = args
        if self.env:
            c["env"] = (
                [{"name": k, "value": str(v)} for k, v in self.env.items()] if isinstance(self.env, dict) else list(self.env)
            )
        resources = self._resources()
        if resources:
            c["resources"] = resources
        return c

    def template(self, container: Obj | None = None) -> Obj:
        """A replica's pod template, with the pod-level options applied (operators/pod.py)."""
        return pod_template(container or self.container(), {name: getattr(self, name) for name in POD_OPTIONS},
                            self.pod_annotations)  # fmt: skip

    def build_spec(self) -> Obj:
        raise NotImplementedError

    def launched_command(self) -> tuple[Obj, list[str]]:
        """For kinds whose launcher runs the command: the worker container without it, and
        the command with its args."""
        worker = self.container()
        command = worker.pop("command", None) or []
        args = worker.pop("args", None) or []
        return worker, [*command, *args]

    def base_job(self) -> Obj:
        if self.job is not None:
            return super().base_job()
        spec = self.build_spec()
        for key, value in (self.spec or {}).items():
            spec[key] = value
        if self.kind is None:
            raise AirflowException("a typed operator needs a kind")
        meta: Obj = {}
        if self.labels:
            meta["labels"] = {k: str(v) for k, v in self.labels.items()}
        if self.annotations:
            meta["annotations"] = {k: str(v) for k, v in self.annotations.items()}
        return {"kind": self.kind, "metadata": meta, "spec": spec}


def _replica(rtype: str, replicas: int, template: Obj, restart: Any = None) -> Obj:
    out: Obj = {"type": rtype, "replicas": replicas, "template": template}
    if restart is not None:
        out["restartPolicy"] = restart
    return out


class GenericJobOperator(TypedJobOperator):
    kind = "GenericJob"

    def build_spec(self) -> Obj:
        return {"replicaSpecs": [_replica("worker", self.replica_count, self.template())]}


class PyTorchTrainingJobOperator(TypedJobOperator):
    kind = "PyTorchTrainingJob"
    container_name = "pytorch"

    def build_spec(self) -> Obj:
        return {"replicaSpecs": [_replica("worker", self.replica_count, self.template(), "ExitCode")]}


class TensorFlowTrainingJobOperator(TypedJobOperator):
    kind = "TensorFlowTrainingJob"
    container_name = "tensorflow"

    def build_spec(self) -> Obj:
        return {"replicaSpecs": [_replica("worker", self.replica_count, self.template(), "OnFailure")]}


class XGBoostTrainingJobOperator(TypedJobOperator):
    """``replicas`` counts the master: one master and ``replicas - 1`` workers."""

    kind = "XGBoostTrainingJob"
    container_name = "xgboost"

    def build_spec(self) -> Obj:
        specs = [_replica("master", 1, self.template(), "OnFailure")]
        if self.replica_count > 1:
            specs.append(_replica("worker", self.replica_count - 1, self.template(), "OnFailure"))
        return {"replicaSpecs": specs}


class ColossalAIJobOperator(TypedJobOperator):
    """``command`` is the training script and its arguments, run by ``colossalai run``."""

    kind = "ColossalAIJob"
    container_name = "worker"

    def build_spec(self) -> Obj:
        worker, command = self.launched_command()
        spec: Obj = {
            "worker": {"replicas": self.replica_count, "procPerWorker": 1, "command": command, "template": self.template(worker)}
        }
        if self.image:  # else the job template's jobSpec.launcher gives it
            spec["launcher"] = {"image": self.image}
        return spec


class DeepSpeedJobOperator(TypedJobOperator):
    """``command`` is what ``deepspeed`` runs with python (``config.run.python``)."""

    kind = "DeepSpeedJob"
    container_name = "worker"

    def build_spec(self) -> Obj:
        worker, command = self.launched_command()
        return {
            "config": {"run": {"python": command}},
            "worker": {"replicas": self.replica_count, "restartPolicy": "OnFailure", "template": self.template(worker)},
        }


class MPIJobOperator(TypedJobOperator):
    """``command`` is what the launcher runs with ``mpirun`` (``worker.cmd``)."""

    kind = "MPIJob"
    container_name = "mpi-worker"

    def build_spec(self) -> Obj:
        worker, command = self.launched_command()
        return {"worker": {"replicas": self.replica_count, "cmd": command, "template": self.template(worker)}}


class BeamJobOperator(TypedJobOperator):
    """``image``/``command``/``args`` are the submit job's; ``replicas`` counts TaskManagers,
    which run ``flink_image`` (default: ``image``). The Flink cluster is deleted when the job
    ends unless ``clean_up_cluster=False`` (T9k's default keeps it; a pipeline rarely wants that)."""

    kind = "BeamJob"
    container_name = "submit-job"

    def __init__(self, *, flink_image: str | None = None, clean_up_cluster: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flink_image = flink_image
        self.clean_up_cluster = clean_up_cluster

    def build_spec(self) -> Obj:
        template = self.template()
        template["spec"]["restartPolicy"] = "OnFailure"
        spec: Obj = {"jobTemplate": {"spec": {"template": template}}, "runPolicy": {"cleanUpCluster": self.clean_up_cluster}}
        if self.flink_image or self.image:  # else the job template's jobSpec gives the whole Flink cluster
            cluster = {
                "image": {"name": self.flink_image or self.image},
                "jobManager": {},
                "taskManager": {"replicas": self.replica_count},
            }
            spec["flinkClusterTemplate"] = {"spec": cluster}
        return spec


class AscendJobOperator(TypedJobOperator):
    """MindCluster's AscendJob: one leader (Master, Chief or Scheduler, by ``framework``) and
    ``replicas - 1`` workers, each asking for ``npus`` NPUs (``huawei.com/Ascend910`` unless
    ``npu_resource`` names another)."""

    kind = "AscendJob"
    container_name = "ascend"
    template_fields: Sequence[str] = (*TypedJobOperator.template_fields, "framework")
    LEADERS: ClassVar[dict[str, str]] = {"pytorch": "Master", "tensorflow": "Chief", "mindspore": "Scheduler"}

    def __init__(self, *, framework: str = "pytorch", npus: int = 0, npu_resource: str = "huawei.com/Ascend910",
                 restart_policy: str = "Never", **kwargs: Any) -> None:  # fmt: skip
        super().__init__(**kwargs)
        if not _templated(framework):  # a template is checked once rendered (``_leader``)
            try:
                self._leader(framework)
            except AirflowException as exc:
                raise ValueError(str(exc)) from None
        if not isinstance(npus, int) or npus < 0:
            raise ValueError(f"npus must be a non-negative integer, got {npus!r}")
        if not _templated(self.replicas) and _replicas(self.replicas) < 2:
            raise ValueError("replicas counts the leader too: an AscendJob needs at least 2 (a leader and a worker)")
        self.framework = framework
        self.npus = npus
        self.npu_resource = npu_resource
        self.restart_policy = restart_policy

    def _leader(self, framework: Any) -> str:
        if framework not in self.LEADERS:
            raise AirflowException(f"framework must be one of {', '.join(self.LEADERS)}, got {framework!r}")
        return self.LEADERS[framework]

    def base_job(self) -> Obj:
        job = super().base_job()
        if self.job is None:
            job["metadata"]["labels"] = {**(job["metadata"].get("labels") or {}), "framework": self.framework}
        return job

    def build_spec(self) -> Obj:
        if self.replica_count < 2:
            raise AirflowException("replicas counts the leader too: an AscendJob needs at least 2 (a leader and a worker)")
        container = self.container()
        if self.npus:
            resources = container.setdefault("resources", {})
            for section in ("requests", "limits"):
                resources.setdefault(section, {})[self.npu_resource] = self.npus
        template = self.template(container)

        def replica(n: int) -> Obj:
            return {"replicas": n, "restartPolicy": self.restart_policy, "template": copy.deepcopy(template)}

        return {"replicaSpecs": {self._leader(self.framework): replica(1), "Worker": replica(self.replica_count - 1)}}


OPERATORS: dict[str, type[T9kJobOperator]] = {
    op.kind: op
    for op in (GenericJobOperator, PyTorchTrainingJobOperator, TensorFlowTrainingJobOperator, XGBoostTrainingJobOperator,
               ColossalAIJobOperator, DeepSpeedJobOperator, MPIJobOperator, BeamJobOperator, AscendJobOperator)
}  # fmt: skip
