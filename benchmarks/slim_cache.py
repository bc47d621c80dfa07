"""What one cached pod and Service cost in the controller's memory, whole and slimmed.

    scripts/local-cluster.sh up
    .venv/bin/python benchmarks/slim_cache.py

Runs our controller on one PyTorchTrainingJob of 1 master + 3 workers (the template of
vs_kubeflow.py and scaling.py: kwok ends each pod Succeeded 20 s after it runs), reads its pods
(Running, then Succeeded) and Services as the API server serves them, and measures with
tracemalloc the Python heap that 1,000 copies of each take, decoded by the controller's own
decoder (``k8s.client.decode``) and shaped as the cache would hold them: whole, without
metadata.managedFields (the cache until session 4), and through ``slim_for(kind)``
(controller/slim.py). Prints KB per object and per job of 4 pods + 4 Services.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import sys
import tempfile
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import SIM_SECONDS, Cluster, Ours, machine, table, wait_for
from vs_kubeflow import T9K, t9k_job

from airflow_t9k.controller.slim import drop_managed_fields, slim_for
from airflow_t9k.k8s.client import decode

Obj = dict


def heap_per_copy(text: str, shape: Callable[[Obj], Obj], copies: int) -> float:
    """Bytes of Python heap one decoded, shaped copy of ``text`` holds (mean over ``copies``)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kept = [shape(decode(text)) for _ in range(copies)]
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del kept
    return used / copies


def capture(cluster: Cluster, ns: str, log_dir: Path) -> dict[str, list[Obj]]:
    g, v, p = T9K
    ctrl = Ours(cluster, ns, log_dir)
    pods_path, svc_path = f"/api/v1/namespaces/{ns}/pods", f"/api/v1/namespaces/{ns}/services"

    def phases() -> list[str]:
        return [(x.get("status") or {}).get("phase") for x in cluster.get(pods_path)["items"]]

    try:
        ctrl.start()
        cluster.request("POST", f"/apis/{g}/{v}/namespaces/{ns}/{p}", t9k_job("slim"))
        wait_for("4 pods Running", lambda: phases().count("Running") == 4, 120)
        running = cluster.get(pods_path)["items"]
        services = cluster.get(svc_path)["items"]
        wait_for("4 pods Succeeded", lambda: phases().count("Succeeded") == 4, SIM_SECONDS + 120)
        succeeded = cluster.get(pods_path)["items"]
    finally:
        ctrl.stop()
        cluster.delete_namespace(ns, wait=False)
    return {"Pod (Running)": running, "Pod (Succeeded)": succeeded, "Service": services}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=1000)
    ap.add_argument("--save", type=Path, help="also write the captured objects (JSON) here")
    ap.add_argument("--load", type=Path, help="measure objects saved by --save instead of running a job")
    args = ap.parse_args()
    if args.load:
        captured = json.loads(args.load.read_text())
    else:
        cluster = Cluster()
        ns = f"slim-{uuid.uuid4().hex[:5]}"
        cluster.create_namespace(ns)
        with tempfile.TemporaryDirectory() as logs:
            captured = capture(cluster, ns, Path(logs))
    if args.save:
        args.save.write_text(json.dumps(captured, indent=1))
    print(f"machine: {machine()}; {args.copies} copies per object decoded by k8s.client.decode, tracemalloc")
    rows, per = [], {}
    for what, objs in captured.items():
        kind = what.split()[0]
        for obj in objs:
            obj.setdefault("kind", kind)  # list items come without it; the informer adds it
        text = [json.dumps(o) for o in objs]
        shapes = {"whole": lambda o: o, "no managedFields": drop_managed_fields, "slim_for": slim_for(kind)}
        sizes = {name: sum(heap_per_copy(t, shape, args.copies) for t in text) / len(text) / 1024
                 for name, shape in shapes.items()}  # fmt: skip
        slim_json = sum(len(json.dumps(slim_for(kind)(copy.deepcopy(o)))) for o in objs) / len(objs) / 1024
        per[what] = sizes
        rows.append([what, len(objs), sum(map(len, text)) / len(text) / 1024, slim_json,
                     sizes["whole"], sizes["no managedFields"], sizes["slim_for"],
                     sizes["no managedFields"] / sizes["slim_for"]])  # fmt: skip
    print(table(["object", "n", "JSON (KB)", "slim JSON (KB)", "heap whole (KB)", "heap no managedFields (KB)",
                 "heap slim_for (KB)", "no managedFields / slim"], rows))  # fmt: skip
    for pods in ("Pod (Running)", "Pod (Succeeded)"):
        job = {k: 4 * (per[pods][k] + per["Service"][k]) for k in per["Service"]}
        print(
            f"per job of 4 pods + 4 Services, pods {pods.split()[1][1:-1]}: whole {job['whole']:.1f} KB, "
            f"no managedFields {job['no managedFields']:.1f} KB, slim_for {job['slim_for']:.1f} KB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
