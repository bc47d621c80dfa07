"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_t9k import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-t9k",
        "name": "T9k Jobs",
        "description": (
            "Run T9k distributed training jobs (GenericJob, PyTorchTrainingJob, ...) and MindCluster AscendJobs from Airflow."
        ),
        "versions": [__version__],
        "integrations": [{"integration-name": "T9k Jobs", "tags": ["software"]}],
        "operators": [
            {
                "integration-name": "T9k Jobs",
                "python-modules": ["airflow_t9k.operators.job", "airflow_t9k.operators.kinds", "airflow_t9k.operators.promote"],
            }
        ],
        "sensors": [{"integration-name": "T9k Jobs", "python-modules": ["airflow_t9k.sensors.job"]}],
        "hooks": [{"integration-name": "T9k Jobs", "python-modules": ["airflow_t9k.hooks.t9k"]}],
        "triggers": [{"integration-name": "T9k Jobs", "python-modules": ["airflow_t9k.triggers.job"]}],
        "extra-links": ["airflow_t9k.links.T9kJobLink", "airflow_t9k.links.TensorBoardLink", "airflow_t9k.links.MLflowLink"],
        "config": {
            "t9k": {
                "description": "airflow-t9k settings",
                "options": {
                    "dashboard_url_template": {
                        "description": "URL of a job in your dashboard; {namespace}, {name}, {kind}, {plural}, {uid} "
                        "are filled in. Empty: the job's path on the Kubernetes API server.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "https://t9k.example.com/jobs/{namespace}/{kind}/{name}",
                        "default": "",
                    },
                    "ui_kubernetes_conn_id": {
                        "description": (
                            "The kubernetes connection the api-server's T9k UI reads and changes jobs with (docs/ui.md)."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "kubernetes_t9k",
                        "default": "kubernetes_default",
                    },
                    "deferral_hold_seconds": {
                        "description": "A deferred task's trigger holds its event until this many seconds after the task "
                        "deferred: Airflow's scheduler can fail a try resumed before it read the deferring process's exit "
                        "(apache/airflow#72716; 3.4 no longer once the resumed try is queued, still once it runs). Only "
                        "jobs that end within the window wait. 0 turns it off.",
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "15",
                        "default": "10",
                    },
                    "ui_namespace": {
                        "description": "Namespace the T9k UI lists jobs of. Empty: every namespace.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "training",
                        "default": "",
                    },
                    "openlineage_inject_parent_job_info": {
                        "description": (
                            "Give every replica of a job the task's OpenLineage run (OPENLINEAGE_PARENT_ID, "
                            "OPENLINEAGE_ROOT_PARENT_ID and their parts) where the OpenLineage provider is installed and "
                            "enabled; an operator's openlineage_inject_parent_job_info= overrides it (docs/airflow.md)."
                        ),
                        "version_added": "0.1.0",
                        "type": "boolean",
                        "example": "False",
                        "default": "True",
                    },
                },
            }
        },
    }
