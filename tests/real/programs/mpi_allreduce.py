"""An MPI program: every rank contributes rank+1; the allreduce's sum proves all ranks met."""

import json
import socket

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
hosts = comm.gather(socket.gethostname(), root=0)
print(f"rank {rank}/{size} on {socket.gethostname()} allreduce={total}", flush=True)
if rank == 0:
    print("hosts " + json.dumps(sorted(hosts)), flush=True)
