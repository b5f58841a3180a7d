/* harness/real.c — a scenario as real processes (see ddp/real.h and
 * docs/real-runs.md). Everything touching the OS goes through the sys seam
 * (spawn, wait, kill, sleep, listen) or through the `ip`, `tc` and `setsid`
 * commands it spawns. */
#include "ddp/real.h"

#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/sim.h"
#include "scenario_priv.h"

#define MAX_PROCS 64
#define SLACK_NS (120 * DDP_NS_PER_S)

/* ---- inside a `ddpsim train` process ---- */

static int64_t env_i64(ddp_sys_t *sys, const char *key, int64_t dflt)
{
    const char *v = ddp_env_get(ddp_sys_env(sys), key);
    return v && *v ? strtoll(v, NULL, 10) : dflt;
}

static void clean(char *s)
{
    for (; *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r')
            *s = ' ';
}

static void append_line(ddp_sys_t *sys, const char *line)
{
    const char *path = ddp_env_get(ddp_sys_env(sys), "DDPSIM_RESULT_FILE");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    /* One write of one line: appends from concurrent processes do not mix. */
    setvbuf(f, NULL, _IOFBF, 4096);
    fputs(line, f);
    fclose(f);
}

void ddp_real_record_result(ddp_sys_t *sys, const ddp_run_result_t *r)
{
    int64_t t0 = env_i64(sys, "DDPSIM_T0", r->start_ns);
    char msg[600], line[900];
    snprintf(msg, sizeof msg, "%s", r->message);
    clean(msg);
    snprintf(line, sizeof line,
             "R\t%lld\t%d\t%d\t%d\t%lld\t%d\t%d\t%lld\t%lld\t%lld\t%s\t%s\n",
             (long long)env_i64(sys, "DDPSIM_TASK", -1), r->global_rank, r->world_size,
             r->local_rank, (long long)env_i64(sys, "DDPSIM_NODE", 0),
             r->rc ? 1 : 0, r->rc, (long long)(r->start_ns - t0),
             (long long)(r->connect_ns >= 0 ? r->connect_ns - t0 : -1),
             (long long)(r->end_ns - t0), r->accelerator ? r->accelerator : "-",
             msg[0] ? msg : "-");
    append_line(sys, line);
}

void ddp_real_record_holding(ddp_sys_t *sys, uint16_t port)
{
    char line[64];
    snprintf(line, sizeof line, "H\t%u\n", (unsigned)port);
    append_line(sys, line);
}

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

/* The faults armed in this process. */
static struct {
    ddp_sys_t *sys;
    ddp_scenario_t *s;
    int node;
    int64_t t0;
    int fired[DDP_SCN_MAX_FAULTS];
    ddp_rng_t rng;
    char hosts[2048]; /* DDPSIM_HOSTS: node i is the i-th entry */
} armed;

static int active_now(const ddp_sim_fault_t *f)
{
    int64_t now = ddp_sys_now(armed.sys) - armed.t0;
    return now >= f->start_ns && (f->end_ns == 0 || now < f->end_ns);
}

static int fire(int i)
{
    const ddp_sim_fault_t *f = &armed.s->faults[i];
    if (f->count > 0 && armed.fired[i] >= f->count)
        return 0;
    if (f->probability > 0 && f->probability < 1 &&
        (double)(ddp_rng_next(&armed.rng) >> 11) / 9007199254740992.0 >= f->probability)
        return 0;
    armed.fired[i]++;
    return 1;
}

/* The node an address belongs to, by the DDPSIM_HOSTS table (-1 none). */
static int node_of(const ddp_addr_t *a)
{
    char want[DDP_ADDR_STRLEN];
    ddp_addr_t x = *a;
    x.port = 0;
    ddp_addr_format(&x, want, sizeof want);
    char *colon = strrchr(want, ':');
    if (colon && want[0] != '[')
        *colon = '\0';
    int idx = 0;
    for (const char *t = armed.hosts; *t; idx++) {
        const char *eq = strchr(t, '='), *end = strchr(t, ',');
        if (!end)
            end = t + strlen(t);
        if (eq && eq < end && (size_t)(end - eq - 1) == strlen(want) &&
            !strncmp(eq + 1, want, strlen(want)))
            return idx;
        t = *end ? end + 1 : end;
    }
    return -1;
}

static int aims_here(const ddp_sim_fault_t *f)
{
    return (f->node < 0 || f->node == armed.node) && ddp__scenario_rank_in(f->ranks, ddp_ident_rank());
}

static int net_cb(const char *name, int *failnum, void **failinfo, unsigned int *flags)
{
    (void)failnum, (void)flags;
    int resolve = !strcmp(name, "sys/net/resolve");
    const ddp_addr_t *a = resolve ? NULL : ddp_sys_posix_call_addr();
    for (int i = 0; i < armed.s->nfaults; i++) {
        const ddp_sim_fault_t *f = &armed.s->faults[i];
        int e = 0;
        if (resolve)
            e = f->kind == DDP_FAULT_RESOLVE ? EHOSTUNREACH : 0;
        else if ((f->peer_node < 0 || f->peer_node == node_of(a)) &&
                 (!f->port || f->port == a->port))
            e = f->kind == DDP_FAULT_REFUSE ? ECONNREFUSED
                : f->kind == DDP_FAULT_RESET && f->after_bytes <= 0 ? ECONNRESET
                                                                    : 0;
        if (e && active_now(f) && aims_here(f) && fire(i)) {
            *failinfo = (void *)(intptr_t)e;
            return 1;
        }
    }
    return 0;
}

static int phase_cb(const char *name, int *failnum, void **failinfo, unsigned int *flags)
{
    (void)name, (void)failnum, (void)failinfo, (void)flags;
    const char *phase = ddp_ident_phase();
    for (int i = 0; phase && i < armed.s->nfaults; i++) {
        const ddp_sim_fault_t *f = &armed.s->faults[i];
        if (f->kind != DDP_FAULT_CRASH || !f->phase || strcmp(f->phase, phase) ||
            !active_now(f) || !aims_here(f) || !fire(i))
            continue;
        char line[256];
        snprintf(line, sizeof line, "C\t%lld\t%d\t%d\t%lld\t%s\n",
                 (long long)env_i64(armed.sys, "DDPSIM_TASK", -1), ddp_ident_rank(),
                 armed.node, (long long)(ddp_sys_now(armed.sys) - armed.t0), phase);
        append_line(armed.sys, line);
        ddp_sys_kill(armed.sys, DDP_PID_SELF, 9);
    }
    return 0;
}

int ddp_real_arm_faults(ddp_sys_t *sys)
{
    const char *spec = ddp_env_get(ddp_sys_env(sys), "DDPSIM_REAL_FAULTS");
    if (!spec || !*spec)
        return 0;
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return ddp_err_set(-ENOMEM, "out of memory");
    fprintf(m, "scenario \"real faults\"\nnodes %lld\n",
            (long long)env_i64(sys, "DDPSIM_NODES", 64));
    for (const char *c = spec; *c; c++)
        fputc(*c == ';' ? '\n' : *c, m);
    fprintf(m, "\nexpect invariants\n");
    fclose(m);
    char err[512];
    int rc = ddp_scenario_parse(text, "DDPSIM_REAL_FAULTS", NULL, &armed.s, err, sizeof err);
    free(text);
    if (rc)
        return ddp_err_set(DDP_ECONFIG, "DDPSIM_REAL_FAULTS: %s", err);
    armed.sys = sys;
    armed.node = (int)env_i64(sys, "DDPSIM_NODE", 0);
    armed.t0 = env_i64(sys, "DDPSIM_T0", ddp_sys_now(sys));
    ddp_rng_seed(&armed.rng, (uint64_t)env_i64(sys, "DDPSIM_SEED", 1) * 7919 +
                                 (uint64_t)env_i64(sys, "DDPSIM_TASK", 0));
    const char *h = ddp_env_get(ddp_sys_env(sys), "DDPSIM_HOSTS");
    snprintf(armed.hosts, sizeof armed.hosts, "%s", h ? h : "");
    fiu_init(0);
    int net = 0, phase = 0, res = 0;
    for (int i = 0; i < armed.s->nfaults; i++) {
        ddp_sim_fault_kind_t k = armed.s->faults[i].kind;
        net |= k == DDP_FAULT_REFUSE || k == DDP_FAULT_RESET;
        res |= k == DDP_FAULT_RESOLVE;
        phase |= k == DDP_FAULT_CRASH && armed.s->faults[i].phase;
    }
    if ((net && fiu_enable_external("sys/net/connect", 1, NULL, 0, net_cb)) ||
        (res && fiu_enable_external("sys/net/resolve", 1, NULL, 0, net_cb)) ||
        (phase && fiu_enable_external("ddp/phase/enter", 1, NULL, 0, phase_cb)))
        return ddp_err_set(DDP_EINTERNAL, "libfiu: cannot enable the fault points");
    return 0;
}

/* ---- the runner ---- */

static int in_process(const ddp_sim_fault_t *f)
{
    return f->kind == DDP_FAULT_REFUSE || f->kind == DDP_FAULT_RESOLVE ||
           (f->kind == DDP_FAULT_RESET && f->after_bytes <= 0) ||
           (f->kind == DDP_FAULT_CRASH && f->phase);
}

const char *ddp_real_unsupported(const ddp_scenario_t *s, const char *accel, int netns,
                                 char *buf, size_t n)
{
    ddp_sim_launcher_t l = s->launcher;
    if (l == DDP_SIM_LAUNCH_AUTO)
        l = !strcmp(accel, "ddp_hpc")       ? DDP_SIM_LAUNCH_SLURM
            : !strcmp(accel, "ddp_cpu_hpc") ? DDP_SIM_LAUNCH_TORCHRUN
                                            : DDP_SIM_LAUNCH_PER_NODE;
    int per_rank = l != DDP_SIM_LAUNCH_PER_NODE;
    int procs = s->nodes * (!strcmp(accel, "ddp2") ? 1 : s->devices);
    if (procs > MAX_PROCS)
        snprintf(buf, n, "%d processes: real runs stop at %d", procs, MAX_PROCS);
    else if (l == DDP_SIM_LAUNCH_LSF)
        snprintf(buf, n, "LSF derives the node rank from the host name, and real "
                         "runs cannot give each process a host name of its own");
    else if (s->gpus > 0 || !strcmp(s->backend, "nccl"))
        snprintf(buf, n, "GPU scenario: real NCCL runs are `make hw-test`");
    else if (s->latency_ns && !netns)
        snprintf(buf, n, "a base latency needs --netns (netem)");
    else {
        buf[0] = '\0';
        for (int i = 0; i < s->nfaults && !buf[0]; i++) {
            const ddp_sim_fault_t *f = &s->faults[i];
            const char *kind = ddp_sim_fault_kind_name(f->kind);
            if (in_process(f))
                continue;
            if (f->kind == DDP_FAULT_BLACKHOLE)
                snprintf(buf, n, "fault %s (line %d): real runs have no packet filter "
                                 "to swallow SYNs", kind, s->fault_line[i]);
            else if (f->kind == DDP_FAULT_RESET)
                snprintf(buf, n, "fault reset after=%lld (line %d): a mid-stream reset "
                                 "needs the simulator", (long long)f->after_bytes,
                         s->fault_line[i]);
            else if (f->kind == DDP_FAULT_POINT)
                snprintf(buf, n, "fault point point=%s (line %d): real runs do not aim "
                                 "fault points (fiu-run -c 'enable name=%s' hits every "
                                 "process)", f->point, s->fault_line[i], f->point);
            else if ((f->kind == DDP_FAULT_PARTITION || f->kind == DDP_FAULT_DELAY) && !netns)
                snprintf(buf, n, "fault %s (line %d) needs --netns", kind, s->fault_line[i]);
            else if (f->kind == DDP_FAULT_DELAY && (f->node >= 0 || f->peer_node >= 0 || f->ranks))
                snprintf(buf, n, "fault delay (line %d): netns runs delay every link, "
                                 "not chosen ones", s->fault_line[i]);
            else if ((f->kind == DDP_FAULT_CRASH || f->kind == DDP_FAULT_PAUSE) &&
                     f->ranks && !per_rank)
                snprintf(buf, n, "fault %s ranks= (line %d): with a per-node launch the "
                                 "runner does not know which process holds a rank",
                         kind, s->fault_line[i]);
        }
    }
    return buf[0] ? buf : NULL;
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
static int read_results(const char *path, proc_t *ps, int np, const ddp_sim_t *plan,
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
        const char *tname = task >= 0 && task < ddp_sim_task_count(plan)
                                ? ddp_sim_outcome(plan, task)->name : "?";
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
        x->name = ddp_sim_outcome(plan, ps[i].task)->name;
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

int ddp_real_run(ddp_sys_t *sys, const ddp_scenario_t *s, const char *accel,
                 const ddp_real_opts_t *o, ddp_scn_result_t *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->accelerator, sizeof r->accelerator, "%s", accel);
    char why[300];
    if (ddp_real_unsupported(s, accel, o->netns, why, sizeof why)) {
        r->skipped = 1;
        snprintf(r->why, sizeof r->why, "skipped: %s", why);
        return 0;
    }
    uint64_t seed = o->seed ? o->seed : s->seed;
    ddp_sim_opts_t so = {.seed = seed};
    ddp_scn_plan_t plan;
    int rc = ddp__scenario_build(s, accel, &so, &plan);
    if (rc) {
        snprintf(r->why, sizeof r->why, "cannot build the run: %s", ddp_err_message());
        return rc;
    }
    ddp_sim_t *sim = plan.sim;
    int ntasks = ddp_sim_task_count(sim);
    proc_t ps[MAX_PROCS + 2];
    int np = 0;
    netns_t ns = {0};
    char results[512], hosts[2048] = "", faults[4096] = "", tmp[64];
    int64_t t0 = ddp_sys_now(sys);
    snprintf(results, sizeof results, "%s/ddpsim-real-%llx.tsv", o->tmpdir ? o->tmpdir : "/tmp",
             (unsigned long long)(t0 ^ (int64_t)seed));
    FILE *rf = fopen(results, "w");
    if (!rf) {
        ddp_sim_free(sim);
        return ddp_err_set(-errno, "cannot create %s: %s", results, strerror(errno));
    }
    fclose(rf);
    if (o->netns && (rc = netns_up(sys, &ns, s->nodes, s->latency_ns)) != 0) {
        snprintf(r->why, sizeof r->why, "%s", ddp_err_message());
        netns_down(sys, &ns, NULL, 0);
        remove(results);
        ddp_sim_free(sim);
        return rc;
    }
    for (int i = 0; i < s->nodes; i++) {
        char ip[32];
        node_ip(o->netns, i, ip, sizeof ip);
        size_t off = strlen(hosts);
        snprintf(hosts + off, sizeof hosts - off, "%s%s=%s", i ? "," : "",
                 ddp_sim_node_hostname(sim, i), ip);
    }
    for (int i = 0; i < s->nfaults; i++) {
        if (!in_process(&s->faults[i]))
            continue;
        char *line = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&line, &len);
        ddp_scenario_t *tmp1 = ddp_scenario_new();
        tmp1->nfaults = 1;
        tmp1->faults[0] = s->faults[i];
        tmp1->faults[0].ranks = s->faults[i].ranks ? strdup(s->faults[i].ranks) : NULL;
        ddp_scenario_write(tmp1, m);
        fclose(m);
        ddp_scenario_free(tmp1);
        char *fl = line ? strstr(line, "\nfault ") : NULL;
        if (fl) {
            char *end = strchr(fl + 1, '\n');
            size_t off = strlen(faults);
            snprintf(faults + off, sizeof faults - off, "%s%.*s", off ? ";" : "",
                     (int)(end ? end - fl - 1 : (long)strlen(fl + 1)), fl + 1);
        }
        free(line);
    }
    /* The plan's tasks become processes (the squatter a port holder). */
    const ddp_trainer_cfg_t *cfg = &plan.launch.cfg;
    for (int t = 0; t < ntasks && np < MAX_PROCS + 2; t++) {
        const ddp_sim_outcome_t *x = ddp_sim_outcome(sim, t);
        ps[np] = (proc_t){.task = t, .node = x->node, .rank = x->rank,
                          .start_ns = ddp_sim_task_start(sim, t)};
        np++;
    }
    /* Timed faults the runner realises. */
    rev_t evs[2 * DDP_SCN_MAX_FAULTS];
    int nev = 0;
    for (int i = 0; i < s->nfaults; i++) {
        const ddp_sim_fault_t *f = &s->faults[i];
        if (in_process(f))
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
    int next_ev = 0, live = 0, timed_out = 0;
    int64_t limit = s->master_late_ns + s->timeout_ns + s->train_ns + SLACK_NS;
    char secs[32], sto[32], trn[32], devs[16], nn[16], sd[32], gp[16];
    snprintf(secs, sizeof secs, "%.3f", (double)cfg->timeout_ns / 1e9);
    snprintf(sto, sizeof sto, "%.3f",
             (double)(cfg->store_timeout_ns ? cfg->store_timeout_ns : 300 * DDP_NS_PER_S) / 1e9);
    snprintf(trn, sizeof trn, "%.3f", (double)cfg->train_ns / 1e9);
    snprintf(devs, sizeof devs, "%d", cfg->num_processes);
    snprintf(nn, sizeof nn, "%d", cfg->num_nodes);
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
    snprintf(gp, sizeof gp, "%d", cfg->gpus);
    for (;;) {
        int64_t now = ddp_sys_now(sys) - t0;
        /* start what is due */
        for (int i = 0; i < np; i++) {
            proc_t *p = &ps[i];
            if (p->started || now < p->start_ns)
                continue;
            const ddp_sim_outcome_t *x = ddp_sim_outcome(sim, p->task);
            ddp_env_t *env = ddp_env_clone(ddp_sim_task_env(sim, p->task));
            const char *path = ddp_env_get(ddp_sys_env(sys), "PATH");
            ddp_env_set(env, "PATH", path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
            ddp_env_set(env, "DDPSIM_RESULT_FILE", results);
            ddp_env_set(env, "DDPSIM_QUIET", "1");
            ddp_env_setf(env, "DDPSIM_T0", "%lld", (long long)t0);
            ddp_env_setf(env, "DDPSIM_TASK", "%d", p->task);
            ddp_env_setf(env, "DDPSIM_NODE", "%d", p->node);
            ddp_env_setf(env, "DDPSIM_NODES", "%d", s->nodes);
            ddp_env_set(env, "DDPSIM_SEED", sd);
            ddp_env_set(env, "DDPSIM_HOSTS", hosts);
            /* This machine's host name is every process's: the tcp backend
             * must advertise the node's own address instead. */
            if (!ddp_env_has(env, "DDP_TCP_ADDR"))
                ddp_env_set(env, "DDP_TCP_ADDR", ddp_sim_node_hostname(sim, p->node));
            if (faults[0])
                ddp_env_set(env, "DDPSIM_REAL_FAULTS", faults);
            /* gcov output of the real processes goes where the runner's does
             * (make coverage's second matrix). */
            static const char *const pass[] = {"GCOV_PREFIX", "GCOV_PREFIX_STRIP"};
            for (size_t k2 = 0; k2 < sizeof pass / sizeof pass[0]; k2++) {
                const char *v = ddp_env_get(ddp_sys_env(sys), pass[k2]);
                if (v)
                    ddp_env_set(env, pass[k2], v);
            }
            const char *lvl = ddp_env_get(ddp_sys_env(sys), "DDP_LOG");
            ddp_env_set(env, "DDP_LOG", lvl ? lvl : "off"); /* errors are in the records */
            char *argv[40];
            int k = 0;
            char nsname[32], portarg[16];
            if (o->netns) {
                ns_name(&ns, p->node, nsname, sizeof nsname);
                argv[k++] = "ip", argv[k++] = "netns", argv[k++] = "exec", argv[k++] = nsname;
            }
            argv[k++] = "setsid";
            argv[k++] = (char *)o->ddpsim;
            if (!strcmp(x->name, "squatter")) {
                snprintf(portarg, sizeof portarg, "%u", (unsigned)s->port_taken);
                argv[k++] = "hold-port", argv[k++] = portarg, argv[k++] = "--seconds";
                snprintf(tmp, sizeof tmp, "%.0f", (double)limit / 1e9);
                argv[k++] = tmp;
            } else {
                argv[k++] = "train", argv[k++] = "--accelerator", argv[k++] = (char *)accel;
                argv[k++] = "--devices", argv[k++] = devs, argv[k++] = "--num-nodes", argv[k++] = nn;
                argv[k++] = "--timeout", argv[k++] = secs, argv[k++] = "--store-timeout", argv[k++] = sto;
                argv[k++] = "--seed", argv[k++] = sd, argv[k++] = "--gpus", argv[k++] = gp;
                if (cfg->train_ns)
                    argv[k++] = "--train", argv[k++] = trn;
                if (cfg->backend)
                    argv[k++] = "--backend", argv[k++] = (char *)cfg->backend;
                if (cfg->cluster)
                    argv[k++] = "--cluster", argv[k++] = (char *)cfg->cluster;
                if (s->plugin[0])
                    argv[k++] = "--plugin", argv[k++] = (char *)s->plugin;
            }
            argv[k] = NULL;
            ddp_spawn_t sp = {.argv = argv, .env = env, .name = x->name};
            int src = ddp_sys_spawn(sys, &sp, &p->pid);
            ddp_env_free(env);
            p->started = 1;
            if (src) {
                p->done = 1;
                p->status = 127;
            } else {
                live++;
            }
            /* The port must be held before anyone else starts (in a
             * namespace, starting takes long enough to lose that race). */
            if (!src && !strcmp(x->name, "squatter")) {
                int64_t until = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S);
                while (!port_held(results) && ddp_sys_now(sys) < until)
                    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS));
            }
        }
        /* timed faults */
        while (next_ev < nev && evs[next_ev].t <= now) {
            const rev_t *e = &evs[next_ev++];
            const ddp_sim_fault_t *f = &s->faults[e->fault];
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
                live--;
                /* orphans of a killed process go with it */
                ddp_sys_kill(sys, -p->pid, 9);
            }
        }
        int pending = 0;
        for (int i = 0; i < np; i++)
            pending |= !ps[i].started;
        /* the port holder only ends at the limit: not waited for */
        int others = 0;
        for (int i = 0; i < np; i++)
            others += ps[i].started && !ps[i].done &&
                      strcmp(ddp_sim_outcome(sim, ps[i].task)->name, "squatter");
        if (!pending && others == 0)
            break;
        if (now > limit) {
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
    (void)live;
    char ns_left[32] = "";
    int nleft = netns_down(sys, &ns, ns_left, sizeof ns_left);
    ddp_sim_outcome_t *outs = NULL;
    int n = read_results(results, ps, np, sim, &outs);
    remove(results);
    if (n < 0) {
        ddp_sim_free(sim);
        return n;
    }
    ddp__scenario_judge(s, outs, n, plan.expected_world,
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
    ddp_sim_free(sim);
    return 0;
}
