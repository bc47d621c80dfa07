"""The real node's bridge keeps one MAC address while pods come and go.

A Linux bridge without an address of its own takes the lowest of its ports' and changes it as
veths join and leave; pods' ARP entries for the gateway (CoreDNS listens on it) then point at a
MAC nobody answers for, and DNS queries are lost for up to half a minute. Measured before the
fix: 12 failed lookups of a stable headless Service in 15 minutes of real-node tests, one of
which failed a ColossalAI launch in CI; after it, none (docs/real-node.md).
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from tests.real.support import IMAGE, on_real_node
from tests.support.cluster import wait_until

BRIDGE = Path("/sys/class/net/t9kbr0")
SET_BY_USER = "3"  # addr_assign_type NET_ADDR_SET: the address no longer follows the ports


def test_the_bridge_keeps_its_address_while_pods_come_and_go(jobs, real):
    before = (BRIDGE / "address").read_text().strip()
    assert (BRIDGE / "addr_assign_type").read_text().strip() == SET_BY_USER
    names = [f"churn-{i}" for i in range(4)]
    spec = on_real_node({"spec": {"containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "30"]}]}}, grace=0)["spec"]
    for n in names:
        jobs.core.create_namespaced_pod(jobs.ns, client.V1Pod(metadata=client.V1ObjectMeta(name=n), spec=spec))
    wait_until(lambda: all(real.pod(n).status.phase == "Running" for n in names), timeout=60, what="churn pods running")
    ports = len(list((BRIDGE / "brif").iterdir()))
    assert ports >= len(names)
    for n in names:
        jobs.core.delete_namespaced_pod(n, jobs.ns, grace_period_seconds=0)
    wait_until(lambda: len(list((BRIDGE / "brif").iterdir())) <= ports - len(names), timeout=60, what="veths removed")
    assert (BRIDGE / "address").read_text().strip() == before == "02:00:0a:58:00:01"
