#!/bin/sh
# bench/store.sh — our store next to redis on loopback, in the same run.
#
# Runs $B/bench/store (ours: SET/GET with 1, 50 and 500 clients, 1,024-rank
# rendezvous, the idle cost at 2k/5k/10k idle connections), then
# redis-server on a free loopback port with
#   redis-benchmark -p PORT -t set,get -c C -n 200000 -q     (C = 50, 500)
# and prints ours/redis for GET and SET at 50 and 500 clients. Figures only.
# Extra arguments go to $B/bench/store (e.g. --idle 0 to skip the idle part).
# REDIS_PORT=P: redis tries P, P+1, ... instead of pseudo-random ports.
# "GET (event loop)" is ours driven like redis-benchmark drives redis (one
# thread, N connections, one plain GET in flight each): the like-for-like
# figure at 500 clients, where 500 client threads measure the scheduler.
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

OURS=$("$BIN" "$@") || { echo "$OURS"; exit 1; }
echo "$OURS"

if ! command -v redis-server >/dev/null 2>&1 ||
   ! command -v redis-benchmark >/dev/null 2>&1; then
    echo "redis: redis-server/redis-benchmark not installed; no comparison"
    exit 0
fi

# A free port: try a few pseudo-random ones until redis starts.
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
PID=
for try in 1 2 3 4 5 6 7 8; do
    PORT=$(( 20000 + ($$ * 7 + try * 7919) % 40000 ))
    [ -n "${REDIS_PORT:-}" ] && PORT=$((REDIS_PORT + try - 1)) # a range of your own
    redis-server --port "$PORT" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$DIR" >"$DIR/log" 2>&1 &
    PID=$!
    for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
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
RED=
for c in 50 500; do
    r=$(redis-benchmark -p "$PORT" -t set,get -c "$c" -n 200000 -q 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | sed "s/^\([A-Z]*\):/\1 c=$c:/")
    RED="$RED$r
"
done
kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null
echo "redis-benchmark -c 50 / -c 500 -n 200000 (port $PORT):"
echo "$RED" | sed '/^$/d; s/^/  redis /'

fig() { # fig TEXT PATTERN -> the number after PATTERN
    echo "$1" | sed -n "s/^$2[: ]*\([0-9][0-9.]*\).*/\1/p" | head -n 1
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
                printf "ratio %s ours/redis: %.2f (%.0f / %.0f ops/s)\n",
                       op, o / r, o, r }'
        fi
    done
done
