#!/bin/sh
# scripts/sweep-slurm.sh — a ddpsim sweep as a SLURM job array, merged when
# the array is done (docs/sweeps.md).
#
#   sh scripts/sweep-slurm.sh [OPTIONS] -- run|explore ARGS...
#
# Submits `ddpsim run|explore ARGS --shard K/N --results DIR/shard-K.res`
# as one array job (sbatch --array=1-N: task K runs shard K), then a merge
# job that depends on the whole array (--dependency=afterany:ARRAY): it runs
# `ddpsim merge DIR/shard-1.res ... DIR/shard-N.res` (with --junit
# DIR/junit.xml for run) into DIR/merged.txt and its exit status into
# DIR/merge.rc. afterany, not afterok: a shard whose scenarios fail exits 1
# and still wrote its results; merge checks that every shard's file is
# there, complete and of this sweep. Then it waits for DIR/merge.rc
# (squeue, every SWEEP_POLL seconds), at most --deadline seconds; past it,
# it cancels both jobs. It prints the merged output and exits as the merge
# did, which is as the unsharded command would.
#
# Options:
#   --shards N       array size: shards 1..N (default 4)
#   --dir DIR        results, logs and the merged output; every node must see
#                    it at the same path (default ./sweep)
#   --deadline S     wait at most S seconds for the array and the merge
#                    (default 3600)
#   --ddpsim PATH    the ddpsim the jobs run (default ./ddpsim), made absolute;
#                    every node must see it at that path
#   --sbatch ARG     one more argument for both sbatch calls, e.g.
#                    --sbatch --partition=debug --sbatch --time=30 (repeatable)
#   --no-wait        submit, print the job ids and DIR, and exit 0
#
# Exit status: the merge's (run: 0, 1, 3, 128+N; explore: 0, 1; 2 a shard's
# results missing or bad); 2 bad usage or a submission that failed; 124 the
# deadline passed (both jobs cancelled; the shards' logs are in DIR).
set -u

usage() { # usage STATUS: the comment above, on stdout (0) or stderr
    if [ "$1" -eq 0 ]; then
        sed -n '2,/^set -u$/p' "$0" | sed -n 's/^# \{0,1\}//p'
    else
        sed -n '2,/^set -u$/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2
    fi
    exit "$1"
}
die() {
    printf 'sweep-slurm: %s\n' "$*" >&2
    exit 2
}

shards=4
dir=./sweep
deadline=3600
ddpsim=./ddpsim
wait=1
sbatch_args=
poll=${SWEEP_POLL:-2}

# q ARG: ARG quoted for a POSIX shell.
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

while [ $# -gt 0 ]; do
    case $1 in
    --shards) [ $# -ge 2 ] || usage 2; shards=$2; shift 2 ;;
    --dir) [ $# -ge 2 ] || usage 2; dir=$2; shift 2 ;;
    --deadline) [ $# -ge 2 ] || usage 2; deadline=$2; shift 2 ;;
    --ddpsim) [ $# -ge 2 ] || usage 2; ddpsim=$2; shift 2 ;;
    --sbatch) [ $# -ge 2 ] || usage 2; sbatch_args="$sbatch_args $(q "$2")"; shift 2 ;;
    --no-wait) wait=0; shift ;;
    -h | --help) usage 0 ;;
    --) shift; break ;;
    *) die "unknown option \"$1\"; expected --shards, --dir, --deadline, --ddpsim, --sbatch, --no-wait, then -- run|explore ARGS" ;;
    esac
done
[ $# -ge 1 ] || die "no command: expected -- run ARGS or -- explore ARGS after the options"
cmd=$1
shift
case $cmd in run | explore) ;; *) die "the command is \"$cmd\"; expected run or explore" ;; esac
case $shards in '' | *[!0-9]*) die "bad --shards \"$shards\"; expected a number 1..100000" ;; esac
[ "$shards" -ge 1 ] && [ "$shards" -le 100000 ] ||
    die "bad --shards \"$shards\"; expected a number 1..100000"
case $deadline in '' | *[!0-9]*) die "bad --deadline \"$deadline\"; expected seconds > 0" ;; esac
[ "$deadline" -gt 0 ] || die "bad --deadline \"$deadline\"; expected seconds > 0"
for a in "$@"; do
    case $a in --shard | --shard=* | --results | --results=*)
        die "$a: the script gives every task its own --shard K/N and --results; leave them out" ;;
    esac
done
command -v sbatch >/dev/null 2>&1 || die "sbatch not found: is SLURM installed and in PATH?"
command -v squeue >/dev/null 2>&1 || die "squeue not found: is SLURM installed and in PATH?"
case $ddpsim in /*) ;; *) ddpsim=$(pwd)/$ddpsim ;; esac
[ -x "$ddpsim" ] || die "$ddpsim is not an executable ddpsim (build it with make, or pass --ddpsim PATH)"
mkdir -p "$dir" || die "cannot make --dir $dir"
dir=$(cd "$dir" && pwd)
rm -f "$dir"/shard-*.res "$dir"/shard-*.log "$dir/merge.rc" "$dir/merged.txt" "$dir/junit.xml"

# The task script: its shard from SLURM_ARRAY_TASK_ID. Arguments are
# quoted here once, so scenario globs expanded by the caller's shell stay
# what they were.
args=
for a in "$@"; do args="$args $(q "$a")"; done
cat >"$dir/shard.sh" <<EOF
#!/bin/sh
# written by scripts/sweep-slurm.sh: shard \$SLURM_ARRAY_TASK_ID of $shards
k=\${SLURM_ARRAY_TASK_ID:?not an array task}
exec $(q "$ddpsim") $cmd$args --shard "\$k/$shards" --results $(q "$dir")/shard-"\$k".res
EOF
merge_args=
k=1
while [ "$k" -le "$shards" ]; do
    merge_args="$merge_args $(q "$dir/shard-$k.res")"
    k=$((k + 1))
done
[ "$cmd" = run ] && merge_args="$merge_args --junit $(q "$dir/junit.xml")"
cat >"$dir/merge.sh" <<EOF
#!/bin/sh
# written by scripts/sweep-slurm.sh: the merge of shards 1..$shards
$(q "$ddpsim") merge$merge_args >$(q "$dir/merged.txt")
rc=\$?
echo "\$rc" >$(q "$dir/merge.rc.tmp") && mv $(q "$dir/merge.rc.tmp") $(q "$dir/merge.rc")
exit "\$rc"
EOF
chmod +x "$dir/shard.sh" "$dir/merge.sh"

# shellcheck disable=SC2086  # sbatch_args holds quoted words
array=$(eval sbatch --parsable $sbatch_args --array=1-"$shards" --job-name=ddpsim-sweep \
    --chdir="$(q "$(pwd)")" --output="$(q "$dir/shard-%a.log")" "$(q "$dir/shard.sh")" \
    2>"$dir/sbatch.err") ||
    die "sbatch --array=1-$shards failed: $(cat "$dir/sbatch.err")"
array=${array%%;*} # --parsable: "JOBID[;CLUSTER]"
case $array in '' | *[!0-9]*) die "sbatch printed no job id: \"$array\" $(cat "$dir/sbatch.err")" ;; esac
# shellcheck disable=SC2086
merge=$(eval sbatch --parsable $sbatch_args --dependency=afterany:"$array" \
    --kill-on-invalid-dep=yes --job-name=ddpsim-sweep-merge --chdir="$(q "$(pwd)")" \
    --output="$(q "$dir/merge.log")" "$(q "$dir/merge.sh")" 2>"$dir/sbatch.err") || {
    scancel "$array" 2>/dev/null
    die "sbatch of the merge job failed (array $array cancelled): $(cat "$dir/sbatch.err")"
}
merge=${merge%%;*}
printf 'sweep-slurm: array job %s (%s shards), merge job %s (after the array), in %s\n' \
    "$array" "$shards" "$merge" "$dir" >&2
[ $wait -eq 1 ] || exit 0

# Wait for the merge's status, at most the deadline.
start=$(date +%s)
while [ ! -f "$dir/merge.rc" ]; do
    now=$(date +%s)
    if [ $((now - start)) -ge "$deadline" ]; then
        scancel "$array" "$merge" 2>/dev/null
        left=$(squeue -h -j "$array,$merge" -o '%i %T' 2>/dev/null | tr '\n' ' ')
        printf 'sweep-slurm: the sweep did not finish within --deadline %s s; jobs %s and %s cancelled (still listed: %s); the logs of the shards: %s/shard-*.log\n' \
            "$deadline" "$array" "$merge" "${left:-none}" "$dir" >&2
        exit 124
    fi
    # The merge job gone from the queue without a status: it was cancelled,
    # or it could not run (its dependency could never be met).
    if [ -z "$(squeue -h -j "$merge" -o '%i' 2>/dev/null)" ]; then
        sleep 1 # let a status written at the very end show up
        [ -f "$dir/merge.rc" ] && break
        printf 'sweep-slurm: merge job %s ended without a status (cancelled, or the array %s failed to run); see %s/merge.log and %s/shard-*.log\n' \
            "$merge" "$array" "$dir" "$dir" >&2
        exit 2
    fi
    sleep "$poll"
done
rc=$(cat "$dir/merge.rc")
[ -f "$dir/merged.txt" ] && cat "$dir/merged.txt"
if [ "$rc" != 0 ] && [ -s "$dir/merge.log" ]; then
    sed 's/^/sweep-slurm: merge: /' "$dir/merge.log" >&2
fi
printf 'sweep-slurm: %s shards in %s s; merged output %s/merged.txt%s, exit %s\n' "$shards" \
    "$(($(date +%s) - start))" "$dir" "$([ "$cmd" = run ] && echo ", JUnit $dir/junit.xml")" \
    "$rc" >&2
exit "$rc"
