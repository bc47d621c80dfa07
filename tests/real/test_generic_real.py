"""GenericJob on the real node: the TF_CONFIG example (examples/manifests/genericjob-tf-config.yaml)
as written, its addresses filled in by variable substitution, run by real TensorFlow workers
that find each other through those names."""

from __future__ import annotations

from tests.real.support import on_real_node, py
from tests.support.manifests import manifest


def test_tf_config_example_workers_reach_each_other_by_substituted_names(jobs, controller, real):
    job = manifest("genericjob-tf-config")
    spec = job["spec"]["replicaSpecs"][0]
    container = spec["template"]["spec"]["containers"][0]
    # The example's own TF_CONFIG (4 workers, $(service.worker[i].host):$(service.port[http])),
    # its program replaced by ours and its image by the real node's.
    container.pop("image")
    container["command"] = py("tf_mwms.py")
    container["resources"] = {"limits": {"cpu": "400m", "memory": "1500Mi"}}
    spec["template"] = on_real_node(spec["template"])
    job["spec"]["successRules"] = [{"worker": [0, 1, 2, 3]}]
    jobs.create(job)
    name = job["metadata"]["name"]
    pods = [f"{name}-worker-{i}" for i in range(4)]
    done = jobs.wait_phase("GenericJob", name, "Succeeded", "Failed", timeout=420)
    assert done["status"]["phase"] == "Succeeded", real.describe(*pods)
    for i, pod in enumerate(pods):
        log = real.log(pod)
        # The substituted cluster: every worker's Service name and the port from spec.service.
        assert (
            f"'worker': ['{name}-worker-0:2222', '{name}-worker-1:2222', '{name}-worker-2:2222', '{name}-worker-3:2222']" in log
        ), log
        line = next(ln for ln in log.splitlines() if ln.startswith("result "))
        assert f"task=worker:{i} workers=4 allreduce=10 " in line, log
