"""Submitting: reattach to the job an earlier try of this task recorded, deliver again the result
of one that succeeded in this series of retries, or run the job anew under a free name; and the
writes that must reach our job and no other.

A job is this task's only by the uid the task recorded in its state store (or, for a submission
whose uid a dying worker never recorded, by the nonce recorded before the create): a job's
``airflow-t9k.io`` annotations and labels are written by whoever creates it, so a co-tenant could
make a job that claims to be this task's, and adopting it would hand its result to the DAG.
Which recorded job a later try takes is ``api/rerun.py``'s decision: a retry reattaches to a job
that still runs; a Clear (a new series of tries) only when the job it renders now has the spec
digest the job was submitted with (``api/specdigest.py``), and otherwise ends the old job as
``on_kill_action`` says and submits the job anew.

Every delete and patch carries the uid this task recorded: the API server refuses it for
another object that took the name (a uid precondition, or ``metadata.uid`` in a merge patch),
and such a refusal means *our job is gone*.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api import checkpoint as ckpt
from airflow_t9k.api import specdigest
from airflow_t9k.api.attempts import ATTEMPTS_KEY
from airflow_t9k.api.attempts import parse as parse_attempts
from airflow_t9k.api.rerun import REPLACE, SUBMISSION, TAKE, in_series, rerun_names, reuse
from airflow_t9k.api.runmode import pause_patch, paused_by_task, resume_patch
from airflow_t9k.k8s.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound
from airflow_t9k.operators.manifest import CONSUMED_BY, DELIVERED_BY, DELIVERED_KEY, STATE_KEY, SUBMITTING_KEY

Obj = dict[str, Any]


@dataclass(frozen=True)
class Found:
    """What an earlier try of this task left: ``job``, the job to take (reattach to, or deliver);
    ``delivered``, the final event a try of this series delivered when its job is gone since
    (``delete_on_finish``); ``recorded``, the uids of every job the task recorded."""

    job: Obj | None = None
    delivered: Obj | None = None
    recorded: frozenset[str] = frozenset()


class SubmitMixin:
    """Part of ``T9kJobOperator``: finding, adopting and submitting its job."""

    hook: Any
    log: Any
    name_suffix: bool
    on_kill_action: str
    _try_number: int
    _series_start: int
    _max_tries: int | None
    _iteration: int | None  # the Task Loop iteration this try runs (compat.loop_iteration)

    def _this_iteration(self, record: Any, what: str) -> Any:
        """``record`` (a task state store value), or None when an earlier iteration of a Task Loop
        wrote it. Airflow 3.4 keeps a store per iteration; a ``[state_store] backend`` that keys by
        map index alone would show this iteration the last one's job, which must not be taken."""
        if not isinstance(record, dict) or record.get("iteration") == self._iteration:
            return record
        self.log.info("the task state store's %s is of loop iteration %s, and this is iteration %s: not this "
                      "iteration's job", what, record.get("iteration"), self._iteration)  # fmt: skip
        return None

    def _find(self, store: Any, job: Obj) -> Found:
        if store is None:
            return Found()
        saved = self._this_iteration(store.get(STATE_KEY) or None, STATE_KEY)
        pending = self._this_iteration(store.get(SUBMITTING_KEY) or None, SUBMITTING_KEY)
        attempts = parse_attempts(store.get(ATTEMPTS_KEY))
        recorded = {str(e["uid"]) for e in attempts}
        if isinstance(saved, dict) and saved.get("uid"):
            recorded.add(str(saved["uid"]))
        if (
            isinstance(pending, dict)
            and pending.get("nonce")
            and (not isinstance(saved, dict) or saved.get("nonce") != pending["nonce"])
        ):
            # An earlier try recorded that it was creating this job and did not live to record its uid.
            made = self.hook.get_job(pending.get("kind") or job["kind"], pending["name"], pending["namespace"])
            if made is not None and ((made["metadata"].get("annotations") or {}).get(SUBMISSION)) == pending["nonce"]:
                saved = {"kind": made["kind"], "name": pending["name"], "namespace": pending["namespace"],
                         "uid": made["metadata"]["uid"], "nonce": pending["nonce"]}  # fmt: skip
                recorded.add(str(saved["uid"]))
        if not isinstance(saved, dict) or not saved.get("uid"):
            return Found(recorded=frozenset(recorded))
        current = self.hook.get_job(saved["kind"], saved["name"], saved["namespace"])
        if current is None or current["metadata"].get("uid") != saved.get("uid"):
            delivered = store.get(DELIVERED_KEY)
            if (isinstance(delivered, dict) and delivered.get("uid") == saved["uid"] and isinstance(delivered.get("try"), int)
                    and same_series(delivered, self._max_tries, self._series_start)
                    and isinstance(delivered.get("event"), dict)):  # fmt: skip
                self.log.info("%s %s/%s succeeded and try %s delivered its result; the job is gone since, and this retry "
                              "delivers that result again (a retry never trains again)", saved["kind"], saved["namespace"],
                              saved["name"], delivered["try"])  # fmt: skip
                return Found(delivered=delivered["event"], recorded=frozenset(recorded))
            self.log.info("the job of an earlier try (%s/%s) is gone; submitting a new one", saved["namespace"], saved["name"])
            return Found(recorded=frozenset(recorded))
        took = [e["try"] for e in attempts if e["uid"] == current["metadata"].get("uid")]
        return Found(
            job=self._adopt_or_replace(current, "reattaching to the job of an earlier try", job, took),
            recorded=frozenset(recorded),
        )

    def _adopt_or_replace(self, current: Obj, why: str, job: Obj | None = None, took: list[int] | None = None) -> Obj | None:
        """Take the job this task recorded (resuming it if a kill or timeout of an earlier try
        paused it), or None: the caller runs the job anew beside it, after ending it first when
        a Clear changed the job the task renders (``job``; see ``api/rerun.py``). ``took``: the
        tries the task recorded running ``current``."""
        meta = current["metadata"]
        digest = specdigest.recorded(job) if job is not None else None
        same_series = in_series(current, self._series_start, took or ())
        decision = reuse(current, self._series_start, digest, same_series)
        reason = decision.why
        if decision.action == REPLACE:
            hint = "; ".join(specdigest.changes(current, job)) if job is not None else "the spec"
            self.log.info("%s %s/%s (uid %s): %s (%s); ending it as on_kill_action=%r says, and running the job anew",
                          current["kind"], meta["namespace"], meta["name"], meta["uid"], reason, hint,
                          self.on_kill_action)  # fmt: skip
            self._end_replaced(current)
            return None
        if decision.action != TAKE:
            if job is not None and not same_series and digest and specdigest.recorded(current) not in (None, digest):
                reason += f" ({'; '.join(specdigest.changes(current, job))})"
            self.log.info("%s %s/%s: %s; it stays as that try's record (its pods and logs too), and this try runs the job "
                          "anew beside it", current["kind"], meta["namespace"], meta["name"], reason)  # fmt: skip
            return None
        if decision.note:
            self.log.info("%s %s/%s: %s", current["kind"], meta["namespace"], meta["name"], decision.note)
        if paused_by_task(current):
            self.log.info("resuming %s %s/%s, paused by an earlier try", current["kind"], meta["namespace"], meta["name"])
            current = self._patch_exact(current, resume_patch(meta["uid"])) or current
        self.log.info("%s: %s %s/%s uid %s (%s)", why, current["kind"], meta["namespace"], meta["name"], meta["uid"], reason)
        return current

    def _end_replaced(self, current: Obj) -> None:
        """End a job a Clear does not take, as ``on_kill_action`` says: delete it, pause it (a
        job already paused stays so), or leave it running (``keep``, said in the log). A write
        the API server refuses is a warning: the task still runs the job it renders now."""
        meta = current["metadata"]
        what = f"{current['kind']} {meta['namespace']}/{meta['name']}"
        try:
            if self.on_kill_action == "keep":
                self.log.warning("leaving %s running (on_kill_action='keep'): it is no longer this task's job, and it "
                                 "runs beside the new one until it ends or is deleted", what)  # fmt: skip
            elif self.on_kill_action == "pause":
                pause = ((current.get("spec") or {}).get("runMode") or {}).get("pause") or {}
                if isinstance(pause, dict) and pause.get("enabled"):
                    self.log.info("%s stays paused (on_kill_action='pause'); no try resumes it", what)
                elif self._patch_exact(current, pause_patch(meta["uid"], f"replaced by try {self._try_number}")) is not None:
                    self.log.info("paused %s (on_kill_action='pause'); no try resumes it", what)
            elif self._delete_exact(current["kind"], meta["name"], meta["namespace"], meta["uid"]):
                self.log.info("deleted %s (on_kill_action='delete')", what)
        except ApiError as exc:
            self.log.warning("could not %s %s (%s); it may run beside the new job until it ends or is deleted",
                             self.on_kill_action, what, exc.message)  # fmt: skip

    def _submit(self, job: Obj, store: Any, recorded: frozenset[str] = frozenset()) -> Obj:
        """Create the job under the first free name of this try (``api/rerun.py``). Before each
        create the name and a nonce go to the task state store, so that a retry after a worker
        lost between the create and the record of its uid finds the job by the nonce (decided
        durably, then done). A name taken by a job this task did not record is never adopted."""
        meta = job["metadata"]
        base = meta["name"]
        for index, name in enumerate(rerun_names(base, self._try_number)):
            for _ in range(3):  # a job deleted between our create and our read: try the name again
                attempt = copy.deepcopy(job)
                nonce = uuid.uuid4().hex
                attempt["metadata"]["name"] = name
                attempt["metadata"].setdefault("annotations", {})[SUBMISSION] = nonce
                # Which run anew of this task in its DAG run this is: the jobs it recorded before, or
                # the names taken before this one (a run id reused without its state store).
                ckpt.set_env(attempt, ckpt.ENV_RERUN, str(max(len(recorded), index)))
                if store is not None:
                    pending = {"kind": job["kind"], "name": name, "namespace": meta["namespace"], "nonce": nonce}
                    store.set(SUBMITTING_KEY, {**pending, **iteration_of(self._iteration)})
                try:
                    created = self.hook.create_job(attempt, meta["namespace"])
                except AlreadyExists:
                    existing = self.hook.get_job(job["kind"], name, meta["namespace"])
                    if existing is None:
                        continue
                    if name == base and not self.name_suffix and existing["metadata"].get("uid") not in recorded:
                        raise AirflowException(
                            f"{job['kind']} {meta['namespace']}/{name} already exists and is not a job this task recorded "
                            "submitting; choose another name or delete it, or leave name_suffix=True so that every run "
                            "gets its own name"
                        ) from None
                    self.log.info("%s %s/%s exists (%s); trying the next name", job["kind"], meta["namespace"], name,
                                  "an earlier run of this task" if existing["metadata"].get("uid") in recorded
                                  else "not a job this task recorded: never adopted")  # fmt: skip
                    break
                self._nonce = nonce
                self.log.info("submitted %s %s/%s uid %s", job["kind"], meta["namespace"], name, created["metadata"]["uid"])
                return created
        raise AirflowException(
            f"{job['kind']} {meta['namespace']}/{base}: every name this try may use ({base}, {base}-t{self._try_number}, ... "
            f"{rerun_names(base, self._try_number)[-1]}) is taken; delete the jobs of earlier runs of this task"
        )

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
        """Mark the job's outcome as consumed by this try (its failure, or a job this try does
        not wait for), so a later try runs the job anew once it has failed."""
        self._mark(ident, CONSUMED_BY, "consumed")

    def _mark(self, ident: Obj, key: str, what: str) -> None:
        job = {
            "kind": ident["kind"],
            "metadata": {"name": ident["name"], "namespace": ident["namespace"], "uid": ident.get("uid")},
        }
        patch = {"metadata": {"uid": ident.get("uid"), "annotations": {key: str(self._try_number)}}}
        try:
            self._patch_exact(job, patch)
        except ApiError as exc:  # the task's outcome stands; the mark only guides later tries
            self.log.warning("could not mark %s/%s as %s by try %s (%s); a Clear of this task would take this job "
                             "again instead of running it anew", ident["namespace"], ident["name"], what,
                             self._try_number, exc.message)  # fmt: skip

    def _delivered(self, store: Any, ours: Obj, event: Obj) -> None:
        """Record that this try delivered the job's success, after everything else it delivered:
        in the task state store (with the event, for a retry that finds the job deleted since)
        and on the job (``delivered-by-try``). Only a try of a later series (a Clear) runs the job
        again; a retry of this series delivers it again (``api/rerun.py``)."""
        if store is not None and ours.get("uid"):
            kept = {k: event.get(k) for k in ("status", "kind", "name", "namespace", "uid", "phase", "message", "state")}
            record = {"uid": ours["uid"], "try": self._try_number, "event": {**kept, "uid": ours["uid"]}}
            if self._max_tries is not None:  # the series it belongs to, as Airflow numbers it (same_series)
                record["max_tries"] = self._max_tries
            store.set(DELIVERED_KEY, record)
        if ours.get("uid"):
            self._mark(ours, DELIVERED_BY, "delivered")


def iteration_of(iteration: int | None) -> Obj:
    """What a task state store record adds for a Task Loop's iteration: nothing outside a loop, so
    the records of every other task stay as they were."""
    return {} if iteration is None else {"iteration": iteration}


def same_series(delivered: Obj, max_tries: int | None, series_start: int) -> bool:
    """Whether a delivery record is of the series the current try belongs to. Airflow sets a task
    instance's ``max_tries`` when a series starts (``retries`` for the first, ``try_number +
    retries`` at a Clear) and keeps it through its retries, so a record carrying the ``max_tries``
    of its try answers exactly, whatever ``retries`` the DAG says today; an older record (or a
    task instance that does not say) is judged by the first try of the series as computed from
    today's ``retries`` (``api/rerun.first_try``)."""
    recorded = delivered.get("max_tries")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and isinstance(max_tries, int):
        return recorded == max_tries
    return int(delivered.get("try") or 0) >= series_start
