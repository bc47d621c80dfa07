"""The retraining example's training program (make demo-real): data-parallel logistic regression
with torch.distributed over gloo, configured only by the environment the controller injects
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE).

The data is generated (a fixed seed, so every run sees the same problem): rank r trains on its
shard, DDP averages the gradients, and rank 0 measures accuracy on held-out rows and writes
{"metric": accuracy, "loss": ...} to /dev/termination-log, the job's result.
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="generated")
parser.add_argument("--epochs", type=int, default=60)
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank}/{world}: training on {args.data} (master {os.environ['MASTER_ADDR']})", flush=True)

generator = torch.Generator().manual_seed(7)
features = torch.randn(4000, 16, generator=generator)
truth = torch.randn(16, 1, generator=generator)
labels = ((features @ truth).squeeze(1) + 0.5 * torch.randn(4000, generator=generator) > 0).float()
train_x, train_y, test_x, test_y = features[:3200], labels[:3200], features[3200:], labels[3200:]
shard = slice(rank * len(train_x) // world, (rank + 1) * len(train_x) // world)

torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
for epoch in range(args.epochs):
    optimizer.zero_grad()
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(train_x[shard]).squeeze(1), train_y[shard])
    loss.backward()
    optimizer.step()
    if epoch % 10 == 0 or epoch == args.epochs - 1:
        print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)

with torch.no_grad():
    accuracy = ((model(test_x).squeeze(1) > 0).float() == test_y).float().mean().item()
print(f"rank {rank}: held-out accuracy {accuracy:.4f}", flush=True)
if rank == 0:
    with open("/dev/termination-log", "w") as f:
        json.dump({"metric": round(accuracy, 4), "loss": round(loss.item(), 4)}, f)
dist.destroy_process_group()
