"""Devices a pod asks for through Dynamic Resource Allocation (DRA), per DeviceClass. Pure.

A pod asks for DRA devices in ``spec.resourceClaims``: each entry names a ResourceClaimTemplate
(the pod gets a claim of its own, made from it) or a ResourceClaim (shared, made beforehand).
What a pod uses is read from the templates, as Kueue counts them for its quota
(``pkg/dra/claims.go``): each request ``exactly: {deviceClassName, allocationMode: ExactCount,
count}`` is ``count`` devices (1 when unset) of that class. Left out, because what they take is
known only once the scheduler has allocated them: ``firstAvailable`` (which alternative is
picked), ``allocationMode: All`` (every matching device), and ``adminAccess`` (access to devices
in use by others, not a device of one's own). A claim by name is shared by the pods naming it:
counting it per pod would count one allocation many times, so it is not counted either.
docs/usage.md and docs/queueing.md say what this means for usage and for Kueue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]

TEMPLATE_KIND = "ResourceClaimTemplate"
EXACT_COUNT = "ExactCount"


def request_devices(request: Obj) -> tuple[str, int] | None:
    """(DeviceClass, devices) one request of a claim spec asks for; None when not countable.

    ``exactly`` is resource.k8s.io/v1's shape; v1beta1 had its fields on the request itself."""
    if not isinstance(request, dict) or request.get("firstAvailable"):
        return None
    exact = request.get("exactly")
    if exact is None and "deviceClassName" in request:  # resource.k8s.io/v1beta1
        exact = request
    if not isinstance(exact, dict) or exact.get("adminAccess") is True:
        return None
    if (exact.get("allocationMode") or EXACT_COUNT) != EXACT_COUNT:
        return None
    device_class = exact.get("deviceClassName")
    count = exact.get("count", 1)
    if not device_class or not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None
    return str(device_class), count


def claim_devices(claim_spec: Obj | None) -> dict[str, int]:
    """DeviceClass -> devices a ResourceClaimSpec asks for (requests it cannot count left out)."""
    out: dict[str, int] = {}
    devices = claim_spec.get("devices") if isinstance(claim_spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    for request in requests if isinstance(requests, list) else []:
        found = request_devices(request)
        if found is not None:
            out[found[0]] = out.get(found[0], 0) + found[1]
    return out


def template_devices(template: Obj | None) -> dict[str, int]:
    """What a pod's claim made from this ResourceClaimTemplate asks for (its ``spec.spec``)."""
    spec = (template or {}).get("spec") if isinstance(template, dict) else None
    return claim_devices(spec.get("spec") if isinstance(spec, dict) else None)


def pod_devices(pod: Obj, templates: Mapping[str, Obj]) -> dict[str, int]:
    """DeviceClass -> devices the pod's claims from ResourceClaimTemplates ask for.

    ``templates``: the ResourceClaimTemplates of the pod's namespace by name; a template not
    there (not created yet, or not watched) counts nothing."""
    out: dict[str, int] = {}
    for claim in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = claim.get("resourceClaimTemplateName") if isinstance(claim, dict) else None
        if not name:
            continue  # a shared ResourceClaim by name, or nothing
        for device_class, n in template_devices(templates.get(str(name))).items():
            out[device_class] = out.get(device_class, 0) + n
    return out
