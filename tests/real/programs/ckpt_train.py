"""Training that checkpoints and resumes: DDP over gloo (or one process), configured by the
environment the operator and the controller give it.

- Resumes from the newest ``step-NNNNNN.pt`` in ``$T9K_CHECKPOINT_DIR`` (model and optimizer).
- Rank 0 saves a checkpoint at the end of every epoch, and on SIGTERM (a deleted pod: the
  grace period is its time) at the end of the step it is in, then exits 143.
- Batches are chosen by the global step, so a resumed run sees exactly the batches an
  uninterrupted one would: its final weights must be the same, bit for bit.
- ``FAIL_AT_STEP``/``FAIL_ON_ATTEMPT``: rank 0 exits 1 at that step when ``$T9K_ATTEMPT`` is
  that attempt (an Airflow try that fails, for the retry test).

Prints ``start ...``, a line per step, and ``result {json}``; rank 0 writes the same JSON
(``loss``, ``checksum``, ``checkpoint``, ``resumed_from``, ``steps_run``) as its termination
message, the job's result.
"""

import json
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

EPOCHS = int(os.environ.get("EPOCHS", "6"))
STEPS = int(os.environ.get("STEPS_PER_EPOCH", "8"))
PAUSE = float(os.environ.get("STEP_SECONDS", "0.3"))  # slow enough to interrupt mid-run
FAIL_AT = int(os.environ.get("FAIL_AT_STEP", "-1"))
FAIL_ON = os.environ.get("FAIL_ON_ATTEMPT", "1")
CKPT = os.environ["T9K_CHECKPOINT_DIR"]
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank = dist.get_rank() if world > 1 else 0
print(f"start rank={rank} world={world} attempt={os.environ.get('T9K_ATTEMPT')} restarts={os.environ.get('T9K_RESTART_COUNT')} "
      f"dir={CKPT}", flush=True)  # fmt: skip

torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.arange(1.0, 9.0).unsqueeze(1) + 0.1 * torch.randn(256, 1)
model = torch.nn.Linear(8, 1)
ddp = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)  # momentum: the optimizer has state to keep


def saved() -> list[str]:
    return sorted(f for f in os.listdir(CKPT) if f.startswith("step-") and f.endswith(".pt"))


def save(step: int) -> str:
    name = f"step-{step:06d}.pt"
    tmp = os.path.join(CKPT, f".{name}.tmp")
    torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, tmp)
    os.replace(tmp, os.path.join(CKPT, name))  # atomic: a reader never sees half a file
    for old in saved()[:-3]:
        os.remove(os.path.join(CKPT, old))
    print(f"saved {name}", flush=True)
    return name


start = 0
if saved():
    state = torch.load(os.path.join(CKPT, saved()[-1]))
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["step"]
print(f"resumed from step {start}", flush=True)

stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(time.monotonic()))
total, last = EPOCHS * STEPS, None
shard = 256 // world
for step in range(start, total):
    idx = (torch.arange(16) + step * 16) % shard + rank * shard  # this step's batch, whatever ran before
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(ddp(x[idx]), y[idx])
    loss.backward()
    opt.step()
    done = step + 1
    print(f"step {done} loss {loss.item():.6f}", flush=True)
    if rank == 0 and done == FAIL_AT and os.environ.get("T9K_ATTEMPT") == FAIL_ON:
        print(f"failing at step {done} on attempt {FAIL_ON}", flush=True)
        sys.exit(1)
    if rank == 0 and (done % STEPS == 0 or stop):
        last = save(done)
    if stop:
        print(f"SIGTERM: saved step {done}, exiting", flush=True)
        sys.exit(143)
    time.sleep(PAUSE)

with torch.no_grad():
    final = torch.nn.functional.mse_loss(model(x), y).item()
checksum = sum(p.detach().double().sum().item() for p in model.parameters())
result = {"loss": final, "checksum": checksum, "checkpoint": last, "resumed_from": start, "steps_run": total - start}
print(f"result {json.dumps(result)}", flush=True)
if rank == 0:
    with open("/dev/termination-log", "w") as f:
        json.dump(result, f)
if world > 1:
    dist.destroy_process_group()
