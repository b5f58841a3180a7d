"""scripts/ddpsim-forkserver.py HOST PORT RUNNER_PID MODULES — the warm start of
a real run's Python ranks (docs/real-runs.md, "Warm start").

One per `ddpsim run` (a zygote): imports MODULES (comma-separated, e.g.
"torch"; one that is missing is skipped with a line on stderr) once,
connects to the runner at HOST:PORT (127.0.0.1), says "ready" and then
forks one rank per request, of every node of every run, until EOF. A
request is NUL-terminated fields ended by an empty one:
    spawn, NETNS, STDOUT, STDERR, ARGC, ARGV[0..ARGC), then NAME=VALUE... ;
NETNS is a network namespace's file (/var/run/netns/NAME) the rank joins
(setns), or "-" (no field may be empty). The reply is "ok PID\\n" or
"error WHY\\n". The rank is a grandchild: the child forks it and exits at
once, so it is reparented to the runner (a child subreaper), which waits
for it, signals its group and kills it as any other rank. Before it runs
the script the rank waits for that, sets its parent-death signal
(SIGKILL), joins NETNS and starts a session of its own."""
import ctypes
import os
import socket
import sys
import time

PR_SET_PDEATHSIG = 1
CLONE_NEWNET = 0x40000000


def load(modules):
    for name in filter(None, modules.split(",")):
        try:
            __import__(name)
        except ImportError as e:
            print("ddpsim-forkserver: %s not imported (%s): ranks import it themselves"
                  % (name, e), file=sys.stderr, flush=True)


def cuda_started():
    torch = sys.modules.get("torch")
    try:
        return bool(torch and torch.cuda.is_initialized())
    except Exception:
        return False


def read_request(conn, buf):
    """The fields of one request (None at EOF) and what is left of buf."""
    while b"\0\0" not in buf:
        more = conn.recv(65536)
        if not more:
            return None, buf
        buf += more
    head, rest = buf.split(b"\0\0", 1)
    return [f.decode("utf-8", "surrogateescape") for f in head.split(b"\0")], rest


def redirect(path, fd):
    f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(f, fd)
    os.close(f)


def join_netns(libc, netns):
    """Into the node's network namespace (as `ip netns exec` would put a
    cold rank); exits 127 where it cannot."""
    fd = os.open(netns, os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        os.write(2, b"ddpsim-forkserver: setns %s: errno %d\n"
                 % (netns.encode(), ctypes.get_errno()))
        os._exit(127)
    os.close(fd)


def become_rank(child, runner, netns, argv, env, out, err):
    """In the grandchild: the rank's own process, then its script as
    __main__; never returns."""
    while os.getppid() == child:  # the child exits at once: reparented
        time.sleep(0.0005)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, 9) != 0 or os.getppid() != runner:
        os._exit(127)  # the runner is gone (or is not our parent)
    if netns != "-":
        join_netns(libc, netns)
    os.setsid()
    redirect(out, 1)
    redirect(err, 2)
    os.environ.clear()
    os.environ.update(env)
    code = run_script(argv)
    os._exit(code)


def run_script(argv):
    import atexit
    import runpy
    import traceback
    sys.argv = argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(argv[1]))
    code = 0
    try:
        runpy.run_path(argv[1], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 120
    return code & 255


def spawn(conn, runner, fields):
    netns, out, err, argc = fields[1], fields[2], fields[3], int(fields[4])
    argv = fields[5:5 + argc]
    env = dict(f.split("=", 1) for f in fields[5 + argc:] if "=" in f)
    if cuda_started():
        return "error CUDA is initialised in the fork server: a fork would share it"
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        try:
            me = os.getpid()
            grandchild = os.fork()
            if grandchild == 0:
                try:
                    os.close(w)
                    conn.close()
                    become_rank(me, runner, netns, argv, env, out, err)
                finally:
                    os._exit(127)  # could not become the rank
            os.write(w, b"%d" % grandchild)
        finally:
            os._exit(0)
    os.close(w)
    pid = os.read(r, 32)
    os.close(r)
    os.waitpid(child, 0)  # gone: its child is the runner's now
    return "ok %s" % pid.decode() if pid else "error fork failed"


def main():
    host, port, runner, modules = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    load(modules)
    conn = socket.create_connection((host, port))
    conn.sendall(b"ready\n")
    buf = b""
    while True:
        fields, buf = read_request(conn, buf)
        if fields is None:
            return 0
        try:
            reply = spawn(conn, runner, fields)
        except (OSError, ValueError, IndexError) as e:
            reply = "error %s" % e
        conn.sendall(reply.encode() + b"\n")


if __name__ == "__main__":
    sys.exit(main())
