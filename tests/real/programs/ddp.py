"""Data-parallel training with torch.distributed (gloo), configured only by the environment.

Each rank trains a small regression model on its shard of generated data; DDP averages the
gradients, so every rank ends with the same weights. Prints one line per epoch and a final
line ``result rank=R world=W loss=L checksum=C``; rank 0 writes {"loss": L} as the container's
termination message (the job's result).
"""

import json
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

EPOCHS = int(os.environ.get("EPOCHS", "20"))

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print(
    f"rank {rank}/{world} on {socket.gethostname()} master={os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
    flush=True,
)

torch.manual_seed(0)
x = torch.randn(512, 8)
y = x @ torch.arange(1.0, 9.0).unsqueeze(1) + 0.1 * torch.randn(512, 1)
shard = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(EPOCHS):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
    loss.backward()
    opt.step()
    total = loss.detach().clone()
    dist.all_reduce(total)
    print(f"epoch {epoch} loss {total.item() / world:.6f}", flush=True)

checksum = sum(p.detach().sum().item() for p in model.parameters())
final = total.item() / world
print(f"result rank={rank} world={world} loss={final:.6f} checksum={checksum:.6f}", flush=True)
if rank == 0:
    with open("/dev/termination-log", "w") as f:
        json.dump({"loss": round(final, 6)}, f)
dist.destroy_process_group()
