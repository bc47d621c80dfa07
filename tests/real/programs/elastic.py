"""A long-ish collective loop for torchrun's elastic mode: prints the world it runs in at every
step, so a rescale that re-forms the group shows in the log. Ends with
``result rank=R world=W restart=N``."""

import os
import time

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("STEPS", "60"))
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
for step in range(STEPS):
    total = torch.ones(1)
    dist.all_reduce(total)
    print(f"step {step} rank {rank} world {world} restart {restart} allreduce {total.item():g}", flush=True)
    time.sleep(0.5)
print(f"result rank={rank} world={world} restart={restart}", flush=True)
dist.destroy_process_group()
