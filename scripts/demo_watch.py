"""Print each T9k job's phase transitions in a namespace as they happen (used by demo.sh)."""

from __future__ import annotations

import sys
from datetime import datetime

from kubernetes import client, config, watch

from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.resources import RESOURCES


def main(kubeconfig: str, namespace: str, kind: str) -> None:
    api = client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))
    r = RESOURCES[kind]
    seen: dict[str, str | None] = {}
    for event in watch.Watch().stream(api.list_namespaced_custom_object, r.group, r.version, namespace, r.plural):
        job = event["object"]
        name = job["metadata"]["name"]
        state = interpret(job)
        if event["type"] == "DELETED":
            print(f"  {datetime.now():%H:%M:%S}  {kind} {name}: deleted", flush=True)
        elif seen.get(name, "") != state.phase:
            text = state.summary() if state.phase else "submitted, waiting for the controller"
            print(f"  {datetime.now():%H:%M:%S}  {kind} {name}: {text}", flush=True)
        seen[name] = state.phase


if __name__ == "__main__":
    main(*sys.argv[1:4])
