"""What a launcher (deepspeed over pdsh, colossalai run over SSH) started: one process per
worker, each with its rank, world size and master, which then meet in a gloo all-reduce.

Accepts and ignores --local_rank=N (deepspeed passes it). Prints
``result host=H rank=R world=W local_rank=L master=A:P allreduce=S``.
"""

import os
import socket
import sys

import torch
import torch.distributed as dist

local_rank = os.environ.get("LOCAL_RANK", "?")
for arg in sys.argv[1:]:
    if arg.startswith("--local_rank="):
        local_rank = arg.split("=", 1)[1]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
master = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
print(
    f"result host={socket.gethostname()} rank={rank} world={world} local_rank={local_rank} master={master} "
    f"allreduce={total.item():g}",
    flush=True,
)
dist.destroy_process_group()
