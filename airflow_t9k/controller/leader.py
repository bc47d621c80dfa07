"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

A candidate takes the lease when it is free, or when its record has not changed for a whole
lease duration by the candidate's own clock (no clock comparison across machines). The
leader renews every retry period; if no renewal has succeeded for the renew deadline it
stops acting at once. The deadline is shorter than the lease duration, so the old leader
has stopped before anyone else can take over. ``valid()`` is the same test, made right
before every write, so a process that was paused past its deadline cannot send one write
after waking (the workers' cancellation would come a moment later).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_t9k.k8s.aio import within
from airflow_t9k.k8s.errors import AlreadyExists, Conflict, NotFound

if TYPE_CHECKING:
    from airflow_t9k.k8s.client import Kube

Obj = dict[str, Any]
JITTER = 1.2  # client-go's JitterFactor for candidates' retries

log = logging.getLogger(__name__)


def micro_time(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, kube: Kube, namespace: str, name: str, identity: str, *, lease_duration: float = 10.0,
                 renew_deadline: float = 7.0, retry_period: float = 1.5,
                 clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[bool], None] | None = None) -> None:  # fmt: skip
        if not lease_duration > renew_deadline > retry_period * JITTER > 0:
            raise ValueError(
                f"need lease duration > renew deadline > {JITTER} x retry period > 0, got "
                f"{lease_duration}, {renew_deadline}, {retry_period}"
            )
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.on_change = on_change
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.leading = False
        self.renewed_at = float("-inf")  # when the last successful acquire/renew was sent
        self.elected = asyncio.Event()
        self.lost = asyncio.Event()
        self._lease: Obj | None = None  # the last lease object we read or wrote
        self._observed: tuple[Any, ...] | None = None  # the other holder's record, and...
        self._observed_at = float("-inf")  # ...when we first saw it as it is

    def valid(self) -> bool:
        """Leading, and a renewal succeeded within the renew deadline: safe to write."""
        return self.leading and self.clock() - self.renewed_at < self.renew_deadline

    # -- one attempt --------------------------------------------------------------------------
    def _spec(self, lease: Obj | None, now: datetime) -> Obj:
        old = (lease or {}).get("spec") or {}
        mine = old.get("holderIdentity") == self.identity
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": old.get("acquireTime") if mine and old.get("acquireTime") else micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": int(old.get("leaseTransitions") or 0) + (0 if mine or not lease else 1),
        }

    def _observe(self, lease: Obj) -> None:
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseTransitions"), spec.get("leaseDurationSeconds"))  # fmt: skip
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        self._lease = lease

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True if we hold the lease now. Raises only on transport errors."""
        now = datetime.now(timezone.utc)
        lease = self._lease if self.leading else None
        if lease is None:
            try:
                lease = await self.kube.get(self.path)
            except NotFound:
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec(None, now)}  # fmt: skip
                try:
                    self._observe(
                        await self.kube.create(f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body=body)
                    )
                except AlreadyExists:
                    return False
                return True
            self._observe(lease)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if holder and holder != self.identity and self.clock() < self._observed_at + duration:
                return False  # held by another, and renewed within its duration as far as we can tell
        body = {**lease, "spec": {**(lease.get("spec") or {}), **self._spec(lease, now)}}
        try:
            self._observe(await self.kube.replace(self.path, body=body))
        except Conflict:
            self._lease = None  # someone else wrote it: read it again next time
            return False
        return True

    # -- the loops ----------------------------------------------------------------------------
    async def _attempt(self, timeout: float) -> bool:
        try:
            return await within(self.try_acquire_or_renew(), timeout)
        except asyncio.TimeoutError:
            log.warning("lease %s/%s: no answer within %.1fs", self.namespace, self.name, timeout)
        except Exception as exc:  # noqa: BLE001 - the API is unreachable or refused: a failed attempt, like client-go
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            self._lease = None
        return False

    async def _acquire(self) -> None:
        while True:
            started = self.clock()
            if await self._attempt(self.retry_period * JITTER):
                self.renewed_at = started
                return
            await asyncio.sleep(self.retry_period * (1 + random.random() * (JITTER - 1)))

    async def _renew(self) -> None:
        """Renew until the renew deadline passes without a success."""
        while True:
            await asyncio.sleep(self.retry_period)
            remaining = self.renewed_at + self.renew_deadline - self.clock()
            if remaining <= 0:
                return
            started = self.clock()
            if await self._attempt(remaining):
                self.renewed_at = started
            elif self.renewed_at + self.renew_deadline <= self.clock():
                return

    def _set(self, leading: bool) -> None:
        self.leading = leading
        if leading:
            self.lost.clear()
            self.elected.set()
        else:
            self.elected.clear()
            self.lost.set()
        if self.on_change is not None:
            self.on_change(leading)

    async def run(self) -> None:
        """Campaign, lead until the lease is lost, campaign again; forever."""
        while True:
            log.info("lease %s/%s: %s is a candidate", self.namespace, self.name, self.identity)
            await self._acquire()
            self._set(True)
            log.info("lease %s/%s: %s became the leader", self.namespace, self.name, self.identity)
            await self._renew()
            self._set(False)
            log.warning("lease %s/%s: %s lost leadership (no renewal for %.0fs); workers stopped",
                        self.namespace, self.name, self.identity, self.renew_deadline)  # fmt: skip

    async def release(self) -> None:
        """Give the lease up on a clean shutdown, so the standby takes over now, not in a lease duration."""
        if not self.valid() or self._lease is None:
            return
        self._set(False)
        spec = {**(self._lease.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1,
                "renewTime": micro_time(datetime.now(timezone.utc))}  # fmt: skip
        try:
            await within(self.kube.replace(self.path, body={**self._lease, "spec": spec}), 2)
            log.info("lease %s/%s released", self.namespace, self.name)
        except Exception as exc:  # noqa: BLE001 - no answer or any failure: the lease then expires on its own
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)
