"""``T9kJobOperator``: submit a T9k job of any kind and wait for it, by default deferred.

What it does that Airflow's own Kubernetes operators do not (see docs/airflow.md):

- the job name is derived from dag, run, task and map index, and the job is labelled with
  them and the try number, so it can always be found again;
- name, namespace and uid go to the task state store *before* waiting: a retry or a
  restarted worker reattaches to that exact job (uid checked) instead of submitting a second
  one; a name conflict adopts the existing job only if its annotations say it is ours;
- a try that finishes with a job marks it consumed (``CONSUMED_BY``): a later try (a retry, a
  Clear) reattaches to a job that runs or whose result nobody consumed, and runs one whose
  result a try already consumed anew beside it, as ``<name>-t<try>`` (the earlier run stays);
- the trigger watches the job (no polling) and carries the task's timeouts with it;
- a kill, sync or deferred, deletes (or pauses) the job, so nothing is left running; every
  delete and patch carries the uid this task recorded, so it never reaches another object that
  took the name.
"""

from __future__ import annotations

import copy
import hashlib
import re
import shlex
import time
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

import yaml
from airflow.sdk import BaseOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout

from airflow_t9k.api.outcome import JobState, interpret
from airflow_t9k.api.paths import job_path
from airflow_t9k.api.queueing import note as queue_note
from airflow_t9k.api.queueing import queue_failure, queue_remaining, with_queue
from airflow_t9k.api.resources import resource_for
from airflow_t9k.api.result import message_of, parse_source
from airflow_t9k.api.result import parse as parse_result
from airflow_t9k.api.runmode import pause_patch, paused_by_task, resume_patch
from airflow_t9k.k8s.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound, is_transient
from airflow_t9k.hooks.t9k import T9kHook
from airflow_t9k.kinds.registry import KINDS, get_kind
from airflow_t9k.links import XCOM_IDENTITY, T9kJobLink
from airflow_t9k.api.startup import (
    DEFAULT_STARTUP_ERROR_GRACE,
    DEFAULT_STARTUP_TIMEOUT,
    StartupErrors,
    startup_error,
    startup_failure,
    startup_remaining,
)
from airflow_t9k.operators.logs import (
    DEFAULT_MAX_FOLLOWED_PODS,
    DEFAULT_MAX_LOG_LINES,
    LOG_REPLICAS,
    LogFollower,
    pods_to_follow,
)
from airflow_t9k.triggers.job import T9kJobTrigger

Obj = dict[str, Any]

STATE_KEY = "t9k_job"
LABEL = "airflow-t9k.io"
DELETE_ON_FINISH = ("never", "always", "on_success")
ON_KILL = ("delete", "pause", "keep")
FINISHED_XCOM = ("phase", "summary")
CONSUMED_BY = f"{LABEL}/consumed-by-try"


def _slug(text: str, limit: int) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    s = re.sub(r"^[^a-z]+", "", s)  # a DNS-1035 label starts with a letter
    return s[:limit].rstrip("-") or "job"


def _label_value(text: str) -> str:
    v = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text))[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", v)


def job_name(dag_id: str, run_id: str, task_id: str, map_index: int = -1, base: str | None = None) -> str:
    """Deterministic, short enough for ``<job>-<type>-<rank>`` Service names (<= 63): ``base``
    (a name the user gave, else the task id) cut to 24 characters, then a digest of the task."""
    digest = hashlib.sha256(f"{dag_id}\x00{run_id}\x00{task_id}\x00{map_index}".encode()).hexdigest()[:10]
    return f"{_slug(base or task_id, 24)}-{digest}"


def split_command(value: Any, field: str = "command") -> list[str] | None:
    """A command given as a string is split as a shell would ("python train.py" is two words)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise AirflowException(f"{field} {value!r} cannot be split like a shell command: {exc}") from None
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise AirflowException(f"{field} must be a list of strings or one string, got {type(value).__name__}")


def _plain(value: Any) -> Any:
    """Kubernetes client models (V1Volume, V1ResourceRequirements, ...), also inside lists and
    dicts, as the API's dicts (camelCase); plain values as they are."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(value)


def load_job(job: Obj | str) -> Obj:
    if isinstance(job, dict):
        return dict(job)
    loaded = yaml.safe_load(job)
    if not isinstance(loaded, dict):
        raise AirflowException(f"the job must be a mapping (a YAML document or a dict), got {type(loaded).__name__}")
    return loaded


class T9kJobOperator(BaseOperator):
    """
    Submit a T9k job and wait until it ends.

    :param job: the job: a dict, a YAML string, or a path to a ``.yaml``/``.yml``/``.json`` file
        (all templated). ``metadata.name`` may be left out: a deterministic name is used.
    :param name_suffix: a ``metadata.name`` given in ``job`` gets a suffix derived from dag, run,
        task and map index, so every run submits its own job (default True); False submits
        the name as given, and a second run then conflicts until the first job is deleted
    :param namespace: namespace (default: the job's, the connection's, then ``default``)
    :param kubernetes_conn_id: the ``kubernetes`` connection
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``)
    :param wait_for_completion: wait at all; False returns once the job is submitted
    :param timeout: give up waiting after this long (seconds or timedelta); the job is then
        deleted (or paused, see ``on_kill_action``) and the task fails
    :param startup_timeout: fail sooner, the same way, when the job has not left ``Pending``
        this long after its submission, admission or last resume (no GPUs free,
        unschedulable), with the scheduler's reason; default one hour, None for no limit
    :param startup_error_grace: fail the task (and delete or pause the job) when a replica of a
        job that has not started shows ``ErrImagePull``, ``ImagePullBackOff``,
        ``InvalidImageName`` or ``CreateContainerConfigError`` this long (default 120 s; None:
        wait for ``startup_timeout`` instead)
    :param queue_name: the Kueue LocalQueue that admits the job (``spec.scheduler.t9kScheduler.queue``;
        AscendJob ``runPolicy.schedulingPolicy.queue``; templated); docs/queueing.md. Named as in the
        provider's ``KubernetesStartKueueJobOperator``: ``queue=`` is BaseOperator's executor queue
        (Celery), which it keeps, and never reaches the job
    :param priority: the job's integer priority in its queue (T9k kinds); higher preempts lower.
        Not Airflow's ``priority_weight``, which orders task instances in the executor
    :param min_available: AscendJob only: admit it with at least this many pods
    :param priority_class: AscendJob only: a WorkloadPriorityClass or PriorityClass name
    :param queue_timeout: fail, the same way as ``startup_timeout``, when the job waited in its
        queue this long without being admitted; time in the queue does not count as startup
    :param delete_on_finish: ``never``, ``always`` or ``on_success``
    :param on_kill_action: ``delete`` or ``pause`` the job when the task is killed or times out
        (a retry resumes a job that a kill or timeout paused), or ``keep`` it running (Mark
        success or Clear of a running task then leaves the training alone); nothing is done to
        a job whose end the wait has already seen
    :param log_events: forward the job's Kubernetes Events into the task log while deferred
    :param stream_logs: follow replicas' logs into the task log while the task waits, deferred
        or on the worker (as KubernetesPodOperator's ``get_logs``)
    :param log_replicas: whose logs: ``"deciding"`` (default: the replica whose success decides
        the job, the master, chief, launcher or rank 0) or ``"all"`` running replicas
    :param max_log_lines: at most this many forwarded lines in all (default 100,000)
    :param max_followed_pods: with ``"all"``, follow at most this many replicas (default 8)
    :param log_tail_lines: lines of each failed replica's log shown on failure
    :param result_from: where the job's result comes from: ``"auto"`` (default) reads the
        termination message of the replica whose success decides the job (the master, chief,
        launcher or rank 0), ``"<type>[:<rank>][/<container>]"`` another replica's, ``None`` none.
        It is returned (and pushed) as XCom ``result``, parsed as JSON when it is JSON, and shown
        in the failure message of a failed job
    """

    # ``rendered_job`` is the manifest as it will be submitted, for the Rendered Template view.
    template_fields: ClassVar[tuple[str, ...]] = ("job", "namespace", "kubernetes_conn_id", "queue_name", "rendered_job")
    template_ext: ClassVar[tuple[str, ...]] = (".yaml", ".yml", ".json")
    template_fields_renderers: ClassVar[dict[str, str]] = {"job": "yaml", "rendered_job": "yaml"}
    operator_extra_links = (T9kJobLink(),)
    ui_color = "#c9e4f7"
    kind: ClassVar[str | None] = None  # set by the per-kind operators

    def __init__(
        self,
        *,
        job: Obj | str | None = None,
        name_suffix: bool = True,
        namespace: str | None = None,
        kubernetes_conn_id: str | None = "kubernetes_default",
        config_file: str | None = None,
        cluster_context: str | None = None,
        in_cluster: bool | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        wait_for_completion: bool = True,
        timeout: float | timedelta | None = None,
        startup_timeout: float | timedelta | None = DEFAULT_STARTUP_TIMEOUT,
        startup_error_grace: float | timedelta | None = DEFAULT_STARTUP_ERROR_GRACE,
        delete_on_finish: str = "never",
        on_kill_action: str = "delete",
        log_events: bool = True,
        stream_logs: bool = True,
        log_replicas: str = "deciding",
        max_log_lines: int = DEFAULT_MAX_LOG_LINES,
        max_followed_pods: int = DEFAULT_MAX_FOLLOWED_PODS,
        log_tail_lines: int = 50,
        result_from: str | None = "auto",
        queue_name: str | None = None,
        priority: int | None = None,
        min_available: int | None = None,
        priority_class: str | None = None,
        queue_timeout: float | timedelta | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ValueError(f"priority must be an integer, got {priority!r}")
        if min_available is not None and (isinstance(min_available, bool) or not isinstance(min_available, int) or min_available < 1):
            raise ValueError(f"min_available must be a positive integer, got {min_available!r}")
        # Not ``self.queue``: BaseOperator routes the task to that executor queue.
        self.queue_name = queue_name
        self.priority = priority
        self.min_available = min_available
        self.priority_class = priority_class
        self.queue_timeout = queue_timeout.total_seconds() if isinstance(queue_timeout, timedelta) else queue_timeout
        if result_from not in (None, "auto"):
            try:
                parse_source(result_from)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
        if delete_on_finish not in DELETE_ON_FINISH:
            raise ValueError(f"delete_on_finish must be one of {DELETE_ON_FINISH}, got {delete_on_finish!r}")
        if log_replicas not in LOG_REPLICAS:
            raise ValueError(f"log_replicas must be one of {LOG_REPLICAS}, got {log_replicas!r}")
        for name, value in (("max_log_lines", max_log_lines), ("max_followed_pods", max_followed_pods)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if on_kill_action not in ON_KILL:
            raise ValueError(f"on_kill_action must be one of {ON_KILL}, got {on_kill_action!r}")
        # A dict may hold kubernetes.client models (a V1PodTemplateSpec, as KubernetesPodOperator's
        # full_pod_spec takes a V1Pod): the API's dicts from here on.
        self.job = _plain(job) if isinstance(job, dict) else job
        self.name_suffix = name_suffix
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.in_cluster = in_cluster
        self.deferrable = deferrable
        self.wait_for_completion = wait_for_completion
        self.timeout = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        self.startup_timeout = startup_timeout.total_seconds() if isinstance(startup_timeout, timedelta) else startup_timeout
        self.startup_error_grace = (startup_error_grace.total_seconds() if isinstance(startup_error_grace, timedelta)
                                    else startup_error_grace)  # fmt: skip
        self.delete_on_finish = delete_on_finish
        self.on_kill_action = on_kill_action
        self.log_events = log_events
        self.stream_logs = stream_logs
        self.log_replicas = log_replicas
        self.max_log_lines = max_log_lines
        self.max_followed_pods = max_followed_pods
        self._follow_pods: list[str] | None = None
        self.log_tail_lines = log_tail_lines
        self.result_from = result_from
        self.rendered_job: Obj | None = None
        self._identity: Obj | None = None
        self._waited = False  # the wait has returned its event
        self._try_number = 0

    # -- templating: only a top-level ``job`` string may name a file -------------------------
    # Airflow applies template_ext to every templated string, also inside dicts and lists, so
    # an argument such as "--deepspeed_config=ds.json" would be read as a template file.
    def _load_job_file(self, env: Any) -> None:
        job = self.job
        if isinstance(job, str) and job.endswith(tuple(type(self).template_ext)):
            self.job = env.loader.get_source(env, job)[0]

    def resolve_template_files(self) -> None:
        self._load_job_file(self.get_template_env())
        self.prepare_template()

    def _do_render_template_fields(self, parent: Any, template_fields: Any, context: Any, jinja_env: Any, seen_oids: set[int]) -> None:
        """Overridden here rather than ``render_template_fields``: a mapped task
        (``partial().expand()``) renders by calling this on the unmapped task directly, so
        an override one level up would apply to unmapped tasks only."""
        if parent is not self:  # a nested object's fields (Airflow renders inside them too)
            return super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
        self._load_job_file(jinja_env)
        self.template_ext = ()  # type: ignore[misc]
        try:
            super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
        finally:
            del self.template_ext
        if "ti" in context:
            self.rendered_job = self.render_job(context)

    # -- the job we submit -------------------------------------------------------------------
    @property
    def hook(self) -> T9kHook:
        if getattr(self, "_hook", None) is None:
            self._hook = T9kHook(
                kubernetes_conn_id=self.kubernetes_conn_id,
                config_file=self.config_file,
                cluster_context=self.cluster_context,
                in_cluster=self.in_cluster,
            )
        return self._hook

    def base_job(self) -> Obj:
        """The job as given; the per-kind operators build it from their arguments instead."""
        if self.job is None:
            raise AirflowException("no job given: pass job= (a dict, YAML string or file)")
        return load_job(self.job)

    def render_job(self, context: Any) -> Obj:
        job = copy.deepcopy(self.base_job())
        if self.kind and job.get("kind", self.kind) != self.kind:
            raise AirflowException(f"{type(self).__name__} submits {self.kind}, but the job is a {job.get('kind')}")
        kind = job.setdefault("kind", self.kind)
        if not kind:
            raise AirflowException("the job has no kind")
        resource = resource_for(kind)
        if self.on_kill_action == "pause" and not (kind in KINDS and KINDS[kind].supports_pause):
            raise AirflowException(f"on_kill_action='pause' needs Pause mode, which {kind} does not have; use 'delete'")
        job.setdefault("apiVersion", resource.api_version)
        meta = dict(job.get("metadata") or {})
        ti = context["ti"]
        dag_id, run_id, task_id = ti.dag_id, ti.run_id, ti.task_id
        map_index = getattr(ti, "map_index", -1)
        map_index = -1 if map_index is None else map_index
        given = meta.get("name")
        if not given or self.name_suffix:
            meta["name"] = job_name(dag_id, run_id, task_id, map_index, base=given)
        meta["namespace"] = self.namespace or meta.get("namespace") or self.hook.get_namespace() or "default"
        meta["labels"] = {
            **(meta.get("labels") or {}),
            f"{LABEL}/dag-id": _label_value(dag_id),
            f"{LABEL}/task-id": _label_value(task_id),
            f"{LABEL}/run-id": _label_value(run_id),
            f"{LABEL}/map-index": str(map_index) if map_index >= 0 else "none",
            f"{LABEL}/try-number": str(getattr(ti, "try_number", 0) or 0),
        }
        # Labels are sanitised and truncated; the exact identity is in annotations.
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            f"{LABEL}/dag-id": dag_id,
            f"{LABEL}/run-id": run_id,
            f"{LABEL}/task-id": task_id,
            f"{LABEL}/map-index": str(map_index),
        }
        job["metadata"] = meta
        try:
            return with_queue(job, self.queue_name, self.priority, self.min_available, self.priority_class)
        except ValueError as exc:
            raise AirflowException(str(exc)) from None

    def dry_run(self) -> None:
        """Print the job this task would submit: template files read and Jinja rendered as in a
        run, with a placeholder run (``manual__dry-run``) and placeholders for XComs."""
        op = copy.deepcopy(self)
        op.resolve_template_files()
        op.render_template_fields(_dry_run_context(op))
        print(yaml.safe_dump(op.rendered_job, sort_keys=False))

    # -- execute -----------------------------------------------------------------------------
    def execute(self, context: Any) -> Obj:
        self._try_number = int(getattr(context["ti"], "try_number", 0) or 0)
        job = copy.deepcopy(self.rendered_job) if isinstance(self.rendered_job, dict) else self.render_job(context)
        meta = job["metadata"]
        store = context.get("task_state_store")
        current = self._reattach(store, job) or self._submit(job)
        identity = {
            "kind": job["kind"],
            "name": current["metadata"]["name"],  # a re-run's is <name>-t<try>
            "namespace": meta["namespace"],
            "uid": current["metadata"]["uid"],
            "server": self.hook.api_client.configuration.host,
        }
        self._identity = identity
        if store is not None:
            store.set(STATE_KEY, identity)
        context["ti"].xcom_push(key=XCOM_IDENTITY, value=identity)
        if not self.wait_for_completion:
            self._consume(identity)  # this try is done with it: a Clear submits anew once it ends
            return identity
        state = interpret(current)
        if state.terminal:
            return self._finish(context, self._event_from(current, "success" if state.succeeded else "failed"))
        deadline = self._deadline(context)
        self._follow_pods = pods_to_follow(current, self.log_replicas, self.max_followed_pods)
        if self.deferrable:
            self.defer(trigger=self._trigger(identity, deadline), method_name="execute_complete")
        event = self._wait_sync(identity, deadline)
        self._waited = True
        return self._finish(context, event)

    def _reattach(self, store: Any, job: Obj) -> Obj | None:
        saved = store.get(STATE_KEY) if store is not None else None
        if not saved:
            return None
        current = self.hook.get_job(saved["kind"], saved["name"], saved["namespace"])
        if current is None or current["metadata"].get("uid") != saved.get("uid"):
            self.log.info("the job of an earlier try (%s/%s) is gone; submitting a new one", saved["namespace"], saved["name"])
            return None
        return self._adopt_or_replace(current, "reattaching to the job of an earlier try")

    def _adopt_or_replace(self, current: Obj, why: str) -> Obj | None:
        """Reattach to a job that runs (resuming it if a kill or timeout of an earlier try paused
        it) or whose result no try consumed; None for one whose result a try consumed: the
        caller submits the new run beside it (see ``_rerun_of``)."""
        meta = current["metadata"]
        state = interpret(current)
        consumed = (meta.get("annotations") or {}).get(CONSUMED_BY)
        if not state.terminal:
            if paused_by_task(current):
                self.log.info("resuming %s %s/%s, paused by an earlier try", current["kind"], meta["namespace"], meta["name"])
                current = self._patch_exact(current, resume_patch(meta["uid"])) or current
            self.log.info("%s: %s %s/%s uid %s (%s)", why, current["kind"], meta["namespace"], meta["name"], meta["uid"], state.summary())
            return current
        if not consumed:
            self.log.info("%s: %s %s/%s uid %s ended and no try has consumed its result (%s)",
                          why, current["kind"], meta["namespace"], meta["name"], meta["uid"], state.summary())  # fmt: skip
            return current
        self.log.info("%s %s/%s ended (%s) and try %s consumed its result; it stays as that try's record (its pods and "
                      "logs too), and this try runs the job anew beside it", current["kind"], meta["namespace"], meta["name"],
                      state.summary(), consumed)  # fmt: skip
        return None

    def _rerun_of(self, job: Obj) -> Obj:
        """The job under this try's own name, ``<name>-t<try>``: a re-run never waits for the
        earlier run's job or pods to go (pods stuck Terminating on a lost node held a retry for
        minutes), and the earlier run's job, pods and logs stay for whoever looks into it."""
        out = copy.deepcopy(job)
        base = job["metadata"]["name"]
        suffix = f"-t{self._try_number}"
        if base.endswith(suffix):  # this try's own name is taken by a run this try consumed: nothing left to do
            raise AirflowException(f"{job['kind']} {job['metadata']['namespace']}/{base} was already run and consumed by this try")
        out["metadata"]["name"] = f"{base}{suffix}"
        return out

    def _live_sibling(self, job: Obj) -> Obj | None:
        """A job of this task under another name (an earlier re-run) that runs or whose result
        no try consumed: reattach to it rather than start a second one (the task state store
        may be gone)."""
        labels = job["metadata"]["labels"]
        selector = ",".join(f"{LABEL}/{k}={labels[f'{LABEL}/{k}']}" for k in ("dag-id", "run-id", "task-id", "map-index"))
        found = [j for j in self.hook.list_jobs(job["kind"], job["metadata"]["namespace"], selector) if self._is_ours(j, job)]
        for other in sorted(found, key=lambda j: str(j["metadata"].get("creationTimestamp") or ""), reverse=True):
            if other["metadata"]["name"] != job["metadata"]["name"]:
                adopted = self._adopt_or_replace(other, "reattaching to an earlier re-run of this task")
                if adopted is not None:
                    return adopted
        return None

    def _submit(self, job: Obj) -> Obj:
        meta = job["metadata"]
        try:
            created = self.hook.create_job(job, meta["namespace"])
            self.log.info("submitted %s %s/%s uid %s", job["kind"], meta["namespace"], meta["name"], created["metadata"]["uid"])
            return created
        except AlreadyExists:
            existing = self.hook.get_job(job["kind"], meta["name"], meta["namespace"])
            if existing is None:
                return self._submit(job)  # deleted in between
            if not self._is_ours(existing, job):
                hint = "" if self.name_suffix else ", or leave name_suffix=True so that every run gets its own name"
                raise AirflowException(
                    f"{job['kind']} {meta['namespace']}/{meta['name']} already exists and was not submitted by this "
                    f"task (its {LABEL} annotations name another DAG, run, task or map index); choose another "
                    f"name or delete it{hint}"
                ) from None
            adopted = self._adopt_or_replace(existing, "adopting the job this task submitted before")
            if adopted is not None:
                return adopted
            return self._live_sibling(job) or self._submit(self._rerun_of(job))

    @staticmethod
    def _is_ours(existing: Obj, job: Obj) -> bool:
        theirs = (existing["metadata"].get("annotations") or {})
        ours = job["metadata"]["annotations"]
        return all(theirs.get(f"{LABEL}/{k}") == ours[f"{LABEL}/{k}"] for k in ("dag-id", "run-id", "task-id", "map-index"))

    # -- writes that must reach our job and no other -----------------------------------------
    def _gone_instead(self, kind: str, name: str, namespace: str, uid: str, exc: ApiError) -> bool:
        """A refused precondition means another object took the name: ours is gone."""
        now = self.hook.get_job(kind, name, namespace)
        if now is not None and now["metadata"].get("uid") == uid:
            return False
        self.log.warning("%s %s/%s (uid %s) is gone; the object of that name now is another one, left alone (%s)",
                         kind, namespace, name, uid, exc.message)  # fmt: skip
        return True

    def _delete_exact(self, kind: str, name: str, namespace: str, uid: str | None) -> bool:
        try:
            return self.hook.delete_job(kind, name, namespace, uid=uid)
        except (Conflict, Invalid) as exc:
            if uid and self._gone_instead(kind, name, namespace, uid, exc):
                return False
            raise

    def _patch_exact(self, job: Obj, patch: Obj) -> Obj | None:
        """Merge-patch with ``metadata.uid`` in the body: the API server refuses it for another
        object of the same name. None when our job is gone."""
        meta = job["metadata"]
        try:
            return self.hook.patch_job(job["kind"], meta["name"], meta["namespace"], patch)
        except NotFound:
            return None
        except (Conflict, Invalid) as exc:
            if meta.get("uid") and self._gone_instead(job["kind"], meta["name"], meta["namespace"], meta["uid"], exc):
                return None
            raise

    def _consume(self, ident: Obj) -> None:
        """Mark the job's result as consumed by this try, so a later try runs it anew."""
        job = {"kind": ident["kind"], "metadata": {"name": ident["name"], "namespace": ident["namespace"], "uid": ident.get("uid")}}
        patch = {"metadata": {"uid": ident.get("uid"), "annotations": {CONSUMED_BY: str(self._try_number)}}}
        try:
            self._patch_exact(job, patch)
        except ApiError as exc:  # the task's outcome stands; only a later Clear would reuse this job
            self.log.warning("could not mark %s/%s as consumed (%s); clearing this task would reattach to it instead of "
                             "running it again", ident["namespace"], ident["name"], exc.message)  # fmt: skip

    def _deadline(self, context: Any) -> float | None:
        candidates = []
        if self.timeout is not None:
            candidates.append(time.time() + float(self.timeout))
        start = getattr(context.get("ti"), "start_date", None)
        if self.execution_timeout is not None and isinstance(start, datetime):
            candidates.append(start.timestamp() + self.execution_timeout.total_seconds())
        return min(candidates) if candidates else None

    def _trigger(self, identity: Obj, deadline: float | None) -> T9kJobTrigger:
        return T9kJobTrigger(
            kind=identity["kind"],
            name=identity["name"],
            namespace=identity["namespace"],
            uid=identity["uid"],
            kubernetes_conn_id=self.kubernetes_conn_id,
            cluster_context=self.cluster_context,
            in_cluster=self.in_cluster,
            deadline=datetime.fromtimestamp(deadline, timezone.utc).isoformat() if deadline else None,
            log_events=self.log_events,
            stream_logs=self.stream_logs,
            max_log_lines=self.max_log_lines,
            max_followed_pods=self.max_followed_pods,
            follow_pods=self._follow_pods,
            log_tail_lines=self.log_tail_lines,
            on_kill_action=self.on_kill_action,
            events_since=datetime.now(timezone.utc).isoformat(),
            config_file=self.config_file,  # a path: the triggerer reads it, no credentials in the trigger
            startup_timeout=self.startup_timeout,
            queue_timeout=self.queue_timeout,
            startup_error_grace=self.startup_error_grace,
        )

    def _wait_sync(self, identity: Obj, deadline: float | None) -> Obj:
        """Wait on this worker by watching the job (one watch, resumed when it ends).

        An API server that stops answering is waited out with back-off until the deadline,
        as the trigger does; a permanent error (CRD gone, access revoked) ends the wait.
        """
        self._startup_errors = StartupErrors(self.startup_error_grace)
        self._logs = (LogFollower(self.hook, identity["namespace"], self.log, self.max_log_lines, self.max_followed_pods,
                                  self._follow_pods) if self.stream_logs and self.max_log_lines else None)  # fmt: skip
        try:
            return self._wait_sync_loop(identity, deadline)
        finally:
            if self._logs is not None:
                self._logs.stop()

    def _wait_sync_loop(self, identity: Obj, deadline: float | None) -> Obj:
        delay = 1.0
        last: list[str | None] = [None]
        while True:
            try:
                event = self._watch_step(identity, deadline, last)
                delay = 1.0
            except ApiError as exc:
                if not is_transient(exc):
                    raise
                if deadline is not None and time.time() + delay > deadline:
                    return self._event_from(None, "timeout", f"timed out waiting for {identity['name']}; last error: {exc.message}")
                self.log.warning("%s; retrying in %.0fs", exc.message, delay)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            if event is not None:
                return event

    def _watch_step(self, identity: Obj, deadline: float | None, last: list[str | None]) -> Obj | None:
        """Read the job; return the final event if the wait is over, else watch until it changes."""
        from kubernetes import watch

        resource = resource_for(identity["kind"])
        job = self.hook.get_job(identity["kind"], identity["name"], identity["namespace"])
        if job is None or job["metadata"]["uid"] != identity["uid"]:
            return self._event_from(job, "error", f"{identity['kind']} {identity['name']} was deleted or replaced")
        if self._logs is not None:
            self._logs.update(job)
        state = interpret(job)
        if state.phase != last[0]:
            self.log.info("%s %s: %s", identity["kind"], identity["name"], state.summary())
            last[0] = state.phase
        if state.terminal:
            return self._event_from(job, "success" if state.succeeded else "failed")
        remaining = None if deadline is None else deadline - time.time()
        if remaining is not None and remaining <= 0:
            return self._event_from(job, "timeout", f"timed out waiting for {identity['name']} ({state.summary()})")
        startup_left = startup_remaining(job, self.startup_timeout)
        if startup_left is not None and startup_left <= 0:
            reason = self.hook.pending_reason(identity["name"], identity["namespace"])
            return self._event_from(job, "timeout", startup_failure(identity["kind"], identity["namespace"], identity["name"],
                                                                    self.startup_timeout, reason))  # fmt: skip
        if startup_left is not None:
            remaining = startup_left if remaining is None else min(remaining, startup_left)
        due, next_in = self._startup_errors.observe(job, time.time())
        if due:
            detail = self.hook.pending_reason(identity["name"], identity["namespace"])
            return self._event_from(job, "startup_error", startup_error(identity["kind"], identity["namespace"], identity["name"],
                                                                        self.startup_error_grace, due, detail))  # fmt: skip
        if next_in is not None:
            remaining = next_in if remaining is None else min(remaining, next_in)
        line = queue_note(job)
        if line and line != getattr(self, "_queue_note", None):
            self.log.info("%s %s: %s", identity["kind"], identity["name"], line)
        self._queue_note = line
        queue_left = queue_remaining(job, self.queue_timeout, time.time())
        if queue_left is not None and queue_left <= 0:
            return self._event_from(job, "timeout", queue_failure(identity["kind"], identity["namespace"], identity["name"],
                                                                  job, self.queue_timeout))  # fmt: skip
        if queue_left is not None:
            remaining = queue_left if remaining is None else min(remaining, queue_left)
        w = watch.Watch()
        path = job_path(resource, identity["namespace"])
        with self.hook.boundary("WATCH", path):
            for _ in w.stream(
                self.hook.custom_object_client.list_namespaced_custom_object, resource.group, resource.version,
                identity["namespace"], resource.plural, field_selector=f"metadata.name={identity['name']}",
                resource_version=job["metadata"]["resourceVersion"], timeout_seconds=int(min(remaining or 60, 60)) or 1,
            ):  # fmt: skip
                w.stop()  # something changed: read it fresh on the next step
        return None

    def _event_from(self, job: Obj | None, status: str, message: str | None = None) -> Obj:
        state = interpret(job)
        logs = {}
        if job is not None and status == "failed":
            ns = job["metadata"]["namespace"]
            logs = {p: self.hook.read_log_tail(p, ns, self.log_tail_lines) for p in state.failed_replicas[:5]}
        meta = (job or {}).get("metadata") or {}
        return {
            "status": status,
            "kind": (job or {}).get("kind") or (self._identity or {}).get("kind"),
            "name": meta.get("name") or (self._identity or {}).get("name"),
            "namespace": meta.get("namespace") or (self._identity or {}).get("namespace"),
            "uid": (self._identity or {}).get("uid") or meta.get("uid"),  # ours, not a replacement's
            "phase": state.phase,
            "message": message or state.summary(),
            "state": state.as_dict(),
            "logs": logs,
        }

    # -- completion --------------------------------------------------------------------------
    def execute_complete(self, context: Any, event: Obj) -> Obj:
        self._try_number = int(getattr(context["ti"], "try_number", 0) or 0)
        return self._finish(context, event)

    def _recorded(self, context: Any, event: Obj) -> Obj:
        """The job this task submitted, as recorded before waiting. The event's uid may be that
        of another object that took the name meanwhile; deletes and patches must not use it."""
        store = context.get("task_state_store")
        saved = self._identity or (store.get(STATE_KEY) if store is not None else None)
        if saved and saved.get("name") == event.get("name") and saved.get("namespace") == event.get("namespace"):
            return {**event, "uid": saved.get("uid")}
        return event

    def _finish(self, context: Any, event: Obj) -> Obj:
        status = event.get("status")
        state = JobState(**{**{k: v for k, v in (event.get("state") or {}).items() if k in ("phase", "message", "reason")},
                            "aggregate": (event.get("state") or {}).get("aggregate") or {},
                            "failed_replicas": tuple((event.get("state") or {}).get("failed_replicas") or ())})  # fmt: skip
        ti = context["ti"]
        ti.xcom_push(key="phase", value=event.get("phase"))
        ti.xcom_push(key="summary", value=state.summary())
        ours = self._recorded(context, event)
        if status in ("success", "failed") and ours.get("uid"):
            self._consume(ours)
        for pod, tail in (event.get("logs") or {}).items():
            self.log.info("--- last %d log lines of failed replica %s ---\n%s", self.log_tail_lines, pod, tail)
        result = self._result(event) if status in ("success", "failed") else None
        if status == "success":
            self.log.info("%s %s succeeded: %s", event.get("kind"), event.get("name"), state.summary())
            if result is not None:
                ti.xcom_push(key="result", value=result)
            if self.delete_on_finish in ("always", "on_success"):
                self._delete(ours)
            return {k: event.get(k) for k in ("kind", "name", "namespace", "uid", "phase")} | {"summary": state.summary(), "result": result}
        if status in ("timeout", "startup_error"):
            ended = self._ended_meanwhile(ours)
            if ended is not None:  # the job finished after all: its outcome, not a timeout
                return self._finish(context, ended)
            try:
                self._kill_job(ours, status)
            except ApiError as exc:  # the cluster may be what timed out; the task still ends
                self.log.warning("could not %s %s %s/%s after the %s: %s", self.on_kill_action, ours["kind"],
                                 ours["namespace"], ours["name"], status, exc.message)  # fmt: skip
            if status == "startup_error":  # not a timeout: the job cannot start, a retry will not help unless fixed
                raise AirflowException(event.get("message") or "the job cannot start")
            raise AirflowTaskTimeout(event.get("message") or "timed out")
        if self.delete_on_finish == "always":
            self._delete(ours)
        replicas = ", ".join(state.failed_replicas)
        detail = f"; failed replicas: {replicas}" if replicas else ""
        why = (event.get("state") or {}).get("replica_failure")
        if why:
            detail += f" ({why})"
        if result is not None:
            detail += f"\n--- result (termination message) of the deciding replica ---\n{result}"
        tails = "".join(f"\n--- {p} ---\n{t}" for p, t in (event.get("logs") or {}).items())
        raise AirflowException(f"{event.get('kind')} {event.get('namespace')}/{event.get('name')}: {event.get('message')}{detail}{tails}")

    def _ended_meanwhile(self, ours: Obj) -> Obj | None:
        """Re-read the job before acting on a timeout: a trigger that ran late (or a stale
        event) may say ``timeout`` for a job that has since ended, and deleting it would throw
        away a finished training. The final event of that end, or None."""
        if not ours.get("uid"):
            return None
        try:
            job = self.hook.get_job(ours["kind"], ours["name"], ours["namespace"])
        except ApiError as exc:  # the cluster may be what timed out; the timeout stands
            self.log.warning("could not re-read %s %s/%s after the timeout: %s", ours["kind"], ours["namespace"], ours["name"], exc.message)
            return None
        if job is None or job["metadata"].get("uid") != ours["uid"]:
            return None
        state = interpret(job)
        if not state.terminal:
            return None
        self.log.info("%s %s/%s ended (%s) by the time its timeout was handled", ours["kind"], ours["namespace"], ours["name"], state.summary())
        return self._event_from(job, "success" if state.succeeded else "failed")

    def _result(self, event: Obj) -> Any:
        """The job's result: the deciding replica's termination message as the controller kept it
        in status, or, with ``result_from``, that replica's (and container's) read from its pod."""
        if self.result_from is None:
            return None
        if self.result_from == "auto":
            return parse_result((event.get("state") or {}).get("result_message"))
        rtype, rank, container = parse_source(self.result_from)
        kind = get_kind(str(event.get("kind")))
        name = kind.pod_name({"metadata": {"name": event.get("name")}}, rtype, rank)
        pod = self.hook.get_pod(name, str(event.get("namespace")))
        if pod is None:
            self.log.warning("no result: replica pod %s is gone (cleaned up?); the deciding replica's result is kept "
                             "in the job's status, result_from='auto'", name)  # fmt: skip
            return None
        return parse_result(message_of(pod, container, prefer=(kind.main_container(pod.get("spec") or {}) or {}).get("name")))

    def _delete(self, ident: Obj) -> None:
        if self._delete_exact(ident["kind"], ident["name"], ident["namespace"], ident.get("uid")):
            self.log.info("deleted %s %s/%s", ident["kind"], ident["namespace"], ident["name"])

    def _kill_job(self, ident: Obj, why: str = "kill") -> None:
        if self.on_kill_action == "keep":
            self.log.info("keeping %s %s/%s after the %s (on_kill_action='keep')", ident["kind"], ident["namespace"], ident["name"], why)
        elif self.on_kill_action == "pause":
            job = {"kind": ident["kind"], "metadata": {"name": ident["name"], "namespace": ident["namespace"], "uid": ident.get("uid")}}
            if self._patch_exact(job, pause_patch(ident.get("uid"), f"{why} of try {self._try_number}")) is not None:
                self.log.info("paused %s %s/%s; a retry resumes it", ident["kind"], ident["namespace"], ident["name"])
        else:
            self._delete(ident)

    def on_kill(self) -> None:
        # Not once the wait has seen the job end: the end is the task's to handle, and a kill
        # arriving then (Mark success) must not delete or pause a finished job.
        if self._identity is not None and not self._waited:
            self._kill_job(self._identity)


class _Placeholder(str):
    """Stands for an XCom in a dry run: prints as ``<xcom:task:key>``, one shell word, and can be indexed."""

    def __getitem__(self, key: Any) -> _Placeholder:  # type: ignore[override]
        return _Placeholder(f"{str(self)[:-1]}.{key}>")

    def __getattr__(self, name: str) -> _Placeholder:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Placeholder(f"{str(self)[:-1]}.{name}>")


class _DryRunTI:
    def __init__(self, op: T9kJobOperator) -> None:
        self.dag_id = op.dag_id if op.has_dag() else "dag"
        self.run_id = "manual__dry-run"
        self.task_id = op.task_id
        self.map_index = -1
        self.try_number = 1

    def xcom_pull(self, task_ids: Any = None, key: str = "return_value", **_: Any) -> _Placeholder:
        return _Placeholder(f"<xcom:{task_ids or self.task_id}:{key}>")

    def xcom_push(self, key: str, value: Any) -> None:
        pass


def _dry_run_context(op: T9kJobOperator) -> dict[str, Any]:
    from airflow.sdk.execution_time import macros

    now = datetime.now(timezone.utc).replace(microsecond=0)
    ti = _DryRunTI(op)
    params = op.params.dump() if hasattr(op.params, "dump") else dict(op.params or {})
    return {
        "ti": ti, "task_instance": ti, "task": op, "dag": op.dag if op.has_dag() else None, "params": params,
        "run_id": ti.run_id, "map_index": -1, "try_number": 1, "macros": macros,
        "logical_date": now, "data_interval_start": now, "data_interval_end": now,
        "ds": now.strftime("%Y-%m-%d"), "ds_nodash": now.strftime("%Y%m%d"),
        "ts": now.isoformat(), "ts_nodash": now.strftime("%Y%m%dT%H%M%S"),
    }  # fmt: skip
