"""REST paths for jobs and their children: one request builder for every client we use."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_t9k.api.resources import JobResource

# Children and what the controller records, by kind: (API prefix, plural).
CHILDREN = {
    "Pod": ("/api/v1", "pods"),
    "Service": ("/api/v1", "services"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Secret": ("/api/v1", "secrets"),
    "Event": ("/api/v1", "events"),
    "Job": ("/apis/batch/v1", "jobs"),  # BeamJob's submit job
    "Workload": ("/apis/kueue.x-k8s.io/v1beta2", "workloads"),  # Kueue admission (docs/queueing.md)
    "PodGroup": ("/apis/scheduling.volcano.sh/v1beta1", "podgroups"),  # AscendJob gang scheduling (Volcano)
    # Kubernetes' own PodGroups (the Workload API, gang scheduling with no add-on): kind PodGroup
    # too, told apart from Volcano's by their group (child_kind).
    "GangGroup": ("/apis/scheduling.k8s.io/v1alpha2", "podgroups"),
}
GANG_GROUP = "GangGroup"


def child_kind(obj: dict) -> str:  # type: ignore[type-arg]
    """The kind a child is recorded, watched and written under: its own, but ``GangGroup`` for a
    ``scheduling.k8s.io`` PodGroup (Volcano's PodGroups are ``PodGroup``)."""
    if obj.get("kind") == "PodGroup" and str(obj.get("apiVersion") or "").startswith("scheduling.k8s.io/"):
        return GANG_GROUP
    return str(obj.get("kind"))


# Every read of a pod's log names a byte limit (the API server's limitBytes), so a replica that
# prints one endless line, or gigabytes, costs the reader a bounded answer. The API server cuts
# the answer there; the reader says nothing is lost silently where it shows it.
LOG_LIMIT_BYTES = 8 * 1024 * 1024
# Every pod log line that reaches the task log, streamed or printed at a failure, is at most this
# many bytes of text after its stamp (k8s/client.py LineSplitter(log=True), with the cut mark
# "… [cut: N bytes]" at its end): containerd writes a longer line as several 16 KiB records, so
# a line no runtime split is never cut, and a progress bar printed for an hour (one line of
# megabytes) costs the task log 16 KiB, not the lines after it.
LOG_LINE_BYTES = 16 * 1024
# The failed replica's last lines that go into the task's final event (the trigger's
# next_kwargs) and its error message: each line at most LOG_TAIL_LINE_BYTES, and the last lines
# that fit in LOG_TAIL_BYTES in all (a traceback's 50 lines are a few KB).
LOG_TAIL_LINE_BYTES = 2 * 1024
LOG_TAIL_BYTES = 32 * 1024


def _path(base: str, plural: str, namespace: str | None, name: str | None, sub: str | None) -> str:
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name:
        parts.append(name)
        if sub:
            parts.append(sub)
    return "/".join(parts)


def job_path(resource: JobResource, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    return _path(f"/apis/{resource.group}/{resource.version}", resource.plural, namespace, name, sub)


def child_path(kind: str, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    base, plural = CHILDREN[kind]
    return _path(base, plural, namespace, name, sub)
