"""The provider's metadata (``get_provider_info``, the ``apache_airflow_provider`` entry point) as the
Airflow that runs the tests validates it: 3.3 in ``make check``, 3.4 in ``make test-airflow-next``."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import json

import jsonschema

from airflow_t9k.get_provider_info import get_provider_info


def test_the_provider_info_is_valid_for_this_airflow():
    schema = json.loads((importlib.resources.files("airflow") / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_every_module_and_class_it_names_imports():
    info = get_provider_info()
    modules = [
        m for section in ("operators", "sensors", "hooks", "triggers") for entry in info[section] for m in entry["python-modules"]
    ]
    for name in modules:
        importlib.import_module(name)
    for path in info["extra-links"]:
        module, _, attribute = path.rpartition(".")
        assert hasattr(importlib.import_module(module), attribute), path


def test_the_entry_points_name_it_and_the_ui_plugin():
    points = {(e.group, e.value) for e in importlib.metadata.distribution("airflow-t9k").entry_points}
    assert ("apache_airflow_provider", "airflow_t9k.get_provider_info:get_provider_info") in points
    assert ("airflow.plugins", "airflow_t9k.ui.plugin:T9kUiPlugin") in points
