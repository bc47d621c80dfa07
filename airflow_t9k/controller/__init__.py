"""The bundled controller: a pure reconcile core, its I/O layer and the process that runs them.

It never imports Airflow, so it runs on its own (``airflow-t9k controller``) on any cluster.
"""
