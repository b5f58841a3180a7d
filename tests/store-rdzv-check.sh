#!/bin/sh
# tests/store-rdzv-check.sh GEN — the real-store rendezvous benchmark's
# generator (bench/store_rdzv.c) against `ddpsim store serve`, small: 256
# TCP clients on loopback each ADD to a counter and WAIT on the barrier key
# the last one sets; every client must get its WAIT reply, and the server
# must still be up afterwards; --world sizes its limits. Then the same generator against the port
# once nobody listens: it must say NOT DONE and exit 1, in one process and
# split over two (--procs 2). Last, 256 clients split over two generator
# processes against a server under a wrapper shell, --server-pid the
# wrapper: the line must sum two server processes and still parse with
# bench/store_rdzv.sh's sed. Then 512 clients through a server with two
# relay processes (--relays 2), which must end with it. No time is checked (bench/store_rdzv.sh
# measures). Run by make test; needs $DDPSIM.
set -u
GEN=${1:?usage: store-rdzv-check.sh GEN}
DDPSIM=${DDPSIM:?DDPSIM must name the ddpsim command}
dir=$(mktemp -d)
srv=
inner=
trap '[ -n "$inner" ] && kill "$inner" 2>/dev/null; [ -n "$srv" ] && kill "$srv" 2>/dev/null; [ -n "$srv" ] && wait "$srv"; rm -rf "$dir"' EXIT
fail() { echo "store-rdzv-check: FAIL: $*"; exit 1; }

# Waits for $srv's "listening on" line in $dir/out; sets port.
await_port() {
    i=0
    until grep -q '^listening on' "$dir/out" 2>/dev/null; do
        kill -0 "$srv" 2>/dev/null || fail "the server did not start: $(cat "$dir/out")"
        [ $i -lt 400 ] || fail "the server did not say it listens in 20 s"
        sleep 0.05
        i=$((i + 1))
    done
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$dir/out")
    [ -n "$port" ] || fail "no port in: $(cat "$dir/out")"
}

# --world 20000: room for 4 x 20000 connections and 8 x 20000 keys, which
# the server's info line (DDP_LOG=info) states.
DDP_LOG=info "$DDPSIM" store serve --host 127.0.0.1 --port 0 --world 20000 >"$dir/out" 2>&1 &
srv=$!
await_port
grep -q 'up to 80000 clients and 160000 keys' "$dir/out" ||
    fail "--world 20000 did not size the server: $(cat "$dir/out")"

# gen WHAT RC PATTERN ARG...: runs the generator; it must exit RC and
# print a line matching PATTERN (grep); $out is the line.
gen() {
    what=$1 want=$2 pat=$3
    shift 3
    out=$("$GEN" "$@")
    rc=$?
    echo "$out"
    [ $rc -eq "$want" ] || fail "$what: the generator exited $rc, not $want"
    echo "$out" | grep -q "$pat" || fail "$what: unexpected report line"
}

gen "256 clients" 0 '^ddpsim 256: connected [0-9.]* s, done [0-9.]* s, .*server CPU' \
    --port "$port" --clients 256 --per-addr 64 --server-pid "$srv" --timeout 60 --label ddpsim
kill -0 "$srv" 2>/dev/null || fail "the server died: $(cat "$dir/out")"
kill "$srv"
wait "$srv"
src=$?
srv=
[ $src -eq 0 ] || fail "the server exited $src on SIGTERM: $(cat "$dir/out")"

gen "against a closed port" 1 '^nobody 8: NOT DONE: 0 of 8 done, 0 connected, 8 failed' \
    --port "$port" --clients 8 --timeout 10 --label nobody
gen "split over 2, against a closed port" 1 \
    '^nobody 8: NOT DONE: 0 of 8 done, 0 connected, 8 failed.* (2 processes)' \
    --port "$port" --clients 8 --procs 2 --timeout 10 --label nobody

# The server one process down: a shell that waits for it. Its pid is in
# $dir/pid, killed in turn; the wrapper then ends. The first server's
# "listening on" goes first, so await_port reads this one's.
rm -f "$dir/out"
sh -c '"$0" store serve --host 127.0.0.1 --port 0 >"$1/out" 2>&1 & echo $! >"$1/pid"; wait' \
    "$DDPSIM" "$dir" &
srv=$!
await_port
inner=$(cat "$dir/pid")
gen "split over 2 with a wrapped server" 0 \
    '^ddpsim 256: connected [0-9.]* s, done [0-9.]* s, generator CPU [0-9.]* s (2 processes), server CPU [0-9.]* s, server peak RSS [0-9.]* MiB ([a-z ]*, 2 processes)$' \
    --port "$port" --clients 256 --per-addr 64 --procs 2 --server-pid "$srv" --timeout 60 \
    --label ddpsim
# bench/store_rdzv.sh's sed, as it reads the line
[ "$(echo "$out" | sed -n 's/^ddpsim \([0-9]*\): connected [0-9.]* s, done \([0-9.]*\) s.*server CPU \([0-9.]*\) s, server peak RSS \([0-9.]*\) MiB.*/ddpsim \1 \2 \3 \4/p' | wc -w)" -eq 5 ] ||
    fail "bench/store_rdzv.sh's sed does not read the split line"
kill "$inner"
inner=
wait "$srv"
srv=

# Relays: the server's clients held by two relay processes (--relays 2),
# which the line counts with the server (3 processes); on SIGTERM the
# server takes them with it.
rm -f "$dir/out"
"$DDPSIM" store serve --host 127.0.0.1 --port 0 --relays 2 >"$dir/out" 2>&1 &
srv=$!
await_port
relays=$(grep -l "^PPid:[[:space:]]*$srv\$" /proc/[0-9]*/status 2>/dev/null |
    sed 's|/proc/\([0-9]*\)/status|\1|')
[ "$(echo $relays | wc -w)" -eq 2 ] || fail "--relays 2: relay processes: '$relays'"
gen "512 clients through 2 relays" 0 \
    '^ddpsim 512: connected [0-9.]* s, done [0-9.]* s, .*server peak RSS [0-9.]* MiB ([a-z ]*, 3 processes)$' \
    --port "$port" --clients 512 --per-addr 64 --procs 2 --server-pid "$srv" --timeout 60 \
    --label ddpsim
kill "$srv"
wait "$srv"
src=$?
srv=
[ $src -eq 0 ] || fail "the relayed server exited $src on SIGTERM: $(cat "$dir/out")"
for p in $relays; do
    ! kill -0 "$p" 2>/dev/null || fail "relay process $p outlived its server"
done
echo "store-rdzv-check: ok (256 clients rendezvoused, in one generator process and in two;" \
    "512 through two relay processes; a closed port reported NOT DONE)"
