"""bench/torch_init.py — 8-process torch gloo init through ddpsim's store
versus through torch's own, in the same run (bench/torch_init.sh runs it).

Per rep and per store: a standalone store server starts (`ddpsim store
serve`, or a torch process holding TCPStore(is_master=True)), then N torch
processes that have already imported torch are released together; each
builds TCPStore(is_master=False) against that server, runs
init_process_group("gloo", store=...) and one all_reduce. The figure is
release -> the last rank's all_reduce done, read from the ranks' own
clocks. The stores alternate each rep. Prints every figure, the medians and
the median ratio ddpsim/torch; asserts nothing.
"""
import datetime
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

HOST = "127.0.0.1"


def rank_main(rank, world, port):
    import torch
    import torch.distributed as dist
    print("ready", flush=True)
    sys.stdin.readline()  # release
    store = dist.TCPStore(HOST, port, world, False,
                          timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.tensor([1])
    dist.all_reduce(t)
    assert int(t.item()) == world
    print("done %.6f" % time.time(), flush=True)
    dist.destroy_process_group()


def torch_master(port):
    import torch.distributed as dist
    s = dist.TCPStore(HOST, port, None, True,
                      timeout=datetime.timedelta(seconds=60),
                      wait_for_workers=False)
    print("listening on %s:%d" % (HOST, port), flush=True)
    sys.stdin.readline()
    del s


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def one_rep(kind, ddpsim, n):
    procs = []
    try:
        if kind == "ddpsim":
            srv = subprocess.Popen([ddpsim, "store", "serve", "--host", HOST,
                                    "--port", "0", "--quiet"],
                                   stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True,
                                   start_new_session=True)
        else:
            srv = subprocess.Popen([sys.executable, __file__, "master",
                                    str(free_port())], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True,
                                   start_new_session=True)
        procs.append(srv)
        port = int(srv.stdout.readline().rsplit(":", 1)[1])
        for r in range(n):
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "rank", str(r), str(n), str(port)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                start_new_session=True))
        ranks = procs[1:]
        for p in ranks:
            assert p.stdout.readline().strip() == "ready"
        t0 = time.time()
        for p in ranks:
            p.stdin.write("go\n")
            p.stdin.flush()
        ends = []
        for p in ranks:
            line = p.stdout.readline().split()
            assert line and line[0] == "done", "a rank failed"
            ends.append(float(line[1]))
            p.wait(timeout=60)
        return max(ends) - t0
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        return rank_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    if len(sys.argv) > 1 and sys.argv[1] == "master":
        return torch_master(int(sys.argv[2]))
    ddpsim = os.path.abspath(os.environ.get("DDPSIM", "./ddpsim"))
    n = int(os.environ.get("N", "8"))
    reps = int(os.environ.get("REPS", "7"))
    import torch
    print("torch_init: %d gloo ranks, %d rep(s) per store, torch %s, %d CPU(s)"
          % (n, reps, torch.__version__, os.cpu_count()))
    res = {"ddpsim": [], "torch": []}
    for i in range(reps):
        for kind in (("ddpsim", "torch") if i % 2 == 0 else ("torch", "ddpsim")):
            dt = one_rep(kind, ddpsim, n)
            res[kind].append(dt)
            print("  rep %d %-6s store: %.3f s" % (i + 1, kind, dt), flush=True)
    md, mt = statistics.median(res["ddpsim"]), statistics.median(res["torch"])
    print("N=%d ddpsim store: median %.3f s  (%s)" % (
        n, md, " ".join("%.3f" % x for x in res["ddpsim"])))
    print("N=%d torch store:  median %.3f s  (%s)" % (
        n, mt, " ".join("%.3f" % x for x in res["torch"])))
    print("N=%d median ratio ddpsim/torch: %.2f" % (n, md / mt))


if __name__ == "__main__":
    main()
