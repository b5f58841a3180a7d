#!/bin/sh
# tests/real/exec-test.sh — foreign programs under scenarios (`exec`,
# `ddpsim run --real --exec`), without torch:
#   - a program that is not there: one line naming it, exit 127, nothing runs;
#   - every rank's environment (RANK, LOCAL_RANK, WORLD_SIZE, NODE_RANK,
#     torchrun's variables, MASTER_ADDR as an address, MASTER_PORT);
#   - exit status + stderr classified as torch's messages say (addrinuse,
#     timeout);
#   - a program that hangs: killed at the deadline plus --grace, a timeout,
#     no process left;
#   - as root with --netns: SIGINT while nft rules and the delay proxy are in
#     force: exit 130, no process, no namespace (and its nft tables) left;
#   - as root with --netns, where the kernel has no netem: a delay fault's
#     run is skipped with the reason, never passed undelayed;
#   - a port holder that dies before it holds the port fails the run with
#     the reason, never lets a port-taken test run as a clean start;
#   - a process the runner kills for a crash fault ends when it was killed
#     (it showed "ended 0.000000 s").
#
#   sh tests/real/exec-test.sh      (DDPSIM=path overrides ./ddpsim)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
test=exec-test
. "$root/tests/real/lib.sh"
scrub_env 'SLURM_[A-Z_]*\|TORCHELASTIC_[A-Z_]*\|OMPI_[A-Z_]*\|PMI_[A-Z_]*'
cd "$root" || exit 1
scn=tests/real/scenarios

# 1. A missing program.
"$ddpsim" run --real --exec 'no-such-program-4711 --flag' scenarios/clean-start.scn \
    >"$work/missing.out" 2>&1
rc=$?
if [ $rc -eq 127 ] && [ "$(wc -l <"$work/missing.out")" -eq 1 ] &&
    grep -q 'no-such-program-4711: command not found' "$work/missing.out"; then
    ok "a missing --exec program: exit 127, one line naming it"
else
    fail "a missing --exec program: exit $rc (want 127) or not one line naming it"
    show "$work/missing.out"
fi

# 2. The environment every rank gets.
mkdir -p "$work/env"
cat >"$work/env.scn" <<EOS
scenario "exec: the environment of every rank"
nodes 2
devices 2
accelerators ddp
launcher torchrun
timeout 20s
seed 7
port 38203
env EXEC_ENV_DIR=$work/env
exec "sh -c 'env | sort > \$EXEC_ENV_DIR/env.\$RANK'"
# it never joins the store the run hosts: a class of its own (issue 31)
expect fail error=no_join
EOS
"$ddpsim" run --real "$work/env.scn" --no-progress >"$work/env.out" 2>&1 ||
    { fail "the environment run failed"; show "$work/env.out"; }
envok=1
for r in 0 1 2 3; do
    f=$work/env/env.$r
    node=$((r / 2)) local=$((r % 2))
    for want in "RANK=$r" "LOCAL_RANK=$local" "WORLD_SIZE=4" "GROUP_RANK=$node" \
        "NODE_RANK=$node" "LOCAL_WORLD_SIZE=2" "MASTER_ADDR=127.0.0.1" "MASTER_PORT=38203"; do
        grep -qx "$want" "$f" 2>/dev/null || {
            fail "rank $r: expected $want in its environment"
            envok=0
        }
    done
done
[ $envok -eq 1 ] && ok "4 ranks: RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK, NODE_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (an address), MASTER_PORT"

# 3. Classified outcomes.
if "$ddpsim" run --real "$scn/exec-classes.scn" --no-progress >"$work/classes.out" 2>&1; then
    ok "exit status and stderr classified: rank 0 addrinuse, the others timeout"
else
    fail "classification"
    show "$work/classes.out"
fi

# 4. A program that hangs.
start=$(date +%s)
"$ddpsim" run --real --grace 1 "$scn/exec-hang.scn" --no-progress >"$work/hang.out" 2>&1
rc=$?
took=$(($(date +%s) - start))
if [ $rc -eq 0 ] && grep -q 'still running at its own deadline' "$work/hang.out"; then
    ok "a hanging program: killed at the deadline + grace, reported as hung (${took} s)"
else
    fail "a hanging program: exit $rc or not reported as killed at the deadline"
    show "$work/hang.out"
fi
sleep 0.3
if pgrep -x -f 'sleep 600' >/dev/null; then
    fail "a hanging program's process is left: $(pgrep -a -x -f 'sleep 600')"
    pkill -KILL -x -f 'sleep 600'
else
    ok "no process of the hanging program left"
fi

# 5. SIGINT with nft rules and the proxy in force (netns, root).
if [ "$(id -u)" -eq 0 ] && command -v nft >/dev/null 2>&1 && command -v ip >/dev/null 2>&1; then
    before=$(ip netns list 2>/dev/null | awk '/^ddps/ {print $1}' | sort | tr '\n' ' ')
    "$ddpsim" run --netns "$scn/exec-netns-hang.scn" --no-progress >"$work/int.out" 2>&1 &
    pid=$!
    n=0
    while ! pgrep -x -f 'sleep 600' >/dev/null && [ $n -lt 200 ]; do sleep 0.1; n=$((n + 1)); done
    sleep 1 # the nft rules are added at time 0, the proxy before the start
    made=$(ip netns list 2>/dev/null | awk '/^ddps/ {print $1}' | sort | tr '\n' ' ')
    rules=0
    for ns in $made; do
        case " $before " in *" $ns "*) continue ;; esac
        ip netns exec "$ns" nft list tables 2>/dev/null | grep -q 'ddpsim_proxy\|inet f' && rules=1
    done
    kill -INT $pid
    wait $pid
    rc=$?
    sleep 0.3
    after=$(ip netns list 2>/dev/null | awk '/^ddps/ {print $1}' | sort | tr '\n' ' ')
    [ $rules -eq 1 ] && ok "netns: the nft tables were in place when interrupted" ||
        fail "netns: no nft table of the run found before the interrupt"
    [ $rc -eq 130 ] && ok "netns: SIGINT: exit 130" || { fail "netns: SIGINT: exit $rc"; show "$work/int.out"; }
    if pgrep -x -f 'sleep 600' >/dev/null; then
        fail "netns: processes left: $(pgrep -a -x -f 'sleep 600')"
        pkill -KILL -x -f 'sleep 600'
    else
        ok "netns: no process left"
    fi
    [ "$after" = "$before" ] && ok "netns: its namespaces (and their nft tables) deleted" ||
        fail "netns: namespaces left: $after (before: $before)"
else
    echo "skip: netns interrupt (needs root, nftables and iproute2)"
fi

# 6. A delay fault where the kernel has no netem: skipped, never a pass
#    without the delay (netns, root). Where netem works, the run is delayed.
if [ "$(id -u)" -eq 0 ] && command -v tc >/dev/null 2>&1 && command -v ip >/dev/null 2>&1; then
    probe=ddpsprobe$$
    ip netns add "$probe" && ip -n "$probe" link set lo up
    if tc -n "$probe" qdisc add dev lo root netem delay 1ms 2>/dev/null; then netem=1; else netem=0; fi
    ip netns del "$probe"
    "$ddpsim" run --netns --accelerator ddp scenarios/delay-links.scn --no-progress \
        >"$work/delay.out" 2>&1
    rc=$?
    if [ $netem -eq 0 ]; then
        if grep -q '0 ok, 0 failed, 1 skipped' "$work/delay.out" &&
            grep -q 'no sch_netem' "$work/delay.out" && [ $rc -ne 0 ]; then
            ok "netns: no netem here: the delay run is skipped, naming why (exit $rc: all skipped)"
        else
            fail "netns: no netem here, yet the delay run was not skipped (exit $rc)"
            show "$work/delay.out"
        fi
    elif grep -q '1 ok, 0 failed' "$work/delay.out"; then
        ok "netns: netem works here: the delay run ran and passed"
    else
        fail "netns: netem works here, yet the delay run did not pass (exit $rc)"
        show "$work/delay.out"
    fi
else
    echo "skip: netns delay without netem (needs root and iproute2)"
fi

# 6b. The delay proxy in front of a foreign program's store (netns, root):
#     a window opened by the program's own store event (set:k*) delays its
#     traffic, and the run counts the segments it delayed; a window that
#     waits for a mark nobody sets acts on nothing: vacuous, exit 1.
if [ "$(id -u)" -eq 0 ] && command -v nft >/dev/null 2>&1 && command -v ip >/dev/null 2>&1; then
    abs=$(cd "$(dirname "$ddpsim")" && pwd)/$(basename "$ddpsim")
    cat >"$work/prog.sh" <<EOS
st="$abs store --host \$MASTER_ADDR --port \$MASTER_PORT --timeout 20"
\$st set k\$RANK v && \$st get k0 && \$st get k1 && \$st set done\$RANK 1
EOS
    for start in "set:k*" "mark:never"; do
        cat >"$work/proxy.scn" <<EOS
scenario "exec: the delay proxy, opened by a store event"
nodes 2
devices 1
accelerators ddp
timeout 30s
seed 7
exec "sh $work/prog.sh"
fault delay delay=100ms start=$start
expect ok
EOS
        "$ddpsim" run --netns --verbose "$work/proxy.scn" --no-progress >"$work/proxy.out" 2>&1
        rc=$?
        n=$(sed -n 's/.*fault delay *(line [0-9]*) *\([0-9][0-9]*\) segments delayed.*/\1/p' "$work/proxy.out" | head -1)
        if [ "$start" = "set:k*" ]; then
            if [ $rc -eq 0 ] && [ "${n:-0}" -gt 0 ]; then
                ok "netns: --exec delay opened at the program's set:k*: $n segments delayed by the proxy"
            else
                fail "netns: --exec delay at set:k*: exit $rc, segments delayed '${n:-none}' (want exit 0, > 0)"
                show "$work/proxy.out"
            fi
        elif [ $rc -eq 1 ] && [ "${n:-x}" = 0 ] && grep -q 'vacuous' "$work/proxy.out"; then
            ok "netns: --exec delay waiting for a mark nobody sets: 0 segments delayed, vacuous, exit 1"
        else
            fail "netns: --exec delay at mark:never: exit $rc, segments delayed '${n:-none}' (want vacuous, 0, exit 1)"
            show "$work/proxy.out"
        fi
    done
else
    echo "skip: netns delay proxy (needs root, nftables and iproute2)"
fi

# 7. A port holder that exits before it holds the port (seen where the
#    holder could not load its libraries): the run fails naming why, and
#    port-taken's ranks never run as a clean start. A wrapper run as the
#    ddpsim of the children (argv[0], set by perl's exec) breaks the
#    holder, process 0.
cat >"$work/ddpsim-broken-holder" <<EOS
#!/bin/sh
case "\$*" in *"--process 0"*) echo "holder: cannot start" >&2; exit 3 ;; esac
exec "$(cd "$(dirname "$ddpsim")" && pwd)/$(basename "$ddpsim")" "\$@"
EOS
chmod +x "$work/ddpsim-broken-holder"
perl -e '$p = shift; exec {$p} @ARGV' "$ddpsim" "$work/ddpsim-broken-holder" \
    run --real --accelerator ddp scenarios/port-taken.scn --no-progress \
    >"$work/holder.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q '0 ok, 1 failed' "$work/holder.out" &&
    tr '\n' ' ' <"$work/holder.out" | tr -s ' ' |
    grep -q 'exited with status 3 before it listened'; then
    ok "a port holder that never held the port fails the run, naming why (exit $rc)"
else
    fail "a broken port holder: exit $rc, or the run was not failed with the reason"
    show "$work/holder.out"
fi

# 8. A crash fault at 1 s kills rank 1's program (a sleep): its outcome
#    ends at about 1 s, not at 0.
cat >"$work/kill.scn" <<EOS
scenario "exec: rank 1 killed by the runner at 1 s"
nodes 1
devices 2
accelerators ddp
launcher torchrun
timeout 10s
seed 7
port 38207
exec "sleep 2"
fault crash ranks=1 start=1s
expect crashed ranks=1
# a sleep never joins the store the run hosts
expect fail ranks=0 error=no_join
EOS
"$ddpsim" run --real -v "$work/kill.scn" --no-progress >"$work/kill.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q 'CRASHED .* ended 1\.[0-9]* s  killed by the runner' "$work/kill.out"; then
    ok "a process killed for a crash fault ends when it was killed"
else
    fail "the killed process's end time (exit $rc)"
    show "$work/kill.out"
fi
# 9. A node's crash is silent unless mode=kill (issue 31): on loopback the
#    node's processes are stopped, so the others wait for their deadline
#    (timeout); with mode=kill they die, their sockets close, and the
#    others read that at their next step (peer_lost).
for mode in silent kill; do
    want=timeout
    [ $mode = kill ] && want=peer_lost
    cat >"$work/node-$mode.scn" <<EOS
scenario "a node's crash after init, mode=$mode"
nodes 2
devices 2
accelerators ddp_hpc
timeout 4s
train 1s
seed 7
port 38209
fault crash node=1 start=barrier+100ms mode=$mode
expect crashed ranks=2-3
expect fail ranks=0 error=$want
EOS
    out=$work/node-$mode.out
    "$ddpsim" run --real -v "$work/node-$mode.scn" --no-progress >"$out" 2>&1 &&
        grep -q 'fault crash     (line 9)  2 processes killed' "$out" &&
        { ok "crash node=1 mode=$mode: rank 0 fails with $want"; continue; }
    fail "crash node=1 mode=$mode: want rank 0 $want and 2 processes hit"
    show "$out"
done
finish
