/* harness/real.c — a scenario as real processes (see ddp/real.h and
 * docs/real-runs.md). Everything touching the OS goes through the sys seam
 * (spawn, wait, kill, sleep, listen) or through the `ip`, `tc` and `setsid`
 * commands it spawns. */
#include "ddp/real.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plan.h"
#include "ddp/sim.h"
#include "real_priv.h"
#include "scenario_priv.h"

#define MAX_PROCS 64
#define SLACK_NS (120 * DDP_NS_PER_S)

/* Has the port holder said it holds the port? */
static int port_held(const char *results)
{
    FILE *f = fopen(results, "r");
    char line[1200];
    int held = 0;
    while (f && !held && fgets(line, sizeof line, f))
        held = line[0] == 'H' && line[1] == '\t';
    if (f)
        fclose(f);
    return held;
}


/* NULL when the plan can run for real; else why not, in buf. */
static const char *plan_unsupported(const ddp_plan_t *p, int netns, char *buf, size_t n)
{
    int per_rank = 1, trainers = 0;
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].kind != DDP_PLAN_PORT_HOLDER) {
            trainers++;
            per_rank &= p->procs[i].rank >= 0;
        }
    int procs = trainers * (per_rank ? 1 : p->entry.num_processes);
    buf[0] = '\0';
    if (procs > MAX_PROCS)
        snprintf(buf, n, "%d processes: real runs stop at %d", procs, MAX_PROCS);
    else if (p->nfiles)
        snprintf(buf, n, "LSF derives the node rank from the host name, and real "
                         "runs cannot give each process a host name of its own");
    else if (p->entry.gpus > 0 || !strcmp(p->entry.backend, "nccl"))
        snprintf(buf, n, "GPU scenario: real NCCL runs are `make hw-test`");
    else if (p->latency_ns && !netns)
        snprintf(buf, n, "a base latency needs --netns (netem)");
    for (int i = 0; i < p->nfaults && !buf[0]; i++) {
        const ddp_sim_fault_t *f = &p->faults[i];
        const char *kind = ddp_sim_fault_kind_name(f->kind);
        int line = p->fault_line[i];
        if (ddp__real_in_process(f))
            continue;
        if (f->kind == DDP_FAULT_BLACKHOLE)
            snprintf(buf, n, "fault %s (line %d): real runs have no packet filter "
                             "to swallow SYNs", kind, line);
        else if (f->kind == DDP_FAULT_RESET)
            snprintf(buf, n, "fault reset after=%lld (line %d): a mid-stream reset "
                             "needs the simulator", (long long)f->after_bytes, line);
        else if ((f->kind == DDP_FAULT_PARTITION || f->kind == DDP_FAULT_DELAY) && !netns)
            snprintf(buf, n, "fault %s (line %d) needs --netns", kind, line);
        else if (f->kind == DDP_FAULT_DELAY && (f->node >= 0 || f->peer_node >= 0 || f->ranks))
            snprintf(buf, n, "fault delay (line %d): netns runs delay every link, "
                             "not chosen ones", line);
        else if ((f->kind == DDP_FAULT_CRASH || f->kind == DDP_FAULT_PAUSE) && f->ranks &&
                 !per_rank)
            snprintf(buf, n, "fault %s ranks= (line %d): with a per-node launch the "
                             "runner does not know which process holds a rank",
                     kind, line);
    }
    return buf[0] ? buf : NULL;
}

const char *ddp_real_unsupported(const ddp_scenario_t *s, const char *accel, int netns,
                                 char *buf, size_t n)
{
    ddp_plan_t *p = NULL;
    if (ddp_scenario_plan(s, accel, 0, &p)) {
        snprintf(buf, n, "cannot build the run: %s", ddp_err_message());
        return buf;
    }
    const char *why = plan_unsupported(p, netns, buf, n);
    ddp_plan_free(p);
    return why;
}

static int run_argv(ddp_sys_t *sys, char *const *argv, int quiet_fail)
{
    ddp_spawn_t sp = {.argv = argv, .env = ddp_sys_env(sys), .name = argv[0]};
    ddp_pid_t pid;
    int st = -1, rc = ddp_sys_spawn(sys, &sp, &pid);
    if (rc == 0)
        rc = ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S));
    if (rc == 0 && st != 0 && !quiet_fail)
        rc = ddp_err_set(DDP_EUNSUPPORTED, "`%s %s %s ...` exited with status %d", argv[0],
                         argv[1] ? argv[1] : "", argv[1] && argv[2] ? argv[2] : "", st);
    return rc ? rc : st;
}

#define RUN(...) run_argv(sys, (char *const[]){__VA_ARGS__, NULL}, 0)
#define RUN_QUIET(...) run_argv(sys, (char *const[]){__VA_ARGS__, NULL}, 1)

typedef struct netns {
    int on, nodes;
    char tag[16]; /* ddps<hex> */
} netns_t;

static void ns_name(const netns_t *ns, int i, char *buf, size_t n)
{
    snprintf(buf, n, "%sn%d", ns->tag, i);
}

/* A namespace `ip netns del` fails on is retried for a second, then named
 * on stderr with the command that removes it (no such failure was seen
 * here; a killed run is what left namespaces behind). Returns how many
 * could not be deleted; the first one's name goes to left (the run then
 * fails on it). */
static int netns_down(ddp_sys_t *sys, netns_t *ns, char *left, size_t left_len)
{
    int nleft = 0;
    if (!ns->on)
        return 0;
    char name[32], br[32];
    for (int i = 0; i < ns->nodes; i++) {
        ns_name(ns, i, name, sizeof name);
        int rc = 1;
        for (int tries = 0; rc && tries < 5; tries++) {
            if (tries)
                ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 200 * DDP_NS_PER_MS));
            rc = RUN_QUIET("ip", "netns", "del", name);
        }
        if (rc) {
            fprintf(stderr, "ddpsim: could not delete network namespace %s; remove it "
                            "with `ip netns del %s` (or `make netns-clean`)\n", name, name);
            if (!nleft++ && left)
                snprintf(left, left_len, "%s", name);
        }
    }
    snprintf(br, sizeof br, "%sbr", ns->tag);
    RUN_QUIET("ip", "link", "del", br);
    ns->on = 0;
    return nleft;
}

static void node_ip(int netns, int i, char *buf, size_t n)
{
    if (netns)
        snprintf(buf, n, "10.213.%d.%d", i / 250, i % 250 + 1);
    else
        snprintf(buf, n, "127.0.%d.%d", i / 250, i % 250 + 1);
}

/* A bridge and one namespace per node, each with a veth on the bridge. */
static int netns_up(ddp_sys_t *sys, netns_t *ns, int nodes, int64_t latency_ns)
{
    ddp_rng_t r;
    ddp_rng_seed(&r, (uint64_t)ddp_sys_now(sys));
    char br[32], name[32], veth[32], cidr[40], ms[32];
    int rc = 1;
    /* a few tags: one may be taken by a run that was killed */
    for (int tries = 0; rc && tries < 4; tries++) {
        snprintf(ns->tag, sizeof ns->tag, "ddps%04x", (unsigned)(ddp_rng_next(&r) & 0xffff));
        snprintf(br, sizeof br, "%sbr", ns->tag);
        rc = RUN_QUIET("ip", "link", "add", br, "type", "bridge");
    }
    ns->nodes = 0;
    ns->on = rc == 0;
    if (rc)
        return ddp_err_wrap("--netns needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and "
                            "iproute2: cannot create bridge %s", br);
    if ((rc = RUN("ip", "link", "set", br, "up")))
        return rc;
    for (int i = 0; i < nodes; i++) {
        ns_name(ns, i, name, sizeof name);
        snprintf(veth, sizeof veth, "%sv%d", ns->tag, i);
        node_ip(1, i, cidr, sizeof cidr - 4);
        strcat(cidr, "/16");
        if ((rc = RUN("ip", "netns", "add", name)))
            return ddp_err_wrap("--netns: cannot create namespace %s (root needed)", name);
        ns->nodes = i + 1;
        if ((rc = RUN("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                      "netns", name)) ||
            (rc = RUN("ip", "link", "set", veth, "master", br, "up")) ||
            (rc = RUN("ip", "-n", name, "addr", "add", cidr, "dev", "eth0")) ||
            (rc = RUN("ip", "-n", name, "link", "set", "eth0", "up")) ||
            (rc = RUN("ip", "-n", name, "link", "set", "lo", "up")))
            return rc;
        if (latency_ns) {
            snprintf(ms, sizeof ms, "%.3fms", (double)latency_ns / 1e6);
            if ((rc = RUN("tc", "-n", name, "qdisc", "add", "dev", "eth0", "root", "netem",
                          "delay", ms)))
                return ddp_err_wrap("--netns: netem (tc qdisc ... netem) is not available");
        }
    }
    return 0;
}

typedef struct proc {
    int task, node, rank; /* rank: the launcher's (-1 per-node scripts) */
    ddp_pid_t pid;
    int started, done, status, killed, stopped;
    int64_t start_ns;
} proc_t;

typedef enum { EV_KILL, EV_STOP, EV_CONT, EV_LINK_DOWN, EV_LINK_UP, EV_DELAY_ON, EV_DELAY_OFF } ev_kind_t;
typedef struct { int64_t t; ev_kind_t kind; int fault; } rev_t;

static int proc_aimed(const ddp_sim_fault_t *f, const proc_t *p)
{
    return (f->node < 0 || f->node == p->node) && ddp__scenario_rank_in(f->ranks, p->rank);
}

static void signal_procs(ddp_sys_t *sys, proc_t *ps, int np, const ddp_sim_fault_t *f, int sig)
{
    for (int i = 0; i < np; i++) {
        if (!ps[i].started || ps[i].done || !proc_aimed(f, &ps[i]))
            continue;
        ddp_sys_kill(sys, -ps[i].pid, sig); /* its process group: workers too */
        ddp_sys_kill(sys, ps[i].pid, sig);  /* before its setsid, no group yet */
        if (sig == 9)
            ps[i].killed = 1;
    }
}

static void link_cmd(ddp_sys_t *sys, const netns_t *ns, const ddp_sim_fault_t *f, int on_off,
                     int delay)
{
    for (int i = 0; i < ns->nodes; i++) {
        char veth[32], name[32], ms[32];
        snprintf(veth, sizeof veth, "%sv%d", ns->tag, i);
        ns_name(ns, i, name, sizeof name);
        if (delay) {
            snprintf(ms, sizeof ms, "%.3fms", (double)f->delay_ns / 1e6);
            if (on_off)
                RUN_QUIET("tc", "-n", name, "qdisc", "replace", "dev", "eth0", "root",
                          "netem", "delay", ms);
            else
                RUN_QUIET("tc", "-n", name, "qdisc", "del", "dev", "eth0", "root");
        } else if (f->node_set >> i & 1) {
            RUN_QUIET("ip", "link", "set", veth, on_off ? "up" : "down");
        }
    }
}

/* Parses the results file into outcomes. */
static int read_results(const char *path, proc_t *ps, int np, const ddp_plan_t *plan,
                        ddp_sim_outcome_t **outs)
{
    int n = 0, cap = np + 16;
    ddp_sim_outcome_t *o = calloc((size_t)cap, sizeof *o);
    FILE *f = fopen(path, "r");
    char line[1200];
    while (o && f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *field[14] = {0};
        int nf = 0;
        for (char *save = NULL, *t = strtok_r(line, "\t", &save); t && nf < 14;
             t = strtok_r(NULL, "\t", &save))
            field[nf++] = t;
        if (n == cap) {
            ddp_sim_outcome_t *no = realloc(o, sizeof *o * (size_t)(cap *= 2));
            if (!no)
                break;
            o = no;
        }
        ddp_sim_outcome_t *x = &o[n];
        memset(x, 0, sizeof *x);
        int task = nf > 1 ? atoi(field[1]) : -1;
        const char *tname = task >= 0 && task < plan->nprocs ? plan->procs[task].name : "?";
        if (field[0][0] == 'R' && nf >= 13) {
            x->rank = atoi(field[2]);
            x->world = atoi(field[3]);
            x->node = atoi(field[5]);
            x->rc = atoi(field[6]);
            x->code = atoi(field[7]);
            x->connect_ns = atoll(field[9]);
            x->end_ns = atoll(field[10]);
            x->state = DDP_SIM_TASK_EXITED;
            snprintf(x->message, sizeof x->message, "%s", strcmp(field[12], "-") ? field[12] : "");
            /* A worker an accelerator launched reports under its parent's task. */
            int parent_is_rank = task >= 0 && task < np && ps[task].rank == x->rank;
            x->name = parent_is_rank || x->rank < 0 ? tname : "worker";
            n++;
        } else if (field[0][0] == 'C' && nf >= 5) {
            x->rank = atoi(field[2]);
            x->world = 1; /* it entered the plugin: a rank */
            x->node = atoi(field[3]);
            x->end_ns = atoll(field[4]);
            x->connect_ns = -1;
            x->state = DDP_SIM_TASK_CRASHED;
            x->name = tname;
            snprintf(x->message, sizeof x->message, "crashed by a fault");
            n++;
        }
    }
    if (f)
        fclose(f);
    /* Processes killed by the runner left no record of their own. */
    for (int i = 0; o && i < np; i++) {
        if (!ps[i].killed)
            continue;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = o[k].node == ps[i].node && ps[i].rank >= 0 && o[k].rank == ps[i].rank &&
                   o[k].state == DDP_SIM_TASK_EXITED && o[k].rc == 0;
        if (seen || n == cap)
            continue;
        ddp_sim_outcome_t *x = &o[n++];
        memset(x, 0, sizeof *x);
        x->name = plan->procs[ps[i].task].name;
        x->rank = ps[i].rank;
        x->node = ps[i].node;
        x->world = -1;
        x->connect_ns = -1;
        x->state = DDP_SIM_TASK_CRASHED;
        snprintf(x->message, sizeof x->message, "killed by the runner (fault)");
    }
    *outs = o;
    return o ? n : -ENOMEM;
}

/* The environment of the real process: the plan's, exactly, plus what
 * the machine needs (PATH), where coverage goes (make coverage's second
 * matrix) and the log level (errors travel in the result records). */
static ddp_env_t *proc_env(ddp_sys_t *sys, const ddp_plan_proc_t *x)
{
    ddp_env_t *env = ddp_env_clone(x->env);
    if (!env)
        return NULL;
    const ddp_env_t *mine = ddp_sys_env(sys);
    const char *path = ddp_env_get(mine, "PATH");
    ddp_env_set(env, "PATH", path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
    static const char *const pass[] = {"GCOV_PREFIX", "GCOV_PREFIX_STRIP"};
    for (size_t k = 0; k < sizeof pass / sizeof pass[0]; k++)
        if (ddp_env_get(mine, pass[k]))
            ddp_env_set(env, pass[k], ddp_env_get(mine, pass[k]));
    const char *lvl = ddp_env_get(mine, "DDP_LOG");
    ddp_env_set(env, "DDP_LOG", lvl ? lvl : "off");
    return env;
}

int ddp_real_run(ddp_sys_t *sys, const ddp_scenario_t *s, const char *accel,
                 const ddp_real_opts_t *o, ddp_scn_result_t *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->accelerator, sizeof r->accelerator, "%s", accel);
    char why[300];
    ddp_plan_t *plan = NULL;
    int rc = ddp_scenario_plan(s, accel, o->seed, &plan);
    if (rc) {
        snprintf(r->why, sizeof r->why, "cannot build the run: %s", ddp_err_message());
        return rc;
    }
    if (plan_unsupported(plan, o->netns, why, sizeof why)) {
        r->skipped = 1;
        snprintf(r->why, sizeof r->why, "skipped: %s", why);
        ddp_plan_free(plan);
        return 0;
    }
    proc_t ps[MAX_PROCS + 2];
    int np = 0;
    netns_t ns = {0};
    char plan_path[300];
    int64_t t0 = ddp_sys_now(sys);
    const char *tmpdir = o->tmpdir ? o->tmpdir : "/tmp";
    unsigned long long tag = (unsigned long long)(t0 ^ (int64_t)plan->seed);
    snprintf(plan->results, sizeof plan->results, "%s/ddpsim-real-%llx.tsv", tmpdir, tag);
    snprintf(plan_path, sizeof plan_path, "%s/ddpsim-real-%llx.plan", tmpdir, tag);
    plan->t0 = t0;
    plan->limit_ns = s->master_late_ns + s->timeout_ns + s->train_ns + SLACK_NS;
    for (int i = 0; i < plan->nnodes; i++)
        node_ip(o->netns, i, plan->nodes[i].addr, sizeof plan->nodes[i].addr);
    FILE *rf = fopen(plan->results, "w");
    FILE *pf = rf ? fopen(plan_path, "w") : NULL;
    if (pf)
        rc = ddp_plan_write(plan, pf);
    if (!rf || !pf || rc || fclose(pf)) {
        rc = ddp_err_set(-EIO, "cannot write %s: %s", rf ? plan_path : plan->results,
                         strerror(errno));
        if (rf)
            fclose(rf);
        remove(plan->results);
        remove(plan_path);
        ddp_plan_free(plan);
        return rc;
    }
    fclose(rf);
    if (o->netns && (rc = netns_up(sys, &ns, plan->nnodes, plan->latency_ns)) != 0) {
        snprintf(r->why, sizeof r->why, "%s", ddp_err_message());
        netns_down(sys, &ns, NULL, 0);
        remove(plan->results);
        remove(plan_path);
        ddp_plan_free(plan);
        return rc;
    }
    for (int t = 0; t < plan->nprocs && np < MAX_PROCS + 2; t++) {
        const ddp_plan_proc_t *x = &plan->procs[t];
        ps[np++] = (proc_t){.task = t, .node = x->node, .rank = x->rank,
                            .start_ns = x->start_ns};
    }
    /* Timed faults the runner realises. */
    rev_t evs[2 * DDP_SCN_MAX_FAULTS];
    int nev = 0;
    for (int i = 0; i < plan->nfaults && nev + 2 <= 2 * DDP_SCN_MAX_FAULTS; i++) {
        const ddp_sim_fault_t *f = &plan->faults[i];
        if (ddp__real_in_process(f))
            continue;
        if (f->kind == DDP_FAULT_CRASH)
            evs[nev++] = (rev_t){f->start_ns, EV_KILL, i};
        else if (f->kind == DDP_FAULT_PAUSE) {
            evs[nev++] = (rev_t){f->start_ns, EV_STOP, i};
            evs[nev++] = (rev_t){f->end_ns, EV_CONT, i};
        } else if (f->kind == DDP_FAULT_PARTITION) {
            evs[nev++] = (rev_t){f->start_ns, EV_LINK_DOWN, i};
            if (f->end_ns)
                evs[nev++] = (rev_t){f->end_ns, EV_LINK_UP, i};
        } else if (f->kind == DDP_FAULT_DELAY) {
            evs[nev++] = (rev_t){f->start_ns, EV_DELAY_ON, i};
            if (f->end_ns)
                evs[nev++] = (rev_t){f->end_ns, EV_DELAY_OFF, i};
        }
    }
    for (int a = 1; a < nev; a++)
        for (int b = a; b > 0 && evs[b - 1].t > evs[b].t; b--) {
            rev_t x = evs[b];
            evs[b] = evs[b - 1];
            evs[b - 1] = x;
        }
    int next_ev = 0, timed_out = 0;
    for (;;) {
        int64_t now = ddp_sys_now(sys) - t0;
        /* start what is due */
        for (int i = 0; i < np; i++) {
            proc_t *p = &ps[i];
            if (p->started || now < p->start_ns)
                continue;
            const ddp_plan_proc_t *x = &plan->procs[p->task];
            ddp_env_t *env = proc_env(sys, x);
            char *argv[16], nsname[32], idx[16];
            int k = 0;
            if (o->netns) {
                ns_name(&ns, p->node, nsname, sizeof nsname);
                argv[k++] = "ip", argv[k++] = "netns", argv[k++] = "exec", argv[k++] = nsname;
            }
            snprintf(idx, sizeof idx, "%d", p->task);
            argv[k++] = "setsid";
            argv[k++] = (char *)o->ddpsim;
            argv[k++] = "train", argv[k++] = "--plan", argv[k++] = plan_path;
            argv[k++] = "--process", argv[k++] = idx;
            argv[k] = NULL;
            ddp_spawn_t sp = {.argv = argv, .env = env, .name = x->name};
            int src = env ? ddp_sys_spawn(sys, &sp, &p->pid) : -ENOMEM;
            ddp_env_free(env);
            p->started = 1;
            if (src) {
                p->done = 1;
                p->status = 127;
            }
            /* The port must be held before anyone else starts (in a
             * namespace, starting takes long enough to lose that race). */
            if (!src && x->kind == DDP_PLAN_PORT_HOLDER) {
                int64_t until = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S);
                while (!port_held(plan->results) && ddp_sys_now(sys) < until)
                    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS));
            }
        }
        /* timed faults */
        while (next_ev < nev && evs[next_ev].t <= now) {
            const rev_t *e = &evs[next_ev++];
            const ddp_sim_fault_t *f = &plan->faults[e->fault];
            switch (e->kind) {
            case EV_KILL: signal_procs(sys, ps, np, f, 9); break;
            case EV_STOP: signal_procs(sys, ps, np, f, 19); break;
            case EV_CONT: signal_procs(sys, ps, np, f, 18); break;
            case EV_LINK_DOWN: link_cmd(sys, &ns, f, 0, 0); break;
            case EV_LINK_UP: link_cmd(sys, &ns, f, 1, 0); break;
            case EV_DELAY_ON: link_cmd(sys, &ns, f, 1, 1); break;
            case EV_DELAY_OFF: link_cmd(sys, &ns, f, 0, 1); break;
            }
        }
        /* reap */
        for (int i = 0; i < np; i++) {
            proc_t *p = &ps[i];
            if (!p->started || p->done)
                continue;
            int st;
            if (ddp_sys_wait(sys, p->pid, &st, 0) == 0) {
                p->done = 1;
                p->status = st;
                /* orphans of a killed process go with it */
                ddp_sys_kill(sys, -p->pid, 9);
            }
        }
        int pending = 0, others = 0;
        for (int i = 0; i < np; i++) {
            pending |= !ps[i].started;
            /* the port holder only ends at the limit: not waited for */
            others += ps[i].started && !ps[i].done &&
                      plan->procs[ps[i].task].kind != DDP_PLAN_PORT_HOLDER;
        }
        if (!pending && others == 0)
            break;
        if (now > plan->limit_ns) {
            timed_out = 1;
            break;
        }
        if (o->interrupted && *o->interrupted)
            break;
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS));
    }
    for (int i = 0; i < np; i++)
        if (ps[i].started && !ps[i].done) {
            ddp_sys_kill(sys, -ps[i].pid, 18);
            ddp_sys_kill(sys, -ps[i].pid, 9);
            int st;
            ddp_sys_wait(sys, ps[i].pid, &st, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S));
            ps[i].done = 1;
        }
    char ns_left[32] = "";
    int nleft = netns_down(sys, &ns, ns_left, sizeof ns_left);
    ddp_sim_outcome_t *outs = NULL;
    int n = read_results(plan->results, ps, np, plan, &outs);
    remove(plan->results);
    remove(plan_path);
    if (n < 0) {
        ddp_plan_free(plan);
        return n;
    }
    ddp__scenario_judge(s, outs, n, plan->expected_world,
                        timed_out ? DDP_SIM_TIME_LIMIT : DDP_SIM_DONE, NULL, o->report,
                        o->report_len, r);
    if (o->interrupted && *o->interrupted) {
        r->pass = 0;
        snprintf(r->why, sizeof r->why, "interrupted: its processes were killed%s",
                 o->netns ? " and its namespaces deleted" : "");
    }
    if (nleft) {
        r->pass = r->invariants_ok = 0;
        snprintf(r->why, sizeof r->why,
                 "%d network namespace(s) could not be deleted (first %s): "
                 "remove with `ip netns del %s` or `make netns-clean`", nleft, ns_left, ns_left);
    }
    free(outs);
    ddp_plan_free(plan);
    return 0;
}
