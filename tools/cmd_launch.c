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
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness/worker_env.h"
#include "cmds.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/sys.h"
#include "opt.h"

#define LAUNCH_MAX_PROCS 64

static void launch_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim launch [--nproc-per-node N] [--nnodes M] [--node-rank R]\n"
            "                     [--master-addr A] [--master-port P] [--rdzv-id ID]\n"
            "                     [--timeout SEC] [--grace-period SEC] [--] PROG [ARGS...]\n\n"
            "A torchrun-style launcher (static rendezvous): starts PROG ARGS N times on\n"
            "this node, each with the TorchElastic environment of one worker, waits for\n"
            "all of them and exits with their status. Run it once per node, with the same\n"
            "--nnodes/--master-addr/--master-port and --node-rank 0..M-1.\n\n"
            "options (torchrun's; --opt=V and --opt_name V are accepted too):\n"
            "  --nproc-per-node N  workers on this node, 1..64 (default 1)\n"
            "  --nnodes M          nodes, >= 1 (default 1)\n"
            "  --node-rank R       this node's rank, 0..M-1 (default 0)\n"
            "  --master-addr A     address of the node of rank 0 (default 127.0.0.1), read\n"
            "                      as torch reads it: leading blanks and [ ] around it go;\n"
            "                      letters, digits, '_', '.', ':', '-' only\n"
            "  --master-port P     port rank 0 serves the store on, 1..65535 (default 29500)\n"
            "  --rdzv-id ID        run id given to workers (default \"none\")\n"
            "  --timeout SEC       stop workers still running after SEC s (default 3600)\n"
            "  --grace-period SEC  how long stopped workers get before SIGKILL, >= 0\n"
            "                      (default 30, torchrun's)\n"
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
            "  NCCL_ASYNC_ERROR_HANDLING=1 and, when N > 1, OMP_NUM_THREADS=1\n"
            "  (both only when not already set)\n\n"
            "A worker that fails does not stop the others: each ends by its own deadlines\n"
            "(and reports its own error); at --timeout the remaining ones get SIGTERM,\n"
            "then SIGKILL after the grace period. SIGINT, SIGTERM and SIGHUP to the\n"
            "launcher are forwarded to every worker still running (as torchrun does);\n"
            "those still running after the grace period, or when a second signal comes,\n"
            "get SIGKILL. Workers' output is not prefixed.\n\n"
            "Exit status: 0 all workers exited 0; else the status of the first worker to\n"
            "fail (1 when it was killed by a signal or at the timeout); 128+N when signal\n"
            "N stopped the launcher (130 INT, 143 TERM, 129 HUP); 127 PROG could not be\n"
            "started; 2 bad options.\n\n"
            "example: ddpsim launch --nproc-per-node 4 -- ddpsim train --accelerator ddp_cpu \\\n"
            "             --devices 4\n");
}

/* torchrun's: PContext.close(death_sig, timeout=30) waits 30 s for the
 * workers it signalled before SIGKILL. */
#define LAUNCH_GRACE_S 30.0

typedef struct {
    ddp_pid_t pid;
    int running;
    int status;
} worker_t;

/* The signal that stops the launcher (INT, TERM, HUP) and how many came. */
static volatile sig_atomic_t g_signal, g_signals;

static void on_signal(int sig)
{
    g_signal = sig;
    g_signals++;
}

static const char *sig_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP"
                                                                                 : "a signal";
}

/* Reaps worker i if it ended (the seam has no "wait for any"): 1 when it
 * did. With report, a failure is named on stderr. */
static int reap(ddp_sys_t *sys, worker_t *w, int i, long rank0, int report)
{
    int st = 0, wr = ddp_sys_wait(sys, w[i].pid, &st, 0);
    if (wr == DDP_ETIMEOUT)
        return 0; /* still running */
    if (wr != 0) {
        fprintf(stderr, "ddpsim launch: local rank %d: %s\n", i, ddp_err_message());
        st = 1;
    }
    w[i].running = 0;
    w[i].status = st;
    if (report && st > 128)
        fprintf(stderr, "ddpsim launch: local rank %d (rank %ld) was killed by signal %d\n",
                i, rank0 + i, st - 128);
    else if (report && st != 0)
        fprintf(stderr, "ddpsim launch: local rank %d (rank %ld) exited with status %d\n",
                i, rank0 + i, st);
    return 1;
}

/* Stops the workers still running: sig to each, then up to grace_s for
 * them to end; SIGKILL to those left after it, or at once when another
 * signal reaches the launcher meanwhile. Every wait is bounded. */
static void stop_workers(ddp_sys_t *sys, worker_t *w, int n, long rank0, int sig,
                         double grace_s)
{
    int left = 0;
    for (int i = 0; i < n; i++)
        if (w[i].running) {
            ddp_sys_kill(sys, w[i].pid, sig);
            left++;
        }
    int seen = g_signals;
    int64_t kill_at = ddp_sys_deadline_in(sys, (int64_t)(grace_s * 1e9));
    while (left > 0) {
        for (int i = 0; i < n; i++)
            if (w[i].running)
                left -= reap(sys, w, i, rank0, 0);
        if (left == 0)
            break;
        if (ddp_sys_now(sys) >= kill_at || g_signals != seen) {
            if (g_signals != seen)
                fprintf(stderr, "ddpsim launch: %s again: SIGKILL to the %d worker(s) "
                                "still running\n", sig_name(g_signal), left);
            else
                fprintf(stderr, "ddpsim launch: %d worker(s) still running %g s after "
                                "%s (--grace-period): SIGKILL\n", left, grace_s,
                        sig_name(sig));
            for (int i = 0; i < n; i++) {
                if (!w[i].running)
                    continue;
                int st = 0;
                ddp_sys_kill(sys, w[i].pid, SIGKILL);
                ddp_sys_wait(sys, w[i].pid, &st, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S));
                w[i].running = 0;
                w[i].status = st;
            }
            break;
        }
        int64_t next = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS);
        ddp_sys_sleep_until(sys, next < kill_at ? next : kill_at);
    }
}

/* The defaults of what the command line left unset: torchrun's PET_<OPTION>
 * variables when set (even empty), else torchrun's defaults. */
static int apply_defaults(const ddp_opt_spec_t *sp, ddp_env_t *env, const int *unset)
{
    static const struct {
        const char *opt, *var, *dflt;
    } defs[] = {
        {"nproc-per-node", "PET_NPROC_PER_NODE", "1"},
        {"nnodes", "PET_NNODES", "1"},
        {"node-rank", "PET_NODE_RANK", "0"},
        {"master-addr", "PET_MASTER_ADDR", "127.0.0.1"},
        {"master-port", "PET_MASTER_PORT", "29500"},
        {"rdzv-id", "PET_RDZV_ID", "none"},
    };
    for (size_t k = 0; k < sizeof defs / sizeof defs[0]; k++) {
        /* set but empty is a value, as in torchrun: refused, not the default */
        const char *v = ddp_env_get(env, defs[k].var);
        if (unset[k] && ddp_opt_apply(sp, defs[k].opt, v ? v : defs[k].dflt,
                                      v ? defs[k].var : NULL) != 0)
            return 2;
    }
    return 0;
}

/* The options of one launch (torchrun's names). */
typedef struct launch {
    long nproc, nnodes, node_rank, port;
    const char *addr, *run_id;
    char host[256]; /* addr as torch reads it */
    double timeout_s, grace_s;
} launch_t;

#define LAUNCH_ADDR_FORM                                                                \
    "a host name or IP address of node rank 0: letters, digits, '_', '.', ':' and '-' " \
    "(an IPv6 address with or without brackets), as torch reads the endpoint ADDR:PORT"

/* --master-addr as torch 1.13 reads it: the host of the endpoint "ADDR:PORT"
 * (torch/distributed/elastic/rendezvous/utils.py, parse_rendezvous_endpoint):
 * leading white space goes, so do brackets around it, and what is left must
 * be [\w.:-]+ (bytes >= 0x80 are taken for the letters \w allows). */
static int parse_master_addr(const char *value, void *dst)
{
    launch_t *L = dst;
    while (*value == ' ' || (*value >= '\t' && *value <= '\r'))
        value++;
    size_t n = strlen(value);
    if (n > 1 && value[0] == '[' && value[n - 1] == ']')
        value++, n -= 2;
    if (n == 0 || n >= sizeof L->host)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)value[i];
        if (!isalnum(c) && c < 0x80 && !strchr("_.:-", c))
            return -1;
    }
    memcpy(L->host, value, n);
    L->host[n] = '\0';
    L->addr = L->host;
    return 0;
}

/* Local worker l's variables, as torchrun sets them (harness/worker_env.c),
 * into env: 0, or nonzero when out of memory. No store is hosted here
 * (rank 0 serves it): TORCHELASTIC_USE_AGENT_STORE=False. */
static int worker_env(ddp_env_t *env, const launch_t *L, long l)
{
    ddp_worker_place_t p = {.local_rank = l, .nproc = L->nproc, .group_rank = L->node_rank,
                            .group_world = L->nnodes, .master_addr = L->addr,
                            .master_port = L->port, .run_id = L->run_id};
    return ddp_worker_env(env, &p);
}

/* Starts the node's nproc workers into w (*n: those started). 0, or the
 * exit status when one did not start (1: out of memory, 127). */
static int start_workers(ddp_sys_t *sys, const launch_t *L, char **prog, worker_t *w, int *n)
{
    ddp_env_t *penv = ddp_sys_env(sys);
    int rc = 0;
    for (long l = 0; l < L->nproc; l++) {
        ddp_env_t *env = ddp_env_clone(penv);
        if (!env) {
            fprintf(stderr, "ddpsim launch: out of memory\n");
            rc = 1;
            break;
        }
        int e = worker_env(env, L, l);
        char name[32];
        snprintf(name, sizeof name, "launch-worker%ld", l);
        ddp_spawn_t spawn = {.argv = prog, .env = env, .name = name};
        int src = e ? -ENOMEM : ddp_sys_spawn(sys, &spawn, &w[*n].pid);
        ddp_env_free(env);
        if (src != 0) {
            fprintf(stderr, "ddpsim launch: local rank %ld: %s\n", l,
                    e ? "out of memory" : ddp_err_message());
            rc = 127;
            break;
        }
        w[*n].running = 1;
        w[*n].status = 0;
        (*n)++;
    }
    return rc;
}

/* Waits for the n workers until the deadline; a signal is forwarded to
 * them (*forwarded: it). The first failure's status (0: none). */
static int watch_workers(ddp_sys_t *sys, const launch_t *L, worker_t *w, int n, long rank0,
                         int64_t deadline, int *forwarded)
{
    int first_fail = -1;
    /* Poll every worker (the seam has no "wait for any"), so that "first to
     * fail" is first in time. */
    int left = n;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (!w[i].running || !reap(sys, w, i, rank0, 1))
                continue;
            left--;
            if (w[i].status != 0 && first_fail < 0)
                first_fail = w[i].status > 128 ? 1 : w[i].status;
        }
        if (left == 0)
            break;
        if (g_signal) { /* as torchrun: the signal to every worker, then SIGKILL */
            int sig = g_signal;
            fprintf(stderr, "ddpsim launch: got %s: forwarding it to %d worker(s); "
                            "SIGKILL to those still running %g s later (--grace-period)\n",
                    sig_name(sig), left, L->grace_s);
            stop_workers(sys, w, n, rank0, sig, L->grace_s);
            *forwarded = sig;
            return 0;
        }
        if (ddp_sys_now(sys) >= deadline) {
            fprintf(stderr, "ddpsim launch: %d of %d worker(s) still running after "
                            "--timeout %g s: stopping them (SIGTERM, then SIGKILL after "
                            "%g s)\n",
                    left, n, L->timeout_s, L->grace_s);
            stop_workers(sys, w, n, rank0, SIGTERM, L->grace_s);
            if (first_fail < 0)
                first_fail = 1;
            break;
        }
        int64_t next = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS);
        ddp_sys_sleep_until(sys, next < deadline ? next : deadline);
    }
    return first_fail < 0 ? 0 : first_fail;
}

int ddp_cmd_launch(ddp_sys_t *sys, int argc, char **argv)
{
    ddp_env_t *penv = ddp_sys_env(sys);
    launch_t L = {.nproc = -1, .nnodes = -1, .node_rank = -1, .port = -1,
                  .timeout_s = 3600, .grace_s = LAUNCH_GRACE_S};
    int nprog;
    const ddp_opt_t opts[] = {
        OPT_LONG("nproc-per-node", &L.nproc, 1, LAUNCH_MAX_PROCS),
        OPT_LONG("nnodes", &L.nnodes, 1, 100000),
        OPT_LONG("node-rank", &L.node_rank, 0, 99999),
        OPT_FN("master-addr", &L, parse_master_addr, LAUNCH_ADDR_FORM),
        OPT_LONG("master-port", &L.port, 1, 65535),
        OPT_STR("rdzv-id", &L.run_id, "a non-empty id"),
        OPT_SEC_POS("timeout", &L.timeout_s, 1e7),
        OPT_SEC("grace-period", &L.grace_s, 0, 1e6),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("launch", opts, launch_usage), .in_order = 1,
                         .underscores = 1, .min_operands = 1, .max_operands = -1,
                         .operands = "a program to launch: ddpsim launch [OPTIONS] -- PROG "
                                     "[ARGS...]"};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &nprog);
    const int unset[] = {L.nproc < 0, L.nnodes < 0, L.node_rank < 0,
                         !L.addr,    L.port < 0,   !L.run_id};
    if (apply_defaults(&sp, penv, unset) != 0)
        return 2;
    if (L.node_rank >= L.nnodes) {
        char v[24], form[64];
        snprintf(v, sizeof v, "%ld", L.node_rank);
        snprintf(form, sizeof form, "an integer 0..%ld (--nnodes %ld)", L.nnodes - 1, L.nnodes);
        return ddp_opt_bad("launch", "--node-rank", v, form);
    }
    char **prog = argv + 1;
    prog[nprog] = NULL; /* the operands were moved up: argv[argc] is NULL */

    long rank0 = L.node_rank * L.nproc;
    worker_t w[LAUNCH_MAX_PROCS];
    int n = 0;
    /* Before the first worker: a signal from here on is forwarded. */
    g_signal = g_signals = 0;
    ddp_tool_catch_signals(on_signal, 1);
    int64_t deadline = ddp_sys_deadline_in(sys, (int64_t)(L.timeout_s * 1e9));
    int rc = start_workers(sys, &L, prog, w, &n);
    if (rc) { /* not every worker started: the others cannot rendezvous */
        stop_workers(sys, w, n, rank0, SIGTERM, L.grace_s);
        ddp_tool_catch_signals(NULL, 1);
        return rc;
    }
    int forwarded = 0;
    rc = watch_workers(sys, &L, w, n, rank0, deadline, &forwarded);
    ddp_tool_catch_signals(NULL, 1);
    if (forwarded)
        return 128 + forwarded;
    /* A signal after the last worker ended stops nothing, but it came. */
    if (g_signal)
        return 128 + g_signal;
    return rc;
}
