#!/usr/bin/env python3
"""tests/check_jobs/job.py - a small torch 1.13 job written as users write
them (init, a key exchange of its own through the job's store, an
all_reduce, a barrier), and the realistic bugs `ddpsim check --exec` must
find in it, one per CHECK_JOB_BUG (tests/check_jobs/run.sh):

  (unset)       correct: the group timeout from DDPSIM_TIMEOUT_S, every
                store wait bounded by it
  notimeout     init_process_group without a timeout (torch's 30 min)
  shorttimeout  a 2 s timeout, "to fail fast"
  localrank     the rank taken from LOCAL_RANK
"""
import datetime
import os

import torch
import torch.distributed as dist


def main():
    bug = os.environ.get("CHECK_JOB_BUG", "")
    timeout = float(os.environ.get("DDPSIM_TIMEOUT_S", "1800"))
    if bug == "shorttimeout":
        timeout = 2.0
    kw = {} if bug == "notimeout" else {"timeout": datetime.timedelta(seconds=timeout)}
    rank = int(os.environ["LOCAL_RANK" if bug == "localrank" else "RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world, **kw)
    store = dist.distributed_c10d._get_default_store()
    store.set(f"job/addr/{rank}", f"host{rank}")
    store.wait([f"job/addr/{r}" for r in range(world)])
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    if t.item() != world * (world + 1) / 2:
        raise RuntimeError(f"all_reduce gave {t.item()}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
