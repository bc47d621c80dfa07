"""Distributed XGBoost with the tracker the environment names.

RANK 0 (the master) starts Rabit's tracker on MASTER_PORT for WORLD_SIZE workers and trains
too; every replica connects to MASTER_ADDR:MASTER_PORT, trains on its shard, and prints
``result rank=R world=W rmse=E trees=T``. The model is the same on every rank.

XGBoost 1.7's worker resolves the tracker's name once and fails at once when it does not
resolve: a worker that starts before the master's pod has its address in DNS (a loaded
node) must wait for it, as docs/kinds.md says.
"""

import os
import socket
import threading
import time

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    tracker = RabitTracker(host_ip="0.0.0.0", n_workers=world, port=port)
    tracker.start(world)
    threading.Thread(target=tracker.join, daemon=True).start()

deadline = time.monotonic() + 120
while True:
    try:
        socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)
        break
    except socket.gaierror:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)

rng = np.random.default_rng(rank)
x = rng.normal(size=(400, 5))
y = x @ np.array([1.0, -2.0, 0.5, 3.0, 0.0]) + 0.1 * rng.normal(size=400)
with collective.CommunicatorContext(DMLC_TRACKER_URI=addr, DMLC_TRACKER_PORT=port, DMLC_TASK_ID=str(rank)):
    assert collective.get_world_size() == world, collective.get_world_size()
    dtrain = xgb.DMatrix(x, label=y)
    booster = xgb.train(
        {"max_depth": 3, "eta": 0.3, "tree_method": "hist"},
        dtrain,
        num_boost_round=20,
        evals=[(dtrain, "train")],
        verbose_eval=False,
    )
    rmse = float(booster.eval(dtrain).split(":")[1])
    dump = booster.get_dump()
    digest = collective.allreduce(np.array([float(len("".join(dump)))]), collective.Op.MAX)[0]
    print(
        f"result rank={rank} world={collective.get_world_size()} rmse={rmse:.4f} trees={len(dump)} model_size={int(digest)}",
        flush=True,
    )
