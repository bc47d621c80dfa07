"""Children watched per managed namespace, when ``--namespace-selector`` decides which are managed.

Anyone who may create a ConfigMap (or a pod) can put our label on it; watched cluster-wide, a
tenant's namespace that the controller does not even manage could fill its caches, or at least
its list answers, with hundreds of large objects. With a selector the controller knows which
namespaces are its own, so it watches children only there: one set of child informers per
managed namespace, started when the namespace's labels come to match and stopped (caches
dropped) when they no longer do. The jobs themselves stay watched cluster-wide, so a job in a
namespace not managed still gets its ``NamespaceNotManaged`` condition.

The price is watches: one per child kind per managed namespace (four to six), each a long-lived
request to the API server. Without a selector (or with ``-n``) nothing changes: one watch per
child kind for every namespace.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from airflow_t9k.controller.logs import outside_pass

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_t9k.k8s.informer import Informer

log = logging.getLogger(__name__)


class NamespaceWatches:
    """``make(kind, namespace)`` builds a child informer; ``on_synced(namespace)`` is called once a
    namespace's informers have all listed (its jobs can be planned from then on)."""

    def __init__(self, make: Callable[[str, str], Informer], kinds: tuple[str, ...], on_synced: Callable[[str], None]) -> None:
        self.make = make
        self.kinds = kinds
        self.on_synced = on_synced
        self.informers: dict[str, dict[str, Informer]] = {}
        self.tasks: dict[str, list[asyncio.Task[None]]] = {}

    def get(self, kind: str, namespace: str) -> Informer | None:
        return self.informers.get(namespace, {}).get(kind)

    def watching(self, namespace: str) -> bool:
        return namespace in self.informers

    def synced(self, namespace: str) -> bool:
        found = self.informers.get(namespace)
        return found is not None and all(i.synced.is_set() for i in found.values())

    def all(self) -> list[tuple[str, str, Informer]]:
        return [(kind, ns, i) for ns, by_kind in sorted(self.informers.items()) for kind, i in sorted(by_kind.items())]

    def start(self, namespace: str) -> None:
        """Watch ``namespace``'s children (nothing when already watched)."""
        if namespace in self.informers:
            return
        informers = {kind: self.make(kind, namespace) for kind in self.kinds}
        self.informers[namespace] = informers
        loop = asyncio.get_running_loop()
        ctx = outside_pass()  # started by a job's pass, they serve every job of the namespace (logs.py)
        tasks = [ctx.run(loop.create_task, i.run(), name=f"informer-{kind}-{namespace}") for kind, i in informers.items()]
        tasks.append(ctx.run(loop.create_task, self._announce(namespace, list(informers.values())), name=f"synced-{namespace}"))
        self.tasks[namespace] = tasks
        log.info("watching the children of namespace %s", namespace)

    async def _announce(self, namespace: str, informers: list[Informer]) -> None:
        await asyncio.gather(*(i.synced.wait() for i in informers))
        self.on_synced(namespace)

    def stop(self, namespace: str) -> None:
        """Stop watching ``namespace``'s children and drop their caches."""
        self.informers.pop(namespace, None)
        for task in self.tasks.pop(namespace, []):
            task.cancel()
        log.info("no longer watching the children of namespace %s", namespace)

    async def wait_synced(self) -> None:
        """Until every namespace watched now has listed its children."""
        await asyncio.gather(*(i.synced.wait() for by_kind in list(self.informers.values()) for i in by_kind.values()))

    async def close(self) -> None:
        tasks = [t for ts in self.tasks.values() for t in ts]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.tasks.clear()
        self.informers.clear()
