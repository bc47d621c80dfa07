"""A training loop that reports its progress with the helper (docs/progress.md, "The push path"):
``airflow_t9k.progress.report`` each step, nothing on stdout but ordinary lines, its result in
the termination message. The image has python3 but not this package: the helper, stdlib only,
comes from a ConfigMap on PYTHONPATH.

    push_progress.py STEPS SECONDS_PER_STEP
"""

import json
import math
import sys
import time

from airflow_t9k.progress import report

steps, pause = int(sys.argv[1]), float(sys.argv[2])
print(f"training for {steps} steps", flush=True)
loss = acc = 0.0
for step in range(1, steps + 1):
    time.sleep(pause)
    loss, acc = round(2.0 * math.exp(-step / 10), 4), round(1 - math.exp(-step / 8), 4)
    print(f"step {step} done", flush=True)
    report(step=step, total_steps=steps, epoch=step // 10, loss=loss, acc=acc)
with open("/dev/termination-log", "w") as f:
    json.dump({"acc": acc}, f)
print("done", flush=True)  # the last values are sent when the interpreter exits
