#!/usr/bin/env python3
"""tests/differential/launch_oracle.py COUNT SEED — the torchrun side of the
launch-contract differential (tests/differential/launch.c, docs/fidelity.md
"Launch contracts").

Generates COUNT torchrun configurations (command line and launcher
environment) and, for each, drives torch 1.13's own code in this one process:
torch.distributed.run's argument parser and run() (--standalone, config_from_args,
OMP_NUM_THREADS), launcher.api.launch_agent (rendezvous parameters, the
static handler's checks, the WorkerSpec), the agent's _rendezvous,
_assign_worker_ranks and _start_workers. Only what would touch the network
or start processes is replaced: the static handler's TCPStore and the c10d
rendezvous round (a HashStore holding what the other nodes' agents would
have written: their role infos, the round's master address and port),
c10d's TCPStore (the endpoint is still parsed by torch), and
start_processes (which records the envs it is given).

Output, one block a configuration, tab-separated:
  C <backend> <group_rank> <group_world> <restart> <arg>...  torchrun's arguments
  E K=V...        the launcher's environment (beyond a bare one)
  X <text>        torch rejected the configuration, or
  W K=V...        one line a local worker: the contract variables it sees
"""
import contextlib
import io
import logging
import os
import random
import shutil
import sys
import tempfile
import uuid
from datetime import timedelta

import torch.distributed.run as trun
from torch.distributed import HashStore, PrefixStore
from torch.distributed.elastic.agent.server import api as agent_api
from torch.distributed.elastic.agent.server import local_elastic_agent as lea
from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as c10d
from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dyn
from torch.distributed.elastic.rendezvous import static_tcp_rendezvous as stat
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

CONTRACT = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
            "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
            "MASTER_ADDR", "MASTER_PORT", "NCCL_ASYNC_ERROR_HANDLING",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS")
LAUNCHER_VARS = ("PET_NPROC_PER_NODE", "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR",
                 "PET_MASTER_PORT", "PET_RDZV_ID", "OMP_NUM_THREADS",
                 "NCCL_ASYNC_ERROR_HANDLING", "MASTER_ADDR", "MASTER_PORT")


class Sim:
    """What the rendezvous of this configuration gave (the other nodes)."""
    store = None
    group_rank = 0
    group_world = 1
    restart = 0
    envs = None


class Done(Exception):
    pass


def prepare_store(agent, spec):
    """What the other agents of the round would have written before ours
    reads (every node runs the same command: the same nproc_per_node)."""
    store, me, world = spec.rdzv_handler.next_rendezvous()
    if not 0 <= me < world:  # no other node holds rank world-1: the round never completes
        raise ValueError(f"node rank {me} is not in 0..{world - 1}: the rendezvous never completes")
    for r in range(world):
        if r != me:
            info = agent_api._RoleInstanceInfo(spec.role, r, spec.local_world_size)
            store.set(f"torchelastic/role_info{r}", info.serialize())
            store.set(f"torchelastic/role_info{r}.FIN", b"FIN")
    if me != 0:
        agent._set_master_addr_port(store, spec.master_addr, spec.master_port)


def fake_run(self, role="default"):
    spec = self._worker_group.spec
    self._remaining_restarts = spec.max_restarts - Sim.restart
    prepare_store(self, spec)
    self._initialize_workers(self._worker_group)
    raise Done()


def fake_start_processes(name, entrypoint, args, envs, log_dir, **kw):
    Sim.envs = envs

    class PC:
        def pids(self):
            return {k: 100000 + k for k in envs}

    return PC()


def static_next(self):
    return PrefixStore(f"torch.rendezvous.{self.run_id}", Sim.store), self.rank, self.world_size


def dyn_next(self):
    return PrefixStore(f"torch.rendezvous.{self._settings.run_id}.0", self._store), \
        Sim.group_rank, Sim.group_world


def c10d_store(params):
    parse_rendezvous_endpoint(params.endpoint, default_port=29400)
    return Sim.store


def patch(logdir):
    stat.StaticTCPRendezvous.next_rendezvous = static_next
    dyn.DynamicRendezvousHandler.next_rendezvous = dyn_next
    dyn.DynamicRendezvousHandler.shutdown = lambda self: True
    c10d._create_tcp_store = c10d_store
    lea.start_processes = fake_start_processes
    lea.LocalElasticAgent.run = fake_run
    lea.LocalElasticAgent._make_log_dir = lambda self, d, rid: logdir


def num(r, good, big="70000"):
    """A number as a user or a script might write it, mostly well-formed."""
    k = r.random()
    if k < 0.85:
        return str(good)
    return r.choice([f" {good}", f"+{good}", f"0{good}", f"{good}.0", "", "x", "-1", "0",
                     f"{good}_0", f"0x{good}", "65", big])


def gen_addr(r):
    return r.choice(["127.0.0.1", "localhost", "10.0.0.5", "node-1", "node1.cluster.local",
                     "::1", "[::1]", "fd00::1", "[fd00::1]", " 10.0.0.7 ", "a b", "host!",
                     "node_2", "", "h:1", "0.0.0.0"])


def gen_static(r, argv, env, nnodes, nproc):
    if r.random() < 0.8:
        argv.append(f"--node_rank={num(r, r.randrange(nnodes + (r.random() < 0.1)))}")
    if r.random() < 0.6:
        argv.append(f"--master_addr={gen_addr(r)}")
    if r.random() < 0.6:
        argv += ["--master_port", num(r, r.choice([29500, 42001, 1, 65535, 0, 65536]),
                                      "99999999999999999999")]
    if r.random() < 0.1:
        env["PET_MASTER_ADDR"] = gen_addr(r)
    if r.random() < 0.1:
        env["PET_MASTER_PORT"] = num(r, 42002)
    if r.random() < 0.1:
        env["PET_NODE_RANK"] = num(r, 0)


def gen_elastic(r, argv, nnodes):
    if r.random() < 0.15:
        argv.append("--standalone")
        return 1, 1
    lo = r.randint(1, nnodes)
    argv += ["--rdzv_backend=c10d", f"--nnodes={lo}:{nnodes}" if lo < nnodes else f"--nnodes={nnodes}",
             f"--rdzv_endpoint={r.choice(['localhost:42003', 'node0:42004', '127.0.0.1', '[::1]:42005'])}"]
    argv.append(f"--max_restarts={r.randint(0, 3)}")
    return r.randint(lo, nnodes), nnodes


def generate(r):
    """(argv, env, group_rank, group_world, restart) of one configuration."""
    nnodes, nproc = r.randint(1, 4), r.choice([1, 1, 2, 3, 4, 8])
    argv, env = [], {}
    for k in ("OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING", "MASTER_ADDR", "MASTER_PORT"):
        if r.random() < 0.15:
            env[k] = r.choice(["1", "0", "4", "10.9.9.9", "31000"])
    if r.random() < 0.9:
        argv.append(f"--nproc_per_node={num(r, nproc, '100')}")
    elif r.random() < 0.5:
        env["PET_NPROC_PER_NODE"] = num(r, nproc, '100')
    if r.random() < 0.3:
        argv += ["--rdzv_id", r.choice(["job1", "42", "none", "a-b_c"])]
    elif r.random() < 0.1:
        env["PET_RDZV_ID"] = "envjob"
    if r.random() < 0.3:
        world, nnodes = gen_elastic(r, argv, nnodes)
        return argv, env, r.randrange(world), world, r.randint(0, 1)
    if r.random() < 0.9:
        argv.append(f"--nnodes={num(r, nnodes)}")
    elif r.random() < 0.5:
        env["PET_NNODES"] = num(r, nnodes)
    gen_static(r, argv, env, nnodes, nproc)
    return argv, env, 0, 1, 0


def run_one(argv, env, base_env):
    os.environ.clear()
    os.environ.update(base_env)
    os.environ.update(env)
    Sim.store = HashStore()
    Sim.store.set_timeout(timedelta(seconds=1))
    Sim.envs = None
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = trun.get_args_parser().parse_args(argv + ["prog"])
            trun.run(args)
    except Done:
        pass
    except SystemExit:
        return None, err.getvalue().strip().splitlines()[-1]
    except Exception as e:  # torch's own checks: assertions, ValueError, ...
        return None, f"{type(e).__name__}: {e}"
    if Sim.envs is None:
        return None, "no worker started"
    return Sim.envs, None


def worker_line(wenv):
    seen = {}
    for k in CONTRACT:
        v = wenv.get(k, os.environ.get(k))
        if v is not None:
            seen[k] = v
    for k in sorted(set(wenv) | set(os.environ)):
        if k.startswith("TORCHELASTIC_"):
            seen[k] = wenv.get(k, os.environ.get(k))
    return "W\t" + "\t".join(f"{k}={v}" for k, v in seen.items())


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    seed = int(sys.argv[2], 0) if len(sys.argv) > 2 else 41
    r = random.Random(seed)
    logging.disable(logging.CRITICAL)
    base_env = {k: v for k, v in os.environ.items()
                if k not in LAUNCHER_VARS and not k.startswith(("PET_", "TORCHELASTIC_"))}
    logdir = tempfile.mkdtemp(prefix="ddpsim-launch-oracle-")
    patch(logdir)
    out = sys.stdout
    try:
        for _ in range(count):
            argv, env, grank, gworld, restart = generate(r)
            Sim.group_rank, Sim.group_world, Sim.restart = grank, gworld, restart
            backend = "c10d" if any(a.startswith(("--rdzv_backend", "--standalone")) for a in argv) \
                else "static"
            out.write("\t".join(["C", backend, str(grank), str(gworld), str(restart)] + argv) + "\n")
            out.write("\t".join(["E"] + [f"{k}={v}" for k, v in env.items()]) + "\n")
            envs, why = run_one(argv, env, base_env)
            if why is not None:
                out.write(f"X\t{why}\n")
            else:
                for l in sorted(envs):
                    out.write(worker_line(envs[l]) + "\n")
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    main()
