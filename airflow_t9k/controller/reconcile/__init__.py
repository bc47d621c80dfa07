"""The pure reconcile core: ``plan(job, observed, now) -> Plan``.

No client, no clock, no Airflow: everything the core knows comes in as arguments, and
everything it wants done goes out as data for the I/O layer to carry out.
"""

from airflow_t9k.controller.reconcile.actions import Create, CreateSSHSecret, Delete, Emit, Patch, Plan, ReplaceStatus
from airflow_t9k.controller.reconcile.observe import Observed
from airflow_t9k.controller.reconcile.plan import plan

__all__ = ["Create", "CreateSSHSecret", "Delete", "Emit", "Observed", "Patch", "Plan", "ReplaceStatus", "plan"]
