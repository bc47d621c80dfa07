"""``T9kJobOperator`` for any kind, one operator per kind, and the TI-style operator."""
