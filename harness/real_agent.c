/* harness/real_agent.c — torch's own elastic agent as a real run's
 * per-node process (`launcher torchrun-elastic` with `exec`, under
 * --real): the agent's command line, the workers it starts (found in its
 * session, Linux /proc), and their outcomes (docs/real-runs.md, "torch's
 * own agent").
 *
 * torch 1.13's LocalElasticAgent starts its workers with subprocess.Popen
 * in its own session and reaps them itself: the runner sees a worker's
 * RANK, LOCAL_RANK and TORCHELASTIC_RESTART_COUNT in its environment and
 * its stderr file (torch's --log_dir), but never its exit status. A failed
 * worker's status is in the agent's ChildFailedError table ("exitcode : E
 * (pid: P)"); a worker of an agent that exited 0 succeeded; one its agent
 * stopped for a restart leaves no outcome, as in ddpsim's own agent. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/real.h"
#include "real_priv.h"

int ddp__real_agent_cmd(const char *cmd, char *out, size_t n)
{
    size_t w;
    const char *c = ddp__real_program_word(cmd, &w);
    const char *base = c;
    for (const char *s = c; s < c + w; s++)
        if (*s == '/')
            base = s + 1;
    size_t bl = (size_t)(c + w - base);
    if (strstr(cmd, "torch.distributed.run") || (bl >= 8 && !strncmp(base, "torchrun", 8))) {
        snprintf(out, n, "%s", cmd); /* already torch's launcher */
        return 0;
    }
    int python = 0;
    for (size_t i = 0; i + 6 <= bl && !python; i++)
        python = !strncmp(base + i, "python", 6);
    if (!python)
        return ddp_err_set(DDP_ECONFIG,
                           "exec \"%s\" under launcher torchrun-elastic: torch's agent runs a "
                           "Python script; give `PYTHON SCRIPT ARGS` (run as `PYTHON -m "
                           "torch.distributed.run SCRIPT ARGS`) or a torchrun command line",
                           cmd);
    if ((size_t)snprintf(out, n, "%.*s -m torch.distributed.run%s", (int)(c + w - cmd), cmd,
                         c + w) >= n)
        return ddp_err_set(DDP_ECONFIG, "exec \"%s\": too long", cmd);
    return 0;
}

int ddp__real_workers_poll(ddp_real_workers_t *ws, long agent_pid, int agent, int node,
                           int64_t now)
{
    long pids[256];
    int np = ddp_sys_session_pids(agent_pid, pids, 256);
    if (np < 0)
        return np;
    int fresh = 0;
    for (int i = 0; i < ws->n; i++) { /* gone since the last look */
        ddp_real_worker_t *w = &ws->w[i];
        int seen = 0;
        for (int k = 0; k < np && !seen; k++)
            seen = pids[k] == w->pid;
        if (w->agent == agent && !w->gone && !seen) {
            w->gone = 1;
            w->end_ns = now;
        }
    }
    for (int k = 0; k < np; k++) {
        int known = 0;
        for (int i = 0; i < ws->n && !known; i++)
            known = ws->w[i].pid == pids[k];
        char rank[32], local[32], restarts[32];
        if (known || pids[k] == agent_pid || ws->n == DDP_REAL_MAX_WORKERS ||
            ddp_sys_proc_getenv(pids[k], "TORCHELASTIC_RESTART_COUNT", restarts,
                                sizeof restarts) != 1 ||
            ddp_sys_proc_getenv(pids[k], "RANK", rank, sizeof rank) != 1 ||
            ddp_sys_proc_getenv(pids[k], "LOCAL_RANK", local, sizeof local) != 1)
            continue;
        ddp_real_worker_t *w = &ws->w[ws->n++];
        memset(w, 0, sizeof *w);
        w->pid = pids[k];
        w->agent = agent;
        w->node = node;
        w->rank = atoi(rank);
        w->local = atoi(local);
        /* its start: torch's TORCHELASTIC_RESTART_COUNT counts only the
         * restarts after a failure of its own node, not those for a node
         * waiting to join (or another node's failure) */
        for (int i = 0; i < ws->n - 1; i++)
            w->attempt += ws->w[i].agent == agent && ws->w[i].local == w->local;
        w->first_ns = now;
        w->end_ns = -1;
        w->fresh = 1;
        if (ddp_sys_proc_fd_path(w->pid, 2, w->err, sizeof w->err) != 0)
            w->err[0] = '\0';
        fresh++;
    }
    return fresh;
}

/* The exit code the agent's ChildFailedError table gives process pid
 * ("  exitcode  : -9 (pid: 4242)"): 1 and *code when listed, else 0. */
static int table_exitcode(const char *text, long pid, int *code)
{
    char want[48];
    snprintf(want, sizeof want, "(pid: %ld)", pid);
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        const char *x = strstr(l, "exitcode");
        const char *p = strstr(l, want);
        if (x && p && x < l + len && p < l + len) {
            const char *colon = strchr(x, ':');
            if (colon && colon < p) {
                *code = atoi(colon + 1);
                return 1;
            }
        }
        l = e ? e + 1 : NULL;
    }
    return 0;
}

/* Up to 64 KiB of a file, NUL-terminated (an empty string when unreadable). */
static char *slurp(const char *path)
{
    char *text = calloc(1, 65537);
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    size_t len = f && text ? fread(text, 1, 65536, f) : 0;
    if (f)
        fclose(f);
    if (text)
        text[len] = '\0';
    return text;
}

int ddp__real_agent_failure(const char *text, char *out, size_t n)
{
    const char *r = strstr(text, "Root Cause");
    r = r ? r : text;
    const char *rank = strstr(r, "rank      :"), *code = strstr(r, "exitcode  :");
    if (!strstr(text, "ChildFailedError") || !rank || !code)
        return 0;
    rank += strlen("rank      :");
    code += strlen("exitcode  :");
    snprintf(out, n, "ChildFailedError: worker group failed: rank %.*s, exitcode %.*s",
             (int)strcspn(rank + strspn(rank, " "), "\n"), rank + strspn(rank, " "),
             (int)strcspn(code + strspn(code, " "), "\n"), code + strspn(code, " "));
    return 1;
}

int ddp__real_worker_outcomes(const ddp_plan_t *plan, const ddp_real_workers_t *ws,
                              const int *agent_status, const char *const *agent_err,
                              ddp_sim_outcome_t **outs, int n)
{
    for (int i = 0; i < ws->n; i++) {
        const ddp_real_worker_t *w = &ws->w[i];
        int last = 1; /* its agent's last attempt */
        for (int k = 0; k < ws->n; k++)
            last &= ws->w[k].agent != w->agent || ws->w[k].attempt <= w->attempt;
        int status = 0;
        int listed = agent_err[w->agent] && table_exitcode(agent_err[w->agent], w->pid, &status);
        if (!w->killed && !listed && !(last && agent_status[w->agent] == 0))
            continue; /* stopped by its agent: no outcome, as ddpsim's agent's workers */
        ddp_sim_outcome_t *no = realloc(*outs, sizeof **outs * (size_t)(n + 1));
        if (!no)
            return -ENOMEM;
        *outs = no;
        ddp_sim_outcome_t *x = &no[n++];
        ddp_sim_outcome_init(x);
        x->name = "worker";
        x->rank = w->rank;
        x->node = w->node;
        x->attempt = w->attempt;
        x->world = plan->expected_world;
        x->foreign = 1;
        x->connect_ns = -1;
        x->join_ns = -1;
        x->end_ns = w->end_ns >= 0 ? w->end_ns : w->first_ns;
        snprintf(x->progress, sizeof x->progress, "unknown (its own store)");
        if (w->killed) {
            x->state = DDP_SIM_TASK_CRASHED;
            x->rc = 137;
            ddp_sim_outcome_set_message(x, "rank %d (node %d, attempt %d, pid %ld): killed by "
                                           "the runner (fault)",
                                        w->rank, w->node, w->attempt, w->pid);
            continue;
        }
        x->state = DDP_SIM_TASK_EXITED;
        if (!listed) { /* its agent's run succeeded */
            x->connect_ns = x->end_ns;
            continue;
        }
        /* torch's exitcode: -S for a signal */
        x->rc = status < 0 ? 128 - status : status;
        char *text = slurp(w->err), why[DDP_ERR_MSG_MAX];
        x->code = ddp__real_classify(x->rc ? x->rc : 1, text ? text : "", why, sizeof why);
        const char *line = strstr(why, ": ") ? strstr(why, ": ") + 2 : "";
        ddp_sim_outcome_set_message(x, "rank %d (node %d, attempt %d, pid %ld), exitcode %d in "
                                       "its agent's ChildFailedError: %s",
                                    w->rank, w->node, w->attempt, w->pid, status,
                                    *line ? line : "nothing on its stderr");
        if (strchr(x->message, '\n')) /* its first line */
            ddp_sim_outcome_set_message(x, "%.*s", (int)strcspn(x->message, "\n"),
                                        x->message);
        free(text);
    }
    return n;
}

char *ddp__real_slurp(const char *path)
{
    return slurp(path);
}
