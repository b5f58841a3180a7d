#!/usr/bin/env python3
"""examples/torch_ddp.py - a tiny real PyTorch DDP job for ddpsim's harness.

Each process joins the default group with the gloo backend through env://
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from its environment, as
torchrun, SLURM or `ddpsim run --real --exec` give them), wraps a tiny model
in DistributedDataParallel (which broadcasts rank 0's parameters), runs a
few training steps (every step all-reduces the gradients), checks an
all_reduce result and that every rank holds rank 0's parameters, passes a
barrier and exits 0. Any failure is a Python exception: a traceback on
stderr and exit status 1, which ddpsim classifies (docs/real-runs.md).

  DDPSIM_TIMEOUT_S   group timeout in seconds (init_process_group's
                     timeout; ddpsim sets it to the scenario's `timeout`);
                     default 1800, as Lightning's
  TORCH_DDP_STEPS    training steps (default 3)
  DDPSIM_TRAIN_S     seconds to "train" after the steps, with the store up
                     (ddpsim sets it from the scenario's `train`; default 0;
                     TORCH_DDP_TRAIN_S when it is not set)

Run it by hand with ddpsim's launcher:  ddpsim launch --nproc-per-node 2 -- python3 examples/torch_ddp.py
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    timeout = float(os.environ.get("DDPSIM_TIMEOUT_S", "1800"))
    steps = int(os.environ.get("TORCH_DDP_STEPS", "3"))
    train_s = float(os.environ.get("DDPSIM_TRAIN_S",
                                   os.environ.get("TORCH_DDP_TRAIN_S", "0")))
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()

    # all_reduce: the sum of 1..world
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    if t.item() != want:
        raise RuntimeError(f"all_reduce gave {t.item()}, expected {want}")

    torch.manual_seed(1234 + rank)  # different on purpose: DDP must fix it
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()  # gradients all-reduced here
        opt.step()
    # every rank holds the same parameters: compare with rank 0's
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    if not torch.equal(flat, ref):
        raise RuntimeError(f"rank {rank}: parameters differ from rank 0's")
    if train_s > 0:
        time.sleep(train_s)
    dist.barrier()
    print(f"rank {rank}/{world}: ok, all_reduce {t.item():g}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
