"""The chart installed on the local cluster the way `make deploy-local` installs it: release
airflow-t9k in airflow-t9k-system, the controller's pods on the real node, from the image built
by scripts/images and imported into the node's containerd (tests/deploy)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.chart import CHART, ROOT, SCRIPT, helm, set_args
from tests.support.cluster import LocalCluster, delete_namespace, wait_until

RELEASE = "airflow-t9k"
NAMESPACE = "airflow-t9k-system"
CONTROLLER = f"{RELEASE}-controller"  # the Deployment, its ServiceAccount and its Lease
SELECTOR = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=controller"
LOCAL_VALUES = ROOT / "deploy" / "chart" / "values-local.yaml"
MANAGED = {"airflow-t9k.io/jobs": "enabled"}  # the chart's default scope: namespaces with this label
# The tests' settings on top of the chart's defaults: progress written every 2 s, not 10.
DEFAULTS: dict[str, Any] = {"controller.progressInterval": 2}
# A controller line that says the API server's RBAC refused it a right: the authorizer's words,
# which name the verb and the resource. (Not other 403s: a namespace being deleted refuses new
# Events with "forbidden ... because it is being terminated", whoever asks.)
REFUSED = re.compile(r'is forbidden: User \\?"[^"\\]+\\?" cannot \S+ resource')  # quoted, or in a repr


def script(*args: str) -> str:
    out = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"scripts/local-cluster.sh {' '.join(args)} failed:\n{out.stderr[-4000:]}"
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def rebuilt_image(image: str, marker: str) -> str:
    """Another build of ``image``: the same layer, a configuration with one more label, so another
    image id under another tag (what `helm upgrade` to a rebuilt image meets), imported into the
    real node's containerd. Returns its ref."""
    src = Path(script("image", "tar", "controller"))
    ref = f"{image}-{marker}"
    out = src.with_name(f"{src.stem}-{marker}.tar")
    if out.exists() and out.stat().st_mtime >= src.stat().st_mtime:  # src's name is its content's: out is the same again
        script("real-node", "import", str(out))  # a no-op when containerd has it, as the tar is unchanged
        return ref
    with tarfile.open(src) as old:
        (entry,) = json.loads(old.extractfile("manifest.json").read())  # type: ignore[union-attr]
        config = json.loads(old.extractfile(entry["Config"]).read())  # type: ignore[union-attr]
        config["config"].setdefault("Labels", {})["airflow-t9k.io/rebuilt"] = marker
        blob = json.dumps(config, sort_keys=True).encode()
        name = hashlib.sha256(blob).hexdigest() + ".json"
        manifest = [{"Config": name, "RepoTags": [ref], "Layers": entry["Layers"]}]
        with tarfile.open(f"{out}.tmp", "w") as new:
            for member, data in ((name, blob), ("manifest.json", json.dumps(manifest).encode())):
                info = tarfile.TarInfo(member)
                info.size = len(data)
                new.addfile(info, io.BytesIO(data))
            layer = old.getmember(entry["Layers"][0])
            new.addfile(layer, old.extractfile(layer))
    os.replace(f"{out}.tmp", out)
    script("real-node", "import", str(out))
    return ref


def old_chart(tmp: Path) -> Path:
    """This chart as an earlier release of it would be: version 0.0.9, its job CRDs without the
    ETA column. Upgrading from it shows `helm upgrade` upgrading the CRDs."""
    chart = tmp / "airflow-t9k"
    shutil.copytree(CHART, chart)
    meta = chart / "Chart.yaml"
    meta.write_text(meta.read_text().replace("version: 0.1.0", "version: 0.0.9"))
    eta = "    - name: ETA\n      type: string\n      jsonPath: .status.progress.eta\n"
    for crd in (chart / "templates" / "crds").glob("*.yaml"):
        text = crd.read_text()
        if eta in text:
            crd.write_text(text.replace(eta, ""))
    return chart


@dataclass
class State:
    chart: Path = CHART
    values: dict[str, Any] = field(default_factory=dict)
    image: str = ""


class Release:
    """One Helm release of the chart, driven by the real Helm binary."""

    def __init__(self, cluster: LocalCluster, api_client: client.ApiClient, image: str) -> None:
        self.cluster = cluster
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.image = image
        self.state: State | None = None  # what is installed now, as this object did it

    def helm(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        out = subprocess.run([helm(), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)
        assert out.returncode == 0, f"helm {' '.join(args[:2])} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
        return out

    def _args(self, state: State) -> list[str]:
        repo, _, tag = state.image.rpartition(":")
        return ["--values", str(LOCAL_VALUES), "--set", f"image.repository={repo}", "--set", f"image.tag={tag}",
                *set_args({**DEFAULTS, **state.values})]  # fmt: skip

    def installed(self) -> bool:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        out = subprocess.run([helm(), "status", RELEASE, "--namespace", NAMESPACE], capture_output=True, env=env, check=False)
        return out.returncode == 0

    def install(self, values: dict[str, Any] | None = None, chart: Path = CHART, image: str | None = None,
                take_ownership: bool = True) -> float:  # fmt: skip
        """`helm install --wait`; the seconds it took. --take-ownership adopts CRDs that other tests
        applied with `airflow-t9k crds` (as docs/install.md tells a cluster that had them), and
        --force-conflicts takes the fields those writers set (server-side apply, Helm 4's default)."""
        state = State(chart, dict(values or {}), image or self.image)
        t0 = time.monotonic()
        self.helm("install", RELEASE, str(chart), "--namespace", NAMESPACE, "--create-namespace", "--wait", "--timeout", "5m",
                  *(["--take-ownership", "--force-conflicts"] if take_ownership else []), *self._args(state))  # fmt: skip
        self.state = state
        return time.monotonic() - t0

    def upgrade(self, values: dict[str, Any] | None = None, chart: Path = CHART, image: str | None = None) -> float:
        state = State(chart, dict(values or {}), image or self.image)
        t0 = time.monotonic()
        # --force-conflicts: other tests (and users' `airflow-t9k crds | kubectl apply`) may have
        # written the CRDs since the install, and Helm 4 applies server-side.
        self.helm("upgrade", RELEASE, str(chart), "--namespace", NAMESPACE, "--wait", "--timeout", "5m", "--force-conflicts",
                  *self._args(state))  # fmt: skip
        self.state = state
        return time.monotonic() - t0

    def uninstall(self) -> float:
        t0 = time.monotonic()
        self.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "3m")
        self.state = None
        return time.monotonic() - t0

    def remove(self) -> None:
        """Nothing of the release left: uninstalled, and its namespace (with the Lease) gone."""
        if self.installed():
            self.uninstall()
        delete_namespace(self.core, NAMESPACE)
        self.state = None

    def ensure_default(self) -> None:
        """The release as the tests share it: installed with the defaults and the built image, two
        Ready pods. A test that changed it (and failed before putting it back) is undone here."""
        default = State(CHART, {}, self.image)
        if not self.ensure_installed() and self.state != default:
            self.upgrade()
        self.wait_ready()

    def ensure_installed(self) -> bool:
        """Installed, with the defaults if it was not (then True); otherwise left as it is."""
        if self.state is not None and self.installed():
            return False
        self.remove()
        self.install()
        return True

    # -- the controller's pods ---------------------------------------------------------------
    def pods(self) -> list[client.V1Pod]:
        items = self.core.list_namespaced_pod(NAMESPACE, label_selector=SELECTOR).items
        return [p for p in items if not p.metadata.deletion_timestamp]

    def ready_pods(self) -> list[client.V1Pod]:
        def ready(p: client.V1Pod) -> bool:
            conditions = p.status.conditions or []
            return p.status.phase == "Running" and any(c.type == "Ready" and c.status == "True" for c in conditions)

        return [p for p in self.pods() if ready(p)]

    def wait_ready(self, count: int = 2, timeout: float = 180) -> list[client.V1Pod]:
        wait_until(lambda: len(self.ready_pods()) == count == len(self.pods()), timeout=timeout,
                   what=f"{count} Ready controller pods")  # fmt: skip
        return self.ready_pods()

    def holder(self) -> str:
        """The Lease's holder identity: <pod name>_<8 hex> (hostname and a random suffix)."""
        try:
            lease = self.coordination.read_namespaced_lease(CONTROLLER, NAMESPACE)
        except ApiException as exc:
            if exc.status == 404:
                return ""
            raise
        return lease.spec.holder_identity or ""

    def leader(self) -> str:
        """The pod that holds the Lease ('' when none does)."""
        return self.holder().rsplit("_", 1)[0]

    def log(self, pod: str) -> str:
        resp = self.core.read_namespaced_pod_log(pod, NAMESPACE, _preload_content=False)
        return resp.data.decode()

    def logs(self) -> dict[str, str]:
        out = {p.metadata.name: self._log_or_none(p.metadata.name) for p in self.pods()}
        return {pod: text for pod, text in out.items() if text is not None}

    def _log_or_none(self, pod: str) -> str | None:
        try:
            return self.log(pod)
        except ApiException:
            return None  # not started yet, or going

    def refusals(self, keep_in: Path | None = None) -> set[tuple[str, str]]:
        """Every line of every controller pod's log that says the API server refused a request for
        want of a right: (pod, line). They name the verb and the resource. With ``keep_in``, the
        logs read are also written there (deployed-<pod>.log), for whoever reads a failed run:
        the pods, and their logs with them, are gone once the release is removed."""
        logs = self.logs()
        if keep_in is not None:
            keep_in.mkdir(parents=True, exist_ok=True)
            for pod, text in logs.items():
                (keep_in / f"deployed-{pod}.log").write_text(text)
        return {(pod, line) for pod, text in logs.items() for line in text.splitlines() if REFUSED.search(line)}
