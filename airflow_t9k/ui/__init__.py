"""Monitoring T9k jobs from the Airflow UI: a "T9k Jobs" page and a "T9k Job" tab on every task
instance, served by a FastAPI app the plugin mounts on the api-server (docs/ui.md)."""
