"""The generated pod-template schema: the transform (scripts/gen_podtemplate_schema.py) on small
OpenAPI inputs, and the structure of the committed schema every CRD embeds."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_t9k.controller.crds import JOB_SPEC, POD_TEMPLATE, all_crds, generated, template_crds
from tests.builders import colossal, generic, pytorch, training

ROOT = Path(__file__).resolve().parents[3]


def _load_script():
    spec = importlib.util.spec_from_file_location("gen_podtemplate_schema", ROOT / "scripts" / "gen_podtemplate_schema.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _load_script()

REF = "#/components/schemas/"


def ref(name: str, **extra: Any) -> dict:
    return {"allOf": [{"$ref": REF + name}], **extra}


# -- the transform -------------------------------------------------------------------------------

BASE = {
    "Root": {"type": "object", "description": "doc", "properties": {
        "child": ref("Child", default={}, description="doc"),
        "port": ref("io.k8s.apimachinery.pkg.util.intstr.IntOrString"),
        "cpu": ref(gen.QUANTITY),
        "metadata": ref(gen.OBJECT_META, default={}),
        "names": {"type": "array", "items": {"type": "string", "default": ""}, "x-kubernetes-list-type": "atomic",
                  "x-kubernetes-patch-strategy": "merge"},
    }},
    "Child": {"type": "object", "required": ["name"], "x-kubernetes-map-type": "atomic",
              "properties": {"name": {"type": "string", "default": ""}, "n": {"type": "integer", "format": "int32"}}},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"oneOf": [{"type": "integer"}, {"type": "string"}],
                                                        "format": "int-or-string"},
    gen.QUANTITY: {"oneOf": [{"type": "string"}, {"type": "number"}]},
    gen.OBJECT_META: {"type": "object", "properties": {
        "name": {"type": "string"}, "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
        "uid": {"type": "string"}, "managedFields": {"type": "array", "items": ref("FieldsV1")}}},
}  # fmt: skip


def test_refs_are_inlined_and_documentation_defaults_and_patch_hints_dropped():
    out = gen.structural(BASE, "Root")
    assert out["properties"]["child"] == {
        "type": "object", "required": ["name"], "x-kubernetes-map-type": "atomic",
        "properties": {"name": {"type": "string"}, "n": {"type": "integer", "format": "int32"}},
    }  # fmt: skip
    assert out["properties"]["names"] == {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"}
    assert "description" not in json.dumps(out)
    assert "default" not in json.dumps(out)


def test_unions_become_int_or_string_and_quantity_keeps_its_grammar():
    props = gen.structural(BASE, "Root")["properties"]
    assert props["port"] == {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert props["cpu"]["x-kubernetes-int-or-string"] is True
    assert props["cpu"]["pattern"] == gen.QUANTITY_PATTERN


def test_embedded_object_meta_keeps_only_what_a_template_may_set():
    # managedFields (whose FieldsV1 is not even in the input) and uid are left out, not followed.
    meta = gen.structural(BASE, "Root")["properties"]["metadata"]
    assert meta == {"type": "object", "properties": {"name": {"type": "string"},
                                                      "labels": {"type": "object",
                                                                 "additionalProperties": {"type": "string"}}}}  # fmt: skip


@pytest.mark.parametrize(
    ("quantity", "ok"),
    [("100m", True), ("1Gi", True), ("1.5", True), (".5", True), ("2.", True), ("1e3", True), ("1E-3", True),
     ("+1", True), ("-1k", True), ("12Ei", True), ("1 Gi", False), ("1GB", False), ("abc", False), ("", False),
     ("1.2.3", False), ("1Ki1", False), ("m", False)],
)  # fmt: skip
def test_quantity_pattern(quantity, ok):
    assert bool(re.match(gen.QUANTITY_PATTERN, quantity)) is ok


def _map_list(key_prop: dict, required: list[str]) -> dict:
    return {"Root": {"type": "object", "properties": {"items": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"],
        "items": {"type": "object", "required": required,
                  "properties": {"key": key_prop, "v": {"type": "string"}}}}}}}  # fmt: skip


@pytest.mark.parametrize(
    ("key_prop", "required", "kept_default"),
    [({"type": "string", "default": "TCP"}, [], "TCP"),  # a defaulted key keeps its default (the CRD needs it)
     ({"type": "string", "default": ""}, ["key"], None)],  # a required key loses it: "" would pass as present
    ids=["defaulted-key", "required-key"],
)  # fmt: skip
def test_list_map_keys_keep_a_default_only_where_the_crd_needs_one(key_prop, required, kept_default):
    out = gen.structural(_map_list(key_prop, required), "Root")
    key = out["properties"]["items"]["items"]["properties"]["key"]
    assert key.get("default") == kept_default
    assert "x-keep-default" not in json.dumps(out)


@pytest.mark.parametrize(
    ("components", "message"),
    [
        (_map_list({"type": "string"}, []), "not a required or defaulted scalar"),
        ({"Root": {"type": "object", "properties": {"a": ref("A")}}, "A": {"type": "object", "properties": {"r": ref("Root")}}},
         "recursive type"),
        ({"Root": {"type": "object", "properties": {"a": {"type": "string", "x-new-thing": 1}}}}, "unknown key 'x-new-thing'"),
        ({"Root": {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "boolean"}]}}}},
         "not int-or-string"),
        ({"Root": {"type": "object", "properties": {"a": {"format": "int32"}}}}, "untyped node"),
        ({"Root": {"type": "object", "properties": {"a": ref("Missing")}}}, "unknown type Missing"),
        ({"Root": {"type": "object", "properties": {"a": {"allOf": [{"$ref": REF + "Root"}, {"type": "object"}]}}}},
         "allOf other than"),
        ({"Root": {"type": "object",
                   "properties": {"s": {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "set"}}}},
         "set of non-scalars"),
    ],
    ids=["map-key-neither-required-nor-defaulted", "recursion", "unknown-key", "other-union", "untyped", "dangling-ref",
         "allof-mix", "set-of-objects"],
)  # fmt: skip
def test_what_a_crd_cannot_express_stops_the_run(components, message):
    with pytest.raises(gen.SchemaError, match=message):
        gen.structural(components, "Root")


def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    for doc, root, _ in gen.TARGETS:
        components = {**BASE, root: BASE["Root"]}
        (src / f"{doc.replace('/', '__')}_openapi.json").write_text(json.dumps({"components": {"schemas": components}}))
    out = tmp_path / "out"
    assert gen.main(["--openapi-dir", str(src), "--out-dir", str(out)]) == 0
    assert gen.main(["--openapi-dir", str(src), "--out-dir", str(out), "--check"]) == 0
    (out / "podtemplate.json").write_text("{}\n")
    assert gen.main(["--openapi-dir", str(src), "--out-dir", str(out), "--check"]) == 1
    assert "podtemplate.json" in capsys.readouterr().err


# -- the committed schema and the CRDs ------------------------------------------------------------


def _nodes(schema: dict, path: str = ""):
    """Every schema node with its path (properties, items, additionalProperties, anyOf)."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")
    for i, sub in enumerate(schema.get("anyOf") or ()):
        yield from _nodes(sub, f"{path}<{i}>")


@pytest.mark.parametrize("name", ["podtemplate.json", "jobspec.json"])
def test_committed_schema_is_structural(name):
    schema = generated(name)
    assert "$ref" not in json.dumps(schema)
    assert "description" not in json.dumps(schema)
    nodes = list(_nodes(schema))
    assert len(nodes) > 500  # the whole Pod template, not a stub
    for path, node in nodes:
        assert node.get("type") or node.get("x-kubernetes-int-or-string"), f"untyped node {path}"
        # Open nodes would let a template nest without bound again.
        assert not node.get("x-kubernetes-preserve-unknown-fields"), path
        if node.get("type") == "object":
            assert "properties" in node or "additionalProperties" in node, f"{path} would prune everything"


def test_committed_schema_has_what_admission_needs_to_refuse_malformed_templates():
    spec = generated("podtemplate.json")["properties"]["spec"]["properties"]
    container = spec["containers"]["items"]["properties"]
    assert container["env"]["type"] == "array"
    assert container["command"]["type"] == "array"
    assert spec["initContainers"]["type"] == "array"
    assert generated("podtemplate.json")["properties"]["metadata"]["properties"]["labels"]["type"] == "object"
    assert container["ports"]["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert container["ports"]["items"]["properties"]["protocol"]["default"] == "TCP"
    assert container["resources"]["properties"]["limits"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert generated("jobspec.json")["properties"]["template"] == generated("podtemplate.json")


# Where each kind keeps its pod templates.
TEMPLATES = {
    "GenericJob": ["replicaSpecs[].template"],
    "PyTorchTrainingJob": ["replicaSpecs[].template"],
    "TensorFlowTrainingJob": ["replicaSpecs[].template"],
    "XGBoostTrainingJob": ["replicaSpecs[].template"],
    "ColossalAIJob": ["worker.template"],
    "DeepSpeedJob": ["worker.template"],
    "MPIJob": ["worker.template"],
    "BeamJob": ["jobTemplate.spec.template"],
    "AscendJob": ["replicaSpecs{}.template"],
}


def test_every_crd_embeds_the_generated_pod_template_and_stays_small():
    crds = {c["spec"]["names"]["kind"]: c for c in all_crds()}
    assert set(TEMPLATES) == set(crds)
    for kind, crd in crds.items():
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert [p.lstrip(".") for p, node in _nodes(spec) if node == POD_TEMPLATE] == TEMPLATES[kind], kind
        # etcd keeps objects up to 1.5 MB; client-side `kubectl apply` stores the whole CRD in a 256 KB annotation.
        size = len(json.dumps(crd, separators=(",", ":")))
        assert size < 200_000, (kind, size)
    # A pod template may leave its pod out only where spec.templateRef names a job template that
    # gives it (docs/templates.md); every other job must hold whole pods, as before job templates.
    assert "required" not in POD_TEMPLATE
    assert "required" not in POD_TEMPLATE["properties"]["spec"]
    for kind, crd in crds.items():
        rules = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
        whole = [r for r in rules if r["rule"].startswith("has(self.templateRef) || (")]
        assert len(whole) == 1, kind
        assert "size(" in whole[0]["rule"], kind
        assert "Required value" in whole[0]["message"], kind
    for crd in template_crds():
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        assert spec["template"] is POD_TEMPLATE
        assert spec["replicaTemplates"]["additionalProperties"] is POD_TEMPLATE
        assert len(json.dumps(crd, separators=(",", ":"))) < 200_000
    beam = crds["BeamJob"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert beam["jobTemplate"]["properties"]["spec"] == JOB_SPEC
    assert "x-kubernetes-preserve-unknown-fields" not in beam["jobTemplate"]


# -- nothing the project writes in a template is pruned ------------------------------------------


def pruned(value: Any, schema: dict, path: str = "") -> list[str]:
    """Fields of ``value`` a structural ``schema`` would drop, and values of the wrong type."""
    if schema.get("x-kubernetes-int-or-string"):
        return [] if isinstance(value, (int, str)) and not isinstance(value, bool) else [f"{path}: not int-or-string"]
    kind = schema.get("type")
    expected = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int, "number": (int, float)}[kind]
    if not isinstance(value, expected) or (kind in ("integer", "number") and isinstance(value, bool)):
        return [f"{path}: not {kind}"]
    out: list[str] = []
    if kind == "object":
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                out += pruned(sub, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += pruned(sub, extra, f"{path}.{key}")
            else:
                out.append(f"{path}.{key}: pruned")
    elif kind == "array":
        for i, sub in enumerate(value):
            out += pruned(sub, schema["items"], f"{path}[{i}]")
    return out


def _templates(job: dict) -> list[dict]:
    spec = job["spec"]
    if job["kind"] == "BeamJob":
        return [spec["jobTemplate"]["spec"]["template"]]
    if job["kind"] == "AscendJob":
        return [r["template"] for r in spec["replicaSpecs"].values()]
    if "replicaSpecs" in spec:
        return [r["template"] for r in spec["replicaSpecs"]]
    return [spec["worker"]["template"]]


def _example_jobs() -> list[tuple[str, dict]]:
    out = [(p.stem, yaml.safe_load(p.read_text())) for p in sorted((ROOT / "examples" / "manifests").glob("*.yaml"))]
    out += [("builders.generic", generic()), ("builders.pytorch", pytorch()), ("builders.colossal", colossal()),
            ("builders.tensorflow", training("TensorFlowTrainingJob", "tensorflow", "tf"))]  # fmt: skip
    return out


@pytest.mark.parametrize(("name", "job"), _example_jobs(), ids=[n for n, _ in _example_jobs()])
def test_example_templates_lose_nothing_to_pruning(name, job):
    for template in _templates(job):
        assert pruned(copy.deepcopy(template), POD_TEMPLATE) == [], name


@pytest.mark.parametrize(
    ("template", "problem"),
    [({"spec": {"containers": [{"name": "m", "env": "A=1"}]}}, ".spec.containers[0].env: not array"),
     ({"metadata": {"labels": ["a"]}, "spec": {"containers": [{"name": "m"}]}}, ".metadata.labels: not object"),
     ({"spec": {"containers": [{"name": "m", "command": "train"}]}}, ".spec.containers[0].command: not array"),
     ({"spec": {"containers": [{"name": "m"}], "initContainers": "x"}}, ".spec.initContainers: not array"),
     ({"spec": {"containers": [{"name": "m"}], "nested": {"a": {"a": {}}}}}, ".spec.nested: pruned")],
    ids=["env-string", "labels-list", "command-string", "init-containers-string", "unknown-field"],
)  # fmt: skip
def test_the_checker_above_sees_malformed_templates(template, problem):
    assert pruned(template, POD_TEMPLATE) == [problem]
