"""AscendJob's Volcano PodGroup spec, as MindCluster's ascend-operator fills it.

``minMember`` is ``runPolicy.schedulingPolicy.minAvailable``, else every pod; ``queue`` and
``priorityClassName`` come from the policy (Volcano puts a group without a queue in its
``default`` queue); ``minResources`` is the policy's, else the requests of the first
``minMember`` pods (leader first), as Kubeflow's common code sums them.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from airflow_t9k.kinds.base import InvalidSpec, Obj, ReplicaSpec

_SUFFIX: dict[str, int | Decimal] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": 10**3, "M": 10**6, "G": 10**9,
           "T": 10**12, "P": 10**15, "E": 10**18}  # fmt: skip


def quantity(value: object) -> Decimal:
    """A Kubernetes quantity ("500m", "2Gi", 8) as a number."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)]:
            number, scale = text[: -len(suffix)], Decimal(_SUFFIX[suffix])
            break
    else:
        number, scale = text, Decimal(1)
    try:
        return Decimal(number) * scale
    except InvalidOperation:
        raise InvalidSpec(f"resource quantity {value!r} is not a Kubernetes quantity") from None


def _format(amount: Decimal) -> str:
    if amount == amount.to_integral_value():
        return str(int(amount))
    return f"{int((amount * 1000).to_integral_value())}m"  # CPU fractions; memory is whole bytes


def pod_requests(template: Obj) -> dict[str, Decimal]:
    """What one pod of this template requests (a limit stands for a missing request, as the API server defaults it)."""
    out: dict[str, Decimal] = {}
    for c in (template.get("spec") or {}).get("containers") or []:
        resources = c.get("resources") or {}
        for name, value in {**(resources.get("limits") or {}), **(resources.get("requests") or {})}.items():
            out[str(name)] = out.get(str(name), Decimal(0)) + quantity(value)
    return out


def podgroup_spec(job: Obj, specs: list[ReplicaSpec]) -> Obj:
    policy = (((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy")) or {}
    total = sum(s.replicas for s in specs)
    min_member = policy.get("minAvailable")
    if min_member is None:
        min_member = total
    if not isinstance(min_member, int) or isinstance(min_member, bool) or not 0 < min_member <= total:
        raise InvalidSpec(
            f"runPolicy.schedulingPolicy.minAvailable must be an integer in 1..{total} (the job's pods), got {min_member!r}"
        )
    out: Obj = {"minMember": min_member}
    if policy.get("queue"):
        out["queue"] = str(policy["queue"])
    if policy.get("priorityClass"):
        out["priorityClassName"] = str(policy["priorityClass"])
    if policy.get("minResources"):
        out["minResources"] = dict(policy["minResources"])
        return out
    summed: dict[str, Decimal] = {}
    left = min_member
    for spec in specs:  # leader first (TYPE_ORDER), then the workers
        take = min(left, spec.replicas)
        for name, amount in pod_requests(spec.template).items():
            summed[name] = summed.get(name, Decimal(0)) + amount * take
        left -= take
    if summed:
        out["minResources"] = {name: _format(amount) for name, amount in sorted(summed.items())}
    return out
