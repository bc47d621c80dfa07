"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_t9k import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-t9k",
        "name": "T9k Jobs",
        "description": "Run T9k distributed training jobs (GenericJob, PyTorchTrainingJob, ...) from Airflow.",
        "versions": [__version__],
    }
