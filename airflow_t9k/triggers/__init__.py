"""``T9kJobTrigger`` and the watches its instances share inside a triggerer."""
