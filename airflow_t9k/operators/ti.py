"""``TIJobOperator``: a Tencent Cloud TI-style training job (seed 004), run as a TensorFlowTrainingJob.

TI fields map onto replicas: the master is the chief, ``workerCount`` workers and
``parameterServerCount`` parameter servers, each sized by its ``aUbGcP`` machine type (empty
or ``0U0G0P``: the cluster's defaults). A ``tfplus`` runtime with workers runs exactly those
workers, with no chief, as seed 004's ``--wcount=3 --workertype=0U0G2P`` example does; without
workers it runs the master alone. ``command`` and ``args`` may be one string each, split like a
shell would (``tictl --command="python train.py"``). ``runtimeVersion`` (optional, as in the
seed: default DEFAULT_RUNTIME, its GPU build when a machine type asks for GPUs) picks the image
through ``runtime_images``; the native ``tf-*`` runtimes map to the official TensorFlow images
by default, while ``tia-*`` and ``tfplus-*`` are Tencent's platform images that you map
yourself, and ``tiaserv-*`` (serving) is refused. ``name`` names the job exactly (TI: unique in
the cluster); ``cluster`` names the Airflow connection of the cluster to run on. ``packageDir``
entries are mounted (``pvc://<claim>/<path>``) or already in the image (an absolute path); the
first is the working directory, so a package-relative command finds its code. Every
malformed input fails when the DAG is parsed, before anything is submitted. XCom
``ti_state`` carries TI's state names and ``ti_job`` TI's view of the job (name, cluster,
state, createTime, startTime, endTime, message).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.machine import InvalidMachineType, parse_machine_type
from airflow_t9k.api.outcome import true_condition
from airflow_t9k.operators.job import T9kJobOperator
from airflow_t9k.operators.manifest import STATE_KEY, split_command

Obj = dict[str, Any]

_TF = re.compile(r"^tf-(?P<version>\d+\.\d+\.\d+)(?P<gpu>-gpu)?(?P<py3>-py3)?$")
TI_STATES = {"Pending": "Created", "Running": "Running", "Paused": "Running", "Resuming": "Running",
             "Succeeded": "Succeeded", "Failed": "Failed"}  # fmt: skip
GPU = "nvidia.com/gpu"
# Seed 004 lists native runtimes up to 1.7.0; python3, as every current image is.
DEFAULT_RUNTIME = "tf-1.7.0-py3"
PACKAGE_ROOT = "/ti/packages"  # packageDir i is mounted at PACKAGE_ROOT/i
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _check_name(name: Any, error: type[Exception]) -> None:
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        raise error(f"name {name!r} must be a Kubernetes object name (lower-case letters, digits, '-' and '.')")


def default_runtime(gpus: bool) -> str:
    return DEFAULT_RUNTIME.replace("-py3", "-gpu-py3") if gpus else DEFAULT_RUNTIME


def no_image_message(runtime: str) -> str:
    """Why a runtime has no image, and what to pass instead."""
    if runtime.startswith("tiaserv-"):
        return (
            f"runtime {runtime!r} is a TI serving environment (seed 004), not a training one; "
            "use a tf-*, tia-* or tfplus-* runtime"
        )
    fix = f"pass runtime_images={{{runtime!r}: '<image>'}}"
    if runtime.startswith(("tia-", "tfplus-")):
        return (f"runtime {runtime!r} has no image: tia-* and tfplus-* are Tencent Cloud's own images (TensorFlow with mxnet, "
                f"xgboost and COS support; tfplus's GPU build), which are not public; {fix} with an image you built")  # fmt: skip
    return f"runtime {runtime!r} has no image: native runtimes look like 'tf-1.6.0-gpu-py3'; for tia-*, tfplus-* and others {fix}"


def package_mounts(package_dir: list[str]) -> tuple[list[Obj], list[Obj], list[str]]:
    """(volumes, volumeMounts, in-container paths) for TI's ``packageDir``, checked at parse time.

    ``pvc://<claim>[/<path>]`` mounts that claim (``path`` as subPath) at PACKAGE_ROOT/<i>,
    writable since the seed allows an output path; an absolute path is taken to be in the image.
    TI's COS paths cannot be reached from a cluster, so they are refused with the fix.
    """
    volumes: list[Obj] = []
    mounts: list[Obj] = []
    paths: list[str] = []
    for i, given in enumerate(package_dir):
        entry = str(given)
        if entry.startswith("pvc://"):
            claim, _, sub = entry[len("pvc://") :].partition("/")
            if not _DNS_SUBDOMAIN.match(claim) or ".." in sub.split("/"):
                raise ValueError(f"package_dir {entry!r}: write pvc://<claim>/<path in the claim> with a valid claim name")
            volume = f"ti-package-{i}"
            volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": claim}})
            mounts.append(
                {"name": volume, "mountPath": f"{PACKAGE_ROOT}/{i}", **({"subPath": sub.strip("/")} if sub.strip("/") else {})}
            )
            paths.append(f"{PACKAGE_ROOT}/{i}")
        elif entry.startswith("/"):
            paths.append(entry)
        else:
            raise ValueError(
                f"package_dir {entry!r}: TI's cos:// and relative paths cannot be reached from the cluster; copy the package "
                "to a PersistentVolumeClaim and write pvc://<claim>/<path>, or give an absolute path inside the image"
            )
    return volumes, mounts, paths


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
    :param command: the start command (TI ``command``): a list, or one string split like a shell;
        it runs in the first ``package_dir``, so a package-relative path works
    :param args: its arguments (TI ``args``): a list, or one string split like a shell
    :param name: TI ``name``: the job's exact name (unique in the cluster); without it the name
        comes from the DAG, run and task. Set ``name_suffix=True`` to add the per-run suffix.
    :param cluster: TI ``cluster``: the Airflow connection (Kubernetes) of the cluster to run on
    :param runtime_version: e.g. ``tf-1.6.0-gpu-py3`` or ``tfplus-1.6.0-gpu``; default
        ``tf-1.7.0-py3`` (``tf-1.7.0-gpu-py3`` when a machine type has GPUs)
    :param master_type: ``aUbGcP`` of the master (chief); empty: defaults
    :param worker_type: ``aUbGcP`` of each worker
    :param parameter_server_type: ``aUbGcP`` of each parameter server
    :param worker_count: number of workers (0: the master trains alone)
    :param parameter_server_count: number of parameter servers
    :param package_dir: TI ``packageDir``: ``pvc://<claim>/<path>`` (mounted at
        ``/ti/packages/<i>``) or absolute paths in the image; the first is the working directory,
        and all are passed as ``TI_PACKAGE_DIR`` (comma-separated, as seen in the container)
    :param runtime_images: ``runtimeVersion`` -> image, consulted before the default ``tf-*`` map
    """

    template_fields: Sequence[str] = (*T9kJobOperator.template_fields, "command", "args", "ti_name")
    kind = "TensorFlowTrainingJob"

    def __init__(
        self,
        *,
        command: list[str] | str,
        runtime_version: str | None = None,
        args: list[str] | str | None = None,
        name: str | None = None,
        cluster: str | None = None,
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
        if name is not None:
            if not (isinstance(name, str) and "{{" in name):  # a template is checked once rendered
                _check_name(name, ValueError)
            kwargs.setdefault("name_suffix", False)  # TI's name is the job's name
        if cluster is not None:
            given = kwargs.get("kubernetes_conn_id")
            if given not in (None, "kubernetes_default", cluster):
                raise ValueError(f"cluster {cluster!r} and kubernetes_conn_id {given!r} name two clusters; pass one")
            kwargs["kubernetes_conn_id"] = cluster
        super().__init__(**kwargs)
        for field, count in (("worker_count", worker_count), ("parameter_server_count", parameter_server_count)):
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(f"{field} must be a non-negative integer, got {count!r}")
        if not _words(command, "command"):
            raise ValueError("command is required (the TI start command)")
        _words(args, "args")
        self.machine_resources = {role: self._resources(role, t) for role, t in
                          (("master", master_type), ("worker", worker_type),
                           ("parameter server", parameter_server_type))}  # fmt: skip
        if runtime_version is None:
            runtime_version = default_runtime(any(r.get("limits", {}).get(GPU) for r in self.machine_resources.values()))
        self.image = (runtime_images or {}).get(runtime_version) or default_runtime_image(runtime_version)
        if self.image is None:
            raise ValueError(no_image_message(runtime_version))
        self.package_volumes, self.package_mounts, self.package_paths = package_mounts(list(package_dir or []))
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
        self.ti_name = name
        self.cluster = cluster

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
        if self.package_paths:
            env.append({"name": "TI_PACKAGE_DIR", "value": ",".join(self.package_paths)})
            container["workingDir"] = self.package_paths[0]  # TI runs the command in the package
        if self.package_mounts:
            container["volumeMounts"] = [dict(m) for m in self.package_mounts]
        container["env"] = env
        template: Obj = {"spec": {"containers": [container]}}
        if self.package_volumes:
            template["spec"]["volumes"] = [
                dict(v, persistentVolumeClaim=dict(v["persistentVolumeClaim"])) for v in self.package_volumes
            ]
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
        if self.ti_name:
            _check_name(self.ti_name, AirflowException)
        meta = {"name": self.ti_name} if self.ti_name else {}
        return {
            "kind": self.kind,
            "metadata": meta,
            "spec": {"replicaSpecs": specs, "runPolicy": {"cleanUpPolicy": "Unfinished"}},
        }

    # TI's states only move forward (Created, Running, then the end): ``ti_state`` is written when
    # the job is submitted, when it is first seen Running (by the worker-side wait, before a
    # deferral, or by the trigger in the triggerer: Forwarding.running_xcom, no extra resume), and
    # at the end (``_finish``).
    _state_ti: Any = None
    _state_pushed: str | None = None

    def execute(self, context: Any) -> Obj:
        self._state_ti, self._state_pushed = context["ti"], None
        self._push_state("Created")
        return super().execute(context)

    def _push_state(self, state: str) -> None:
        if self._state_ti is not None and state != self._state_pushed:
            self._push(self._state_ti, "ti_state", state)
            self._state_pushed = state

    def _phase_seen(self, phase: str | None) -> None:
        if ti_state(phase) == "Running":
            self._push_state("Running")

    def _running_xcom(self) -> tuple[str, str] | None:
        if not self.do_xcom_push or self._state_pushed == "Running":
            return None  # nothing is pushed at all, or Running is on record already
        return ("ti_state", "Running")

    def _finish(self, context: Any, event: Obj) -> Obj:
        ti = context["ti"]
        self._state_ti = ti
        self._push_state(ti_state(event.get("phase")))
        if self.do_xcom_push:  # the report reads the job: not when nothing is pushed
            self._push(ti, "ti_job", ti_report(self._read(event), event, self.cluster or self._cluster(context)))
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
