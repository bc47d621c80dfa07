"""One operator per job kind: the same base, plus typed conveniences for the common case.

Give either ``job=`` (the full resource, as for ``T9kJobOperator``) or the conveniences
(``image``, ``command``, ``args``, ``replicas``, ``env``, ``container_resources`` (named as
in Airflow's KubernetesPodOperator, since ``resources`` is taken by BaseOperator) or
``machine_type="2U8G1P"``, ``pod_annotations``, ``spec``); not both.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.machine import InvalidMachineType, parse_machine_type
from airflow_t9k.operators.job import T9kJobOperator

Obj = dict[str, Any]


class TypedJobOperator(T9kJobOperator):
    template_fields: ClassVar[tuple[str, ...]] = (*T9kJobOperator.template_fields, "image", "command", "args", "env", "spec")
    container_name: ClassVar[str] = "main"

    def __init__(
        self,
        *,
        image: str | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        replicas: int = 1,
        env: dict[str, str] | list[Obj] | None = None,
        container_resources: Obj | None = None,
        machine_type: str | None = None,
        pod_annotations: dict[str, str] | None = None,
        spec: Obj | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        given = {k for k, v in {"image": image, "command": command, "args": args, "env": env, "container_resources": container_resources,
                                "machine_type": machine_type, "spec": spec}.items() if v is not None}  # fmt: skip
        if self.job is not None and given:
            raise ValueError(f"give either job= or the conveniences ({', '.join(sorted(given))}), not both")
        if self.job is None and not image:
            raise ValueError(f"{type(self).__name__} needs job= or image=")
        if machine_type is not None and container_resources is not None:
            raise ValueError("give either machine_type= or container_resources=, not both")
        if machine_type is not None:
            try:
                container_resources = parse_machine_type(machine_type).resources()
            except InvalidMachineType as exc:
                raise ValueError(str(exc)) from None
        if not isinstance(replicas, int) or replicas < 1:
            raise ValueError(f"replicas must be a positive integer, got {replicas!r}")
        self.image = image
        self.command = command
        self.args = args
        self.replicas = replicas
        self.env = env
        self.container_resources = container_resources
        self.pod_annotations = pod_annotations
        self.spec = spec

    def container(self, name: str | None = None) -> Obj:
        c: Obj = {"name": name or self.container_name, "image": self.image}
        if self.command is not None:
            c["command"] = list(self.command)
        if self.args is not None:
            c["args"] = list(self.args)
        if self.env:
            c["env"] = [{"name": k, "value": str(v)} for k, v in self.env.items()] if isinstance(self.env, dict) else list(self.env)
        if self.container_resources:
            c["resources"] = copy.deepcopy(self.container_resources)
        return c

    def template(self, container: Obj | None = None) -> Obj:
        t: Obj = {"spec": {"containers": [container or self.container()]}}
        if self.pod_annotations:
            t["metadata"] = {"annotations": dict(self.pod_annotations)}
        return t

    def build_spec(self) -> Obj:
        raise NotImplementedError

    def launched_command(self) -> tuple[Obj, list[str]]:
        """For kinds whose launcher runs the command: the worker container without it, and
        the command with its args."""
        worker = self.container()
        command = worker.pop("command", None) or []
        worker.pop("args", None)
        return worker, [*command, *(self.args or [])]

    def base_job(self) -> Obj:
        if self.job is not None:
            return super().base_job()
        spec = self.build_spec()
        for key, value in (self.spec or {}).items():
            spec[key] = value
        if self.kind is None:
            raise AirflowException("a typed operator needs a kind")
        return {"kind": self.kind, "metadata": {}, "spec": spec}


def _replica(rtype: str, replicas: int, template: Obj, restart: Any = None) -> Obj:
    out: Obj = {"type": rtype, "replicas": replicas, "template": template}
    if restart is not None:
        out["restartPolicy"] = restart
    return out


class GenericJobOperator(TypedJobOperator):
    kind = "GenericJob"

    def build_spec(self) -> Obj:
        return {"replicaSpecs": [_replica("worker", self.replicas, self.template())]}


class PyTorchTrainingJobOperator(TypedJobOperator):
    kind = "PyTorchTrainingJob"
    container_name = "pytorch"

    def build_spec(self) -> Obj:
        return {"replicaSpecs": [_replica("worker", self.replicas, self.template(), "ExitCode")]}


class TensorFlowTrainingJobOperator(TypedJobOperator):
    kind = "TensorFlowTrainingJob"
    container_name = "tensorflow"

    def build_spec(self) -> Obj:
        return {"replicaSpecs": [_replica("worker", self.replicas, self.template(), "OnFailure")]}


class XGBoostTrainingJobOperator(TypedJobOperator):
    """``replicas`` counts the master: one master and ``replicas - 1`` workers."""

    kind = "XGBoostTrainingJob"
    container_name = "xgboost"

    def build_spec(self) -> Obj:
        specs = [_replica("master", 1, self.template(), "OnFailure")]
        if self.replicas > 1:
            specs.append(_replica("worker", self.replicas - 1, self.template(), "OnFailure"))
        return {"replicaSpecs": specs}


class ColossalAIJobOperator(TypedJobOperator):
    """``command`` is the training script and its arguments, run by ``colossalai run``."""

    kind = "ColossalAIJob"
    container_name = "worker"

    def build_spec(self) -> Obj:
        worker, command = self.launched_command()
        return {
            "launcher": {"image": self.image},
            "worker": {"replicas": self.replicas, "procPerWorker": 1, "command": command, "template": self.template(worker)},
        }


class DeepSpeedJobOperator(TypedJobOperator):
    """``command`` is what ``deepspeed`` runs with python (``config.run.python``)."""

    kind = "DeepSpeedJob"
    container_name = "worker"

    def build_spec(self) -> Obj:
        worker, command = self.launched_command()
        return {
            "config": {"run": {"python": command}},
            "worker": {"replicas": self.replicas, "restartPolicy": "OnFailure", "template": self.template(worker)},
        }


class MPIJobOperator(TypedJobOperator):
    """``command`` is what the launcher runs with ``mpirun`` (``worker.cmd``)."""

    kind = "MPIJob"
    container_name = "mpi-worker"

    def build_spec(self) -> Obj:
        worker, command = self.launched_command()
        return {"worker": {"replicas": self.replicas, "cmd": command, "template": self.template(worker)}}


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
        cluster = {"image": {"name": self.flink_image or self.image}, "jobManager": {}, "taskManager": {"replicas": self.replicas}}
        return {
            "flinkClusterTemplate": {"spec": cluster},
            "jobTemplate": {"spec": {"template": template}},
            "runPolicy": {"cleanUpCluster": self.clean_up_cluster},
        }


class AscendJobOperator(TypedJobOperator):
    """MindCluster's AscendJob: one leader (Master, Chief or Scheduler, by ``framework``) and
    ``replicas - 1`` workers, each asking for ``npus`` NPUs (``huawei.com/Ascend910`` unless
    ``npu_resource`` names another)."""

    kind = "AscendJob"
    container_name = "ascend"
    template_fields: ClassVar[tuple[str, ...]] = (*TypedJobOperator.template_fields, "framework")
    LEADERS: ClassVar[dict[str, str]] = {"pytorch": "Master", "tensorflow": "Chief", "mindspore": "Scheduler"}

    def __init__(self, *, framework: str = "pytorch", npus: int = 0, npu_resource: str = "huawei.com/Ascend910",
                 restart_policy: str = "Never", **kwargs: Any) -> None:  # fmt: skip
        super().__init__(**kwargs)
        if framework not in self.LEADERS:
            raise ValueError(f"framework must be one of {', '.join(self.LEADERS)}, got {framework!r}")
        if not isinstance(npus, int) or npus < 0:
            raise ValueError(f"npus must be a non-negative integer, got {npus!r}")
        if self.replicas < 2:
            raise ValueError("replicas counts the leader too: an AscendJob needs at least 2 (a leader and a worker)")
        self.framework = framework
        self.npus = npus
        self.npu_resource = npu_resource
        self.restart_policy = restart_policy

    def base_job(self) -> Obj:
        job = super().base_job()
        if self.job is None:
            job["metadata"]["labels"] = {"framework": self.framework}
        return job

    def build_spec(self) -> Obj:
        container = self.container()
        if self.npus:
            resources = container.setdefault("resources", {})
            for section in ("requests", "limits"):
                resources.setdefault(section, {})[self.npu_resource] = self.npus
        template = self.template(container)

        def replica(n: int) -> Obj:
            return {"replicas": n, "restartPolicy": self.restart_policy, "template": copy.deepcopy(template)}

        return {"replicaSpecs": {self.LEADERS[self.framework]: replica(1), "Worker": replica(self.replicas - 1)}}


OPERATORS: dict[str, type[T9kJobOperator]] = {
    op.kind: op  # type: ignore[misc]
    for op in (GenericJobOperator, PyTorchTrainingJobOperator, TensorFlowTrainingJobOperator, XGBoostTrainingJobOperator,
               ColossalAIJobOperator, DeepSpeedJobOperator, MPIJobOperator, BeamJobOperator, AscendJobOperator)
}  # fmt: skip
