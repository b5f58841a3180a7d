"""tests/torch/torch_interop.py — real PyTorch (torch.distributed) against
ddpsim's store, run by tests/torch/run.sh (make torch-test).

Cases (each starts what it uses and stops it, also when it fails):
  store_ops      torch TCPStore clients against `ddpsim store serve`: set,
                 get, add, wait with and without a timeout, compare_set,
                 delete_key, num_keys, two clients seeing each other's keys
  ddpsim_cli     every `ddpsim store` subcommand against a torch master,
                 in the generation its release speaks (--protocol legacy
                 for torch 1.9 - 2.0, current from 2.5); the other
                 generation must fail with a message naming the mismatch
  gloo_N         N = 2, 4, 8 torch processes: init_process_group("gloo",
                 store=TCPStore(..., is_master=False)) against ddpsim's
                 store, all_reduce checked
  gloo_4_relays  gloo_4 against `ddpsim store serve --relays 2`: the ranks'
                 connections held by two relay processes
  mixed          `ddpsim launch -- ddpsim train` (2 ranks, tcp backend,
                 rank 0 serves the store) and 2 torch processes share the
                 store; torch reads the keys ddpsim's ranks wrote, ddpsim's
                 client reads the keys torch wrote
  c10d_rdzv      two torchrun agents (--nnodes 2, --rdzv_backend=c10d) meet
                 in `ddpsim store serve`: the port is ddpsim's, so each
                 agent's own bind fails and it joins as a client; the
                 rendezvous key is in ddpsim's store afterwards and the two
                 workers all_reduce over gloo (torchrun 1.13 under Python
                 3.11 needs --redirects 1 --tee 1)

Prints "ok NAME" or "FAIL NAME: why" per case, then "N passed, N failed";
exits 1 when any failed. Roles (--role ...) are the child processes.
"""
import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time

HOST = "127.0.0.1"
CHILD_TIMEOUT_S = 60

_procs = []


def spawn(args, **kw):
    """A child in its own process group, killed by cleanup()."""
    p = subprocess.Popen(args, start_new_session=True, **kw)
    _procs.append(p)
    return p


def cleanup():
    for p in _procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (p.stdin, p.stdout, p.stderr):
            if f:
                f.close()
    _procs.clear()


def on_signal(sig, _frame):
    cleanup()
    sys.exit(128 + sig)


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def td(s):
    return datetime.timedelta(seconds=s)


class Fail(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Fail(what)


def ddpsim_server(ddpsim, protocol="auto", relays=0):
    """`ddpsim store serve` on a free port: (process, port)."""
    p = spawn([ddpsim, "store", "serve", "--host", HOST, "--port", "0",
               "--protocol", protocol, "--quiet", "--relays", str(relays)],
              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    expect(line.startswith("listening on "),
           "ddpsim store serve printed %r (stderr: %s)"
           % (line, p.stderr.read() if p.poll() is not None else ""))
    return p, int(line.rsplit(":", 1)[1])


def wait_all(procs, what, timeout=CHILD_TIMEOUT_S):
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail("%s: still running after %d s" % (what, timeout))
        expect(p.returncode == 0, "%s: exit %d: %s%s"
               % (what, p.returncode, out or "", err or ""))
        outs.append(out)
    return outs


def generation(version):
    """The TCPStore protocol generation a torch release speaks, from the
    version matrix in docs/store-protocol.md: "legacy" for 1.9 - 2.0,
    "current" from 2.5 (VALIDATE, then PING), None for the rest (before
    1.9, 2.1 without VALIDATE, 2.2 - 2.4 whose PING is not pinned)."""
    major, minor = (int(x) for x in version.split("+")[0].split(".")[:2])
    if (1, 9) <= (major, minor) <= (2, 0):
        return "legacy"
    if (major, minor) >= (2, 5):
        return "current"
    return None


# ------------------------------------------------------------------ cases

def case_store_ops(a):
    import torch.distributed as dist
    srv, port = ddpsim_server(a.ddpsim)
    s1 = dist.TCPStore(HOST, port, None, False, timeout=td(10))
    s2 = dist.TCPStore(HOST, port, None, False, timeout=td(10))
    s1.set("k", "v1")
    expect(s1.get("k") == b"v1", "get after set")
    expect(s2.get("k") == b"v1", "the second client sees the first's key")
    s2.set("k2", b"\x00bin\xff")
    expect(s1.get("k2") == b"\x00bin\xff", "binary value across clients")
    expect(s1.add("ctr", 5) == 5 and s2.add("ctr", 2) == 7, "add")
    expect(s1.get("ctr") == b"7", "a counter reads as decimal text")
    expect(s1.compare_set("k", "v1", "v2") == b"v2", "compare_set swaps")
    expect(s1.compare_set("k", "nope", "v3") == b"v2",
           "compare_set keeps on a mismatch")
    expect(s1.compare_set("new", "", "born") == b"born",
           "compare_set creates with an empty expected value")
    s1.wait(["k", "ctr"])  # present: returns at once
    s1.wait(["k"], td(2))
    t0 = time.time()
    try:
        s1.wait(["never"], td(1))
        raise Fail("wait on a missing key returned")
    except RuntimeError as e:
        expect("imeout" in str(e), "wait timeout error: %s" % e)
    expect(time.time() - t0 < 5, "wait with a 1 s timeout took %.1f s"
           % (time.time() - t0))
    # The client is usable after its wait timed out (the server answers the
    # next WAIT on that connection, as torch's own server does).
    s1.set("after", "ok")
    expect(s1.get("after") == b"ok", "get after a timed-out wait")
    n = s1.num_keys()
    expect(s1.delete_key("k2") is True, "delete_key of a present key")
    expect(s1.delete_key("k2") is False, "delete_key of a missing key")
    expect(s1.num_keys() == n - 1, "num_keys after a delete")
    # A key set late is seen by a waiting get.
    w = spawn([sys.executable, __file__, "--role", "set-later", str(port)])
    expect(s2.get("late") == b"arrived", "get blocked until set")
    wait_all([w], "set-later")
    del s1, s2
    srv.terminate()
    srv.wait(timeout=10)
    expect(srv.returncode == 0, "ddpsim store serve exit %s" % srv.returncode)


def case_ddpsim_cli(a):
    port = free_port()
    m = spawn([sys.executable, __file__, "--role", "master", str(port)],
              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    expect(m.stdout.readline().strip() == "ready", "torch master did not start")

    def cli(*args, rc=0):
        r = subprocess.run([a.ddpsim, "store", "--host", HOST, "--port",
                            str(port), "--timeout", "5"] + list(args),
                           capture_output=True, text=True, timeout=30)
        expect(r.returncode == rc, "ddpsim store %s: exit %d, want %d: %s%s"
               % (" ".join(args), r.returncode, rc, r.stdout, r.stderr))
        return r

    expect(cli("get", "fromtorch").stdout == "hello\n", "get a torch key")
    cli("set", "fromddpsim", "hi")
    expect(cli("get", "fromddpsim").stdout == "hi\n", "get own key back")
    expect(cli("add", "ctr", "3").stdout == "3\n", "add")
    expect(cli("add", "ctr", "-1").stdout == "2\n", "add again")
    cli("wait", "fromtorch", "fromddpsim")
    r = cli("--timeout", "1", "wait", "never", rc=1)
    expect("Timed out" in r.stderr and "never" in r.stderr,
           "wait timeout names the key: %s" % r.stderr)
    expect(cli("check", "fromtorch").stdout == "ready\n", "check present")
    expect(cli("check", "nope", rc=1).stdout == "not ready\n",
           "check missing")
    expect(cli("numkeys").stdout == "3\n", "numkeys (fromtorch, fromddpsim, "
           "ctr)")
    expect(cli("delete", "fromddpsim").stdout == "1\n", "delete present")
    expect(cli("delete", "fromddpsim").stdout == "0\n", "delete missing")
    if a.generation == "legacy":
        r = cli("keys", rc=1)  # the legacy table has no way to list keys
        expect("LIST_KEYS" in r.stderr and "legacy" in r.stderr,
               "keys against a legacy master says why: %s" % r.stderr)
        other = "current"
    else:
        # LIST_KEYS (17) came after the PING generation; a master without
        # it closes the connection on it, and the error must say so.
        r = subprocess.run([a.ddpsim, "store", "--host", HOST, "--port",
                            str(port), "--timeout", "5", "keys"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            expect(sorted(r.stdout.split()) == ["ctr", "fromtorch"],
                   "keys lists the master's keys: %r" % r.stdout)
            print("  keys: this master answers LIST_KEYS", flush=True)
        else:
            expect("LIST_KEYS" in r.stderr,
                   "keys against a master without LIST_KEYS says why: %s"
                   % r.stderr)
            print("  keys: this master has no LIST_KEYS", flush=True)
        other = "legacy"
    r = cli("--protocol", other, "--timeout", "1", "get", "fromtorch",
            rc=1)
    expect("legacy" in r.stderr and "running and reachable" not in r.stderr,
           "protocol %s names the mismatch: %s" % (other, r.stderr))
    expect(cli("--protocol", a.generation, "get",
               "fromtorch").stdout == "hello\n",
           "protocol %s" % a.generation)
    # The torch side sees what ddpsim set.
    m.stdin.write("check\n")
    m.stdin.flush()
    expect(m.stdout.readline().strip() == "ctr=2",
           "the torch master reads ddpsim's counter")
    m.stdin.close()
    m.stdin = None  # communicate() must not flush it
    wait_all([m], "torch master")


def case_gloo(a, n, relays=0):
    srv, port = ddpsim_server(a.ddpsim, relays=relays)
    ranks = [spawn([sys.executable, __file__, "--role", "gloo", str(r), str(n),
                    str(port)], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True) for r in range(n)]
    outs = wait_all(ranks, "gloo rank")
    want = n * (n + 1) // 2
    for r, out in enumerate(outs):
        expect(out.strip() == "allreduce %d" % want,
               "rank %d printed %r, want allreduce %d" % (r, out, want))
    srv.terminate()
    srv.wait(timeout=10)


def case_mixed(a):
    port = free_port()
    env = dict(os.environ, DDP_LOG="error")
    job = spawn([a.ddpsim, "launch", "--nproc-per-node", "2", "--master-port",
                 str(port), "--", a.ddpsim, "train", "--accelerator", "ddp_cpu",
                 "--devices", "2", "--backend", "tcp", "--timeout", "60",
                 "--train", "10"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
    torch_ranks = [spawn([sys.executable, __file__, "--role", "mixed", str(i),
                          str(port)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = wait_all(torch_ranks, "torch process")
    for i, out in enumerate(outs):
        expect("joined 0,1" in out, "torch %d read ddpsim's rank keys: %r"
               % (i, out))
    # ddpsim's side reads what torch wrote (the store is still up: train).
    for i in range(2):
        r = subprocess.run([a.ddpsim, "store", "--host", HOST, "--port",
                            str(port), "--timeout", "5", "get",
                            "torch/%d" % i], capture_output=True, text=True,
                           timeout=30)
        expect(r.returncode == 0 and r.stdout == "from torch %d\n" % i,
               "ddpsim read torch/%d: %r %r" % (i, r.stdout, r.stderr))
    out = wait_all([job], "ddpsim launch -- ddpsim train")[0]
    expect(out.count(": ok, connected") == 2,
           "both ddpsim ranks connected: %r" % out)


def case_c10d_rdzv(a):
    srv, port = ddpsim_server(a.ddpsim)
    run_id = "ddpsim-torch-test-%d" % os.getpid()
    # A bound, not a measurement: two agents and two workers import torch
    # (8-15 s each on a slow machine), then meet.
    agents = [spawn([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                     "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                     "--rdzv_endpoint", "%s:%d" % (HOST, port), "--rdzv_id", run_id,
                     "--max_restarts", "0", "--redirects", "1", "--tee", "1",
                     __file__, "--role", "c10d"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    outs = wait_all(agents, "torchrun agent", timeout=4 * CHILD_TIMEOUT_S)
    got = sorted(line.split("]:", 1)[-1].strip() for out in outs
                 for line in out.splitlines() if "allreduce" in line)
    expect(got == ["rank 0 of 2 allreduce 3", "rank 1 of 2 allreduce 3"],
           "the workers printed %r" % got)
    # The rendezvous state is a key of ddpsim's store: the agents used it.
    r = subprocess.run([a.ddpsim, "store", "--host", HOST, "--port", str(port),
                        "--timeout", "5", "check", "torch.rendezvous." + run_id],
                       capture_output=True, text=True, timeout=30)
    expect(r.returncode == 0 and r.stdout.strip() == "ready",
           "ddpsim's store holds torch.rendezvous.%s: %r %r"
           % (run_id, r.stdout, r.stderr))
    srv.terminate()
    srv.wait(timeout=10)


# ------------------------------------------------------------------ roles

def role(args):
    import torch
    import torch.distributed as dist
    kind = args[0]
    if kind == "set-later":
        s = dist.TCPStore(HOST, int(args[1]), None, False, timeout=td(10))
        time.sleep(0.3)
        s.set("late", "arrived")
    elif kind == "master":
        s = dist.TCPStore(HOST, int(args[1]), None, True, timeout=td(30),
                          wait_for_workers=False)
        s.set("fromtorch", "hello")
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "check":
                print("ctr=%s" % s.get("ctr").decode(), flush=True)
    elif kind == "gloo":
        rank, world, port = int(args[1]), int(args[2]), int(args[3])
        store = dist.TCPStore(HOST, port, world, False, timeout=td(30))
        dist.init_process_group("gloo", store=store, rank=rank,
                                world_size=world, timeout=td(30))
        t = torch.tensor([rank + 1])
        dist.all_reduce(t)
        dist.barrier()
        print("allreduce %d" % int(t.item()), flush=True)
        dist.destroy_process_group()
    elif kind == "c10d":  # a torchrun worker: the agent set the environment
        dist.init_process_group("gloo", timeout=td(60))
        t = torch.tensor([dist.get_rank() + 1])
        dist.all_reduce(t)
        print("rank %d of %d allreduce %d" % (dist.get_rank(), dist.get_world_size(),
                                              int(t.item())), flush=True)
        dist.destroy_process_group()
    elif kind == "mixed":
        i, port = int(args[1]), int(args[2])
        deadline = time.time() + 30
        while True:  # ddpsim's rank 0 may not listen yet
            try:
                s = dist.TCPStore(HOST, port, None, False, timeout=td(30),
                                  wait_for_workers=False)
                break
            except RuntimeError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        s.set("torch/%d" % i, "from torch %d" % i)
        s.wait(["ddpsim/joined/0", "ddpsim/joined/1"], td(30))
        print("joined 0,1", s.get("ddpsim/joined/0"),
              s.get("ddpsim/joined/1"), flush=True)
    else:
        raise SystemExit("unknown role %s" % kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ddpsim", default="./ddpsim")
    ap.add_argument("--role", nargs=argparse.REMAINDER)
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    if a.role:
        return role(a.role)
    a.ddpsim = os.path.abspath(a.ddpsim)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    import torch
    a.generation = generation(torch.__version__)
    print("torch-test: torch %s (%s), %s TCPStore protocol"
          % (torch.__version__, sys.executable, a.generation))
    if a.generation is None:
        print("torch-test: skipped: torch %s speaks a TCPStore table ddpsim "
              "does not support (docs/store-protocol.md, version matrix)"
              % torch.__version__)
        return 0
    cases = [("store_ops", case_store_ops), ("ddpsim_cli", case_ddpsim_cli)]
    cases += [("gloo_%d" % n, lambda x, n=n: case_gloo(x, n)) for n in (2, 4, 8)]
    cases += [("gloo_4_relays", lambda x: case_gloo(x, 4, relays=2))]
    cases += [("mixed", case_mixed), ("c10d_rdzv", case_c10d_rdzv)]
    passed = failed = 0
    for name, fn in cases:
        if a.cases and name not in a.cases:
            continue
        t0 = time.time()
        try:
            fn(a)
            passed += 1
            print("ok %s (%.1f s)" % (name, time.time() - t0), flush=True)
        except Exception as e:  # a case's failure must not stop the rest
            failed += 1
            print("FAIL %s: %s" % (name, e), flush=True)
        finally:
            cleanup()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
