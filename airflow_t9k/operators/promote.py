"""``PromoteOperator``: a candidate model replaces the production one only if it beats it, and two
runs finishing together cannot both win (docs/retraining.md, "Promotion that cannot race").

- The champion (its metric, model URI, DAG run and task) is kept in Airflow's asset state store on
  the production asset, under ``state_key``; every decision, won or lost, in ``<state_key>_history``.
- The read, the comparison and the write run with one instance of the task at a time across all
  runs of its DAG (``max_active_tis_per_dag=1``, which the operator insists on): Airflow's
  scheduler serializes them, so the second of two runs finishing together compares with the first's
  winner. Promotions into one asset from several DAGs share a pool of one slot (``pool=``).
- A promotion ends the task with the production asset's event (its extra: the metric, the model
  URI, the previous champion's metric and the margin); a candidate that loses skips the task, so
  the asset gets no event and tasks after it that deploy are skipped too. The decision (who beat
  whom, by how much) is XCom ``promotion`` either way.
- ``approve_below=``: a win by a smaller margin asks a person first, through Airflow's
  human-in-the-loop (the task waits in ``awaiting_input``, the Required Actions page shows the
  comparison). Waiting counts as the one instance, so no other run of the DAG decides meanwhile;
  the answer, or ``approval_default`` at ``approval_timeout``, decides. A champion that changed
  while the person was asked (another DAG's promotion) voids the approval: the candidate is
  compared again and promoted only if it now wins by ``approve_below`` or more.
- A retry after a crash between the write and the end finds its own run as the champion and ends
  as that promotion did; a backfill never promotes (an old week's model is not compared with
  today's champion).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import Asset, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowSkipException, TaskAwaitingInput
from airflow.sdk.execution_time.hitl import HITLUser, upsert_hitl_detail

from airflow_t9k.api import promotion

Obj = dict[str, Any]


class PromoteOperator(BaseOperator):
    """
    Promote a candidate model over the production one when its metric is better.

    :param asset: the production model's ``Asset``: it holds the champion in its asset state store and
        gets an event only on a promotion (added to ``outlets``)
    :param metric: the name of the metric in the candidate (``"accuracy"``)
    :param candidate_task_id: the task whose XCom holds the candidate (a training operator's ``result``)
    :param candidate_key: that XCom's key (default ``"result"``; ``"metrics"`` for the last reported metrics)
    :param model_uri_key: the key of the candidate's model URI, recorded with the champion (default ``"model_uri"``)
    :param higher_is_better: False for a loss
    :param min_improvement: the margin a candidate must beat the champion by (default 0: any improvement)
    :param state_key: the asset state store key of the champion (default ``"champion"``)
    :param approve_below: a win by less than this margin waits for a person's approval (Airflow's
        human-in-the-loop); None (the default) never asks
    :param approval_timeout: how long to wait for the answer; None waits until someone answers
    :param approval_default: the answer at the timeout, ``"keep"`` (the default) or ``"promote"``
    :param approvers: who may answer, Airflow users as ``{"id": ..., "name": ...}``; None: anyone
        Airflow lets answer the DAG's requests
    """

    template_fields: Sequence[str] = ("candidate_task_id", "candidate_key")
    ui_color = "#f6e7c1"

    def __init__(self, *, asset: Asset, metric: str, candidate_task_id: str, candidate_key: str = "result",
                 model_uri_key: str = "model_uri", higher_is_better: bool = True, min_improvement: float = 0.0,
                 state_key: str = "champion", approve_below: float | None = None,
                 approval_timeout: timedelta | None = None, approval_default: str = "keep",
                 approvers: list[HITLUser] | HITLUser | None = None, **kwargs: Any) -> None:  # fmt: skip
        if kwargs.get("max_active_tis_per_dag", 1) != 1:
            raise ValueError("PromoteOperator runs one instance at a time (max_active_tis_per_dag=1): that is what keeps "
                             "two runs finishing together from both winning")  # fmt: skip
        if not isinstance(asset, Asset):
            raise ValueError(f"asset must be an airflow.sdk.Asset, got {asset!r}")
        if isinstance(min_improvement, bool) or not isinstance(min_improvement, (int, float)) or min_improvement < 0:
            raise ValueError(f"min_improvement must be a non-negative number, got {min_improvement!r}")
        if approve_below is not None and (isinstance(approve_below, bool) or not isinstance(approve_below, (int, float))
                                          or approve_below <= 0):  # fmt: skip
            raise ValueError(f"approve_below must be a positive number or None, got {approve_below!r}")
        if approval_default not in ("keep", "promote"):
            raise ValueError(f"approval_default must be 'keep' or 'promote', got {approval_default!r}")
        if approval_timeout is not None and (not isinstance(approval_timeout, timedelta) or approval_timeout <= timedelta(0)):
            raise ValueError(f"approval_timeout must be a positive timedelta or None, got {approval_timeout!r}")
        approvers = [approvers] if isinstance(approvers, dict) else approvers
        if approvers is not None and not all(isinstance(a, dict) and a.get("id") and a.get("name") for a in approvers):
            raise ValueError(f"approvers must be Airflow users as {{'id': ..., 'name': ...}}, got {approvers!r}")
        kwargs["max_active_tis_per_dag"] = 1
        kwargs["outlets"] = [*(kwargs.get("outlets") or []), asset]
        super().__init__(**kwargs)
        self.asset = asset
        self.metric = metric
        self.candidate_task_id = candidate_task_id
        self.candidate_key = candidate_key
        self.model_uri_key = model_uri_key
        self.higher_is_better = higher_is_better
        self.min_improvement = float(min_improvement)
        self.state_key = state_key
        self.approve_below = None if approve_below is None else float(approve_below)
        self.approval_timeout = approval_timeout
        self.approval_default = approval_default
        self.approvers = approvers

    def execute(self, context: Any) -> Obj:
        ti, run = context["ti"], context["dag_run"]
        if str(getattr(run.run_type, "value", run.run_type)) == "backfill":
            raise AirflowSkipException("a backfill does not promote: its model is not compared with today's champion")
        raw = ti.xcom_pull(task_ids=self.candidate_task_id, key=self.candidate_key)
        try:
            value = promotion.metric_of(raw, self.metric)
        except ValueError as exc:
            raise AirflowException(f"{self.candidate_task_id}'s XCom {self.candidate_key!r}: {exc}") from None
        state = context["asset_state_store"][self.asset]
        champion = state.get(self.state_key)
        me = {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": self.candidate_task_id}
        if (won := self._won_already(context, champion, me)) is not None:
            return won
        decision = promotion.decide(value, champion, self.metric, self.higher_is_better, self.min_improvement)
        model_uri = raw.get(self.model_uri_key) if isinstance(raw, dict) else None
        record: Obj = {"promoted": decision.promoted, "metric": self.metric, "candidate": value,
                       "champion_before": promotion.champion_metric(champion),
                       "champion_before_run": (champion or {}).get("run_id") if isinstance(champion, dict) else None,
                       "margin": decision.margin, "why": decision.why, "model_uri": model_uri, **me}  # fmt: skip
        if promotion.needs_approval(decision, self.approve_below):
            self._ask(context, record)
        return self._settle(context, state, record)

    def execute_complete(self, context: Any, event: Any = None, record: Obj | None = None) -> Obj:
        """The person's answer (or the timeout's default) to a close win: promote, or keep the champion."""
        record = dict(record or {})
        answer = promotion.answer(event)
        state = context["asset_state_store"][self.asset]
        champion = state.get(self.state_key)
        if (won := self._won_already(context, champion, {k: record.get(k) for k in ("dag_id", "run_id", "task_id")})) is not None:
            return won
        record["approval"] = answer
        who = answer["by"] or "nobody"
        if answer["chosen"] != promotion.PROMOTE:
            if answer["timed_out"]:
                why = f"no answer within {self.approval_timeout}; the default is {answer['chosen']!r}"
            else:
                why = f"{who} chose {answer['chosen']!r}" if answer["chosen"] else f"no usable answer ({answer['error']})"
            record.update(promoted=False, why=f"{why}: {record.get('why', '')}")
            return self._settle(context, state, record)
        how = (
            f"no answer within {self.approval_timeout}; the default is to promote"
            if answer["timed_out"]
            else f"approved by {who}"
        )
        if promotion.same_champion(champion, record):
            record["why"] = f"{record.get('why', '')}; {how}"
            return self._settle(context, state, record)
        # Another DAG promoted into the asset while the person was asked: the approval was for a different
        # champion, so the candidate is compared again and promoted only on a margin that needs no approval.
        again = promotion.decide(record["candidate"], champion, self.metric, self.higher_is_better, self.min_improvement)
        promoted = again.promoted and not promotion.needs_approval(again, self.approve_below)
        record.update(promoted=promoted, margin=again.margin, champion_before=promotion.champion_metric(champion),
                      champion_before_run=champion.get("run_id") if isinstance(champion, dict) else None,
                      why=f"the champion changed while the approval was pending ({how}): {again.why}"
                          + ("" if promoted else ", and a new approval would be needed"))  # fmt: skip
        return self._settle(context, state, record)

    def _won_already(self, context: Any, champion: Any, me: Obj) -> Obj | None:
        """An earlier try (or resume) of this run promoted it: end as that promotion did, deciding nothing again."""
        if not (isinstance(champion, dict) and all(champion.get(k) == v for k, v in me.items())):
            return None
        self.log.info("this run is the champion already (an earlier try promoted it): %s", champion)
        return self._promoted(context, dict(champion.get("decision") or {}), champion)

    def _ask(self, context: Any, record: Obj) -> None:
        """Park the task in ``awaiting_input`` with the comparison for a person; it resumes in execute_complete."""
        subject, body = promotion.approval_request(record, float(self.approve_below or 0))
        default = promotion.PROMOTE if self.approval_default == "promote" else promotion.KEEP
        self._push(context, "promotion", {**record, "promoted": None, "approval": {"pending": True, "default": default}})
        upsert_hitl_detail(ti_id=context["task_instance"].id, options=[promotion.PROMOTE, promotion.KEEP], subject=subject,
                           body=body, defaults=[default], multiple=False, params={}, assigned_users=self.approvers)  # fmt: skip
        self.log.warning("%s: a win by less than %g waits for a person's answer%s", record["why"], self.approve_below,
                         f" (at most {self.approval_timeout}, then {default!r})" if self.approval_timeout else "")  # fmt: skip
        raise TaskAwaitingInput(method_name="execute_complete", kwargs={"record": record}, timeout=self.approval_timeout)

    def _settle(self, context: Any, state: Any, record: Obj) -> Obj:
        """Record the decision, then act on it: a win is written before the asset's event; a loss skips."""
        record = {**record, "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        self._push(context, "promotion", record)
        state.set(f"{self.state_key}_history", promotion.history(state.get(f"{self.state_key}_history"), record))
        if not record["promoted"]:
            self.log.info("kept the production model: %s", record["why"])
            raise AirflowSkipException(f"kept the production model: {record['why']}")
        winner = {"metric": record["candidate"], "model_uri": record.get("model_uri"),
                  **{k: record[k] for k in ("dag_id", "run_id", "task_id")}, "decision": record}  # fmt: skip
        state.set(self.state_key, winner)  # decided; the asset's event follows only once this is on record
        return self._promoted(context, record, winner)

    def _push(self, context: Any, key: str, value: Any) -> None:
        if self.do_xcom_push:
            context["ti"].xcom_push(key=key, value=value)

    def _promoted(self, context: Any, record: Obj, winner: Obj) -> Obj:
        context["outlet_events"][self.asset].extra = {"metric": winner.get("metric"), "model_uri": winner.get("model_uri"),
                                                      "previous_metric": record.get("champion_before"),
                                                      "margin": record.get("margin"), "run_id": winner.get("run_id")}  # fmt: skip
        self.log.info("promoted model with metric %.4f: %s", float(winner["metric"]), record.get("why", ""))
        return record
