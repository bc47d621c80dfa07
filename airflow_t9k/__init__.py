"""airflow-t9k: T9k distributed training jobs in Apache Airflow, plus a bundled controller.

The package is layered (see docs/design.md): ``api`` and ``kinds`` are pure vocabulary,
``controller`` reconciles jobs without Airflow, and the Airflow layer (hooks, operators,
triggers, sensors) sits on top.
"""

__version__ = "0.1.0"
