"""Two costs the controller does not need to pay (measured under load: docs/benchmarks.md).

- ``metadata.managedFields`` is about 40% of a pod's JSON as kwok, the scheduler and we leave
  it, and nothing here reads it. The cache drops it from every object it keeps. Leaving it out
  of a later PUT is safe: the API server keeps an object's managedFields when an update omits
  them.
- ``kubernetes_asyncio`` walks every request body recursively before it ``json.dumps`` it
  (``sanitize_for_serialization``), to turn its generated models into dicts. The controller only
  sends plain JSON dicts, for which that walk returns an equal copy: a quarter of the
  controller's CPU at 10 jobs went there. Dicts and lists now go to ``json.dumps`` as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]


def drop_managed_fields(obj: Obj) -> Obj:
    """The object without metadata.managedFields (changed in place, and returned)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def plain_json_bodies(api: Any) -> None:
    """Let dict and list bodies (our plain JSON) skip the client's recursive model walk; every
    other value (models, datetimes, tuples) still takes it."""
    walk: Callable[[Any], Any] = api.sanitize_for_serialization

    def sanitize(obj: Any) -> Any:
        if isinstance(obj, (dict, list)):
            return obj
        return walk(obj)

    api.sanitize_for_serialization = sanitize
