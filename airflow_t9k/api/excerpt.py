"""Tell a whole job manifest from an excerpt of one, and say how to complete an excerpt.

The specification's examples (seeds 001-003) are often excerpts: ``...`` stands for what they
leave out (a line of its own, or a list item ``- ...``), a fragment may show only
``spec.scheduler`` or a job's ``status``, and a container may be shown with nothing but its
``resources``. Submitted as they are, such documents fail with a YAML parse error or an API
refusal that does not say what to do. ``problems(text)`` reads the text as the seeds print it
and returns, for each document, why it cannot be submitted and what to add; an empty list
means every document is a whole job. Pure (PyYAML only), shared by the operators' ``job=``
loading and ``airflow-t9k check``.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

Obj = dict[str, Any]
_ELIDED = re.compile(r"^(\s*)(- )?\.\.\.\s*$")
WHOLE = "examples/manifests/"  # where whole jobs to start from are


def _unelide(text: str) -> tuple[str, bool]:
    """The text with the seeds' ``...`` removed (a ``- ...`` item keeps its dash), and whether there was any."""
    out, elided = [], False
    for line in text.splitlines():
        m = _ELIDED.match(line)
        if m:
            elided = True
            if m.group(2):
                out.append(f"{m.group(1)}-")  # the item's fields follow, indented under the dash
            continue
        out.append(line)
    return "\n".join(out) + "\n", elided


def _containers(doc: Obj) -> list[tuple[str, Obj]]:
    spec = doc.get("spec") or {}
    templates: list[tuple[str, Any]] = []
    if isinstance(spec.get("replicaSpecs"), list):
        templates = [
            (f"spec.replicaSpecs[{i}]", r.get("template")) for i, r in enumerate(spec["replicaSpecs"]) if isinstance(r, dict)
        ]
    elif isinstance(spec.get("replicaSpecs"), dict):
        templates = [
            (f"spec.replicaSpecs.{t}", r.get("template")) for t, r in spec["replicaSpecs"].items() if isinstance(r, dict)
        ]
    for key in ("worker",):
        if isinstance(spec.get(key), dict):
            templates.append((f"spec.{key}", spec[key].get("template")))
    out = []
    for where, template in templates:
        for i, c in enumerate(((template or {}).get("spec") or {}).get("containers") or []):
            out.append((f"{where}.template.spec.containers[{i}]", c if isinstance(c, dict) else {}))
    return out


def problem(doc: Any, elided: bool) -> str | None:
    """Why this one document cannot be submitted as it is, with the fix; None for a whole job."""
    if not isinstance(doc, dict):
        return f"the document is a {type(doc).__name__}, not a job"
    if "status" in doc and not doc.get("spec"):
        return ("it shows a job's status, which the controller writes (the seeds print it as an example of what to "
                "expect): there is nothing to submit; read it from a running job with kubectl get -o yaml")  # fmt: skip
    if not doc.get("apiVersion") or not doc.get("kind") or not (doc.get("metadata") or {}).get("name"):
        shown = ", ".join(f"spec.{k}" for k in (doc.get("spec") or {})) or ", ".join(doc) or "nothing"
        return (f"it is an excerpt (it shows only {shown}; '...' stands for the rest of the job): add these fields to "
                f"a whole job with apiVersion, kind and metadata.name, e.g. one in {WHOLE}")  # fmt: skip
    if doc["kind"] in ("T9kJobTemplate", "ClusterT9kJobTemplate"):
        return None  # a job template is a part of pods on purpose (docs/templates.md)
    templated = isinstance((doc.get("spec") or {}).get("templateRef"), dict)  # its template gives images and pods
    missing = [f"{where} has no {' or '.join(k for k in ('name', 'image') if not c.get(k))}"
               for where, c in _containers(doc) if not c.get("name") or not (c.get("image") or templated)]  # fmt: skip
    if missing:
        return (f"it is an excerpt of a {doc['kind']}: {'; '.join(missing)} (the example shows only the fields it is "
                "about): give each container its name, image and command, as the whole example does")  # fmt: skip
    spec = doc.get("spec") or {}
    if elided or not templated and any(isinstance(r, dict) and "template" not in r for r in spec.get("replicaSpecs") or []
                                       if isinstance(spec.get("replicaSpecs"), list)):  # fmt: skip
        return (f"it is an excerpt of a {doc['kind']} ('...' stands for what it leaves out): fill in the rest, e.g. each "
                f"replica's template with its containers, as the whole example in {WHOLE} does")  # fmt: skip
    return None


def is_excerpt(text: str) -> bool:
    """Does the text use the seeds' ``...`` for what it leaves out?"""
    return any(_ELIDED.match(line) for line in text.splitlines())


def problems(text: str) -> list[str]:
    """One line per document that is not a whole job (``document <n>: <why and the fix>``)."""
    clean, elided = _unelide(text)
    try:
        docs = [d for d in yaml.safe_load_all(clean) if d is not None]
    except yaml.YAMLError as exc:
        return [f"not YAML: {exc}"]
    if not docs:
        return ["no document: the text is empty or only comments"]
    out = []
    for n, doc in enumerate(docs, 1):
        why = problem(doc, elided)
        if why:
            out.append(f"document {n}: {why}" if len(docs) > 1 else why)
    return out
