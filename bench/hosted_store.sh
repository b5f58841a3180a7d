#!/bin/sh
# bench/hosted_store.sh — a 64-client rendezvous through the store a real
# run hosts for an exec job vs the same through `ddpsim store serve`.
#
#   sh bench/hosted_store.sh          (PORT=P: the run's port; RUNS=N: repeats)
#
# Both are driven by the same generator, $B/bench/store_rdzv
# (bench/store_rdzv.c): 64 clients connect, ADD to a counter and WAIT on
# the barrier key the last one sets. The hosted store also attributes each
# connection to a rank (docs/real-runs.md): its run has 64 ranks, rank 0
# runs the generator, the others wait, so every attribution looks through
# 64 ranks' sessions. Printed: the generator's line for each ("connected",
# "done": the rendezvous time from the first connect). Figures only.
set -u
B=${B:-build/default}
DDPSIM=${DDPSIM:-$B/ddpsim}
GEN=$(cd "$(dirname "$B/bench/store_rdzv")" && pwd)/store_rdzv
PORT=${PORT:-$((31000 + $$ % 9000))}
RUNS=${RUNS:-3}
for f in "$GEN" "$DDPSIM"; do
    [ -x "$f" ] || { echo "hosted_store.sh: $f is missing: run make -j2 first"; exit 1; }
done
dir=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$dir"' EXIT

"$DDPSIM" store serve --host 127.0.0.1 --port 0 >"$dir/serve.out" 2>&1 &
srv=$!
i=0
until grep -q '^listening on' "$dir/serve.out" 2>/dev/null; do
    [ $i -lt 200 ] || { echo "hosted_store.sh: store serve did not start"; exit 1; }
    sleep 0.05
    i=$((i + 1))
done
sport=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$dir/serve.out")
for r in $(seq "$RUNS"); do
    "$GEN" --port "$sport" --clients 64 --label "store serve" --server-pid "$srv"
done
kill "$srv"
wait "$srv" 2>/dev/null
srv=

cat >"$dir/hosted.scn" <<SCN
scenario "64 clients through the hosted store"
nodes 1
devices 64
accelerators ddp
launcher torchrun
port $PORT
timeout 30s
exec "sh -c 'if [ \$RANK = 0 ]; then $GEN --host \$MASTER_ADDR --port \$MASTER_PORT --clients 64 --label \"hosted store\"; else sleep 3; fi'"
expect invariants
SCN
for r in $(seq "$RUNS"); do
    "$DDPSIM" run --real --no-progress --keep-output "$dir/keep" "$dir/hosted.scn" >/dev/null 2>&1
    cat "$dir/keep/hosted.ddp/rank0.out" 2>/dev/null ||
        echo "hosted store: no figures (the run failed; rerun with --keep-output to see why)"
done
