"""Render Kueue's CRDs and admission webhooks for a manager running outside the cluster.

Used by ``scripts/local-cluster.sh kueue up``. Every webhook (CRD conversion and admission)
is pointed at ``https://127.0.0.1:<port>`` with the given CA instead of an in-cluster
Service. Only the webhooks on kueue.x-k8s.io objects are kept: the job-framework ones
(batch Job, Pod, ...) would put Kueue in the path of every pod the cluster creates.

    python kueue_render.py KUEUE_MODULE_DIR CA_FILE PORT OUT_DIR
"""

from __future__ import annotations

import base64
import pathlib
import sys

import yaml

# The kinds whose CRDs serve v1beta1 and v1beta2 through Kueue's conversion webhook.
CONVERTED = {"localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}


def main(module_dir: str, ca_file: str, port: str, out_dir: str) -> None:
    ca = base64.b64encode(pathlib.Path(ca_file).read_bytes()).decode()
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def client(path: str) -> dict[str, str]:
        return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}

    crds = []
    for f in sorted(pathlib.Path(module_dir, "config/components/crd/bases").glob("*.yaml")):
        crd = yaml.safe_load(f.read_text())
        if crd["spec"]["names"]["plural"] in CONVERTED:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {"clientConfig": client("/convert"), "conversionReviewVersions": ["v1"]},
            }
        crds.append(crd)
    (out / "crds.yaml").write_text(yaml.safe_dump_all(crds, sort_keys=False))

    configs = []
    for doc in yaml.safe_load_all(pathlib.Path(module_dir, "config/components/webhook/manifests.yaml").read_text()):
        if not doc:
            continue
        doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
        kept = []
        for hook in doc["webhooks"]:
            if any("kueue.x-k8s.io" in rule.get("apiGroups", []) for rule in hook.get("rules", [])):
                hook["clientConfig"] = client(hook["clientConfig"]["service"]["path"])
                hook["timeoutSeconds"] = 10
                kept.append(hook)
        doc["webhooks"] = kept
        configs.append(doc)
    (out / "webhooks.yaml").write_text(yaml.safe_dump_all(configs, sort_keys=False))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
