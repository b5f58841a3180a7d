#!/bin/sh
# bench/store.sh — our store next to redis on loopback, in the same run.
#
# Starts redis-server on a free loopback port, runs $B/bench/store --redis
# PORT (ours: SET/GET with 1, 50 and 500 clients, 1,024-rank rendezvous, the
# idle cost at 2k/5k/10k idle connections; the event-loop GET of ours and of
# redis, taken in turn), then
#   redis-benchmark -p PORT -t set,get -c C -n 200000 -q     (C = 50, 500)
# with the CPU share of redis-benchmark and of redis-server while it ran,
# and prints ours/redis for GET and SET at 50 and 500 clients, and the
# ceiling redis-benchmark's own CPU puts on any server's GET ratio at 500
# clients (one client thread, and --threads 2). Figures only.
# Extra arguments go to $B/bench/store (e.g. --idle 0 to skip the idle part).
# REDIS_PORT=P: redis tries P, P+1, ... instead of pseudo-random ports.
# "GET (event loop, one generator for both)" is the like-for-like figure:
# one thread, N connections, one plain GET in flight each, the same loop
# driving our server and redis (RESP), medians of 3 taken in turn. The
# ratios against redis-benchmark measure the generators too: at -c 500
# redis-benchmark needs a whole CPU while redis-server does not (printed).
# Read the ratios with care. GET is like for like: one request in flight
# per client and one round trip per GET on both sides (ours is CHECK + GET
# in one write; PyTorch's own client does WAIT, then GET: two round trips).
# Our 50 clients are 50 SCHED_BATCH threads (see bench/store.c); the
# "normal sched" ratio is the same GET run with ordinary threads. A TCPStore
# SET has no reply at all (ours are pipelined), while every redis request is
# one round trip, so the SET ratio is not like for like.
set -u
B=${B:-build/default}
BIN=$B/bench/store
[ -x "$BIN" ] || make -s "$BIN" || exit 1

run_ours() {
    OURS=$("$BIN" "$@") || { echo "$OURS"; exit 1; }
    echo "$OURS"
}
if ! command -v redis-server >/dev/null 2>&1 ||
   ! command -v redis-benchmark >/dev/null 2>&1; then
    run_ours "$@"
    echo "redis: redis-server/redis-benchmark not installed; no comparison"
    exit 0
fi

# A free port: try a few pseudo-random ones until redis starts.
DIR=$(mktemp -d)
PID=
trap 'rm -rf "$DIR"; [ -n "$PID" ] && kill "$PID" 2>/dev/null' EXIT
for try in 1 2 3 4 5 6 7 8; do
    PORT=$(( 20000 + ($$ * 7 + try * 7919) % 40000 ))
    [ -n "${REDIS_PORT:-}" ] && PORT=$((REDIS_PORT + try - 1)) # a range of your own
    redis-server --port "$PORT" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$DIR" >"$DIR/log" 2>&1 &
    PID=$!
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
    kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=
done
if [ -z "$PID" ]; then
    echo "redis: could not start redis-server"; cat "$DIR/log"; exit 1
fi
# Ours first, its event-loop GET taken in turn with redis's (--redis).
run_ours --redis "$PORT" --redis-pid "$PID" "$@"

# CPU seconds: this shell's reaped children (redis-benchmark), redis-server.
tck=$(getconf CLK_TCK)
# stat_cpu PID F: fields F and F+1 of /proc/PID/stat after "(comm) ", in s
# (12: utime + stime; 14: cutime + cstime, the reaped children's).
stat_cpu() { awk -v t="$tck" -v f="$2" '{ sub(/.*\) /, ""); print ($f + $(f + 1)) / t }' "/proc/$1/stat"; }
now() { awk '{ print $1 }' /proc/uptime; }
RED=
for c in 50 500; do
    k0=$(stat_cpu $$ 14) s0=$(stat_cpu "$PID" 12) t0=$(now)
    r=$(redis-benchmark -p "$PORT" -t set,get -c "$c" -n 200000 -q 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | sed "s/^\([A-Z]*\):/\1 c=$c:/")
    k1=$(stat_cpu $$ 14) s1=$(stat_cpu "$PID" 12) t1=$(now)
    RED="$RED$r
"
    CPU="${CPU:-}$(awk -v c="$c" -v kb="$k1" -v ka="$k0" -v sb="$s1" -v sa="$s0" \
        -v tb="$t1" -v ta="$t0" 'BEGIN { w = tb - ta; if (w <= 0) w = 1
        printf "  -c %d: redis-benchmark %.0f %% of a CPU, redis-server %.0f %%\n",
               c, 100 * (kb - ka) / w, 100 * (sb - sa) / w }')
"
done
# The ceiling the generator itself sets: GET alone at -c 500, with one
# redis-benchmark thread and with --threads 2, and the CPU each side used
# (window: the whole redis-benchmark run). Its client threads can use at
# most one CPU each (and no more than there are), and the client and the server
# share the machine, so a server costing S us of CPU per GET can be
# driven at most at min(client CPUs / G, CPUs / (G + S)) GETs per second,
# G the client's CPU per GET; printed against the rate redis got in the
# same window, for S = 0 and for our server's S (its event-loop GET).
CEIL=
NCPU=$(nproc 2>/dev/null || echo 1)
for th in 1 2; do
    k0=$(stat_cpu $$ 14) s0=$(stat_cpu "$PID" 12) t0=$(now)
    T=; [ "$th" = 2 ] && T="--threads 2"
    # shellcheck disable=SC2086
    redis-benchmark -p "$PORT" -t get -c 500 -n 200000 -q $T >/dev/null 2>&1
    k1=$(stat_cpu $$ 14) s1=$(stat_cpu "$PID" 12) t1=$(now)
    CEIL="$CEIL$th $k0 $k1 $s0 $s1 $t0 $t1
"
done
kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=
echo "redis-benchmark -c 50 / -c 500 -n 200000 (port $PORT):"
echo "$RED" | sed '/^$/d; s/^/  redis /'
echo "CPU while redis-benchmark ran (SET and GET):"
printf '%s' "$CPU"

fig() { # fig TEXT PATTERN -> the number after PATTERN
    echo "$1" | sed -n "s/^$2[: ][: ]*\([0-9][0-9.]*\).*/\1/p" | head -n 1
}
for c in 50 500; do
    for op in GET SET "GET (normal sched)" "GET (event loop)"; do
        case $op in
        GET | SET) o=$(fig "$OURS" "$op c=$c"); r=$(fig "$RED" "$op c=$c") ;;
        *) o=$(fig "$OURS" "GET c=$c ${op#GET }"); r=$(fig "$RED" "GET c=$c") ;;
        esac
        if [ -n "$o" ] && [ -n "$r" ]; then
            awk -v o="$o" -v r="$r" -v op="$op" -v c="$c" 'BEGIN {
                sub(/^GET/, "GET c=" c, op); sub(/^SET/, "SET c=" c, op)
                sub(/\(event loop\)/, "(event loop; redis driven by redis-benchmark)", op)
                printf "ratio %s ours/redis: %.2f (%.0f / %.0f ops/s)\n",
                       op, o / r, o, r }'
        fi
    done
    o=$(fig "$OURS" "GET c=$c (event loop)"); r=$(fig "$OURS" "redis GET c=$c (event loop)")
    if [ -n "$o" ] && [ -n "$r" ]; then
        awk -v o="$o" -v r="$r" -v c="$c" 'BEGIN {
            printf "ratio GET c=%d (event loop, one generator for both) ours/redis: %.2f (%.0f / %.0f ops/s)\n",
                   c, o / r, o, r }'
    fi
    o=$(fig "$OURS" "GET c=$c (event loop) server CPU"); r=$(fig "$OURS" "redis GET c=$c (event loop) server CPU")
    if [ -n "$o" ] && [ -n "$r" ] && [ "$o" != 0.00 ]; then
        awk -v o="$o" -v r="$r" -v c="$c" 'BEGIN {
            printf "ratio GET c=%d server CPU per GET, redis/ours: %.2f (%.2f / %.2f us)\n",
                   c, r / o, r, o }'
    fi
done
SO=$(fig "$OURS" "GET c=500 (event loop) server CPU")
echo "The generator's ceiling: redis-benchmark -t get -c 500 -n 200000 ($NCPU CPUs):"
echo "$CEIL" | while read -r th k0 k1 s0 s1 t0 t1; do
    [ -n "$th" ] || continue
    awk -v th="$th" -v ka="$k0" -v kb="$k1" -v sa="$s0" -v sb="$s1" -v ta="$t0" \
        -v tb="$t1" -v ncpu="$NCPU" -v so="${SO:-}" 'BEGIN {
        n = 200000; w = tb - ta; if (w <= 0) w = 1
        g = (kb - ka) / n * 1e6; s = (sb - sa) / n * 1e6; r = n / w
        cc = th < ncpu ? th : ncpu
        if (g <= 0) { print "  (no CPU time seen)"; exit }
        z = cc * 1e6 / g
        printf "  %d client thread(s): redis %.0f GET/s; redis-benchmark %.0f %% of a CPU (%.2f us per GET), redis-server %.0f %% (%.2f us); a server costing no CPU: at most %.2fx redis",
               th, r, 100 * (kb - ka) / w, g, 100 * (sb - sa) / w, s, z / r
        if (so != "") {
            o = ncpu * 1e6 / (g + so); if (o > z) o = z
            printf "; ours (%.2f us per GET): at most %.2fx", so, o / r
        }
        printf "\n" }'
done
