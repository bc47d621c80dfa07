"""``T9kJobOperator``: submit a T9k job of any kind and wait for it, by default deferred.

What it does that Airflow's own Kubernetes operators do not (see docs/airflow.md):

- the job name is derived from dag, run, task and map index (and the Task Loop iteration, in a
  loop of Airflow 3.4), and the job is labelled with them and the try number, so it can always
  be found again;
- name, namespace and uid go to the task state store *before* waiting: a retry or a
  restarted worker reattaches to that exact job (uid checked) instead of submitting a second
  one; a name conflict adopts the existing job only if its annotations say it is ours;
- a try that finishes with a job marks it consumed (``CONSUMED_BY``): a later try (a retry, a
  Clear) reattaches to a job that runs or whose result nobody consumed, and runs one whose
  result a try already consumed anew beside it, as ``<name>-t<try>`` (the earlier run stays);
  a Clear takes a job that runs only when the job it renders has the same spec digest
  (``airflow-t9k.io/spec-digest``, api/specdigest.py), and otherwise ends it (``on_kill_action``);
- the trigger watches the job (no polling) and carries the task's timeouts with it;
- a kill, sync or deferred, deletes (or pauses) the job, so nothing is left running; every
  delete and patch carries the uid this task recorded, so it never reaches another object that
  took the name.

The operator is split by concern: the manifest (``manifest``), submitting and the writes that
must reach only our job (``submit``), waiting (``wait``, ``logs``), and the end (``end``); this
module holds the arguments, templating and ``execute``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, cast

import yaml
from airflow.sdk import BaseOperator
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException
from airflow.sdk.execution_time.context import NEVER_EXPIRE  # airflow.sdk re-exports it lazily; its stub does not name it

from airflow_t9k.api.attempts import ATTEMPTS_KEY
from airflow_t9k.api.attempts import record as record_attempt
from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.overlap import check_mode as check_overlap
from airflow_t9k.api.queueing import with_queue
from airflow_t9k.api.rerun import SUBMISSION, first_try
from airflow_t9k.api.resources import resource_for
from airflow_t9k.api.result import parse_source
from airflow_t9k.api.retry import check_codes
from airflow_t9k.api.specdigest import SPEC_DIGEST
from airflow_t9k.api.specdigest import digest as spec_digest
from airflow_t9k.api.startup import DEFAULT_STARTUP_ERROR_GRACE, DEFAULT_STARTUP_TIMEOUT
from airflow_t9k.compat import loop_iteration
from airflow_t9k.kinds.base import ANNOTATION_EVIDENCE_LINES
from airflow_t9k.kinds.registry import KINDS
from airflow_t9k.links import TOOL_LINKS, XCOM_IDENTITY, T9kJobLink, tool_url
from airflow_t9k.operators.assets import AssetsMixin
from airflow_t9k.operators.cache import CacheMixin
from airflow_t9k.operators.checkpoint import CheckpointMixin
from airflow_t9k.operators.dryrun import dry_run_context
from airflow_t9k.operators.end import EndMixin
from airflow_t9k.operators.history import HistoryMixin
from airflow_t9k.operators.lineage import LineageMixin
from airflow_t9k.operators.lineage_parent import LineageParentMixin
from airflow_t9k.operators.logs import DEFAULT_MAX_FOLLOWED_PODS, DEFAULT_MAX_LOG_LINES, LOG_REPLICAS, pods_to_follow
from airflow_t9k.operators.manifest import (  # noqa: F401 - also imported from here by others
    CONSUMED_BY,
    LABEL,
    LOOP_ITERATION,
    STATE_KEY,
    _label_value,
    _plain,
    job_name,
    load_job,
    set_in_spec,
    split_command,
)
from airflow_t9k.operators.overlap import OverlapMixin
from airflow_t9k.operators.overrun import OverrunMixin
from airflow_t9k.operators.stall import ProgressDeadlineMixin
from airflow_t9k.operators.submit import SubmitMixin, iteration_of
from airflow_t9k.operators.wait import WaitMixin

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_t9k.hooks.t9k import T9kHook

Obj = dict[str, Any]

DELETE_ON_FINISH = ("never", "always", "on_success")
ON_KILL = ("delete", "pause", "keep")
FINISHED_XCOM = ("phase", "summary")


def ttl_seconds(value: Any) -> int | None:
    """``ttl_after_finished`` as whole seconds (a timedelta rounded up); a ValueError for anything
    but a non-negative integer or timedelta."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        if seconds < 0:
            raise ValueError(f"ttl_after_finished must not be negative, got {value!r}")
        return math.ceil(seconds)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"ttl_after_finished must be a non-negative integer (seconds) or a timedelta, got {value!r}")
    return value


def ttl_refused(kind: str) -> str | None:
    """Why ``ttl_after_finished`` has no meaning for ``kind``; None where it has one (or the kind is
    unknown, which fails on its own)."""
    if kind in KINDS and KINDS[kind].ttl_path is None:
        return (f"ttl_after_finished has no meaning for {kind}: seed 002 calls runPolicy.ttlSecondsAfterFinished "
                "meaningless and the controller ignores it; delete_on_finish deletes the job when the task ends")  # fmt: skip
    return None


def record_try(store: Any, identity: Obj, nonce: str | None, try_number: int, iteration: int | None = None) -> None:
    """The job this try runs, in the task state store: for a retry to reattach (``STATE_KEY``, kept
    as long as Airflow keeps task state; with the Task Loop ``iteration`` inside a loop), and for
    the T9k Job tab's "Earlier attempts" (the last 20 tries, ``api/attempts.py``), kept for good: a
    monthly retraining's history must outlive ``[state_store] default_retention_days`` (30 by default)."""
    store.set(STATE_KEY, {**identity, **({"nonce": nonce} if nonce else {}), **iteration_of(iteration)})
    store.set(ATTEMPTS_KEY, record_attempt(store.get(ATTEMPTS_KEY), try_number, identity), retention=NEVER_EXPIRE)


class T9kJobOperator(SubmitMixin, WaitMixin, CheckpointMixin, AssetsMixin, LineageMixin, LineageParentMixin, EndMixin,
                     ProgressDeadlineMixin, OverlapMixin, OverrunMixin, CacheMixin, HistoryMixin, BaseOperator):  # fmt: skip
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
    :param ttl_after_finished: seconds (or a timedelta, rounded up to whole seconds) after the
        job ended at which the controller deletes it, with everything it owns (its pods, logs and
        ``<name>-evidence``), whether or not any task is still around: the job's
        ``spec.runPolicy.ttlSecondsAfterFinished`` (GenericJob's ``spec.ttlSecondsAfterFinished``).
        ``0`` deletes it as soon as it ended. Default None: the job stays (``delete_on_finish``
        decides). Refused for AscendJob, whose controller ignores the field (seed 002). The task's
        XComs, its log and its task state store keep what it took from the job (docs/airflow.md,
        "Finished jobs: ttl_after_finished")
    :param progress_deadline: a timedelta (or seconds) without progress after which the running
        job is stalled: the job's ``progressDeadlineSeconds`` (``spec.runPolicy``'s, GenericJob's
        ``spec``'s). The controller keeps the replicas' last log lines in ``<name>-evidence``, then
        restarts every replica where the restart policy and budget allow (counted), else fails the
        job with reason ``ProgressDeadlineExceeded``; the task log says so. Progress is a
        ``T9K_PROGRESS`` line or a push (``airflow_t9k.progress.report``); a job that never
        reports is never judged (docs/progress.md, "Hang detection"). Refused for BeamJob, which
        reports none
    :param on_kill_action: ``delete`` or ``pause`` the job when the task is killed or times out
        (a retry resumes a job that a kill or timeout paused), or ``keep`` it running (Mark
        success or Clear of a running task then leaves the training alone); nothing is done to
        a job whose end the wait has already seen
    :param regression_threshold: {metric: threshold}: a run whose metric (the job's last reported
        metrics, then its result's numbers) fell behind the best of every earlier run of this task
        by more than the threshold is flagged: a warning in the task log, XCom ``regression``, and
        a marked point in the T9k Job tab's History (docs/retraining.md, "A task's history")
    :param lower_is_better: the metrics for which lower is better (a loss); higher is better otherwise
    :param cache: deliver the outcome of an earlier successful run of this task (same map index)
        instead of training, when the rendered job (its spec digest and images) and the input
        asset events (the run's triggering events, the inlets' latest) are what that run had: its
        result, metrics, checkpoint and checkpoint location, as XComs and asset events, said in the
        log and in XCom ``t9k_cache``. Default False. A Clear always trains. Images named by tag
        are taken as the same while the tag is (pin by digest to follow pushes) (docs/retraining.md)
    :param cache_version: a string in the cache key: change it to train again on the same inputs
    :param on_predicted_overrun: ``callback(context, overrun)``, called once per try, on the worker,
        when the job's ETA (``status.progress``) says it will end after the try's deadline: the
        earliest of ``timeout``, ``execution_timeout`` and the DAG's deadline alerts whose time is
        known (a fixed time, or an interval after the run's logical date). ``overrun`` is an
        ``airflow_t9k.operators.overrun.PredictedOverrun`` (job, predicted_end, deadline,
        deadline_source, message). The task log warns, and the job gets condition
        ``PredictedOverrun`` and a Warning Event, with or without a callback; nothing is said of a
        job with no ETA (docs/progress.md, "A deadline miss seen coming")
    :param overlap: what this run's task does when the job an earlier DAG run of it submitted
        (the latest earlier run's XCom ``t9k_job``, uid checked; the same map index) still runs:
        ``"allow"`` (default) runs beside it; ``"wait"`` waits until it ends (deferred when
        ``deferrable``), then decides again; ``"skip"`` skips this run's task, saying which job
        still runs; ``"supersede"`` ends the older job as ``on_kill_action`` says (its task then
        fails), then trains this run's data. A paused job does not count. Only a try about to
        submit looks: a retry that reattaches to its own job never does (docs/airflow.md,
        "Overlapping runs")
    :param log_events: forward the job's Kubernetes Events into the task log while deferred
    :param stream_logs: follow replicas' logs into the task log while the task waits, deferred
        or on the worker (as KubernetesPodOperator's ``get_logs``)
    :param log_replicas: whose logs: ``"deciding"`` (default: the replica whose success decides
        the job, the master, chief, launcher or rank 0) or ``"all"`` running replicas
    :param max_log_lines: at most this many forwarded lines in all (default 100,000); and, when
        the job failed, at most this many more of the failed replicas' logs, which follow in the
        task log, the first to fail (by ``terminated.finishedAt``) first
    :param max_followed_pods: with ``"all"``, follow at most this many replicas (default 8); and
        print the logs of at most this many failed replicas
    :param log_tail_lines: lines of the first failed replica's log (the root cause) quoted in
        the task's error
    :param permanent_exit_codes: exit codes of the first failed replica that fail the task
        without spending its retries (``AirflowFailException``); by default none: every exit code
        spends the retries the DAG asked for, whatever the job's restart policy thinks of it
        (docs/disruptions.md)
    :param skip_on_exit_code: an exit code (or several) of the first failed replica that skips the
        task instead of failing it (``AirflowSkipException``), as KubernetesPodOperator's
    :param evidence_log_lines: log lines per replica the controller keeps in the job's
        ``<name>-evidence`` ConfigMap when ``cleanUpPolicy`` deletes its pods (default 50, at most 500)
    :param result_from: where the job's result comes from: ``"auto"`` (default) reads the
        termination message of the replica whose success decides the job (the master, chief,
        launcher or rank 0), ``"<type>[:<rank>][/<container>]"`` another replica's, ``None`` none.
        It is returned (and pushed) as XCom ``result``, parsed as JSON when it is JSON, and shown
        in the failure message of a failed job
    :param checkpoint: a volume for checkpoints, mounted in every container of every replica
        at ``T9K_CHECKPOINT_DIR``: a PersistentVolumeClaim (``"claim"``, ``"claim/dir"`` or
        ``{"claim": ..., "path": ...}``) or any lasting volume source (``{"volume": {"nfs":
        {...}}, "path": ...}``); ``mount_path`` (default ``/t9k/checkpoint``). Each DAG run,
        task and map index gets its own directory, ``<path>/<dag>/<run>/<task>[/map-<i>]``, the
        same for replica restarts and retries; ``checkpoint_scope`` decides about Clears
        (docs/checkpoints.md). Templated. A result ``{"checkpoint": ...}`` is pushed as XCom
        ``checkpoint``, and where the job actually run keeps its checkpoints as ``checkpoint_location``
    :param checkpoint_scope: ``"series"`` (default): retries resume from the task's directory and
        each Clear starts empty in its own (``.../series-<first try>``); ``"run"``: retries and
        Clears resume from the task's directory (a Clear whose job differs from the one before,
        an edited DAG or a sweep's changed element, gets ``.../spec-<digest>``); ``"try"``: each
        try that submits a job gets its own (``.../try-<n>``). A try that reattaches to an
        earlier try's job keeps that job's directory. Either way the program gets ``T9K_RERUN``
        (0 for the task's first job in its DAG run, n for the n-th run anew beside earlier ones)
    :param asset_from_result: a key of the job's (dict) result whose value is an asset URI (e.g.
        ``"model_uri"``): when the job succeeds, that asset gets an event through each ``AssetAlias``
        in ``outlets`` (required), with the same extra as below. Every ``Asset`` in ``outlets``
        gets an event too, whose ``extra`` is the result's keys (``{"result": ...}`` for a result
        that is not a dict) and the job under ``t9k_job`` (docs/airflow.md, "Assets")
    :param termination_grace_period: seconds (or a timedelta) between SIGTERM and SIGKILL for
        every replica (``terminationGracePeriodSeconds``), time to save a last checkpoint;
        default: the pod template's, else Kubernetes' 30 s
    :param template: a ``T9kJobTemplate`` of the job's namespace whose image, volumes, env,
        resources and the rest the job starts from (``spec.templateRef``); what the task gives
        wins (docs/templates.md). The controller merges it once, when the job is submitted;
        templated. ``cluster_template``: a ``ClusterT9kJobTemplate`` instead (give one of the two)
    :param tensorboard_url: the run's TensorBoard, shown as the task's "TensorBoard" extra link
        (templated; ``{namespace}``, ``{name}``, ``{kind}``, ``{uid}`` are the submitted job's;
        http(s) only). The training's live progress and metrics need no URL: they are in the
        job's ``status.progress`` and the T9k Job tab (docs/progress.md)
    :param mlflow_url: the run in MLflow, shown as the "MLflow" extra link, the same way
    :param openlineage_inject_parent_job_info: give every replica the task's OpenLineage run as
        ``OPENLINEAGE_PARENT_ID``, ``OPENLINEAGE_ROOT_PARENT_ID`` and their parts, so the training's
        own lineage events nest under the task (where the OpenLineage provider is installed and
        enabled). Default: ``[t9k] openlineage_inject_parent_job_info`` (True); False opts out, as
        the provider's ``spark_inject_parent_job_info`` does for Spark (docs/airflow.md)
    """

    # ``rendered_job`` is the manifest as it will be submitted, for the Rendered Template view.
    # ``config_file`` and ``cluster_context`` as KubernetesPodOperator templates them.
    template_fields: Sequence[str] = ("job", "namespace", "kubernetes_conn_id", "config_file", "cluster_context",
                                      "queue_name", "checkpoint", "job_template", "cluster_job_template",
                                      "rendered_job", "tensorboard_url", "mlflow_url")  # fmt: skip
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers: ClassVar[dict[str, str]] = {"job": "yaml", "rendered_job": "yaml"}
    operator_extra_links = (T9kJobLink(), *TOOL_LINKS)
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
        ttl_after_finished: timedelta | int | None = None,
        progress_deadline: timedelta | float | None = None,
        on_kill_action: str = "delete",
        overlap: str = "allow",
        on_predicted_overrun: Any = None,
        cache: bool = False,
        regression_threshold: dict[str, float] | None = None,
        lower_is_better: Collection[str] = (),
        cache_version: str | None = None,
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
        permanent_exit_codes: Collection[int] | None = None,
        skip_on_exit_code: int | Collection[int] | None = None,
        evidence_log_lines: int | None = None,
        checkpoint: str | Obj | None = None,
        checkpoint_scope: str = "series",
        termination_grace_period: float | timedelta | None = None,
        asset_from_result: str | None = None,
        template: str | None = None,
        cluster_template: str | None = None,
        tensorboard_url: str | None = None,
        mlflow_url: str | None = None,
        openlineage_inject_parent_job_info: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._init_lineage_parent(openlineage_inject_parent_job_info)
        if template is not None and cluster_template is not None:
            raise ValueError("give template= (a T9kJobTemplate of the job's namespace) or cluster_template= "
                             "(a ClusterT9kJobTemplate), not both")  # fmt: skip
        # Not ``self.template``: the typed operators build pod templates with a method of that name.
        self.job_template = template
        self.cluster_job_template = cluster_template
        self.tensorboard_url = tensorboard_url
        self.mlflow_url = mlflow_url
        self._check_asset_args(asset_from_result, wait_for_completion, result_from)
        self.asset_from_result = asset_from_result
        self._lineage: Obj | None = None
        # Exit codes of the first failed replica that fail the task without its retries (api/retry.py).
        self.permanent_exit_codes = check_codes(permanent_exit_codes)
        # As KubernetesPodOperator's: the task is skipped, not failed, for these exit codes.
        self.skip_on_exit_code = check_codes([skip_on_exit_code] if isinstance(skip_on_exit_code, int) else skip_on_exit_code,
                                             "skip_on_exit_code")  # fmt: skip
        if evidence_log_lines is not None and (isinstance(evidence_log_lines, bool) or not isinstance(evidence_log_lines, int)
                                               or evidence_log_lines < 0):  # fmt: skip
            raise ValueError(f"evidence_log_lines must be a non-negative integer, got {evidence_log_lines!r}")
        self.evidence_log_lines = evidence_log_lines
        self._init_checkpoint(_plain(checkpoint) if isinstance(checkpoint, dict) else checkpoint, termination_grace_period,
                              checkpoint_scope)  # fmt: skip
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ValueError(f"priority must be an integer, got {priority!r}")
        if min_available is not None and (
            isinstance(min_available, bool) or not isinstance(min_available, int) or min_available < 1
        ):
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
        self.ttl_after_finished = ttl_seconds(ttl_after_finished)
        self._init_progress_deadline(progress_deadline)
        known = self.kind or (self.job.get("kind") if isinstance(self.job, dict) else None)
        if self.ttl_after_finished is not None and isinstance(known, str) and (why := ttl_refused(known)):
            raise ValueError(why)  # a job given as YAML or a file is checked when rendered
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
        self.overlap = check_overlap(overlap)
        self._init_overrun(on_predicted_overrun)
        self._init_cache(cache, cache_version)
        self._init_history(regression_threshold, lower_is_better)
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
        self._series_start = 0
        self._max_tries: int | None = None
        self._iteration: int | None = None

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

    def _do_render_template_fields(
        self, parent: Any, template_fields: Any, context: Any, jinja_env: Any, seen_oids: set[int]
    ) -> None:
        """Overridden here rather than ``render_template_fields``: a mapped task
        (``partial().expand()``) renders by calling this on the unmapped task directly, so
        an override one level up would apply to unmapped tasks only."""
        if parent is not self:  # a nested object's fields (Airflow renders inside them too)
            return super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
        self._load_job_file(jinja_env)
        self.template_ext = ()
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
            from airflow_t9k.hooks.t9k import T9kHook  # here, not at the top: see hooks/__init__.py

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
        iteration = loop_iteration(context)  # each iteration of a Task Loop trains its own job
        given = meta.get("name")
        if not given or self.name_suffix:
            meta["name"] = job_name(dag_id, run_id, task_id, map_index, base=given, iteration=iteration)
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
        if iteration is not None:  # only inside a loop: other jobs' labels stay as they were
            meta["labels"][LOOP_ITERATION] = meta["annotations"][LOOP_ITERATION] = str(iteration)
        if self.evidence_log_lines is not None:  # the controller keeps this many lines per replica at clean-up
            meta["annotations"][ANNOTATION_EVIDENCE_LINES] = str(self.evidence_log_lines)
        job["metadata"] = meta
        self._refer_template(job)
        self._apply_ttl(job)
        self._apply_progress_deadline(job)
        self._apply_checkpoint(job, ti, iteration)
        self._apply_lineage_parent(job, context)
        try:
            job = with_queue(job, self.queue_name, self.priority, self.min_available, self.priority_class)
        except ValueError as exc:
            raise AirflowException(str(exc)) from None
        # What a Clear compares before it takes a job that still runs (api/specdigest.py, api/rerun.py).
        job["metadata"].setdefault("annotations", {})[SPEC_DIGEST] = spec_digest(job)
        return job

    def _refer_template(self, job: Obj) -> None:
        """``spec.templateRef`` from ``template=``/``cluster_template=``: the controller merges the
        template into the job once, before any pod exists (docs/templates.md)."""
        name = self.job_template or self.cluster_job_template
        if not name:
            return
        spec = job.setdefault("spec", {})
        ref = {"name": str(name), "kind": "T9kJobTemplate" if self.job_template else "ClusterT9kJobTemplate"}
        if spec.get("templateRef") not in (None, ref):
            raise AirflowException(f"the job names template {spec['templateRef']!r} and the task {ref!r}: give one")
        spec["templateRef"] = ref

    def _apply_ttl(self, job: Obj) -> None:
        """``ttl_after_finished`` as the kind's ``ttlSecondsAfterFinished`` (``JobKind.ttl_path``):
        the controller deletes the finished job that long after it ended."""
        if self.ttl_after_finished is None:
            return
        why = ttl_refused(job["kind"])
        if why:
            raise AirflowException(why)
        set_in_spec(job, KINDS[job["kind"]].ttl_path or (), self.ttl_after_finished, "ttl_after_finished")

    def dry_run(self) -> None:
        """Print the job this task would submit: template files read and Jinja rendered as in a
        run, with a placeholder run (``manual__dry-run``) and placeholders for XComs."""
        op = copy.deepcopy(self)
        op.resolve_template_files()
        op.render_template_fields(cast("Context", dry_run_context(op)))  # placeholders stand in for a run's context
        print(yaml.safe_dump(op.rendered_job, sort_keys=False))

    def _push(self, ti: Any, key: str, value: Any) -> None:
        """An XCom of this task's, unless ``do_xcom_push=False``: then it pushes nothing (no job
        identity, result, usage or metrics; Airflow then leaves out the return value too)."""
        if self.do_xcom_push:
            ti.xcom_push(key=key, value=value)

    # -- execute -----------------------------------------------------------------------------
    def execute(self, context: Any) -> Obj:
        ti = context["ti"]
        self._try_number = int(getattr(ti, "try_number", 0) or 0)
        # The first try since the task's first run or its last Clear: retries after it never train a
        # job that succeeded again (api/rerun.py).
        self._series_start = first_try(self._try_number, getattr(ti, "max_tries", None), self.retries)
        max_tries = getattr(ti, "max_tries", None)
        self._max_tries = max_tries if isinstance(max_tries, int) and not isinstance(max_tries, bool) else None
        self._iteration = loop_iteration(context)
        job = copy.deepcopy(self.rendered_job) if isinstance(self.rendered_job, dict) else self.render_job(context)
        meta = job["metadata"]
        store = context.get("task_state_store")
        found = self._find(store, job)
        if found.delivered is not None:  # a success this series delivered, its job deleted since
            return self._deliver_again(context, found.delivered)
        if found.job is None:
            cached = self._cached(context, job)  # cache=True: an earlier run trained on the same job and inputs
            if cached is not None:
                return self._deliver_cached(context, cached, job)
            self._check_overlap(context)  # an earlier DAG run's job of this task that still runs (overlap=)
            self._checkpoint_for_new_job(job, store)  # checkpoint_scope="run": another configuration's own directory
        self._mark_deadline(context, job, found.job)  # when this try must end by, for the controller's ETA check
        current = found.job or self._submit(job, store, found.recorded)
        identity = {
            "kind": job["kind"],
            "name": current["metadata"]["name"],  # a re-run's is <name>-t<try>
            "namespace": meta["namespace"],
            "uid": current["metadata"]["uid"],
            "server": self.hook.api_client.configuration.host,
        }
        self._identity = identity
        if store is not None:
            nonce = (current["metadata"].get("annotations") or {}).get(SUBMISSION)
            record_try(store, identity, nonce, self._try_number, self._iteration)
        self._push(context["ti"], XCOM_IDENTITY, identity)
        for link in TOOL_LINKS:  # there while the job runs; Airflow pushes them again when the task ends
            if url := tool_url(getattr(self, link.attribute, None), identity):
                self._push(context["ti"], link.xcom_key, url)
        self._push_checkpoint_location(context, current)  # the job's own: an earlier try's when reattached
        if not self.wait_for_completion:
            self._consume(identity)  # this try is done with it: a Clear submits anew once it ends
            return identity
        state = interpret(current)
        if state.terminal:
            return self._finish(context, self._event_from(current, "success" if state.succeeded else "failed"))
        self._phase_seen(state.phase)  # a job reattached to may run already (TIJobOperator's ti_state)
        self._overrun_seen(current, context)
        deadline = self._deadline(context)
        self._follow_pods = pods_to_follow(current, self.log_replicas, self.max_followed_pods)
        if self.deferrable:
            self.defer(trigger=self._trigger(identity, deadline), method_name="execute_complete")
        self._cursor_store = context.get("task_state_store")
        event = self._wait_sync(identity, deadline)
        self._waited = True
        return self._finish(context, event)

    def _deliver_again(self, context: Any, event: Obj) -> Obj:
        """End as the try that delivered ``event`` did: the same XComs, result and asset events."""
        identity = {k: event.get(k) for k in ("kind", "name", "namespace", "uid")}
        self._identity = {**identity, "server": self.hook.api_client.configuration.host}
        self._push(context["ti"], XCOM_IDENTITY, self._identity)
        self._push_checkpoint_location(context, uid=event.get("uid"))
        self._waited = True
        return self._finish(context, event)
