"""Every object the Helm chart renders, for every combination of its values, is accepted by the
local API server (a server-side dry run: validated, defaulted and admitted, nothing stored)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid

import yaml

from tests.support.chart import SCRIPT, by_kind, combinations, render


def test_every_rendered_object_is_accepted_by_the_api_server(cluster, core, namespace, tmp_path):
    from kubernetes import client

    # The release goes to the test's namespace; the variants name two more (never the release's own).
    teams = (f"{namespace}-a", f"{namespace}-b")
    for team in teams:
        meta = client.V1ObjectMeta(name=team, labels={"airflow-t9k/test": "true"})
        core.create_namespace(client.V1Namespace(metadata=meta))
    try:
        unique: dict[str, dict] = {}
        renders = 0
        for _, values in combinations(teams):
            for obj in render(values, namespace=namespace):
                # The progress endpoint's TLS Secret holds a new CA and key in every render: one of them is enough.
                key = obj["metadata"] if obj["kind"] == "Secret" else obj
                unique[hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()] = obj
            renders += 1
        objs = list(unique.values())
        assert by_kind(objs, "CustomResourceDefinition")
        assert by_kind(objs, "ValidatingAdmissionPolicy")
        assert by_kind(objs, "NetworkPolicy")
        assert by_kind(objs, "Secret")
        manifest = tmp_path / "rendered.yaml"
        manifest.write_text(yaml.dump_all(objs, Dumper=yaml.CSafeDumper))
        kubectl = subprocess.run([f"{cluster_bin()}/kubectl", "--kubeconfig", str(cluster.kubeconfig), "apply", "--server-side",
                                  "--dry-run=server", "--force-conflicts", "--field-manager", f"dry-run-{uuid.uuid4().hex[:6]}",
                                  "-f", str(manifest)], capture_output=True, text=True, check=False)  # fmt: skip
        assert kubectl.returncode == 0, kubectl.stderr[-5000:]
        accepted = [line for line in kubectl.stdout.splitlines() if line.endswith("(server dry run)")]
        assert len(accepted) == len(objs), (len(accepted), len(objs), kubectl.stdout[-3000:])
        print(f"\n{renders} renders, {len(objs)} distinct objects, every one accepted by the API server's dry run")
    finally:
        for team in teams:
            core.delete_namespace(team)


def cluster_bin() -> str:
    return subprocess.run([str(SCRIPT), "bin"], capture_output=True, text=True, check=True).stdout.strip()
