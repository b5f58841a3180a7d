#!/usr/bin/env python3
"""tests/differential/launch_real.py COUNT SEED — checks the in-process
oracle (launch_oracle.py) against real torchrun: COUNT generated one-node
configurations (static and c10d; ports 42060..42079 only, never
--standalone: it takes 29400) run by /usr/bin/torchrun with a worker that
prints its environment, each worker's contract variables compared with what
the oracle computes for the same configuration (c10d's MASTER_PORT, a free
port of the agent's choosing, and TORCHELASTIC_ERROR_FILE, a log path, are
not compared). torch 1.13 under Python 3.11 needs --redirects 1 --tee 1
(harness/real.c). One line; exit 1 on a disagreement.
"""
import os
import random
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_oracle as o  # noqa: E402

TORCHRUN = os.environ.get("DDPSIM_TORCHRUN", "/usr/bin/torchrun")


def free_port(i):
    """A port of 42060..42079 that binds now (without SO_REUSEADDR, so not
    one a run before left in TIME_WAIT), from the i-th on."""
    for k in range(20):
        p = 42060 + (i + k) % 20
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", p))
                return p
            except OSError:
                continue
    return 42060 + i % 20


def gen_real(r, i):
    argv, env = [f"--nproc_per_node={r.randint(1, 4)}"], {}
    port = free_port(i)
    if r.random() < 0.5:
        argv += ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
                 r.choice(["--nnodes=1", "--nnodes=1:1"])]
    else:
        argv += ["--nnodes=1", f"--master_addr={r.choice(['127.0.0.1', 'localhost'])}",
                 f"--master_port={port}"]
        if r.random() < 0.5:
            argv.append("--node_rank=0")
    if r.random() < 0.4:
        argv += ["--rdzv_id", r.choice(["job1", "a-b_c"])]
    if r.random() < 0.4:
        argv.append(f"--max_restarts={r.randint(0, 3)}")
    for k in ("OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING"):
        if r.random() < 0.3:
            env[k] = r.choice(["0", "3"])
    return argv, env


def run_bounded(cmd, env):
    """Real torchrun, bounded by 60 s, once more when it did not finish
    (a c10d round on a loaded machine has been seen to stall once)."""
    for attempt in (1, 2):
        try:
            return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            if attempt == 2:
                return subprocess.CompletedProcess(cmd, 124, "", "timed out twice (60 s)")
    return None


def real_workers(argv, env, base_env, logdir):
    cmd = [TORCHRUN, "--redirects", "1", "--tee", "1", "--monitor_interval", "0.1",
           "--log_dir", logdir, *argv, "--no_python", "sh", "-c", "env"]
    run = run_bounded(cmd, {**base_env, **env})
    workers = {}
    for line in run.stdout.splitlines():
        if line.startswith("[default") and "]:" in line and "=" in line:
            tag, kv = line.split("]:", 1)
            k, v = kv.split("=", 1)
            workers.setdefault(int(tag[len("[default"):]), {})[k] = v
    tail = run.stderr.strip().splitlines()[-1:] if run.returncode else []
    return run.returncode, workers, tail


def contract(wenv, c10d):
    keep = {k: v for k, v in wenv.items()
            if k in o.CONTRACT or k.startswith("TORCHELASTIC_")}
    keep.pop("TORCHELASTIC_ERROR_FILE", None)
    if c10d:
        keep.pop("MASTER_PORT", None)
    return keep


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    seed = int(sys.argv[2], 0) if len(sys.argv) > 2 else 41
    r = random.Random(seed)
    base_env = {k: v for k, v in os.environ.items()
                if k not in o.LAUNCHER_VARS and not k.startswith(("PET_", "TORCHELASTIC_"))}
    import logging
    import tempfile
    logging.disable(logging.CRITICAL)
    logdir = tempfile.mkdtemp(prefix="ddpsim-launch-real-")
    o.patch(logdir)  # the oracle's agents and real torchrun's: one folder, removed at the end
    workers = bad = 0
    first = ""
    for i in range(count):
        argv, env = gen_real(r, i)
        c10d = any(a.startswith("--rdzv_backend") for a in argv)
        o.Sim.group_rank, o.Sim.group_world, o.Sim.restart = 0, 1, 0
        want, why = o.run_one(argv, env, base_env)
        os.environ.clear()
        os.environ.update(base_env)
        rc, got, tail = real_workers(argv, env, base_env, logdir)
        for l in range(max(len(got), len(want or {}))):
            workers += 1
            w = contract({**os.environ, **env, **(want or {}).get(l, {})}, c10d) if want else None
            if rc != 0 or why or w != contract(got.get(l, {}), c10d):
                bad += 1
                if not first:
                    first = f"{argv} {env}: worker {l}: oracle {why or w}, real (exit {rc}) " \
                            f"{contract(got.get(l, {}), c10d)}"
                break
    shutil.rmtree(logdir, ignore_errors=True)
    print(f"torchrun (real) {count} configurations, {workers} workers compared with the "
          f"oracle, {bad} disagreements{'; first: ' + first if bad else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
