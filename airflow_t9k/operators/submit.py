"""Submitting: reattach to the job of an earlier try, adopt our own job on a name conflict, or
run a consumed job anew beside it; and the writes that must reach our job and no other.

Every delete and patch carries the uid this task recorded: the API server refuses it for
another object that took the name (a uid precondition, or ``metadata.uid`` in a merge patch),
and such a refusal means *our job is gone*.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.runmode import paused_by_task, resume_patch
from airflow_t9k.k8s.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound
from airflow_t9k.operators.manifest import CONSUMED_BY, LABEL, STATE_KEY

Obj = dict[str, Any]


class SubmitMixin:
    """Part of ``T9kJobOperator``: finding, adopting and submitting its job."""

    hook: Any
    log: Any
    name_suffix: bool
    _try_number: int

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
            self.log.info(
                "%s: %s %s/%s uid %s (%s)", why, current["kind"], meta["namespace"], meta["name"], meta["uid"], state.summary()
            )
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
            raise AirflowException(
                f"{job['kind']} {job['metadata']['namespace']}/{base} was already run and consumed by this try"
            )
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
        theirs = existing["metadata"].get("annotations") or {}
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
        job = {
            "kind": ident["kind"],
            "metadata": {"name": ident["name"], "namespace": ident["namespace"], "uid": ident.get("uid")},
        }
        patch = {"metadata": {"uid": ident.get("uid"), "annotations": {CONSUMED_BY: str(self._try_number)}}}
        try:
            self._patch_exact(job, patch)
        except ApiError as exc:  # the task's outcome stands; only a later Clear would reuse this job
            self.log.warning("could not mark %s/%s as consumed (%s); clearing this task would reattach to it instead of "
                             "running it again", ident["namespace"], ident["name"], exc.message)  # fmt: skip
