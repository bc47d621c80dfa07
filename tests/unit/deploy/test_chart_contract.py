"""The chart's contract with whoever installs it (issue 46, item 4): values.schema.json refuses an
unknown key or a wrong type naming it, and is values.yaml's with the docs' table (one generator);
nameOverride/fullnameOverride rename every object and keep every reference between them; the
controller pod takes extra env, volumes, containers and spread constraints; the roles for people
are aggregated into view/edit/admin for the chart's own kinds only; the monitoring objects render
when asked, and only then."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
import yaml

from airflow_t9k.api.resources import RESOURCES
from scripts import gen_chart_values as gen
from tests.support.chart import CHART, KUBE_VERSION, ROOT, Obj, by_kind, granted, helm, render, template

NS = "airflow-t9k-system"
FAILS = "values don't meet the specifications of the schema"


def _refused(values: dict[str, Any]) -> str:
    out = template({"crds.install": False, **values}, check=False)
    assert out.returncode != 0, f"rendered although {values} is not in the contract"
    assert FAILS in out.stderr, out.stderr
    return out.stderr


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"controler.workers": 4}, "at '': additional properties 'controler' not allowed"),
        ({"replica": 3}, "at '': additional properties 'replica' not allowed"),
        ({"controller.workrs": 4}, "at '/controller': additional properties 'workrs' not allowed"),
        ({"controller.logformat": "json"}, "at '/controller': additional properties 'logformat' not allowed"),
        ({"progress.push.prot": 9443}, "at '/progress/push': additional properties 'prot' not allowed"),
        ({"progress.push.tls.sorce": "secret"}, "at '/progress/push/tls': additional properties 'sorce' not allowed"),
        ({"metrics.grafanaDashboard.enable": True}, "at '/metrics/grafanaDashboard': additional properties 'enable'"),
        ({"rbac.aggregateToDefaultRole": False}, "at '/rbac': additional properties 'aggregateToDefaultRole'"),
        ({"airflow.rbac.ui.action": False}, "at '/airflow/rbac/ui': additional properties 'action' not allowed"),
        ({"airflow.rbac.tasks.subjects": [{"kind": "ServiceAccount", "name": "w", "namepsace": "airflow"}]},
         "at '/airflow/rbac/tasks/subjects/0': additional properties 'namepsace' not allowed"),
    ],
)  # fmt: skip
def test_an_unknown_key_fails_the_render_naming_it(values, says):
    assert says in _refused(values)


def test_a_typo_given_with_set_fails_as_the_issue_wrote_it():
    cmd = [helm(), "template", "airflow-t9k", str(CHART), "--kube-version", KUBE_VERSION, "--set", "controler.workers=4"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode != 0
    assert "additional properties 'controler' not allowed" in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"controller.workers": "four"}, "at '/controller/workers': got string, want integer"),
        ({"replicas": 1.5}, "at '/replicas': got number, want integer"),
        ({"leaderElection.enabled": "yes"}, "at '/leaderElection/enabled': got string, want boolean"),
        ({"scope.namespaces": "team-a"}, "at '/scope/namespaces': got string, want array"),
        ({"scope.mode": "everything"}, "at '/scope/mode': value must be one of 'selector', 'namespaces', 'all'"),
        ({"controller.logFormat": "xml"}, "at '/controller/logFormat': value must be one of 'text', 'json'"),
        ({"controller.kinds": ["PytorchJob"]}, "at '/controller/kinds/0': value must be one of"),
        ({"controller.workers": 0}, "at '/controller/workers': minimum: got 0, want 1"),
        ({"progress.push.port": 70000}, "at '/progress/push/port': maximum: got 70,000, want 65,535"),
        ({"podLabels": {"team": 1}}, "at '/podLabels/team': got number, want string"),
        ({"extraEnv": [{"value": "10.96.0.1"}]}, "at '/extraEnv/0': missing property 'name'"),
        ({"extraVolumeMounts": [{"name": "ca"}]}, "at '/extraVolumeMounts/0': missing property 'mountPath'"),
        ({"topologySpreadConstraints": [{"maxSkew": 1}]}, "at '/topologySpreadConstraints/0': missing properties"),
        ({"metrics.prometheusRule.additionalGroups": {"name": "mine"}}, "got object, want array"),
    ],
)
def test_a_wrong_type_fails_the_render_naming_the_key(values, says):
    assert says in _refused(values)


def test_what_kubernetes_defines_stays_free_form():
    """Maps that embed Kubernetes objects are the API server's to check, not the schema's."""
    objs = render({"crds.install": False, "resources": {"limits": {"memory": "1Gi", "hugepages-2Mi": "64Mi"}},
                   "livenessProbe": {"exec": {"command": ["true"]}}, "nodeSelector": {"pool": "system"},
                   "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                       {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}},
                   "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                   "podSecurityContext": {"runAsNonRoot": True, "fsGroup": 65532}, "image.tag": 2,
                   "extraEnv": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                   "admissionPolicy.namespaceSelector": {"matchExpressions": [{"key": "t", "operator": "Exists"}]},
                   "global": {"imageRegistry": "example.com"}})  # fmt: skip
    pod = _deployment(objs)["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["hugepages-2Mi"] == "64Mi"
    assert pod["containers"][0]["image"].endswith(":2")
    assert pod["affinity"]["nodeAffinity"]


# The generator: one source (values.yaml and its comments) for the schema and the docs' table.


def _schema() -> dict[str, Any]:
    return json.loads((CHART / "values.schema.json").read_text())


def _keys(values: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every key of values.yaml down to the free-form maps (whose keys are the user's)."""
    out = {}
    for k, v in values.items():
        out[prefix + k] = v
        sub = schema["properties"][k]
        if "properties" in sub:
            out |= _keys(v, sub, f"{prefix}{k}.")
    return out


def _table() -> dict[str, list[str]]:
    doc = (ROOT / "docs" / "install.md").read_text()
    body = doc.split(gen.BEGIN)[1].split(gen.END)[0]
    rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in body.strip().splitlines()[2:]]
    return {cells[0].strip().strip("`"): [c.strip() for c in cells[1:]] for cells in rows}


def test_the_schema_and_the_docs_table_are_values_yamls_current_ones():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_chart_values.py"), "--check"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, f"run scripts/gen_chart_values.py (or make chart):\n{out.stdout}{out.stderr}"


def test_every_key_of_values_yaml_is_in_the_schema_and_the_table_with_its_default():
    import jsonschema

    values, schema = yaml.safe_load((CHART / "values.yaml").read_text()), _schema()
    jsonschema.Draft7Validator(schema).validate(values)
    keys, table = _keys(values, schema), _table()
    assert set(table) == set(keys), {"not in the table": sorted(set(keys) - set(table)), "stale": sorted(set(table) - set(keys))}
    assert set(schema["properties"]) == set(values) | {"global"}
    for key, value in keys.items():
        if not isinstance(value, dict) or not value or table[key][1]:
            assert table[key][1] == f"`{gen.flow(value)}`", key
    # The drift issue 46 found: the table said 4 workers; it had no progress.push.* or networkPolicy.* rows.
    assert table["controller.workers"][1] == "`16`"
    assert {"progress.push.port", "progress.push.tls.source", "networkPolicy.enabled", "networkPolicy.pushFrom"} <= set(table)


def test_the_kinds_a_values_file_may_name_are_the_controllers():
    kinds = _schema()["properties"]["controller"]["properties"]["kinds"]["items"]["enum"]
    assert kinds == sorted(RESOURCES)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a: null  # no type\n", "values.yaml:1: a is null: say its type"),
        ("# @schema {oops}\na: 1\n", "values.yaml:1: the @schema annotation is not JSON"),
        ("# @schema {\"enum\": [\"x\", \"y\"]}\na: z\n", "a: 'z' is not one of ['x', 'y']"),
    ],
)  # fmt: skip
def test_the_generator_refuses_what_it_cannot_type(text, error):
    with pytest.raises(gen.ValuesError, match=re.escape(error)):
        gen.schema_of(text)


def test_the_generator_infers_closed_objects_and_open_maps():
    text = """# -- a group
group:
  n: 1  # a count
  # @schema {"additionalProperties": true}
  probe: {httpGet: {path: /x}}
  labels: {}  # free-form
  # @schema {"type": ["string", "null"]}
  maybe: null
"""
    schema, _ = gen.schema_of(text)
    group = schema["properties"]["group"]
    assert (group["description"], group["additionalProperties"]) == ("a group", False)
    props = group["properties"]
    assert props["n"] == {"description": "a count", "type": "integer", "default": 1}
    assert "properties" not in props["probe"]
    assert props["probe"]["additionalProperties"] is True
    assert props["labels"] == {"description": "free-form", "type": "object", "default": {}}
    assert props["maybe"]["type"] == ["string", "null"]


def test_a_key_added_without_regenerating_fails_the_check(tmp_path, monkeypatch, capsys):
    for name, path in (("VALUES", CHART / "values.yaml"), ("SCHEMA", CHART / "values.schema.json"),
                       ("DOC", ROOT / "docs" / "install.md")):  # fmt: skip
        shutil.copy(path, tmp_path / path.name)
        monkeypatch.setattr(gen, name, tmp_path / path.name)
        monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 0
    with (tmp_path / "values.yaml").open("a") as f:
        f.write("brandNew: 3  # a key nobody documented yet\n")
    assert gen.main(["--check"]) == 1
    assert capsys.readouterr().out.count("not current") == 2  # the schema and the table
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    assert "| `brandNew` | integer | `3` | a key nobody documented yet |" in (tmp_path / "install.md").read_text()


# Names: nameOverride and fullnameOverride.

ALL_ON = {"crds.install": False, "admissionPolicy.enabled": True, "airflow.rbac.namespaces": ["team-a"],
          "metrics.serviceMonitor.enabled": True, "metrics.grafanaDashboard.enabled": True,
          "metrics.prometheusRule.enabled": True, "networkPolicy.enabled": True}  # fmt: skip


def _deployment(objs: list[Obj]) -> Obj:
    (dep,) = by_kind(objs, "Deployment")
    return dep


@pytest.mark.parametrize(
    ("override", "fullname", "name_label"),
    [
        ({"nameOverride": "trainer"}, "airflow-t9k-trainer", "trainer"),
        ({"fullnameOverride": "ml-train"}, "ml-train", "airflow-t9k"),
    ],
)
def test_name_overrides_rename_every_object_and_keep_every_reference(override, fullname, name_label):
    default, objs = render(ALL_ON), render({**ALL_ON, **override})
    assert sorted((o["kind"], o["metadata"]["name"].replace("airflow-t9k", fullname, 1)) for o in default) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in objs
    )
    assert all(o["metadata"]["name"].startswith(fullname) for o in objs)
    names = {(o["kind"], o["metadata"]["name"]) for o in objs}
    for b in [*by_kind(objs, "RoleBinding"), *by_kind(objs, "ClusterRoleBinding")]:
        assert (b["roleRef"]["kind"], b["roleRef"]["name"]) in names
        for s in b["subjects"]:
            if s["kind"] == "ServiceAccount" and s["namespace"] == NS:
                assert ("ServiceAccount", s["name"]) in names
    for b in by_kind(objs, "ValidatingAdmissionPolicyBinding"):
        assert ("ValidatingAdmissionPolicy", b["spec"]["policyName"]) in names
    dep = _deployment(objs)
    pod = dep["spec"]["template"]
    controller = f"{fullname}-controller"
    assert dep["metadata"]["name"] == controller
    assert pod["spec"]["serviceAccountName"] == controller
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == name_label
    args = pod["spec"]["containers"][0]["args"]
    assert f"--leader-election-id={controller}" in args  # the Lease, which the election Role names
    (election,) = [r for r in by_kind(objs, "Role") if r["metadata"]["name"] == f"{controller}-leader-election"]
    assert [r["resourceNames"] for r in election["rules"] if "resourceNames" in r] == [[controller]]
    assert f"--progress-endpoint=https://{controller}-progress.{NS}.svc:8443" in args
    assert ("Service", f"{controller}-progress") in names
    # The push endpoint's TLS Secret, mounted or read through the API (progress.push.tls.source).
    secrets = [v["secret"]["secretName"] for v in pod["spec"].get("volumes", []) if "secret" in v]
    secrets += [a.split("=", 1)[1] for a in args if a.startswith("--progress-tls-secret=")]
    assert secrets
    assert {("Secret", s) for s in secrets} <= names
    # Every selector still finds the controller's pods.
    selects = [dep["spec"]["selector"]["matchLabels"], *(s["spec"]["selector"] for s in by_kind(objs, "Service")),
               *(p["spec"]["podSelector"]["matchLabels"] for p in by_kind(objs, "NetworkPolicy")),
               *(p["spec"]["selector"]["matchLabels"] for p in by_kind(objs, "PodDisruptionBudget")),
               *(m["spec"]["selector"]["matchLabels"] for m in by_kind(objs, "ServiceMonitor"))]  # fmt: skip
    assert len(selects) >= 5
    for selector in selects:
        assert selector.items() <= pod["metadata"]["labels"].items(), selector
    (writes,) = [
        p for p in by_kind(objs, "ValidatingAdmissionPolicy") if p["metadata"]["name"] == f"{fullname}-controller-writes"
    ]
    assert f"system:serviceaccount:{NS}:{controller}" in writes["spec"]["matchConditions"][0]["expression"]


# The controller pod's extras.


PUSH = {  # the push path's own volume comes first where it has one
    "push-off": ({"progress.push.enabled": False}, []),
    "push-own-secret": ({"progress.push.tls.source": "secret", "progress.push.tls.secretName": "mine"}, ["progress-tls"]),
}


@pytest.mark.parametrize(("push", "own"), PUSH.values(), ids=PUSH)
def test_extra_env_volumes_containers_and_spread_land_in_the_controller_pod(push, own):
    env = [{"name": "NO_PROXY", "value": "$(KUBERNETES_SERVICE_HOST),.svc,.cluster.local"}]
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
              {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"tier": "ops"}}}]  # fmt: skip
    objs = render({"crds.install": False, **push, "extraEnv": env, "topologySpreadConstraints": spread,
                   "extraVolumes": [{"name": "proxy-ca", "configMap": {"name": "proxy-ca"}}],
                   "extraVolumeMounts": [{"name": "proxy-ca", "mountPath": "/etc/proxy-ca", "readOnly": True}],
                   "extraContainers": [{"name": "metrics-proxy", "image": "quay.io/brancz/kube-rbac-proxy:v0.19.0"}],
                   "controller.logFormat": "json"})  # fmt: skip
    pod = _deployment(objs)["spec"]["template"]
    controller, sidecar = pod["spec"]["containers"]
    assert controller["name"] == "controller"
    assert sidecar["name"] == "metrics-proxy"
    assert controller["env"][0]["name"] == "POD_NAMESPACE"
    assert controller["env"][1:] == env
    assert [m["name"] for m in controller["volumeMounts"]] == [*own, "proxy-ca"]
    assert [v["name"] for v in pod["spec"]["volumes"]] == [*own, "proxy-ca"]
    own, given = pod["spec"]["topologySpreadConstraints"]
    assert own["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()  # counts the controller's pods
    assert given["labelSelector"] == {"matchLabels": {"tier": "ops"}}  # left as given
    assert "--log-format=json" in controller["args"]
    from airflow_t9k.cli import build_parser

    assert build_parser().parse_args(["controller", *controller["args"]]).log_format == "json"  # the controller's own flag


def test_by_default_the_pod_has_none_of_the_extras():
    pod = _deployment(render({"crds.install": False, "progress.push.enabled": False}))["spec"]["template"]
    assert [c["name"] for c in pod["spec"]["containers"]] == ["controller"]
    assert "topologySpreadConstraints" not in pod["spec"]  # the default anti-affinity spreads over nodes
    assert "volumes" not in pod["spec"]
    assert "volumeMounts" not in pod["spec"]["containers"][0]
    assert "--log-format=text" in pod["spec"]["containers"][0]["args"]


# Roles for people.

AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
READ, WRITE = ("get", "list", "watch"), ("create", "update", "patch", "delete", "deletecollection")


def _namespaced_kinds() -> dict[tuple[str, str], set[str]]:
    """(group, plural) of every namespaced kind the chart's CRDs define, with their subresources."""
    crds = by_kind(render({}), "CustomResourceDefinition")
    assert len(crds) == 11
    return {(c["spec"]["group"], c["spec"]["names"]["plural"]): set(c["spec"]["versions"][0].get("subresources", {}))
            for c in crds if c["spec"]["scope"] == "Namespaced"}  # fmt: skip


@pytest.mark.parametrize("aggregate", [True, False])
def test_roles_for_people_cover_the_charts_kinds_and_nothing_else(aggregate):
    objs = render({"crds.install": False, "rbac.aggregateToDefaultRoles": aggregate})
    roles = {r["metadata"]["name"]: r for r in by_kind(objs, "ClusterRole")}
    viewer, editor = roles["airflow-t9k-job-viewer"], roles["airflow-t9k-job-editor"]
    labels = {r: {k.removeprefix(AGGREGATE) for k, v in roles[r]["metadata"]["labels"].items() if k.startswith(AGGREGATE)}
              for r in ("airflow-t9k-job-viewer", "airflow-t9k-job-editor")}  # fmt: skip
    assert labels == ({"airflow-t9k-job-viewer": {"view"}, "airflow-t9k-job-editor": {"edit", "admin"}} if aggregate else
                      {"airflow-t9k-job-viewer": set(), "airflow-t9k-job-editor": set()})  # fmt: skip
    assert all(v == "true" for r in (viewer, editor) for k, v in r["metadata"]["labels"].items() if k.startswith(AGGREGATE))
    kinds = _namespaced_kinds()
    assert ("batch.tensorstack.dev", "clustert9kjobtemplates") not in kinds
    want_view = {(g, p, v, "*") for g, p in kinds for v in READ}
    want_view |= {(g, f"{p}/{sub}", "get", "*") for (g, p), subs in kinds.items() for sub in subs}
    assert granted(viewer["rules"]) == want_view
    want_edit = {(g, p, v, "*") for g, p in kinds for v in (*READ, *WRITE)}
    want_edit |= {
        (g, f"{p}/scale", v, "*") for (g, p), subs in kinds.items() if "scale" in subs for v in ("get", "update", "patch")
    }
    assert granted(editor["rules"]) == want_edit
    # Status and finalizers are the controller's; nothing here reaches pods, Secrets or another group.
    assert not [r for _, r, _, _ in granted(editor["rules"]) if r.endswith(("/status", "/finalizers"))]
    assert not [b for b in [*by_kind(objs, "ClusterRoleBinding"), *by_kind(objs, "RoleBinding")]
                if b["roleRef"]["name"] in ("airflow-t9k-job-viewer", "airflow-t9k-job-editor")]  # fmt: skip


# Monitoring.


def test_the_monitoring_objects_render_only_when_asked():
    objs = render({"crds.install": False})
    assert not by_kind(objs, "ConfigMap")
    assert not by_kind(objs, "PrometheusRule")
    mine = [{"name": "team", "rules": [{"alert": "TooManyJobs", "expr": "sum(t9k_jobs) > 100"}]}]
    objs = render({"crds.install": False, "metrics.grafanaDashboard.enabled": True,
                   "metrics.grafanaDashboard.namespace": "monitoring",
                   "metrics.grafanaDashboard.annotations": {"grafana_folder": "Training"},
                   "metrics.prometheusRule.enabled": True, "metrics.prometheusRule.labels": {"release": "prometheus"},
                   "metrics.prometheusRule.additionalGroups": mine})  # fmt: skip
    (dashboard,) = by_kind(objs, "ConfigMap")
    assert dashboard["metadata"]["name"] == "airflow-t9k-dashboard"
    assert dashboard["metadata"]["namespace"] == "monitoring"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "Training"}
    (data,) = dashboard["data"].values()
    assert json.loads(data) == json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    (rule,) = by_kind(objs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert (rule["metadata"]["name"], rule["metadata"]["namespace"]) == ("airflow-t9k", NS)
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    shipped = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
    assert rule["spec"]["groups"] == [*shipped, *mine]
    for group in rule["spec"]["groups"]:
        assert group["name"]
        assert group["rules"]
        for r in group["rules"]:
            assert ("alert" in r) != ("record" in r), r
            assert r["expr"], r


def test_a_chart_without_the_dashboard_file_says_so(tmp_path):
    chart = tmp_path / "airflow-t9k"
    shutil.copytree(CHART, chart, ignore=shutil.ignore_patterns("crds"))
    (chart / "files" / "grafana-dashboard.json").unlink()
    cmd = [helm(), "template", "r", str(chart), "--kube-version", KUBE_VERSION, "--set", "metrics.grafanaDashboard.enabled=true"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode != 0
    assert "the chart has no files/grafana-dashboard.json" in out.stderr, out.stderr


def test_no_command_in_the_docs_upgrades_with_bare_reuse_values():
    """--reuse-values keeps the old release's values whole: a new chart's new defaults never apply."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = re.findall(r"```(?:bash|sh|console)\n(.*?)```", path.read_text(), flags=re.DOTALL)
        assert not [line for b in blocks for line in b.splitlines() if re.search(r"--reuse-values\b", line)], path
