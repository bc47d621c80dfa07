"""A training loop that reports its progress the documented way (docs/progress.md): a
T9K_PROGRESS line on stdout per step, among ordinary log lines, and its result in the
termination message.

    progress.py STEPS SECONDS_PER_STEP
"""

import json
import math
import sys
import time

steps, pause = int(sys.argv[1]), float(sys.argv[2])
print(f"training for {steps} steps", flush=True)
loss = acc = 0.0
for step in range(1, steps + 1):
    time.sleep(pause)
    loss, acc = round(2.0 * math.exp(-step / 10), 4), round(1 - math.exp(-step / 8), 4)
    print(f"step {step} done", flush=True)  # ordinary output: ignored
    print(
        "T9K_PROGRESS "
        + json.dumps({"step": step, "total_steps": steps, "epoch": step // 10, "loss": loss, "metrics": {"acc": acc}}),
        flush=True,
    )
    if step == steps // 2:
        print("T9K_PROGRESS step=oops", flush=True)  # garbage: ignored
with open("/dev/termination-log", "w") as f:
    json.dump({"acc": acc}, f)
