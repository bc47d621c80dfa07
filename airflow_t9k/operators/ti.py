"""``TIJobOperator``: a Tencent Cloud TI-style training job (seed 004), run as a TensorFlowTrainingJob.

TI fields map onto replicas: the master is the chief, ``workerCount`` workers and
``parameterServerCount`` parameter servers, each sized by its ``aUbGcP`` machine type (empty
or ``0U0G0P``: the cluster's defaults). A ``tfplus`` runtime with workers runs exactly those
workers, with no chief, as seed 004's ``--wcount=3 --workertype=0U0G2P`` example does; without
workers it runs the master alone. ``command`` and ``args`` may be one string each, split like a
shell would (``tictl --command="python train.py"``). ``runtimeVersion`` picks the image through
``runtime_images``; the native ``tf-*`` runtimes map to the official TensorFlow images by
default, while ``tia-*`` and ``tfplus-*`` are platform images that you map yourself. Every
malformed input fails when the DAG is parsed, before anything is submitted. XCom
``ti_state`` carries TI's state names and ``ti_job`` TI's view of the job (name, cluster,
state, createTime, startTime, endTime, message).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from airflow.exceptions import AirflowException

from airflow_t9k.api.machine import InvalidMachineType, parse_machine_type
from airflow_t9k.api.outcome import true_condition
from airflow_t9k.operators.job import STATE_KEY, T9kJobOperator, split_command

Obj = dict[str, Any]

_TF = re.compile(r"^tf-(?P<version>\d+\.\d+\.\d+)(?P<gpu>-gpu)?(?P<py3>-py3)?$")
TI_STATES = {"Pending": "Created", "Running": "Running", "Paused": "Running", "Resuming": "Running",
             "Succeeded": "Succeeded", "Failed": "Failed"}  # fmt: skip
GPU = "nvidia.com/gpu"


def default_runtime_image(runtime: str) -> str | None:
    """``tf-1.6.0-gpu-py3`` -> ``tensorflow/tensorflow:1.6.0-gpu-py3``; other runtimes: None."""
    m = _TF.match(runtime)
    if not m:
        return None
    return f"tensorflow/tensorflow:{m['version']}{m['gpu'] or ''}{m['py3'] or ''}"


def ti_state(phase: str | None) -> str:
    return TI_STATES.get(phase or "Pending", "Created")


def ti_report(job: Obj | None, event: Obj, cluster: str | None) -> Obj:
    """TI's fields for a finished job (seed 004): times as RFC 3339, None where unknown."""
    meta = (job or {}).get("metadata") or {}
    status = (job or {}).get("status") or {}
    ended = true_condition(status, "Completed") or true_condition(status, "Failed")
    return {
        "name": event.get("name") or meta.get("name"),
        "cluster": cluster,
        "namespace": event.get("namespace") or meta.get("namespace"),
        "state": ti_state(event.get("phase")),
        "createTime": meta.get("creationTimestamp"),
        "startTime": status.get("startTime"),
        "endTime": (ended or {}).get("lastTransitionTime"),
        "message": event.get("message") or "",
    }


class TIJobOperator(T9kJobOperator):
    """
    :param command: the start command (TI ``command``): a list, or one string split like a shell
    :param args: its arguments (TI ``args``): a list, or one string split like a shell
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
        command: list[str] | str,
        runtime_version: str,
        args: list[str] | str | None = None,
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
        if not _words(command, "command"):
            raise ValueError("command is required (the TI start command)")
        _words(args, "args")
        self.image = (runtime_images or {}).get(runtime_version) or default_runtime_image(runtime_version)
        if self.image is None:
            raise ValueError(
                f"runtime {runtime_version!r} has no image: native runtimes look like 'tf-1.6.0-gpu-py3'; for tia-*, "
                "tfplus-* and others pass runtime_images={runtime: image}"
            )
        self.machine_resources = {role: self._resources(role, t) for role, t in
                          (("master", master_type), ("worker", worker_type), ("parameter server", parameter_server_type))}  # fmt: skip
        # Seed 004: tfplus runs without parameter servers, on GPUs only; "--wcount=3" runs three
        # workers (distributed), no --wcount runs one machine (the master).
        self.workers_only = runtime_version.startswith("tfplus-") and worker_count > 0
        if runtime_version.startswith("tfplus-"):
            if parameter_server_count:
                raise ValueError("tfplus runtimes run without parameter servers (parameter_server_count must be 0)")
            if self.workers_only and master_type:
                raise ValueError("a distributed tfplus job runs workers only (seed 004): master_type does not apply; "
                                 "use worker_type")  # fmt: skip
            role = "worker" if self.workers_only else "master"
            if not self.machine_resources[role].get("limits", {}).get(GPU):
                raise ValueError(f"tfplus runtimes need at least one GPU per machine (e.g. {role}_type='0U0G1P')")
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
        # Split at render time: command and args are template fields.
        container: Obj = {"name": "tensorflow", "image": self.image, "command": split_command(self.command) or []}
        args = split_command(self.args, "args")
        if args:
            container["args"] = args
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
        specs = []
        if not self.workers_only:
            specs.append({"type": "chief", "replicas": 1, "restartPolicy": "OnFailure", "template": self._template("master")})
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
        ti = context["ti"]
        ti.xcom_push(key="ti_state", value=ti_state(event.get("phase")))
        ti.xcom_push(key="ti_job", value=ti_report(self._read(event), event, self._cluster(context)))
        return super()._finish(context, event)

    def _read(self, event: Obj) -> Obj | None:
        """The finished job, for its times; the report is best-effort and never fails the task."""
        if not (event.get("kind") and event.get("name") and event.get("namespace")):
            return None
        try:
            return self.hook.get_job(event["kind"], event["name"], event["namespace"])
        except Exception as exc:  # noqa: BLE001 - the job's outcome, not this report, decides the task
            self.log.warning("TI report without times: reading %s %s failed: %s", event["kind"], event["name"], exc)
            return None

    def _cluster(self, context: Any) -> str | None:
        """TI's ``cluster``: here the API server the job ran on, as recorded when it was submitted
        (by this instance, or before a deferral in the task's state store)."""
        store = context.get("task_state_store")
        identity = self._identity or (store.get(STATE_KEY) if store is not None else None) or {}
        return identity.get("server")


def _words(value: Any, field: str) -> list[str] | None:
    """Check a command or args now, at parse time; templated strings are split again when rendered."""
    try:
        return split_command(value, field)
    except AirflowException as exc:
        raise ValueError(str(exc)) from None
