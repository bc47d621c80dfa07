"""A job that names a job template (``spec.templateRef``): merged once, before anything else.

The first pass over such a job does nothing but decide its spec: the template merged in
(``kinds/templates.py``), written back to the job with the record of the template and its
resourceVersion (``WriteSpec``, a PUT carrying the job's resourceVersion). No pod, Service or
Workload exists before that write lands, and every later pass plans from the written spec
alone, so no change to the template (an edit, a deprecation, its deletion) ever reaches the job.

A template that is not there (yet: ``kubectl apply -f dir/`` may send the job first) is waited
for ``Observed.template_wait`` seconds from the job's creation, with condition
``TemplateResolved=False``; then the job fails, reason ``TemplateNotFound``. A template for
another kind, or one that leaves a container without an image, fails the job with
``InvalidSpec`` (no retry can help). A deprecated template is used, with a Warning Event.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import Emit, Plan, WriteSpec
from airflow_t9k.controller.reconcile.progress import finish
from airflow_t9k.controller.reconcile.status import FINISHED, StatusBuilder
from airflow_t9k.kinds.templates import (
    TemplateError,
    allowed_in,
    apply_template,
    deprecation,
    describe,
    merged_record,
    record_of,
    wanted,
)

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.observe import Observed
    from airflow_t9k.kinds.base import Obj

CONDITION = "TemplateResolved"


def resolve(sb: StatusBuilder, job: Obj, observed: Observed, now: datetime) -> Plan:
    """The pass for a job whose template is not merged yet (``kinds.templates.unresolved``).

    Its status is ``sb.old`` when the pass only writes the spec, else ``sb.new`` (waiting, or failed).
    """
    if sb.old_phase in FINISHED:  # failed while waiting: nothing was created, nothing to do
        return Plan(status=sb.old)
    kind, namespace, name = wanted(job) or ("", "", "")
    what = describe(kind, namespace, name)
    template = observed.template
    if template is None:
        return _missing(sb, job, what, observed.template_wait, now)
    namespace = str(job["metadata"].get("namespace") or "")
    if not allowed_in(template, namespace):
        finish(sb, "Failed", "TemplateNotAllowed",
               f"{what} may be used only in the namespaces its spec.allowedNamespaces lists, not in {namespace}.")  # fmt: skip
        return Plan(status=sb.new)
    try:
        merged = apply_template(job, template)
    except TemplateError as exc:
        finish(sb, "Failed", "InvalidSpec", f"Invalid spec: {exc}")
        return Plan(status=sb.new)
    rv = (template.get("metadata") or {}).get("resourceVersion")
    events = [Emit("Normal", "TemplateResolved", f"Merged {what} (resourceVersion {rv}) into the job's spec.")]
    if (message := deprecation(template)) is not None:
        events.append(Emit("Warning", "TemplateDeprecated", f"{what} is deprecated: {message}"))
    return Plan((WriteSpec(merged, record_of(template)),), sb.old, tuple(events))


def _missing(sb: StatusBuilder, job: Obj, what: str, wait: float, now: datetime) -> Plan:
    created = job["metadata"].get("creationTimestamp")
    waited = (now - datetime.fromisoformat(str(created).replace("Z", "+00:00"))).total_seconds() if created else 0.0
    if waited >= wait:
        finish(sb, "Failed", "TemplateNotFound",
               f"{what} does not exist (waited {wait:g}s from the job's creation): "
               "create it, or name another template.")  # fmt: skip
        return Plan(status=sb.new)
    sb.new.setdefault("phase", "Pending")
    message = f"{what} does not exist; the job waits for it until {wait:g}s after its creation, then fails."
    events = (
        (Emit("Warning", "TemplateNotFound", message),) if sb.set_condition(CONDITION, False, "TemplateNotFound", message) else ()
    )
    return Plan(status=sb.new, events=events, requeue_after=max(wait - waited, 0.1))


def note(sb: StatusBuilder, job: Obj) -> None:
    """Condition ``TemplateResolved`` of a job the controller merged a template into, from the
    record in its status; never from the annotation alone, which the job's author can write."""
    rec = merged_record(job)
    if rec is None:
        return
    try:
        what = describe(str(rec["kind"]), str(rec.get("namespace") or ""), str(rec["name"]))
    except (TypeError, KeyError):
        what = f"the template recorded as {json.dumps(rec)[:200]!r}"
    message = f"The spec was merged with {what} (resourceVersion {rec.get('resourceVersion')}) when the job was submitted."
    if rec.get("deprecated"):
        message += f" The template was deprecated: {rec['deprecated']}"
    sb.set_condition(CONDITION, True, "Deprecated" if rec.get("deprecated") else "Resolved", message)
