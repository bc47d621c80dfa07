"""Airflow as pods on the local cluster's real node, each component under its own ServiceAccount,
every Kubernetes call in-cluster (tests/deploy/test_airflow_in_cluster.py; docs/install.md,
"Airflow's side in the cluster").

- ``postgres``: Debian's PostgreSQL (scripts/images/postgres.conf), the metadata database every
  component shares, on an emptyDir (the test's data lives as long as its pods).
- ``airflow-db-migrate``: a Job, ``airflow db migrate``, before the components start.
- ``airflow-scheduler`` under ``airflow-worker``: the LocalExecutor runs the tasks in this pod, so
  its identity is the workers' (the chart's ``airflow.rbac.tasks`` subjects by default).
- ``airflow-triggerer`` under ``airflow-triggerer``: deferred tasks' triggers.
- ``airflow-api-server`` under ``airflow-api-server``: the UI, the REST and the Execution API (the
  tasks report to it), and the T9k plugin's views (``airflow.rbac.ui``, read only).
- ``airflow-dag-processor`` under its own account with no token at all: it parses DAGs and never
  calls Kubernetes.

Every component is the same image (scripts/images/airflow.conf), non-root (uid 50000), on a
read-only root filesystem with emptyDirs for its home and /tmp, with no kubeconfig anywhere: the
``kubernetes_default`` connection says ``in_cluster``. The DAGs come from a ConfigMap, mounted file
by file (a ConfigMap volume's ``..data`` directory would be walked and parsed twice).
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from kubernetes import client, utils
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream

from tests.real.support import REAL_NODE
from tests.support.cluster import delete_namespace, wait_until

Obj = dict[str, Any]
NAMESPACE = "airflow"  # the chart's default airflow.rbac subjects name ServiceAccounts in it
API_PORT = 8080
DAGS = Path(__file__).resolve().parents[1] / "deploy" / "airflow_dags"
# Each component: its Deployment, the ServiceAccount it runs as, its command.
COMPONENTS: dict[str, tuple[str, list[str]]] = {
    "scheduler": ("airflow-worker", ["scheduler"]),
    "triggerer": ("airflow-triggerer", ["triggerer"]),
    "api-server": ("airflow-api-server", ["api-server", "--port", str(API_PORT)]),
    "dag-processor": ("airflow-dag-processor", ["dag-processor"]),
}
ON_REAL_NODE: Obj = {
    "nodeSelector": {"t9k.test/real": "true"},
    "tolerations": [{"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"}],
}
HARDENED: Obj = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
INITDB = """set -e
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  initdb -D "$PGDATA" -U airflow --pwfile=/secrets/db-password --auth-local=trust --auth-host=scram-sha-256 \\
    --encoding=UTF8 --no-instructions >/dev/null
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "CREATE DATABASE airflow" | postgres --single -D "$PGDATA" postgres >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp -c shared_buffers=32MB \\
  -c max_connections=200
"""


def _meta(name: str, **labels: str) -> Obj:
    return {"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/part-of": "airflow-t9k-test", **labels}}


@dataclass
class AirflowPods:
    api_client: client.ApiClient
    jobs_namespace: str
    airflow_image: str
    postgres_image: str
    core: client.CoreV1Api = field(init=False)
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api_client)

    # -- the objects ------------------------------------------------------------------------
    def _env(self) -> list[Obj]:
        def secret(name: str, key: str) -> Obj:
            return {"name": name, "valueFrom": {"secretKeyRef": {"name": "airflow", "key": key}}}

        conn = {"conn_type": "kubernetes", "extra": {"in_cluster": True, "namespace": self.jobs_namespace}}
        plain = {
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": "/dags",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://airflow-api-server.{NAMESPACE}.svc.cluster.local:{API_PORT}/execution/",
            # Task logs are served by the worker's log server: the api-server finds it by the pod's IP.
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "airflow.utils.net.get_host_ip_address",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # The migrate Job ran to Complete before any component starts (start() checks): no
            # component need load Alembic's revisions again to check it.
            "AIRFLOW__DATABASE__CHECK_MIGRATIONS": "False",
            "AIRFLOW__T9K__UI_NAMESPACE": self.jobs_namespace,  # the UI's Role is in that namespace only
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(conn),
        }
        return [
            secret("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "sql-alchemy-conn"),
            secret("AIRFLOW__CORE__FERNET_KEY", "fernet-key"),
            secret("AIRFLOW__API_AUTH__JWT_SECRET", "jwt-secret"),
            secret("AIRFLOW__API__SECRET_KEY", "api-secret-key"),
            *({"name": k, "value": v} for k, v in plain.items()),
        ]

    def _airflow_pod(self, component: str, account: str, args: list[str], token: bool) -> Obj:
        dags = sorted(p.name for p in DAGS.glob("*.py"))
        container: Obj = {
            "name": component,
            "image": self.airflow_image,
            "imagePullPolicy": "Never",
            "args": args,
            "env": self._env(),
            "resources": {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"memory": "3Gi"}},
            "securityContext": HARDENED,
            "volumeMounts": [
                {"name": "home", "mountPath": "/opt/airflow"},
                {"name": "tmp", "mountPath": "/tmp"},
                *({"name": "dags", "mountPath": f"/dags/{d}", "subPath": d, "readOnly": True} for d in dags),
            ],
        }
        if component == "api-server":
            container["ports"] = [{"name": "http", "containerPort": API_PORT}]
            # Ready once the execution API answers: its first request builds its routers, blocking
            # every other request for seconds, and workers' calls meanwhile time out.
            container["readinessProbe"] = {"httpGet": {"path": "/execution/health", "port": "http"}, "periodSeconds": 1,
                                           "timeoutSeconds": 30}  # fmt: skip
        return {
            "serviceAccountName": account,
            "automountServiceAccountToken": token,
            "enableServiceLinks": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 50000,
                "runAsGroup": 50000,
                "fsGroup": 50000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "terminationGracePeriodSeconds": 2,  # the test removes them with their namespace, waiting for it to go
            "containers": [container],
            "volumes": [
                {"name": "home", "emptyDir": {}},
                {"name": "tmp", "emptyDir": {}},
                {"name": "dags", "configMap": {"name": "airflow-dags"}},
            ],
            **ON_REAL_NODE,
        }

    def _deployment(self, name: str, pod: Obj) -> Obj:
        labels = {"app.kubernetes.io/name": name}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(name, **labels),
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}},
        }  # fmt: skip

    def base_objects(self) -> list[Obj]:
        """What the components need first: their accounts, the Secret, the DAGs, the database."""
        conn = f"postgresql+psycopg2://airflow:{self.password}@postgres.{NAMESPACE}.svc.cluster.local:5432/airflow"
        data = {
            "db-password": self.password,
            "sql-alchemy-conn": conn,
            "fernet-key": Fernet.generate_key().decode(),
            "jwt-secret": secrets.token_urlsafe(32),
            "api-secret-key": secrets.token_urlsafe(32),
        }
        accounts = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(sa)} for sa, _ in COMPONENTS.values()]
        postgres = {
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 999,
                "runAsGroup": 999,
                "fsGroup": 999,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 2,  # the test removes them with their namespace, waiting for it to go
            "containers": [
                {
                    "name": "postgres",
                    "image": self.postgres_image,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", INITDB],
                    "env": [{"name": "PATH", "value": "/usr/lib/postgresql/15/bin:/usr/bin:/bin"}],
                    "ports": [{"name": "postgres", "containerPort": 5432}],
                    "readinessProbe": {"tcpSocket": {"port": "postgres"}, "periodSeconds": 2},
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
                    "securityContext": HARDENED,
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/var/lib/postgresql/data"},
                        {"name": "tmp", "mountPath": "/tmp"},
                        {"name": "secrets", "mountPath": "/secrets", "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "tmp", "emptyDir": {}},
                {
                    "name": "secrets",
                    "secret": {"secretName": "airflow", "items": [{"key": "db-password", "path": "db-password"}]},
                },
            ],
            **ON_REAL_NODE,
        }
        return [
            *accounts,
            {"apiVersion": "v1", "kind": "Secret", "metadata": _meta("airflow"), "stringData": data},
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": _meta("airflow-dags"),
                "data": {p.name: p.read_text() for p in sorted(DAGS.glob("*.py"))},
            },
            self._deployment("postgres", postgres),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta("postgres"),
                "spec": {"selector": {"app.kubernetes.io/name": "postgres"}, "ports": [{"port": 5432, "targetPort": "postgres"}]},
            },
        ]

    def migrate_job(self) -> Obj:
        pod = self._airflow_pod("migrate", "default", ["db", "migrate"], token=False)
        pod["restartPolicy"] = "Never"  # a failed try's pod stays, with its log
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("airflow-db-migrate"),
                "spec": {"backoffLimit": 1, "template": {"spec": pod}}}  # fmt: skip

    def component_objects(self) -> list[Obj]:
        out = [
            self._deployment(f"airflow-{name}", self._airflow_pod(name, account, args, token=name != "dag-processor"))
            for name, (account, args) in COMPONENTS.items()
        ]
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": _meta("airflow-api-server"),
                    "spec": {"selector": {"app.kubernetes.io/name": "airflow-api-server"},
                             "ports": [{"name": "http", "port": API_PORT, "targetPort": "http"}]}})  # fmt: skip
        return out

    # -- lifecycle ---------------------------------------------------------------------------
    def _create(self, objs: list[Obj]) -> None:
        for obj in objs:
            utils.create_from_dict(self.api_client, obj, namespace=NAMESPACE)

    def start(self) -> dict[str, float]:
        """Everything created and healthy; the seconds each stage took."""
        took: dict[str, float] = {}
        t0 = time.monotonic()
        self.remove()  # left by an interrupted run
        self.core.create_namespace({"metadata": {"name": NAMESPACE, "labels": {"airflow-t9k/test": "true"}}})
        wait_until(lambda: bool(self.core.list_namespaced_service_account(NAMESPACE).items), what="default serviceaccount")
        self._create(self.base_objects())
        wait_until(lambda: self._ready("postgres"), timeout=120, interval=1, what="postgres Ready")
        took["database"] = time.monotonic() - t0
        self._create([self.migrate_job()])
        batch = client.BatchV1Api(self.api_client)
        status = wait_until(lambda: self._ended(batch.read_namespaced_job("airflow-db-migrate", NAMESPACE)), timeout=300,
                            interval=0.5, what="airflow db migrate")  # fmt: skip
        assert status == "Complete", "airflow db migrate failed:\n" + "\n".join(
            f"== {pod}\n{text[-3000:]}" for pod, text in self.logs().items() if "migrate" in pod
        )
        took["migrate"] = time.monotonic() - t0 - took["database"]
        self._create(self.component_objects())
        wait_until(self.healthy, timeout=300, interval=0.5, what="Airflow's components healthy")
        took["components"] = time.monotonic() - t0 - took["database"] - took["migrate"]
        return took

    @staticmethod
    def _ended(job: client.V1Job) -> str | None:
        """``Complete`` or ``Failed`` once the Job has ended."""
        return next(
            (c.type for c in job.status.conditions or [] if c.type in ("Complete", "Failed") and c.status == "True"), None
        )

    def remove(self) -> None:
        delete_namespace(self.core, NAMESPACE, timeout=180)

    # -- the pods ----------------------------------------------------------------------------
    def pod(self, name: str) -> client.V1Pod:
        pods = [p for p in self.core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={name}").items
                if not p.metadata.deletion_timestamp]  # fmt: skip
        assert len(pods) == 1, f"{name}: {[p.metadata.name for p in pods]}"
        return pods[0]

    def _ready(self, name: str) -> bool:
        try:
            p = self.pod(name)
        except AssertionError:
            return False
        return any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])

    def exec(self, name: str, command: list[str]) -> str:
        """A command in the component's container, through the API server and the kubelet."""
        p = self.pod(name)
        return stream(self.core.connect_get_namespaced_pod_exec, p.metadata.name, NAMESPACE, command=command,
                      container=p.spec.containers[0].name, stderr=True, stdin=False, stdout=True, tty=False)  # fmt: skip

    def logs(self) -> dict[str, str]:
        out = {}
        for p in self.core.list_namespaced_pod(NAMESPACE).items:
            try:
                resp = self.core.read_namespaced_pod_log(p.metadata.name, NAMESPACE, _preload_content=False)
                out[p.metadata.name] = resp.data.decode(errors="replace")
            except ApiException as exc:
                out[p.metadata.name] = f"(no log: {exc.status})"
        return out

    def state(self) -> str:
        """What a failed start needs explained: the pods' phases and containers, the Jobs, the Events."""
        lines = []
        for p in self.core.list_namespaced_pod(NAMESPACE).items:
            lines.append(f"pod {p.metadata.name} {p.status.phase} node={p.spec.node_name} {p.status.reason or ''}")
            lines += [f"  {c.name} ready={c.ready} restarts={c.restart_count} {c.state} last={c.last_state}"
                      for c in p.status.container_statuses or []]  # fmt: skip
        for j in client.BatchV1Api(self.core.api_client).list_namespaced_job(NAMESPACE).items:
            lines.append(f"job {j.metadata.name} {j.status}")
        for e in self.core.list_namespaced_event(NAMESPACE).items:
            lines.append(f"event {e.last_timestamp} {e.involved_object.kind}/{e.involved_object.name} {e.reason}: {e.message}")
        return "\n".join(lines) + "\n"

    def save_logs(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "state.txt").write_text(self.state())
        for pod, text in self.logs().items():
            (directory / f"{pod}.log").write_text(text)
        for name in ("airflow-scheduler",):  # the task logs, in the worker's home
            try:
                (directory / f"{name}-task-logs.txt").write_text(
                    self.exec(
                        name,
                        ["sh", "-c", "find /opt/airflow/logs -name '*.log' -exec sh -c 'echo \"== $1\"; cat \"$1\"' _ {} \\;"],
                    )
                )
            except (ApiException, AssertionError) as exc:
                (directory / f"{name}-task-logs.txt").write_text(f"(not read: {exc})")

    # -- Airflow's REST API, through the api-server pod's IP -----------------------------------
    @property
    def base(self) -> str:
        return f"http://{self.pod('airflow-api-server').status.pod_ip}:{API_PORT}"

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, raw = r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read().decode()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw

    def api(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, f"/api/v2/{path}", body)
        assert status in (200, 201), f"{method} /api/v2/{path}: {status} {answer}"
        return answer

    def healthy(self) -> bool:
        if not self._ready("airflow-api-server"):
            return False
        try:
            status, health = self.call("GET", "/api/v2/monitor/health")
        except OSError:
            return False
        return status == 200 and all(
            (health.get(c) or {}).get("status") == "healthy" for c in ("metadatabase", "scheduler", "triggerer", "dag_processor")
        )

    def trigger(self, dag_id: str, conf: Obj | None = None) -> str:
        wait_until(lambda: self.call("GET", f"/api/v2/dags/{dag_id}")[0] == 200, timeout=120, interval=1, what=f"{dag_id} parsed")
        self.api("PATCH", f"dags/{dag_id}", {"is_paused": False})
        run_id = f"in-cluster-{uuid.uuid4().hex[:8]}"
        self.api("POST", f"dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": conf or {}})
        return run_id

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        return self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}").get("state")

    def ti(self, dag_id: str, run_id: str, task_id: str) -> Obj:
        """The task instance as the REST API shows it: state, hostname, try_number, and while it
        is deferred its trigger and the triggerer that runs it."""
        return dict(self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"))

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str) -> Any:
        value = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}")["value"]
        if isinstance(value, str):  # the stored JSON, as the database holds it
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value


__all__ = ["COMPONENTS", "NAMESPACE", "REAL_NODE", "AirflowPods"]
