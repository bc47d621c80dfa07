"""``T9kJobSensor``: wait on a job that already exists."""
