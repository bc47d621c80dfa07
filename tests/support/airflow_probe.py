"""Who each of Airflow's pods is to the API server (tests/deploy/test_airflow_in_cluster.py): a
probe run in the pod finds no kubeconfig in its environment or files, and asks the API server who
its in-cluster credentials are (a SelfSubjectReview), or finds it has none."""

from __future__ import annotations

import json
from typing import Any

from tests.support.airflow_pods import NAMESPACE, AirflowPods

Obj = dict[str, Any]


def identity(name: str) -> str:
    return f"system:serviceaccount:{NAMESPACE}:{name}"


# Run in each component's pod: its environment and files hold no kubeconfig, and the API server
# says who its in-cluster credentials are (a SelfSubjectReview), or that it has none.
PROBE = r"""
import json, os
found = []
for top in ("/opt", "/root", "/home", "/etc", "/tmp", "/dags", "/var", "/srv", "/run", "/usr/local"):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if root + "/" + d not in ("/usr/local/lib",)]
        for f in files + [d for d in dirs if d == ".kube"]:
            if f == ".kube" or "kubeconfig" in f.lower() or os.path.basename(root) == ".kube":
                found.append(os.path.join(root, f))
out = {"KUBECONFIG": os.environ.get("KUBECONFIG"), "kubeconfigs": found,
       "home_kube": os.path.exists(os.path.expanduser("~/.kube")),
       "token": os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token")}
try:
    from kubernetes import client, config
    config.load_incluster_config()
    review = client.AuthenticationV1Api().create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    out["user"] = review.status.user_info.username
except Exception as exc:
    out["user"] = None
    out["error"] = f"{type(exc).__name__}: {exc}"
print("PROBE " + json.dumps(out))
"""


def probe(pods: AirflowPods, name: str) -> Obj:
    out = pods.exec(name, ["python3", "-c", PROBE])
    line = next((ln for ln in out.splitlines() if ln.startswith("PROBE ")), None)
    assert line, out
    return json.loads(line[len("PROBE ") :])
