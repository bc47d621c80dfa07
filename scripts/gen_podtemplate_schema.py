#!/usr/bin/env python3
"""Generate the structural pod-template schemas the CRDs embed, from the API server's OpenAPI v3.

    scripts/gen_podtemplate_schema.py                      # from the cluster of $KUBECONFIG (or .local-cluster)
    scripts/gen_podtemplate_schema.py --openapi-dir DIR    # from saved api__v1_openapi.json, apis__batch__v1_openapi.json
    scripts/gen_podtemplate_schema.py --check              # exit 1 if the committed files differ from a fresh run

Writes airflow_t9k/controller/schemas/podtemplate.json (core/v1 PodTemplateSpec, for every replica
template) and jobspec.json (batch/v1 JobSpec, for BeamJob's submit Job template). A CRD schema may
not hold ``$ref`` and must be structural, so the transform inlines every reference, turns the two
union types into ``x-kubernetes-int-or-string``, replaces embedded ObjectMeta by the fields a
template may set, keeps ``x-kubernetes-list-type``/``map-keys`` where a CRD allows them, and drops
descriptions, defaults (except those of list-map keys) and patch-strategy hints to stay small.
Anything in the source it does not know stops the run, so a new Kubernetes version is looked at
rather than silently mistranslated.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

S = dict[str, Any]

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "airflow_t9k" / "controller" / "schemas"

# (OpenAPI v3 document, root type, output file)
TARGETS = [
    ("api/v1", "io.k8s.api.core.v1.PodTemplateSpec", "podtemplate.json"),
    ("apis/batch/v1", "io.k8s.api.batch.v1.JobSpec", "jobspec.json"),
]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# What a template's metadata may carry (the rest of ObjectMeta is set by the API server or the
# controller); unknown fields are pruned, which also bounds how deep a template can nest.
EMBEDDED_META_FIELDS = ("name", "namespace", "labels", "annotations", "finalizers")
# Quantity's grammar (from its OpenAPI description): <signedNumber><suffix>, suffix one of the
# binary (Ki..Ei), decimal (n, u, m, "", k, M..E) or exponent (e/E<signedNumber>) forms.
_NUMBER = r"([0-9]+(\.[0-9]*)?|\.[0-9]+)"
QUANTITY_PATTERN = rf"^[+-]?{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?{_NUMBER}))?$"

# Keys copied as they are; everything else must be in DROPPED or the run stops.
KEPT = {
    "type", "format", "required", "enum", "pattern", "nullable",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
}  # fmt: skip
# Documentation, client-side patch hints and union annotations: no meaning to CRD validation.
DROPPED = {"description", "example", "externalDocs", "title", "x-kubernetes-patch-strategy",
           "x-kubernetes-patch-merge-key", "x-kubernetes-unions"}  # fmt: skip
SCALARS = {"string", "integer", "number", "boolean"}


class SchemaError(ValueError):
    """The source holds something this transform does not know how to make structural."""


def structural(components: S, root: str) -> S:
    """The structural CRD schema of ``components[root]``: no ``$ref``, every node typed."""
    out = _Transform(components).named(root, ())
    _strip_defaults(out)
    return out


class _Transform:
    def __init__(self, components: S) -> None:
        self.components = components

    def named(self, name: str, stack: tuple[str, ...]) -> S:
        if name in stack:
            raise SchemaError(f"recursive type {name} (via {' -> '.join(stack)}): a structural schema cannot hold it")
        if name not in self.components:
            raise SchemaError(f"$ref to unknown type {name}")
        stack = (*stack, name)
        if name == QUANTITY:
            return {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": QUANTITY_PATTERN,
            }
        if name == OBJECT_META:
            props = {k: v for k, v in self.components[name]["properties"].items() if k in EMBEDDED_META_FIELDS}
            return self.node({"type": "object", "properties": props}, stack)
        return self.node(self.components[name], stack)

    def node(self, src: S, stack: tuple[str, ...]) -> S:
        src = dict(src)
        out: S = {}
        ref = src.pop("$ref", None)
        all_of = src.pop("allOf", None)
        if all_of is not None:
            if ref is not None or len(all_of) != 1 or set(all_of[0]) != {"$ref"}:
                raise SchemaError(f"allOf other than a single $ref in {stack[-1]}: {all_of}")
            ref = all_of[0]["$ref"]
        if ref is not None:
            out.update(self.named(ref.rsplit("/", 1)[-1], stack))
        one_of = src.pop("oneOf", None)
        if one_of is not None:
            types = sorted(o.get("type") for o in one_of)
            # IntOrString; a CRD can express no other union of types.
            if types != ["integer", "string"] or any(set(o) != {"type"} for o in one_of):
                raise SchemaError(f"oneOf {one_of} in {stack[-1]} is not int-or-string")
            out.update({"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]})
            src.pop("format", None)  # "int-or-string" names the union, which the extension now says
        for key, value in src.items():
            if key in DROPPED:
                continue
            if key == "default":
                if value not in ({}, []) and not ref:  # kept for now: a list-map key may need it
                    out["default"] = value
            elif key == "properties":
                out["properties"] = {k: self.node(v, stack) for k, v in value.items()}
            elif key == "items":
                out["items"] = self.node(value, stack)
            elif key == "additionalProperties":
                out["additionalProperties"] = value if isinstance(value, bool) else self.node(value, stack)
            elif key in KEPT:
                out[key] = value
            else:
                raise SchemaError(f"unknown key {key!r} in {stack[-1]}")
        if "x-kubernetes-list-type" in out:
            _check_list(out, stack[-1])
        if (
            "type" not in out
            and not out.get("x-kubernetes-int-or-string")
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            raise SchemaError(f"untyped node in {stack[-1]}: {sorted(src)}")
        return out


def _check_list(node: S, where: str) -> None:
    """Keep a list type only where a CRD allows it: set of scalars, map keyed by required or defaulted scalars."""
    kind, items = node["x-kubernetes-list-type"], node.get("items") or {}
    if kind == "set" and items.get("type") not in SCALARS:
        raise SchemaError(f"list-type set of non-scalars in {where}")
    if kind == "map":
        props, required = items.get("properties") or {}, set(items.get("required") or ())
        for key in node.get("x-kubernetes-list-map-keys") or ():
            prop = props.get(key)
            if prop is None or prop.get("type") not in SCALARS or (key not in required and "default" not in prop):
                raise SchemaError(f"list-map key {key} in {where} is not a required or defaulted scalar")
            if key not in required:  # a default on a required key would make a missing one pass as ""
                prop["x-keep-default"] = True


def _strip_defaults(node: Any) -> None:
    """Drop defaults but those of list-map keys: the pod and Job APIs default the rest themselves."""
    if isinstance(node, dict):
        if not node.pop("x-keep-default", False):
            node.pop("default", None)
        for value in node.values():
            _strip_defaults(value)
    elif isinstance(node, list):
        for value in node:
            _strip_defaults(value)


def render(schema: S) -> str:
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


def _from_cluster(kubeconfig: str, path: str) -> S:
    from kubernetes import config

    api = config.new_client_from_config(config_file=kubeconfig)
    try:
        resp = api.call_api(f"/openapi/v3/{path}", "GET", auth_settings=["BearerToken"], _preload_content=False)
        return json.loads(resp.data)
    finally:
        api.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG") or str(ROOT / ".local-cluster" / "kubeconfig"))
    p.add_argument("--openapi-dir", type=Path, help="saved documents (api__v1_openapi.json, ...) instead of the cluster")
    p.add_argument("--out-dir", type=Path, default=OUT_DIR)
    p.add_argument("--check", action="store_true", help="compare with the files in --out-dir instead of writing")
    args = p.parse_args(argv)
    stale = []
    for doc, root, filename in TARGETS:
        if args.openapi_dir:
            source = json.loads((args.openapi_dir / f"{doc.replace('/', '__')}_openapi.json").read_text())
        else:
            source = _from_cluster(args.kubeconfig, doc)
        text = render(structural(source["components"]["schemas"], root))
        target = args.out_dir / filename
        if args.check:
            if not target.exists() or target.read_text() != text:
                stale.append(str(target))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"{target}: {root}, {len(text)} bytes")
    if stale:
        print("out of date (rerun scripts/gen_podtemplate_schema.py):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
