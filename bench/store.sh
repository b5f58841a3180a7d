#!/bin/sh
# bench/store.sh — our store next to redis on loopback, in the same run.
#
# Runs $B/bench/store (ours: SET/GET with 1 and 50 clients, 1,024-rank
# rendezvous), then redis-server on a free loopback port with
#   redis-benchmark -p PORT -t set,get -c 50 -n 200000 -q
# and prints ours/redis for GET and SET at 50 clients. Figures only.
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

OURS=$("$BIN") || { echo "$OURS"; exit 1; }
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
RED=$(redis-benchmark -p "$PORT" -t set,get -c 50 -n 200000 -q 2>&1 |
      tr '\r' '\n' | grep 'requests per second')
kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null
echo "redis-benchmark -c 50 -n 200000 (port $PORT):"
echo "$RED" | sed 's/^/  redis /'

fig() { # fig TEXT PATTERN -> the number after PATTERN
    echo "$1" | sed -n "s/^$2[: ]*\([0-9][0-9.]*\).*/\1/p" | head -n 1
}
for op in GET SET "GET c=50 (normal sched)"; do
    case $op in
    GET | SET) o=$(fig "$OURS" "$op c=50"); r=$(fig "$RED" "$op") ;;
    *) o=$(fig "$OURS" "$op"); r=$(fig "$RED" GET) ;;
    esac
    if [ -n "$o" ] && [ -n "$r" ]; then
        awk -v o="$o" -v r="$r" -v op="$op" 'BEGIN {
            if (op !~ / /) op = op " c=50"
            printf "ratio %s ours/redis: %.2f (%.0f / %.0f ops/s)\n",
                   op, o / r, o, r }'
    fi
done
