/* tools/cmd_launch.c — `ddpsim launch`: a torchrun-style launcher. It starts
 * PROG once per local worker with the TorchElastic environment contract
 * (RANK, LOCAL_RANK, GROUP_RANK, WORLD_SIZE, MASTER_ADDR, ...), so any
 * program — `ddpsim train`, `ddpsim env`, a user's script — runs as it would
 * under `torchrun --rdzv-backend static`. Processes are started and waited for
 * through the sys seam (ddp_sys_spawn / ddp_sys_wait / ddp_sys_kill).
 *
 * The variables are those torch.distributed.elastic's LocalElasticAgent
 * (_start_workers) sets for each worker; the option defaults are torchrun's
 * (torch/distributed/run.py), including its PET_<OPTION> environment
 * defaults. See docs/real-runs.md, "Launchers". */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/sys.h"

#define LAUNCH_MAX_PROCS 64

static void launch_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim launch [--nproc-per-node N] [--nnodes M] [--node-rank R]\n"
            "                     [--master-addr A] [--master-port P] [--rdzv-id ID]\n"
            "                     [--timeout SEC] [--] PROG [ARGS...]\n\n"
            "A torchrun-style launcher (static rendezvous): starts PROG ARGS N times on\n"
            "this node, each with the TorchElastic environment of one worker, waits for\n"
            "all of them and exits with their status. Run it once per node, with the same\n"
            "--nnodes/--master-addr/--master-port and --node-rank 0..M-1.\n\n"
            "options (torchrun's; --opt=V and --opt_name V are accepted too):\n"
            "  --nproc-per-node N  workers on this node, 1..64 (default 1)\n"
            "  --nnodes M          nodes, >= 1 (default 1)\n"
            "  --node-rank R       this node's rank, 0..M-1 (default 0)\n"
            "  --master-addr A     address of the node of rank 0 (default 127.0.0.1)\n"
            "  --master-port P     port rank 0 serves the store on, 1..65535 (default 29500)\n"
            "  --rdzv-id ID        run id given to workers (default \"none\")\n"
            "  --timeout SEC       kill workers still running after SEC s (default 3600)\n"
            "Defaults come from PET_NPROC_PER_NODE, PET_NNODES, PET_NODE_RANK,\n"
            "PET_MASTER_ADDR, PET_MASTER_PORT, PET_RDZV_ID when set, as in torchrun. An\n"
            "inherited MASTER_ADDR / MASTER_PORT is not a default: workers get the values\n"
            "above, as under torchrun.\n\n"
            "each worker L = 0..N-1 gets (all other variables are inherited):\n"
            "  RANK=R*N+L  LOCAL_RANK=L  GROUP_RANK=R  ROLE_RANK=R*N+L  ROLE_NAME=default\n"
            "  LOCAL_WORLD_SIZE=N  WORLD_SIZE=M*N  GROUP_WORLD_SIZE=M  ROLE_WORLD_SIZE=M*N\n"
            "  MASTER_ADDR=A  MASTER_PORT=P  TORCHELASTIC_RUN_ID=ID\n"
            "  TORCHELASTIC_RESTART_COUNT=0  TORCHELASTIC_MAX_RESTARTS=0\n"
            "  TORCHELASTIC_USE_AGENT_STORE=False (no store is hosted here: rank 0 serves it)\n"
            "  TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and, when N > 1, OMP_NUM_THREADS=1\n"
            "  (both only when not already set)\n\n"
            "A worker that fails does not stop the others: each ends by its own deadlines\n"
            "(and reports its own error); at --timeout the remaining ones get SIGTERM,\n"
            "then SIGKILL 5 s later. Workers' output is not prefixed.\n\n"
            "Exit status: 0 all workers exited 0; else the status of the first worker to\n"
            "fail (1 when it was killed by a signal or at the timeout); 127 PROG could not\n"
            "be started; 2 bad options.\n\n"
            "example: ddpsim launch --nproc-per-node 4 -- ddpsim train --accelerator ddp_cpu \\\n"
            "             --devices 4\n");
}

static int bad(const char *opt, const char *val, const char *form)
{
    fprintf(stderr, "ddpsim launch: bad %s \"%s\"; expected %s\n", opt, val ? val : "",
            form);
    return 2;
}

/* A decimal integer in [lo, hi] -> 0, else -1. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

typedef struct {
    const char *nproc, *nnodes, *node_rank, *addr, *port, *run_id, *timeout;
} launch_opts_t;

/* "--nproc-per-node" and "--nproc_per_node" name the same option. */
static int opt_is(const char *arg, size_t len, const char *name)
{
    if (strlen(name) != len)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char a = arg[i] == '_' ? '-' : arg[i];
        if (a != name[i])
            return 0;
    }
    return 1;
}

static const char *env_or(ddp_env_t *env, const char *key, const char *dflt)
{
    const char *v = ddp_env_get(env, key);
    return v && *v ? v : dflt;
}

typedef struct {
    ddp_pid_t pid;
    int running;
    int status;
} worker_t;

/* Stop the workers still running: SIGTERM, up to 5 s, then SIGKILL. */
static void stop_workers(ddp_sys_t *sys, worker_t *w, int n)
{
    for (int i = 0; i < n; i++)
        if (w[i].running)
            ddp_sys_kill(sys, w[i].pid, SIGTERM);
    int64_t grace = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S);
    for (int i = 0; i < n; i++) {
        if (!w[i].running)
            continue;
        int st = 0;
        if (ddp_sys_wait(sys, w[i].pid, &st, grace) != 0) {
            ddp_sys_kill(sys, w[i].pid, SIGKILL);
            ddp_sys_wait(sys, w[i].pid, &st, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S));
        }
        w[i].running = 0;
        w[i].status = st;
    }
}

int ddp_cmd_launch(ddp_sys_t *sys, int argc, char **argv)
{
    ddp_env_t *penv = ddp_sys_env(sys);
    launch_opts_t o = {
        .nproc = env_or(penv, "PET_NPROC_PER_NODE", "1"),
        .nnodes = env_or(penv, "PET_NNODES", "1"),
        .node_rank = env_or(penv, "PET_NODE_RANK", "0"),
        .addr = env_or(penv, "PET_MASTER_ADDR", "127.0.0.1"),
        .port = env_or(penv, "PET_MASTER_PORT", "29500"),
        .run_id = env_or(penv, "PET_RDZV_ID", "none"),
        .timeout = "3600",
    };
    int prog = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            prog = i + 1;
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            launch_usage(stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) {
            prog = i; /* the program; everything after it is its own */
            break;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
        static const struct {
            const char *name;
            size_t off;
        } opts[] = {
            {"--nproc-per-node", offsetof(launch_opts_t, nproc)},
            {"--nnodes", offsetof(launch_opts_t, nnodes)},
            {"--node-rank", offsetof(launch_opts_t, node_rank)},
            {"--master-addr", offsetof(launch_opts_t, addr)},
            {"--master-port", offsetof(launch_opts_t, port)},
            {"--rdzv-id", offsetof(launch_opts_t, run_id)},
            {"--timeout", offsetof(launch_opts_t, timeout)},
        };
        size_t k = 0;
        while (k < sizeof opts / sizeof opts[0] && !opt_is(a, len, opts[k].name))
            k++;
        if (k == sizeof opts / sizeof opts[0])
            return bad("option", a, "one of the options of --help, then -- PROG ARGS");
        if (!v)
            return bad("option (missing value)", a, "--OPTION VALUE (see --help)");
        *(const char **)((char *)&o + opts[k].off) = v;
        if (!eq)
            i++;
    }

    long nproc, nnodes, node_rank, port;
    if (parse_int(o.nproc, 1, LAUNCH_MAX_PROCS, &nproc))
        return bad("--nproc-per-node", o.nproc, "an integer 1..64");
    if (parse_int(o.nnodes, 1, 100000, &nnodes))
        return bad("--nnodes", o.nnodes, "an integer >= 1");
    if (parse_int(o.node_rank, 0, nnodes - 1, &node_rank)) {
        char form[64];
        snprintf(form, sizeof form, "an integer 0..%ld (--nnodes %ld)", nnodes - 1, nnodes);
        return bad("--node-rank", o.node_rank, form);
    }
    if (parse_int(o.port, 1, 65535, &port))
        return bad("--master-port", o.port, "an integer 1..65535");
    if (!*o.addr)
        return bad("--master-addr", o.addr, "the host name or IP address of node rank 0");
    if (!*o.run_id)
        return bad("--rdzv-id", o.run_id, "a non-empty id");
    char *end;
    double timeout_s = strtod(o.timeout, &end);
    if (!*o.timeout || *end || !(timeout_s > 0) || timeout_s > 1e7)
        return bad("--timeout", o.timeout, "seconds > 0");
    if (prog < 0 || prog >= argc) {
        fprintf(stderr, "ddpsim launch: no program to launch; expected "
                        "ddpsim launch [OPTIONS] -- PROG [ARGS...] (see --help)\n");
        return 2;
    }

    long world = nnodes * nproc;
    worker_t w[LAUNCH_MAX_PROCS];
    int n = 0, rc = 0, first_fail = -1;
    int64_t deadline = ddp_sys_deadline_in(sys, (int64_t)(timeout_s * 1e9));
    for (long l = 0; l < nproc; l++) {
        ddp_env_t *env = ddp_env_clone(penv);
        if (!env) {
            fprintf(stderr, "ddpsim launch: out of memory\n");
            rc = 1;
            break;
        }
        long rank = node_rank * nproc + l;
        int e = 0;
        e |= ddp_env_setf(env, "RANK", "%ld", rank);
        e |= ddp_env_setf(env, "LOCAL_RANK", "%ld", l);
        e |= ddp_env_setf(env, "GROUP_RANK", "%ld", node_rank);
        e |= ddp_env_setf(env, "ROLE_RANK", "%ld", rank);
        e |= ddp_env_set(env, "ROLE_NAME", "default");
        e |= ddp_env_setf(env, "LOCAL_WORLD_SIZE", "%ld", nproc);
        e |= ddp_env_setf(env, "WORLD_SIZE", "%ld", world);
        e |= ddp_env_setf(env, "GROUP_WORLD_SIZE", "%ld", nnodes);
        e |= ddp_env_setf(env, "ROLE_WORLD_SIZE", "%ld", world);
        e |= ddp_env_set(env, "MASTER_ADDR", o.addr);
        e |= ddp_env_setf(env, "MASTER_PORT", "%ld", port);
        e |= ddp_env_set(env, "TORCHELASTIC_RESTART_COUNT", "0");
        e |= ddp_env_set(env, "TORCHELASTIC_MAX_RESTARTS", "0");
        e |= ddp_env_set(env, "TORCHELASTIC_RUN_ID", o.run_id);
        e |= ddp_env_set(env, "TORCHELASTIC_USE_AGENT_STORE", "False");
        if (!ddp_env_has(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"))
            e |= ddp_env_set(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
        if (nproc > 1 && !ddp_env_has(env, "OMP_NUM_THREADS"))
            e |= ddp_env_set(env, "OMP_NUM_THREADS", "1");
        char name[32];
        snprintf(name, sizeof name, "launch-worker%ld", l);
        ddp_spawn_t sp = {.argv = argv + prog, .env = env, .name = name};
        int src = e ? -ENOMEM : ddp_sys_spawn(sys, &sp, &w[n].pid);
        ddp_env_free(env);
        if (src != 0) {
            fprintf(stderr, "ddpsim launch: local rank %ld: %s\n", l,
                    e ? "out of memory" : ddp_err_message());
            rc = 127;
            break;
        }
        w[n].running = 1;
        w[n].status = 0;
        n++;
    }
    if (rc) { /* not every worker started: the others cannot rendezvous */
        stop_workers(sys, w, n);
        return rc;
    }

    /* Poll every worker (the seam has no "wait for any"), so that "first to
     * fail" is first in time. */
    int left = n;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (!w[i].running)
                continue;
            int st = 0, wr = ddp_sys_wait(sys, w[i].pid, &st, 0);
            if (wr == DDP_ETIMEOUT)
                continue; /* still running */
            if (wr != 0) {
                fprintf(stderr, "ddpsim launch: local rank %d: %s\n", i,
                        ddp_err_message());
                st = 1;
            }
            w[i].running = 0;
            w[i].status = st;
            left--;
            if (st != 0) {
                long rank = node_rank * nproc + i;
                if (st > 128)
                    fprintf(stderr,
                            "ddpsim launch: local rank %d (rank %ld) was killed by "
                            "signal %d\n",
                            i, rank, st - 128);
                else
                    fprintf(stderr,
                            "ddpsim launch: local rank %d (rank %ld) exited with "
                            "status %d\n",
                            i, rank, st);
                if (first_fail < 0)
                    first_fail = st > 128 ? 1 : st;
            }
        }
        if (left == 0)
            break;
        if (ddp_sys_now(sys) >= deadline) {
            fprintf(stderr, "ddpsim launch: %d of %d worker(s) still running after "
                            "--timeout %g s: stopping them (SIGTERM, then SIGKILL)\n",
                    left, n, timeout_s);
            stop_workers(sys, w, n);
            if (first_fail < 0)
                first_fail = 1;
            break;
        }
        int64_t next = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS);
        ddp_sys_sleep_until(sys, next < deadline ? next : deadline);
    }
    return first_fail < 0 ? 0 : first_fail;
}
