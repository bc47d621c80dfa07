"""``TIJobOperator``: a Tencent Cloud TI-style training job (seed 004), run as a TensorFlowTrainingJob.

TI fields map onto replicas: the master is the chief, ``workerCount`` workers and
``parameterServerCount`` parameter servers, each sized by its ``aUbGcP`` machine type (empty:
the cluster's defaults). ``runtimeVersion`` picks the image through ``runtime_images``; the
native ``tf-*`` runtimes map to the official TensorFlow images by default, while ``tia-*`` and
``tfplus-*`` are platform images that you map yourself. Every malformed input fails when the
DAG is parsed, before anything is submitted. XCom ``ti_state`` carries TI's state names.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from airflow_t9k.api.machine import InvalidMachineType, parse_machine_type
from airflow_t9k.operators.job import T9kJobOperator

Obj = dict[str, Any]

_TF = re.compile(r"^tf-(?P<version>\d+\.\d+\.\d+)(?P<gpu>-gpu)?(?P<py3>-py3)?$")
TI_STATES = {"Pending": "Created", "Running": "Running", "Paused": "Running", "Resuming": "Running",
             "Succeeded": "Succeeded", "Failed": "Failed"}  # fmt: skip


def default_runtime_image(runtime: str) -> str | None:
    """``tf-1.6.0-gpu-py3`` -> ``tensorflow/tensorflow:1.6.0-gpu-py3``; other runtimes: None."""
    m = _TF.match(runtime)
    if not m:
        return None
    return f"tensorflow/tensorflow:{m['version']}{m['gpu'] or ''}{m['py3'] or ''}"


def ti_state(phase: str | None) -> str:
    return TI_STATES.get(phase or "Pending", "Created")


class TIJobOperator(T9kJobOperator):
    """
    :param command: the start command (TI ``command``)
    :param args: its arguments (TI ``args``)
    :param runtime_version: e.g. ``tf-1.6.0-gpu-py3`` or ``tfplus-1.6.0-gpu``
    :param master_type: ``aUbGcP`` of the master (chief); empty: defaults
    :param worker_type: ``aUbGcP`` of each worker
    :param parameter_server_type: ``aUbGcP`` of each parameter server
    :param worker_count: number of workers (0: the master trains alone)
    :param parameter_server_count: number of parameter servers
    :param package_dir: TI ``packageDir`` paths, passed to every replica as ``TI_PACKAGE_DIR``
    :param runtime_images: ``runtimeVersion`` -> image, consulted before the default ``tf-*`` map
    """

    template_fields: ClassVar[tuple[str, ...]] = (*T9kJobOperator.template_fields, "command", "args")
    kind = "TensorFlowTrainingJob"

    def __init__(
        self,
        *,
        command: list[str],
        runtime_version: str,
        args: list[str] | None = None,
        master_type: str | None = None,
        worker_type: str | None = None,
        parameter_server_type: str | None = None,
        worker_count: int = 0,
        parameter_server_count: int = 0,
        package_dir: list[str] | None = None,
        runtime_images: dict[str, str] | None = None,
        pod_annotations: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, count in (("worker_count", worker_count), ("parameter_server_count", parameter_server_count)):
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {count!r}")
        if not command:
            raise ValueError("command is required (the TI start command)")
        self.image = (runtime_images or {}).get(runtime_version) or default_runtime_image(runtime_version)
        if self.image is None:
            raise ValueError(
                f"runtime {runtime_version!r} has no image: native runtimes look like 'tf-1.6.0-gpu-py3'; for tia-*, "
                "tfplus-* and others pass runtime_images={runtime: image}"
            )
        self.machine_resources = {role: self._resources(role, t) for role, t in
                          (("master", master_type), ("worker", worker_type), ("parameter server", parameter_server_type))}  # fmt: skip
        if runtime_version.startswith("tfplus-"):
            if parameter_server_count:
                raise ValueError("tfplus runtimes run without parameter servers (parameter_server_count must be 0)")
            roles = ["master"] + (["worker"] if worker_count else [])
            if any(not self.machine_resources[r].get("limits", {}).get("nvidia.com/gpu") for r in roles):
                raise ValueError("tfplus runtimes need at least one GPU per machine (e.g. worker_type='0U0G1P')")
        self.command = command
        self.args = args
        self.runtime_version = runtime_version
        self.worker_count = worker_count
        self.parameter_server_count = parameter_server_count
        self.package_dir = package_dir
        self.pod_annotations = pod_annotations

    @staticmethod
    def _resources(role: str, machine_type: str | None) -> Obj:
        if not machine_type:
            return {}
        try:
            return parse_machine_type(machine_type).resources()
        except InvalidMachineType as exc:
            raise ValueError(f"{role} machine type: {exc}") from None

    def _template(self, role: str) -> Obj:
        container: Obj = {"name": "tensorflow", "image": self.image, "command": list(self.command)}
        if self.args:
            container["args"] = list(self.args)
        if self.machine_resources[role]:
            container["resources"] = self.machine_resources[role]
        env = [{"name": "TI_RUNTIME_VERSION", "value": self.runtime_version}]
        if self.package_dir:
            env.append({"name": "TI_PACKAGE_DIR", "value": ",".join(self.package_dir)})
        container["env"] = env
        template: Obj = {"spec": {"containers": [container]}}
        if self.pod_annotations:
            template["metadata"] = {"annotations": dict(self.pod_annotations)}
        return template

    def base_job(self) -> Obj:
        specs = [{"type": "chief", "replicas": 1, "restartPolicy": "OnFailure", "template": self._template("master")}]
        if self.worker_count:
            specs.append({"type": "worker", "replicas": self.worker_count, "restartPolicy": "OnFailure",
                          "template": self._template("worker")})  # fmt: skip
        if self.parameter_server_count:
            specs.append({"type": "ps", "replicas": self.parameter_server_count, "restartPolicy": "OnFailure",
                          "template": self._template("parameter server")})  # fmt: skip
        return {"kind": self.kind, "metadata": {}, "spec": {"replicaSpecs": specs, "runPolicy": {"cleanUpPolicy": "Unfinished"}}}

    def execute(self, context: Any) -> Obj:
        context["ti"].xcom_push(key="ti_state", value="Created")
        return super().execute(context)

    def _finish(self, context: Any, event: Obj) -> Obj:
        context["ti"].xcom_push(key="ti_state", value=ti_state(event.get("phase")))
        return super()._finish(context, event)
