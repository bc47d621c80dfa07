"""Reports its progress, then blocks the way a collective that never returns does (issue 47: hang
detection). After a restart (``T9K_RESTART_COUNT`` at least 1, the replica's counted restarts)
it reports again, waits a moment and succeeds, unless told to block ``always``.

    hang.py STEPS [always]
"""

import json
import os
import sys
import time

steps = int(sys.argv[1])
always = sys.argv[2:] == ["always"]
run = int(os.environ.get("T9K_RESTART_COUNT") or 0)
print(f"run {run}", flush=True)
for step in range(1, steps + 1):
    time.sleep(0.3)
    print("T9K_PROGRESS " + json.dumps({"step": run * steps + step, "total_steps": 10 * steps}), flush=True)
if run == 0 or always:
    print("all-reduce 7: waiting for peers", flush=True)
    while True:
        time.sleep(3600)
# Go on reporting for a while: a followed log reopens with back-off after the restart, and the
# stall clears only once a report is read; a silence as long as the deadline would be a new stall.
for beat in range(1, 16):
    time.sleep(1)
    print("T9K_PROGRESS " + json.dumps({"step": run * steps + steps + beat, "total_steps": 10 * steps}), flush=True)
print("done", flush=True)
