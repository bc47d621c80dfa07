"""Part of ``T9kJobOperator``: ``cache=`` and ``cache_version=`` (``api/cache.py``; docs/retraining.md,
"Unchanged inputs are not retrained").

Looked up only by a try about to submit a job, and never by a try of a Clear: a Clear asks for
the training again (and its success is then the record later runs find). The key is computed
once per try, before anything is submitted, and kept in the task state store: what the try
records at its success is the key of the inputs it trained on, even if an inlet got a new event
while it trained.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from airflow_t9k.api import cache
from airflow_t9k.operators.checkpoint import CHECKPOINT_KEY
from airflow_t9k.operators.earlier import earlier_xcom

Obj = dict[str, Any]


def _event_fields(event: Any, uri: str) -> list[str]:
    """One asset event as strings: its asset, id or time, and where it came from."""
    extra = getattr(event, "extra", None)
    return [uri, str(getattr(event, "id", "") or ""), str(getattr(event, "timestamp", "") or ""),
            str(getattr(event, "source_dag_id", "") or ""), str(getattr(event, "source_run_id", "") or ""),
            str(getattr(event, "source_task_id", "") or ""), str(getattr(event, "source_map_index", "") or ""),
            json.dumps(extra, sort_keys=True, default=str) if extra else ""]  # fmt: skip


def input_events(context: Any, inlets: list[Any]) -> list[list[str]]:
    """The DAG run's triggering asset events, and the latest event of each of the task's inlets."""
    out: list[list[str]] = []
    triggering = context.get("triggering_asset_events") or {}
    for asset, events in triggering.items():
        for event in events or []:
            uri = getattr(getattr(event, "asset", None), "uri", None) or getattr(asset, "uri", None) or str(asset)
            out.append(["triggering", *_event_fields(event, str(uri))])
    accessor = context.get("inlet_events")
    for inlet in inlets:
        uri = getattr(inlet, "uri", None)
        if not uri or accessor is None:
            continue
        try:
            latest = accessor[inlet][-1]
        except (IndexError, KeyError):
            out.append(["inlet", str(uri), "no event"])
            continue
        out.append(["inlet", *_event_fields(latest, str(uri))])
    return out


class CacheMixin:
    """``cache=``: deliver an earlier run's outcome when nothing that decides it changed."""

    log: Any
    cache: bool
    cache_version: str | None
    inlets: list[Any]
    _series_start: int
    _try_number: int
    _push: Callable[[Any, str, Any], None]
    _emit_assets: Callable[[Any, Any, Obj], None]

    def _init_cache(self, enabled: Any, version: Any) -> None:
        if not isinstance(enabled, bool):
            raise ValueError(f"cache must be True or False, got {enabled!r}")
        if version is not None and not isinstance(version, str):
            raise ValueError(f"cache_version must be a string, got {version!r}")
        self.cache = enabled
        self.cache_version = version

    def _run_key(self, context: Any, job: Obj) -> str:
        return cache.key(cache.spec_key(job), cache.images_of(job), input_events(context, list(self.inlets or [])),
                         self.cache_version)  # fmt: skip

    def _cached(self, context: Any, job: Obj) -> Obj | None:
        """The earlier run's record to deliver, or None to train (the key kept for the success)."""
        if not self.cache:
            return None
        store = context.get("task_state_store")
        run_key = self._run_key(context, job)
        if store is not None:  # what this try's success records, a Clear's too: the latest training on these inputs
            store.set(cache.KEY_STATE, run_key)
        if self._series_start > 1:
            self.log.info("cache=True: this try is of a Clear (tries from %s), which trains again", self._series_start)
            return None
        found = cache.matching(earlier_xcom(context, cache.XCOM_CACHE, "cache=True", self.log), run_key)
        if found is None or found.get("run_id") == context["ti"].run_id:
            self.log.info("cache=True: no earlier successful run of this task had these inputs (key %s); training", run_key)
            return None
        return found

    def _deliver_cached(self, context: Any, found: Obj, job: Obj) -> Obj:
        """End as the earlier run did, without a job: its result, metrics and checkpoint; asset events."""
        ti = context["ti"]
        earlier = found["job"]
        self.log.info("cache=True: run %s's %s %s/%s trained on the same job and inputs (key %s); delivering its outcome "
                      "without training", found["run_id"], earlier.get("kind"), earlier.get("namespace"), earlier.get("name"),
                      found["key"])  # fmt: skip
        tags = cache.mutable(cache.images_of(job))
        if tags:
            self.log.warning("cache=True: %s named by tag, not digest: an image pushed under the same tag since is "
                             "taken as the same; pin it (repo@sha256:...) or change cache_version= to train again",
                             ", ".join(tags))  # fmt: skip
        for key in cache.DELIVERED:
            if key in found:
                self._push(ti, key, found[key])
        self._push(ti, cache.XCOM_CACHE, {**found, "hit": True})
        self._emit_assets(context, found.get("result"), earlier)
        return {**earlier, "phase": "Succeeded", "summary": f"cached: the outcome of run {found['run_id']}",
                "result": found.get("result"), "cached_from": found["run_id"]}  # fmt: skip

    def _cache_success(self, context: Any, ours: Obj, result: Any, metrics: Any) -> None:
        """A success records its key and what it delivered, for later runs (XCom ``t9k_cache``)."""
        if not self.cache:
            return
        store = context.get("task_state_store")
        run_key = store.get(cache.KEY_STATE) if store is not None else None
        if not isinstance(run_key, str):
            self.log.info("cache=True: this try computed no cache key (it reattached to an earlier try's job, or no task "
                          "state store); its outcome is not recorded for later runs")  # fmt: skip
            return
        where = store.get(CHECKPOINT_KEY) if store is not None else None
        location = where.get("location") if isinstance(where, dict) and where.get("uid") == ours.get("uid") else None
        checkpoint = result.get("checkpoint") if isinstance(result, dict) else None
        delivered = {"result": result, "metrics": metrics or None, "checkpoint": checkpoint, "checkpoint_location": location}
        self._push(context["ti"], cache.XCOM_CACHE, cache.record(run_key, context["ti"].run_id, ours, delivered))
