"""tests/real/store_hostile.py — hostile clients against a running
`ddpsim store serve` (issue 15's cases), one phase at a time, while a
normal client keeps doing GETs; prints the GET latency of each phase and
the server's RSS, and exits 1 when the RSS went past the budget plus the
stated margin. Run by tests/real/store-hostile-test.sh.

    python3 store_hostile.py PORT SERVER_PID MAX_MEMORY_BYTES

Phases (each about PHASE_S seconds, the hostile clients then close):
  amplification  16 clients that never read, each MULTI_GET of an 8 MiB
                 value named 31 times (4 GiB of replies asked for)
  slowloris      200 validated clients, each sending 1 MiB of a SET that
                 claims an 8 MiB value, then nothing
  waits          100 clients, each WAIT on 10,000 keys nobody sets
Wire format: docs/store-protocol.md (the current generation).
"""
import os
import select
import socket
import struct
import sys
import threading
import time

MAGIC = 0x3C85F7CE
OP_VALIDATE, OP_SET, OP_GET, OP_WAIT, OP_MULTI_GET = 0, 1, 3, 6, 10
PHASE_S = 3.0
MIB = 1 << 20
# What the server may hold past max_memory: code, allocator slack and the
# per-connection floors (ddpsim's docs/store-protocol.md, "Memory budget").
MARGIN_FIXED = 48 * MIB
MARGIN_PER_CONN = 64 << 10


def s_bytes(b):
    return struct.pack("<Q", len(b)) + b


def validate():
    return struct.pack("<BI", OP_VALIDATE, MAGIC)


def connect(port, blocking=True):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setblocking(blocking)
    return s


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the normal client")
        buf += chunk
    return bytes(buf)


def rss(pid):
    """(VmRSS, VmHWM) of pid in bytes."""
    cur = peak = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
    return cur, peak


class Normal(threading.Thread):
    """A normal client: GET /small in a loop, latencies per phase."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.s = connect(port)
        self.s.sendall(validate())
        self.lat = []
        self.lock = threading.Lock()
        self.stop = False
        self.error = None

    def get(self, key):
        self.s.sendall(bytes([OP_GET]) + s_bytes(key))
        n = struct.unpack("<Q", recv_exact(self.s, 8))[0]
        return recv_exact(self.s, n)

    def run(self):
        try:
            while not self.stop:
                t0 = time.perf_counter()
                v = self.get(b"/small")
                dt = time.perf_counter() - t0
                if v != b"value":
                    raise ValueError("GET /small returned %r" % v[:32])
                with self.lock:
                    self.lat.append(dt)
                time.sleep(0.002)
        except Exception as e:  # reported by the main thread
            self.error = e

    def take(self):
        with self.lock:
            lat, self.lat = self.lat, []
        return lat


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def push(socks, data):
    """Non-blocking sends of data (one bytes for all, or one per socket) to
    every socket, for a second at most, as far as each takes it (a server
    that stops reading leaves the rest with us)."""
    if isinstance(data, bytes):
        data = [data] * len(socks)
    left = {s: memoryview(d) for s, d in zip(socks, data)}
    deadline = time.time() + 1.0
    while left and time.time() < deadline:
        _, w, _ = select.select([], list(left), [], 0.05)
        for s in w:
            try:
                n = s.send(left[s])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                del left[s]
                continue
            left[s] = left[s][n:]
            if not left[s]:
                del left[s]


def phase_amplification(port):
    req = bytes([OP_MULTI_GET]) + struct.pack("<Q", 31) + s_bytes(b"/big") * 31
    socks = [connect(port, blocking=False) for _ in range(16)]
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    push(socks, validate() + req)
    return socks


def phase_slowloris(port):
    socks = [connect(port, blocking=False) for _ in range(200)]
    head = validate() + bytes([OP_SET]) + s_bytes(b"/stall") + \
        struct.pack("<Q", 8 * MIB)
    push(socks, head + b"x" * MIB)
    return socks


def phase_waits(port):
    socks = [connect(port, blocking=False) for _ in range(100)]
    reqs = [validate() + bytes([OP_WAIT]) + struct.pack("<Q", 10000) +
            b"".join(s_bytes(b"/w%d/%d" % (i, k)) for k in range(10000))
            for i in range(len(socks))]
    push(socks, reqs)
    return socks


def phase_trickle(port):
    """50 clients that send a request one byte at a time, each tick."""
    socks = [connect(port, blocking=False) for _ in range(50)]
    req = validate() + bytes([OP_SET]) + s_bytes(b"/trickle") + s_bytes(b"t" * 64)
    sent = {s: 0 for s in socks}

    def tick():
        for s in socks:
            if sent[s] < len(req):
                try:
                    sent[s] += s.send(req[sent[s]:sent[s] + 1])
                except OSError:
                    sent[s] = len(req)
    return socks, tick


CHURNED = [0]


def phase_churn(port):
    """Connections opened and dropped at once, each tick: 20 that send half
    a request and close, half of them with a reset (SO_LINGER 0)."""
    half = (validate() + bytes([OP_SET]) + s_bytes(b"/churn") + s_bytes(b"c" * 64))[:20]
    count = CHURNED

    def tick():
        for i in range(20):
            try:
                s = connect(port)
                s.sendall(half)
                if i % 2:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 struct.pack("ii", 1, 0))
                s.close()
                count[0] += 1
            except OSError:
                pass
    return [], tick


def main():
    port, pid, budget = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    setup = connect(port)
    setup.sendall(validate() + bytes([OP_SET]) + s_bytes(b"/small") +
                  s_bytes(b"value") + bytes([OP_SET]) + s_bytes(b"/big") +
                  s_bytes(b"b" * (8 * MIB)))
    normal = Normal(port)
    normal.start()
    time.sleep(0.5)
    base = normal.take()
    print("baseline: %d GETs, p50 %.2f ms, p99 %.2f ms; server RSS %.1f MiB"
          % (len(base), pct(base, 0.5) * 1e3, pct(base, 0.99) * 1e3,
             rss(pid)[0] / MIB))
    worst_p99, bad = 0.0, 0
    most_conns = 0
    for name, fn in (("amplification", phase_amplification),
                     ("slowloris", phase_slowloris),
                     ("waits", phase_waits),
                     ("trickle", phase_trickle),
                     ("churn", phase_churn)):
        got = fn(port)
        socks, tick = got if isinstance(got, tuple) else (got, None)
        most_conns = max(most_conns, len(socks) + 22)
        t_end = time.time() + PHASE_S
        peak_now = 0
        while time.time() < t_end:
            if tick:
                tick()
            peak_now = max(peak_now, rss(pid)[0])
            time.sleep(0.05)
        lat = normal.take()
        for s in socks:
            s.close()
        p99 = pct(lat, 0.99)
        worst_p99 = max(worst_p99, p99)
        print("%-13s %3d hostile clients: %5d GETs, p50 %.2f ms, p99 %.2f ms,"
              " max %.2f ms; server RSS up to %.1f MiB"
              % (name, len(socks) or CHURNED[0], len(lat), pct(lat, 0.5) * 1e3, p99 * 1e3,
                 max(lat) * 1e3 if lat else float("nan"), peak_now / MIB))
        if normal.error:
            print("FAIL: the normal client: %s" % normal.error)
            bad = 1
            break
        time.sleep(0.5)
    normal.stop = True
    normal.join(5)
    peak = rss(pid)[1]
    limit = budget + MARGIN_FIXED + MARGIN_PER_CONN * most_conns
    print("server peak RSS (VmHWM) %.1f MiB; budget %.0f MiB + margin "
          "(48 MiB + 64 KiB x %d connections) = %.1f MiB"
          % (peak / MIB, budget / MIB, most_conns, limit / MIB))
    print("normal client GET p99, worst phase: %.2f ms (target < 50 ms)"
          % (worst_p99 * 1e3))
    if peak > limit:
        print("FAIL: the server's RSS went past the budget plus the margin")
        bad = 1
    setup.close()
    return bad


if __name__ == "__main__":
    sys.exit(main())
