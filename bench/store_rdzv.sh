#!/bin/sh
# bench/store_rdzv.sh — an N-client store rendezvous over real TCP:
# `ddpsim store serve` against torch 1.13's TCPStore master, in one run.
#
#   sh bench/store_rdzv.sh        (root: its own network namespace)
#   NS="4096 16384" TORCH_NS=4096 TORCH_MAX_S=60 sh bench/store_rdzv.sh
#
# For each N in NS (default 4096 8192 16384 32768 65536) a fresh
# `ddpsim store serve --world N` and, for N in TORCH_NS (default 4096 8192 16384; empty: none), a
# fresh Python process holding TCPStore(is_master=True,
# wait_for_workers=False), taken in turn, each driven by the same
# generator, $B/bench/store_rdzv (bench/store_rdzv.c): N clients from
# source addresses spread over 127.0.0.0/8 connect, ADD to a counter and
# WAIT on a barrier key the last one sets. Printed per run: all connected,
# all done, the server's CPU over the run and its peak RSS; then a table
# with the ratio ddpsim/torch at each common N and each side's growth
# exponent log(t2/t1)/log(N2/N1) between its smallest and largest N. A
# torch run that does not finish in TORCH_MAX_S (default 300) seconds ends
# torch's sizes. Figures only.
#
# Limits, set here and never on the host: the script re-runs itself under
# `unshare -n` (a network namespace of its own, which dies with it: root
# needed; otherwise it says so and runs in the host's namespace with the
# host's settings) and there sets net.core.somaxconn and
# net.ipv4.tcp_max_syn_backlog to 65535 (the listeners' backlog: ddpsim's
# server listens with somaxconn, and a burst of N connects past the
# backlog loses SYNs to 1-3 s retransmits; the clients' source addresses
# spread over 127.0.0.0/8 leave the port range as it is). A process holds a descriptor per client (the generator its
# clients, the server their peers), so `ulimit -n` is raised, hard limit
# too where the host allows (that takes CAP_SYS_RESOURCE), to the largest
# N + 64. A size past the limit still runs: ddpsim's server with
# `--relays K` (K = N / (limit - 256) + 1 relay processes hold the clients'
# sockets and relay their bytes; docs/store-protocol.md) and the generator
# with its clients split over processes the same way (its --procs,
# automatic). torch's TCPStore master holds every client in its one
# process: its sizes past the limit are skipped, with the reason.
# ulimit -n, -H and -S: dash, bash and busybox sh have them.
# shellcheck disable=SC3045
set -u
B=${B:-build/default}
DDPSIM=${DDPSIM:-$B/ddpsim}
GEN=$B/bench/store_rdzv
NS=${NS:-4096 8192 16384 32768 65536}
TORCH_NS=${TORCH_NS-4096 8192 16384}
TORCH_MAX_S=${TORCH_MAX_S:-300}
DDPSIM_MAX_S=${DDPSIM_MAX_S:-120}
TORCH_PY=${TORCH_PY:-scripts/torch-python}
for f in "$GEN" "$DDPSIM"; do
    [ -x "$f" ] || { echo "store_rdzv.sh: $f is missing: run make -j2 first"; exit 1; }
done

if [ -z "${STORE_RDZV_INSIDE:-}" ]; then
    if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
        STORE_RDZV_INSIDE=netns exec unshare -n sh "$0" "$@"
    fi
    echo "note: no network namespace (unshare -n needs root): the host's own" \
         "somaxconn ($(cat /proc/sys/net/core/somaxconn)) and port range apply"
    STORE_RDZV_INSIDE=host
fi
if [ "$STORE_RDZV_INSIDE" = netns ]; then
    ip link set lo up || exit 1
    sysctl -q -w net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535 || exit 1
fi

# Descriptors: the largest N + 64, hard limit first (as root).
max=0
for n in $NS; do [ "$n" -gt "$max" ] && max=$n; done
need=$((max + 64))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    ulimit -H -n "$need" 2>/dev/null
    ulimit -S -n "$need" 2>/dev/null || ulimit -S -n "$(ulimit -H -n)"
fi
FDS=$(ulimit -n)
[ "$FDS" = unlimited ] && FDS=$need
echo "settings: network namespace: $STORE_RDZV_INSIDE; somaxconn" \
     "$(cat /proc/sys/net/core/somaxconn); tcp_max_syn_backlog" \
     "$(cat /proc/sys/net/ipv4/tcp_max_syn_backlog); ports" \
     "$(tr '\t' '-' </proc/sys/net/ipv4/ip_local_port_range); ulimit -n $FDS" \
     "(hard $(ulimit -H -n)); $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"

DIR=$(mktemp -d)
SRV=
stop_server() {
    [ -n "$SRV" ] || return 0
    kill "$SRV" 2>/dev/null
    wait "$SRV" 2>/dev/null
    SRV=
}
trap 'stop_server; rm -rf "$DIR"' EXIT
trap 'exit 130' INT TERM

# relays_for N: the server's --relays option where N clients do not fit
# one process's descriptors (nothing where they do).
relays_for() {
    [ $(($1 + 64)) -le "$FDS" ] || echo "--relays $(($1 / (FDS - 256) + 1))"
}

# start_server ddpsim|torch PORT N: the server in the background ($SRV),
# ready when its first line says so; 1 when it does not come up.
start_server() {
    : >"$DIR/out"
    if [ "$1" = ddpsim ]; then
        # shellcheck disable=SC2046
        "$DDPSIM" store serve --host 127.0.0.1 --port "$2" --world "$3" --quiet \
            $(relays_for "$3") >"$DIR/out" 2>&1 &
    else
        "$TORCH_PY" -c '
import datetime, signal, sys
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), int(sys.argv[2]), True,
                  datetime.timedelta(seconds=600), wait_for_workers=False)
print("listening on 127.0.0.1:%s (torch %s)" % (sys.argv[1], __import__("torch").__version__), flush=True)
signal.pause()' "$2" "$3" >"$DIR/out" 2>&1 &
    fi
    SRV=$!
    # Poll for the line (torch takes seconds to import on a loaded host).
    i=0
    while ! grep -q '^listening on' "$DIR/out"; do
        if ! kill -0 "$SRV" 2>/dev/null || [ "$i" -ge 1200 ]; then
            echo "$1: the server did not start:"; cat "$DIR/out"
            stop_server
            return 1
        fi
        sleep 0.05
        i=$((i + 1))
    done
}

RES=$DIR/results # lines: side N done_s server_cpu_s peak_mib
: >"$RES"
# Ports: 29501 up in our own namespace; on the host's, below its ephemeral
# range and away from 29500 (the real-run tests' port), by process id.
port=29500
[ "$STORE_RDZV_INSIDE" = host ] && port=$((20000 + $$ % 9000))
torch_on=1
# The namespace's TcpExt ListenOverflows: connections whose handshake the
# listener could not queue (its accept queue was full); their final ACK
# is dropped and the server's SYN-ACK retransmits (1, 3, 7, 15, 31 s)
# complete them, while the client already counts itself connected.
overflows() {
    awk '$1 == "TcpExt:" { if (!h) { for (i = 2; i <= NF; i++) if ($i == "ListenOverflows") c = i; h = 1 }
                           else print (c ? $c : 0) }' /proc/net/netstat
}
run_one() { # side N timeout
    port=$((port + 1))
    start_server "$1" "$port" "$2" || return 1
    ov=$(overflows)
    line=$("$GEN" --port "$port" --clients "$2" --server-pid "$SRV" --timeout "$3" \
        --label "$1")
    rc=$?
    ov=$(($(overflows) - ov))
    backlog=$(ss -Hltn "sport = :$port" 2>/dev/null | awk '{ print $3; exit }')
    stop_server
    rl=
    [ "$1" = ddpsim ] && rl=$(relays_for "$2" | sed 's/--relays \(.*\)/; \1 relay processes/')
    echo "$line; listen backlog ${backlog:-?}, listen overflows $ov$rl"
    [ $rc -eq 0 ] || return 1
    echo "$line" | sed -n "s/^$1 \([0-9]*\): connected [0-9.]* s, done \([0-9.]*\) s.*server CPU \([0-9.]*\) s, server peak RSS \([0-9.]*\) MiB.*/$1 \1 \2 \3 \4/p" >>"$RES"
}
for n in $NS; do
    run_one ddpsim "$n" "$DDPSIM_MAX_S"
    case " $TORCH_NS " in *" $n "*) ;; *) continue ;; esac
    if [ $torch_on = 0 ]; then
        echo "torch $n: skipped (a smaller size did not finish in ${TORCH_MAX_S} s)"
    elif [ $((n + 64)) -gt "$FDS" ]; then
        echo "torch $n: skipped: its TCPStore master holds every client in one" \
             "process, $((n + 64)) descriptors; ulimit -n is $FDS (hard $(ulimit -H -n))"
    elif ! "$TORCH_PY" -c 'import torch' >/dev/null 2>&1; then
        echo "torch: no Python with torch here (sh scripts/deps.sh --torch); no comparison"
        torch_on=0
    elif ! run_one torch "$n" "$TORCH_MAX_S"; then
        torch_on=0
    fi
done

echo
echo "| N | ddpsim done | torch done | ratio | ddpsim server CPU | torch server CPU | CPU ratio | peak RSS ddpsim / torch |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
awk '
{ has[$1, $2] = 1; t[$1, $2] = $3; c[$1, $2] = $4; m[$1, $2] = $5; if (!($2 in seen)) { seen[$2] = 1; ns[++k] = $2 } }
function f(v, u) { return v == "" ? "-" : sprintf("%.3f %s", v, u) }
function r(a, b) { return a == "" || b == "" || b == 0 ? "-" : sprintf("**%.3f**", a / b) }
function mm(v) { return v == "" ? "-" : sprintf("%.0f MiB", v) }
END {
    for (i = 1; i <= k; i++) { n = ns[i]
        printf "| %d | %s | %s | %s | %s | %s | %s | %s / %s |\n", n,
            f(t["ddpsim", n], "s"), f(t["torch", n], "s"), r(t["ddpsim", n], t["torch", n]),
            f(c["ddpsim", n], "s"), f(c["torch", n], "s"), r(c["ddpsim", n], c["torch", n]),
            mm(m["ddpsim", n]), mm(m["torch", n]) }
    split("ddpsim torch", sides, " ")
    for (s = 1; s <= 2; s++) { side = sides[s]; lo = hi = ""
        for (i = 1; i <= k; i++) if ((side, ns[i]) in has) { if (lo == "") lo = ns[i]; hi = ns[i] }
        if (lo == "" || lo == hi) continue
        cpu = "-"
        if (c[side, lo] > 0 && c[side, hi] > 0)
            cpu = sprintf("N^%.2f", log(c[side, hi] / c[side, lo]) / log(hi / lo))
        printf "growth %s %d -> %d: done N^%.2f, server CPU %s\n", side, lo, hi,
            log(t[side, hi] / t[side, lo]) / log(hi / lo), cpu }
}' "$RES"
