"""The steps of a reconcile pass, one small module per concern. Their order is ``STEPS`` in
reconcile/plan.py; each step is ``PassState -> PassState`` (reconcile/passstate.py)."""
