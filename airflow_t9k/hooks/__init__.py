"""Hooks on the cncf-kubernetes provider's ``kubernetes`` connection.

The operators, sensors and triggers import ``hooks.t9k`` where they first make a hook, not at
the top of their modules: it loads the provider's hook and with it both Kubernetes clients
(``kubernetes`` and ``kubernetes_asyncio``), about a CPU-second on the 2-core test machine
that parsing a DAG file never needs (the DAG processor parses every file again every
``min_file_process_interval``).
A unit test keeps it so (tests/unit/airflow/test_imports.py).
"""
