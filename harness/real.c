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
#include "ddp/host.h"
#include "ddp/plan.h"
#include "ddp/plugin.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "real_priv.h"
#include "scenario_priv.h"

#define MAX_PROCS 64
#define SLACK_NS (120 * DDP_NS_PER_S)
/* A foreign program still running this long after the scenario's deadline
 * is killed and counts as timed out (ddp_real_opts_t.exec_grace_ns). */
#define EXEC_GRACE_NS (30 * DDP_NS_PER_S)

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


/* Why bandwidth fault i cannot have eth0's root qdisc to itself, or NULL:
 * netem (the base latency, a delay of ddpsim's own processes) is the root
 * qdisc too, and two bandwidth limits on one node at once would replace
 * each other's tbf where the simulator takes the lower rate. */
static const char *bandwidth_clash(const ddp_plan_t *p, int i, int exec)
{
    const ddp_fault_t *f = &p->faults[i];
    if (!exec && p->latency_ns)
        return "a base latency is netem, the same root qdisc of eth0 as the tbf";
    for (int j = 0; j < p->nfaults; j++) {
        const ddp_fault_t *g = &p->faults[j];
        int overlap = (!f->end_ns || g->start_ns < f->end_ns) &&
                      (!g->end_ns || f->start_ns < g->end_ns);
        if (j == i || !overlap)
            continue;
        if (g->kind == DDP_FAULT_DELAY && !exec)
            return "a delay at the same time is netem, the same root qdisc of eth0 as the tbf";
        if (g->kind == DDP_FAULT_BANDWIDTH && (f->node < 0 || g->node < 0 || f->node == g->node))
            return "another bandwidth fault limits the same node at the same time; "
                   "one tbf per interface (give them disjoint windows or nodes)";
    }
    return NULL;
}

/* A process that serves the others (a port holder, the hosted store): no
 * rank, started first, ended at the run's end. */
static int is_service(ddp_plan_kind_t k)
{
    return k == DDP_PLAN_PORT_HOLDER || k == DDP_PLAN_STORE;
}

/* The plan's hosted store (a foreign job's: -1 none). */
static int hosted_store(const ddp_plan_t *p)
{
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].kind == DDP_PLAN_STORE)
            return i;
    return -1;
}

/* A process that runs the user's program: exec's, one per rank, or, under
 * launcher torchrun-elastic, torch's own agent, one per node. */
static int foreign(const ddp_plan_t *p, const ddp_plan_proc_t *x)
{
    return x->kind == DDP_PLAN_EXEC || (x->kind == DDP_PLAN_AGENT && p->entry.exec[0]);
}

/* torch's own agent runs the nodes (torchrun-elastic with exec). */
static int torch_agents(const ddp_plan_t *p)
{
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].kind == DDP_PLAN_AGENT)
            return p->entry.exec[0] != '\0';
    return 0;
}

static int exec_stall(const ddp_plan_t *p)
{
    for (int i = 0; p->entry.exec[0] && i < p->nfaults; i++)
        if (p->faults[i].kind == DDP_FAULT_STALL)
            return 1;
    return 0;
}

/* GPUs a plan needs on the one machine real runs use: every node's. */
static int plan_gpus(const ddp_plan_t *p)
{
    int per_node = p->entry.gpus > 0 ? p->entry.gpus : 1;
    return p->entry.gpus > 0 || !strcmp(p->entry.backend, "nccl") ? p->nnodes * per_node : 0;
}

/* NULL when the plan can run for real; else why not, in buf. gpus: the
 * GPUs this machine lends real runs (DDPSIM_REAL_GPUS, set by `make
 * hw-test`; 0 elsewhere). */
static const char *plan_unsupported(const ddp_plan_t *p, int netns, int gpus, char *buf,
                                    size_t n)
{
    int per_rank = 1, trainers = 0;
    for (int i = 0; i < p->nprocs; i++)
        if (!is_service(p->procs[i].kind)) {
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
    else if (plan_gpus(p) > gpus && !gpus)
        snprintf(buf, n, "GPU scenario: real NCCL runs are `make hw-test`");
    else if (plan_gpus(p) > gpus)
        snprintf(buf, n, "GPU scenario: needs %d GPUs (%d per node), this machine lends %d",
                 plan_gpus(p), plan_gpus(p) / p->nnodes, gpus);
    else if (p->latency_ns && !netns)
        snprintf(buf, n, "a base latency needs --netns (netem)");
    else if (exec_stall(p))
        snprintf(buf, n, "a stall holds a thread of ddpsim's own processes; a foreign "
                         "program's threads cannot be held");
    else if (p->nnet && !netns)
        snprintf(buf, n, "iface, resolve and somaxconn lines need --netns: on loopback "
                         "every node shares this host's interfaces and sysctls");
    else if (p->nnet && p->entry.exec[0])
        snprintf(buf, n, "iface, resolve and somaxconn lines reach ddpsim's own processes "
                         "only (a foreign program resolves names with the system's resolver)");
    int exec = p->entry.exec[0] != '\0';
    for (int i = 0; i < p->nfaults && !buf[0]; i++) {
        const ddp_fault_t *f = &p->faults[i];
        const char *kind = ddp_fault_kind_name(f->kind), *why;
        int line = p->fault_line[i];
        unsigned ex = ddp__real_executor(f, ddp_fault_kind_info(f->kind)->exec, exec);
        int nft = ex == DDP_EXEC_NFT;
        if (exec && f->kind == DDP_FAULT_CRASH && f->phase)
            snprintf(buf, n, "fault crash phase=\"%s\" (line %d): a foreign program has "
                             "no ddpsim phases (aim it with start= instead)", f->phase, line);
        else if (exec && f->kind == DDP_FAULT_RESOLVE)
            snprintf(buf, n, "fault resolve (line %d): a foreign program's name "
                             "resolution cannot be made to fail", line);
        else if (ex == DDP_EXEC_INPROC)
            continue; /* libfiu inside ddpsim's own processes */
        else if (!ex) /* the kinds table lists no executor of a real run */
            ddp__real_no_executor(f, ddp_fault_kind_info(f->kind)->exec, exec, line, buf, n);
        else if (nft && !netns)
            snprintf(buf, n, "fault %s (line %d) needs --netns: it is an nft rule in the "
                             "nodes' namespaces (root)", kind, line);
        else if (nft && (f->count || (f->probability > 0 && f->probability < 1)))
            snprintf(buf, n, "fault %s (line %d): count= and p= cannot be realised by an "
                             "nft rule", kind, line);
        else if (nft && f->ranks)
            snprintf(buf, n, "fault %s ranks= (line %d): an nft rule holds for a whole "
                             "node's namespace; aim it with node= instead", kind, line);
        else if (nft)
            continue;
        else if (f->kind == DDP_FAULT_DELAY && !netns)
            snprintf(buf, n, "fault delay (line %d) needs --netns", line);
        else if (f->kind == DDP_FAULT_DELAY && !exec &&
                 (f->node >= 0 || f->peer_node >= 0 || f->ranks))
            snprintf(buf, n, "fault delay (line %d): netns runs delay every link, "
                             "not chosen ones", line);
        else if (f->kind == DDP_FAULT_BANDWIDTH && !netns)
            snprintf(buf, n, "fault bandwidth (line %d) needs --netns: it is a tc tbf qdisc "
                             "on the node's interface in its namespace (root)", line);
        else if (f->kind == DDP_FAULT_BANDWIDTH && (why = bandwidth_clash(p, i, exec)))
            snprintf(buf, n, "fault bandwidth (line %d): %s", line, why);
        else if (f->kind == DDP_FAULT_DELAY && exec && (f->ranks || f->peer_node > 0))
            snprintf(buf, n, "fault delay (line %d): a foreign program's links are "
                             "delayed by a proxy in front of the store on node 0: aim it "
                             "with node= (the clients' node) only", line);
        else if (f->kind == DDP_FAULT_PAUSE && f->ranks && torch_agents(p))
            snprintf(buf, n, "fault pause ranks= (line %d): torch's agent's workers are "
                             "found, and killed, but not paused: aim it with node=", line);
        /* torch's agent's workers are found in its session by their RANK */
        else if ((f->kind == DDP_FAULT_CRASH || f->kind == DDP_FAULT_PAUSE) && f->ranks &&
                 !per_rank && !torch_agents(p))
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
    const char *why = plan_unsupported(p, netns, 0, buf, n);
    ddp_plan_free(p);
    return why;
}

typedef struct proc {
    int task, node, rank; /* rank: the launcher's (-1 per-node scripts) */
    ddp_pid_t pid;
    int started, done, status, killed, stopped;
    int held;             /* its start waited for a pause window to close */
    int at_limit;         /* still running past its own deadline: killed */
    int64_t from_ns, deadline_ns; /* that deadline and where it counts from
                                     (rank_deadline), when at_limit */
    int64_t start_ns, end_ns;
    int64_t spawn_ns; /* when it was spawned: start_ns, or after its pause */
    int workers; /* records of processes it launched */
    int phase;   /* the furthest it got at the hosted store (ddp_store_client_phase_t
                    short of LEFT; 0: never reached it) */
    int left;    /* a connection of it to the store closed */
    int64_t contact_ns; /* its first connect to the hosted store (-1 none) */
    int frozen;  /* stopped for a silent node crash on loopback: killed at the end */
    int agent;   /* torch's own agent (its connections are attributed to it) */
} proc_t;

/* Who realises a fault in a real run. */
typedef enum {
    BY_OTHERS, /* the processes (libfiu), or the start times */
    BY_PROXY,  /* the delay proxy in front of a foreign program's store */
    BY_KILL,   /* the runner: SIGKILL when the window opens */
    BY_STOP,   /* the runner: SIGSTOP while the window is open, SIGCONT after */
    BY_NFT,    /* the runner: nft rules while the window is open */
    BY_LINK,   /* the runner: tc / links while the window is open */
    BY_NONE,   /* nothing: the kinds table gives the kind no real executor */
} by_t;

static int proc_aimed(const ddp_fault_t *f, const proc_t *p)
{
    return (f->node < 0 || f->node == p->node) && ddp__scenario_rank_in(f->ranks, p->rank);
}

/* Signals the processes f aims at; returns how many it reached alive (the
 * fault's hits; a crash before a process starts keeps it from starting). */
static int signal_procs(ddp_sys_t *sys, proc_t *ps, int np, const ddp_fault_t *f, int sig)
{
    int hit = 0;
    for (int i = 0; i < np; i++) {
        if (ps[i].done || !proc_aimed(f, &ps[i]))
            continue;
        if (!ps[i].started) { /* killed before its (late) start: it never runs */
            if (sig == 9)
                ps[i].started = ps[i].done = ps[i].killed = 1, ps[i].status = 137, hit++;
            continue;
        }
        ddp_sys_kill(sys, -ps[i].pid, sig); /* its process group: workers too */
        ddp_sys_kill(sys, ps[i].pid, sig);  /* before its setsid, no group yet */
        if (sig == 9)
            ps[i].killed = 1;
        hit++;
    }
    return hit;
}

/* A node's crash that is silent (ddp_fault_t.kill_mode): as after a power
 * loss nothing more leaves or reaches the node. In namespaces its traffic
 * is dropped (nft) before its processes are killed, so the FINs and
 * resets their kernel sends on their death never leave; on loopback, where
 * no rule can silence one node, its processes are stopped instead (they
 * hold their sockets and answer nothing) and killed at the run's end. */
static int silent_node_crash(const ddp_fault_t *f)
{
    return f->kind == DDP_FAULT_CRASH && f->node >= 0 && !f->ranks && !f->phase &&
           !f->kill_mode;
}

static int freeze_node(ddp_sys_t *sys, proc_t *ps, int np, const ddp_fault_t *f, int64_t now)
{
    int hit = 0;
    for (int i = 0; i < np; i++) {
        if (ps[i].done || !proc_aimed(f, &ps[i]))
            continue;
        if (ps[i].started) {
            ddp_sys_kill(sys, -ps[i].pid, 19);
            ddp_sys_kill(sys, ps[i].pid, 19);
            ps[i].frozen = 1;
        }
        hit++; /* one not started yet never starts: held off, as signal_procs counts it */
        /* crashed from now on, as a node that lost power */
        ps[i].started = ps[i].done = ps[i].killed = 1;
        ps[i].status = 137;
        ps[i].end_ns = now;
    }
    return hit;
}

/* The kinds table's executor (ddp__real_executor) and, for signals, which
 * ones: BY_NONE when there is none (plan_unsupported has refused the run
 * then). */
static by_t realised_by(const ddp_fault_t *f, int exec)
{
    switch (ddp__real_executor(f, ddp_fault_kind_info(f->kind)->exec, exec)) {
    case DDP_EXEC_NFT: return BY_NFT;
    case DDP_EXEC_INPROC: return BY_OTHERS;
    case DDP_EXEC_SIGNAL: return ddp__real_signal(f) == 9 ? BY_KILL : BY_STOP;
    case DDP_EXEC_LINK: return BY_LINK;
    case DDP_EXEC_PROXY: return BY_PROXY; /* a foreign program's delay */
    case DDP_EXEC_RUNNER: return BY_OTHERS; /* late starts */
    default: return BY_NONE;
    }
}

/* What fault f's hits start at: 0 where an executor counts them (signals,
 * nft rule and tc qdisc counters, the proxy's delayed chunks, late
 * starts, the processes' F records), -1 where none can (a link fault
 * without namespaces, which is not realised at all): such a fault never
 * makes a run vacuous. */
static long long hits_start(const ddp_fault_t *f, by_t by, int exec, int netns)
{
    if (by == BY_KILL || by == BY_STOP || by == BY_NFT || f->kind == DDP_FAULT_LATE)
        return 0;
    if (by == BY_LINK || by == BY_PROXY)
        return netns ? 0 : -1;
    return by == BY_OTHERS && !exec && ddp__real_in_process(f) ? 0 : -1;
}

/* A runner's event (a process spawned or exited): an E record, for the
 * processes and the runner alike (ddp__real_events_read). */
static void rank_event(const ddp_plan_t *plan, ddp_faultset_t *fs, int rank,
                       ddp_trigger_kind_t kind, int64_t now)
{
    ddp_fault_event_t ev = {.kind = kind, .rank = rank, .name = "", .value = -1};
    if (ddp_faultset_wants(fs, &ev))
        ddp__real_event_write(plan->results, &ev, now, 0);
}

static void proc_event(const ddp_plan_t *plan, ddp_faultset_t *fs, const proc_t *p,
                       ddp_trigger_kind_t kind, int64_t now)
{
    rank_event(plan, fs, p->rank, kind, now);
}

/* How often the runner looks for torch's agents' workers. */
#define WORKER_POLL_NS (100 * DDP_NS_PER_MS)

/* A crash aimed at ranks, under torch's own agent: when its window opens,
 * SIGKILL to the live workers of those ranks (of node= if given), as the
 * simulator kills the tasks it aims at then. The agent sees the exit code
 * and stops, and maybe restarts, its group; a later start of the rank is
 * spared, as in the simulator. */
static int kill_workers(ddp_sys_t *sys, ddp_real_workers_t *ws, const ddp_fault_t *f)
{
    int hit = 0;
    for (int k = 0; f->ranks && f->ranks[0] && k < ws->n; k++) {
        ddp_real_worker_t *w = &ws->w[k];
        if (w->gone || w->killed || (f->node >= 0 && f->node != w->node) ||
            !ddp__scenario_rank_in(f->ranks, w->rank))
            continue;
        ddp_sys_kill(sys, (ddp_pid_t)w->pid, 9);
        w->killed = 1;
        hit++;
    }
    return hit;
}

/* Workers seen for the first time: their spawn event; workers gone:
 * their exit event. */
static void workers_seen(const ddp_plan_t *plan, ddp_faultset_t *fs, ddp_real_workers_t *ws,
                         int64_t now)
{
    for (int k = 0; k < ws->n; k++) {
        ddp_real_worker_t *w = &ws->w[k];
        if (w->fresh) {
            w->fresh = 0;
            rank_event(plan, fs, w->rank, DDP_TRIG_SPAWN, now);
        }
        if (w->gone == 1) {
            w->gone = 2; /* its exit told */
            rank_event(plan, fs, w->rank, DDP_TRIG_EXIT, now);
        }
    }
}

/* What the hosted store saw of each connection (P records), and whose
 * process holds it: the runner asks the kernel which rank's session
 * holds the client's port while the connection is open. */
#define MAX_CONNS 256
typedef struct store_conn {
    unsigned long long id;
    unsigned port;
    int proc;     /* index in ps (-1: not known yet) */
    int phase;    /* furthest, short of LEFT */
    int left, tries;
    int64_t first_ns;
} store_conn_t;

typedef struct progress {
    store_conn_t c[MAX_CONNS];
    int n;
    long off;     /* P records read so far */
    uint16_t store_port[2]; /* the hosted stores' (a second job's: 0 none) */
    ddp_sys_tcp_owners_t *owners; /* which rank's session holds a socket */
} progress_t;

static void progress_apply(proc_t *p, const store_conn_t *c)
{
    if (c->phase > p->phase)
        p->phase = c->phase;
    p->left |= c->left;
    if (c->first_ns >= 0 && (p->contact_ns < 0 || c->first_ns < p->contact_ns))
        p->contact_ns = c->first_ns;
}

/* Reads the new P records and attributes connections to processes: by the
 * plan process the store found holding the client's port, else by asking
 * the kernel here while the connection is open. */
/* The connections the store could not attribute, asked of the kernel
 * while they are open, a few times at most: one that belongs to no rank
 * (a shell's `ddpsim store`) stays unknown, and one that no rank's
 * namespace has (closed, or the delay proxy's: each read of the TCP tables
 * walks the kernel's whole hash) is not asked about again. One index of
 * the running ranks' sockets serves them all (ddp_sys_tcp_owner). */
#define ASK_TRIES 20
static void progress_ask(progress_t *pg, proc_t *ps, int np)
{
    long sids[MAX_PROCS + 2];
    int idx[MAX_PROCS + 2], n = 0;
    for (int i = 0; i < np && n < MAX_PROCS + 2; i++)
        if ((ps[i].rank >= 0 || ps[i].agent) && ps[i].started && !ps[i].done)
            sids[n] = (long)ps[i].pid, idx[n++] = i;
    for (int k = 0; k < pg->n; k++) {
        store_conn_t *c = &pg->c[k];
        if (c->proc >= 0 || c->left || c->tries >= ASK_TRIES || !n)
            continue;
        c->tries++;
        if (!pg->owners && !(pg->owners = ddp_sys_tcp_owners_new()))
            return;
        int gone = 1;
        for (int j = 0; j < 2 && c->proc < 0 && pg->store_port[j]; j++) {
            int w = ddp_sys_tcp_owner(pg->owners, sids, n, (uint16_t)c->port, pg->store_port[j]);
            gone &= w == -ENOENT;
            if (w >= 0) {
                c->proc = idx[w];
                progress_apply(&ps[c->proc], c);
            }
        }
        if (c->proc < 0 && gone)
            c->tries = ASK_TRIES;
    }
}

static void progress_read(const char *results, progress_t *pg, proc_t *ps, int np)
{
    FILE *f = fopen(results, "r");
    char line[256];
    if (f && fseek(f, pg->off, SEEK_SET) == 0)
        while (fgets(line, sizeof line, f)) {
            size_t len = strlen(line);
            if (!len || line[len - 1] != '\n')
                break; /* still being written */
            pg->off += (long)len;
            unsigned long long id;
            int ph;
            long long t;
            unsigned port;
            int task = -1;
            if (line[0] != 'P' ||
                sscanf(line, "P\t%llu\t%d\t%lld\t%u\t%d", &id, &ph, &t, &port, &task) < 4)
                continue;
            int k = 0;
            while (k < pg->n && pg->c[k].id != id)
                k++;
            if (k == pg->n) {
                if (pg->n == MAX_CONNS)
                    continue;
                pg->c[pg->n++] = (store_conn_t){.id = id, .port = port, .proc = -1,
                                                .first_ns = t};
            }
            store_conn_t *c = &pg->c[k];
            for (int i = 0; i < np && c->proc < 0 && task >= 0; i++)
                if (ps[i].task == task && ps[i].started) /* the store saw whose */
                    c->proc = i;
            if (ph == DDP_STORE_CLIENT_LEFT)
                c->left = 1;
            else if (ph > c->phase)
                c->phase = ph;
            if (c->proc >= 0)
                progress_apply(&ps[c->proc], c);
        }
    if (f)
        fclose(f);
    progress_ask(pg, ps, np);
}

/* Every rank has exited, and the kernel closed their connections; the
 * hosted store records each close when it next reads (a LEFT record). At
 * load that came after the runner had already stopped the store: "[store:
 * joined]" for a rank that had left. Reads the records until every
 * connection the store saw has left, 5 s at most (a store that stopped
 * serving never says). */
static void progress_settle(ddp_sys_t *sys, const char *results, progress_t *pg, proc_t *ps,
                            int np)
{
    int64_t until = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S);
    for (;;) {
        progress_read(results, pg, ps, np);
        int open = 0;
        for (int k = 0; k < pg->n; k++)
            open += !pg->c[k].left;
        if (!open || ddp_sys_now(sys) >= until)
            return;
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS));
    }
}

/* An S record: rank's process (its session) for the hosted store, which
 * tells by it whose connection it accepted (real_child.c). */
static void session_record(const char *results, const proc_t *p)
{
    FILE *f = fopen(results, "a");
    if (!f)
        return;
    setvbuf(f, NULL, _IOFBF, 256); /* one write: appends do not mix */
    fprintf(f, "S\t%d\t%d\t%ld\n", p->task, p->rank, (long)p->pid);
    fclose(f);
}

/* Joined connections no rank's process was found to hold. */
static int progress_unknown_joined(const progress_t *pg)
{
    int n = 0;
    for (int k = 0; k < pg->n; k++)
        n += pg->c[k].proc < 0 && pg->c[k].phase >= DDP_STORE_CLIENT_JOINED;
    return n;
}

/* "joined", "barrier passed, left": the furthest a rank got at the store. */
static const char *phase_text(const proc_t *p, char *buf, size_t n)
{
    static const char *const names[] = {"none", "connected", "joined", "barrier passed"};
    int ph = p->phase >= 0 && p->phase <= DDP_STORE_CLIENT_BARRIER ? p->phase : 0;
    snprintf(buf, n, "%s%s", names[ph], p->left ? ", left" : "");
    return buf;
}

/* Parses the results file into outcomes; fired[i] counts the firings of
 * the plan's in-process fault i (the children's F records). */
static int read_results(const char *path, proc_t *ps, int np, const ddp_plan_t *plan,
                        ddp_sim_outcome_t **outs, int *fired)
{
    int n = 0, cap = np + 16;
    ddp_sim_outcome_t *o = calloc((size_t)cap, sizeof *o);
    FILE *f = fopen(path, "r");
    char line[DDP_ERR_MSG_MAX + 400]; /* a result line: its fields and a whole message */
    while (o && f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *field[15] = {0};
        int nf = 0;
        for (char *save = NULL, *t = strtok_r(line, "\t", &save); t && nf < 15;
             t = strtok_r(NULL, "\t", &save))
            field[nf++] = t;
        if (n == cap) {
            ddp_sim_outcome_t *no = realloc(o, sizeof *o * (size_t)(cap *= 2));
            if (!no)
                break;
            o = no;
        }
        ddp_sim_outcome_t *x = &o[n];
        ddp_sim_outcome_init(x);
        int task = nf > 1 ? atoi(field[1]) : -1;
        const char *tname = task >= 0 && task < plan->nprocs ? plan->procs[task].name : "?";
        x->job = task >= 0 && task < plan->nprocs ? plan->procs[task].job : 0;
        if (field[0][0] == 'R' && nf >= 14) {
            x->rank = atoi(field[2]);
            x->world = atoi(field[3]);
            x->node = atoi(field[5]);
            x->rc = atoi(field[6]);
            x->code = atoi(field[7]);
            x->connect_ns = atoll(field[9]);
            x->end_ns = atoll(field[10]);
            x->retries = atoi(field[11]);
            x->attempt = nf >= 15 ? atoi(field[14]) : 0;
            x->agent = task >= 0 && task < plan->nprocs && plan->procs[task].kind == DDP_PLAN_AGENT &&
                       x->rank < 0;
            x->state = DDP_SIM_TASK_EXITED;
            if (task >= 0 && task < np && ps[task].spawn_ns > plan->procs[task].start_ns)
                x->held_ns = ps[task].spawn_ns - plan->procs[task].start_ns;
            ddp_sim_outcome_set_message(x, "%s", strcmp(field[13], "-") ? field[13] : "");
            /* A worker an accelerator launched reports under its parent's task. */
            int parent_is_rank = task >= 0 && task < np && ps[task].rank == x->rank;
            x->name = parent_is_rank || x->rank < 0 ? tname : "worker";
            if (!parent_is_rank && x->rank >= 0 && task >= 0 && task < np)
                ps[task].workers++;
            n++;
        } else if (field[0][0] == 'F' && nf >= 3) {
            int i = atoi(field[2]);
            if (fired && i >= 0 && i < plan->nfaults)
                fired[i]++;
        } else if (field[0][0] == 'C' && nf >= 5) {
            x->rank = atoi(field[2]);
            x->world = 1; /* it entered the plugin: a rank */
            x->node = atoi(field[3]);
            x->end_ns = atoll(field[4]);
            x->connect_ns = -1;
            x->state = DDP_SIM_TASK_CRASHED;
            x->name = tname;
            ddp_sim_outcome_set_message(x, "crashed by a fault");
            n++;
        }
    }
    if (f)
        fclose(f);
    /* A per-node script whose workers reported is their launcher (its own
     * record carries the plan's name for its task). */
    for (int k = 0; o && k < n; k++)
        for (int i = 0; i < np; i++)
            if (o[k].rank < 0 && i < plan->nprocs && o[k].name == plan->procs[i].name)
                o[k].spawned = ps[i].workers;
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
        ddp_sim_outcome_init(x);
        x->name = plan->procs[ps[i].task].name;
        x->job = plan->procs[ps[i].task].job;
        x->rank = ps[i].rank;
        x->node = ps[i].node;
        x->world = -1;
        x->connect_ns = -1;
        x->state = DDP_SIM_TASK_CRASHED;
        x->end_ns = ps[i].end_ns; /* when it was reaped (0: killed before it started) */
        ddp_sim_outcome_set_message(x, "killed by the runner (fault)");
    }
    *outs = o;
    return o ? n : -ENOMEM;
}

/* The environment of the real process: the plan's, exactly, plus what
 * the machine needs (PATH), where coverage goes (make coverage's second
 * matrix) and the log level (errors travel in the result records). A
 * foreign program also gets MASTER_ADDR as a node address (it cannot read
 * ddpsim's host table), the scenario's timeouts (DDPSIM_TIMEOUT_S,
 * DDPSIM_TRAIN_S: examples/torch_ddp.py passes them to torch) and, in
 * namespaces, the interface gloo and NCCL bind. */
/* Variables a launcher or cluster owns: a foreign program inherits none
 * of them from the runner's environment (a run started inside a SLURM job
 * must not hand its torchrun-launched ranks that job's SLURM_*), only what
 * the scenario's cluster and launcher set. */
static int launcher_var(const char *k)
{
    static const char *const prefix[] = {"SLURM_", "OMPI_", "PMIX_", "PMI_", "LSB_",
                                         "JSM_", "TORCHELASTIC_", "PET_", "DDPSIM_"};
    static const char *const name[] = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                                       "LOCAL_RANK", "NODE_RANK", "GROUP_RANK",
                                       "LOCAL_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
                                       "GROUP_WORLD_SIZE", "ROLE_NAME"};
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (!strncmp(k, prefix[i], strlen(prefix[i])))
            return 1;
    for (size_t i = 0; i < sizeof name / sizeof name[0]; i++)
        if (!strcmp(k, name[i]))
            return 1;
    return 0;
}

static int inherit_one(void *arg, const char *k, const char *v)
{
    return launcher_var(k) ? 0 : ddp_env_set(arg, k, v);
}

static int overlay_one(void *arg, const char *k, const char *v)
{
    return ddp_env_set(arg, k, v);
}

/* A foreign program's environment starts from the runner's (the user's:
 * PYTHONPATH, LD_LIBRARY_PATH, VIRTUAL_ENV, OMP_NUM_THREADS, NCCL_*,
 * GLOO_*, ...) less the launchers' variables, or from nothing with
 * env_clear; the plan's (the scenario's cluster, launcher and env lines)
 * go over it. ddpsim's own processes get the plan's alone. */
static ddp_env_t *base_env(ddp_sys_t *sys, const ddp_plan_t *plan, const ddp_plan_proc_t *x,
                           int env_clear)
{
    if (!foreign(plan, x))
        return ddp_env_clone(x->env);
    ddp_env_t *env = ddp_env_new();
    if (env && ((!env_clear && ddp_env_foreach(ddp_sys_env(sys), inherit_one, env)) ||
                ddp_env_foreach(x->env, overlay_one, env))) {
        ddp_env_free(env);
        return NULL;
    }
    return env;
}

/* torch's own agent (torchrun-elastic with exec): the endpoint as a node
 * address; is_host=0, since the run hosts the c10d
 * store; and each worker's stderr in a file of its own under logs/agentN
 * (--redirects 2 --tee 2: torch 1.13's Std.from_str finds no member for 0
 * or 3 under Python 3.11, so its defaults fail with "'NoneType' object
 * has no attribute 'get'"). The user's own PET_* settings win. */
static void agent_env(ddp_env_t *env, const ddp_plan_t *plan, const ddp_plan_proc_t *x,
                      const char *logs)
{
    char host[256];
    uint16_t port;
    ddp_errsave_t *keep = ddp_err_save(); /* a bad endpoint is torch's to report */
    if (ddp_endpoint_parse(ddp_env_get(env, "PET_RDZV_ENDPOINT"), 29400, host, sizeof host,
                           &port) == 0)
        for (int i = 0; i < plan->nnodes; i++)
            if (!strcmp(plan->nodes[i].host, host)) {
                ddp_env_setf(env, "PET_RDZV_ENDPOINT", "%s:%u", plan->nodes[i].addr,
                             (unsigned)port);
                break;
            }
    ddp_err_restore(keep);
    const char *conf = ddp_env_get(env, "PET_RDZV_CONF");
    if (!conf || !*conf)
        ddp_env_set(env, "PET_RDZV_CONF", "is_host=0");
    else if (!strstr(conf, "is_host"))
        ddp_env_setf(env, "PET_RDZV_CONF", "is_host=0,%s", conf);
    if (!ddp_env_has(env, "PET_REDIRECTS"))
        ddp_env_set(env, "PET_REDIRECTS", "2");
    if (!ddp_env_has(env, "PET_TEE"))
        ddp_env_set(env, "PET_TEE", "2");
    if (!ddp_env_has(env, "PET_LOG_DIR"))
        ddp_env_setf(env, "PET_LOG_DIR", "%s/agent%d", logs, x->node);
}

static ddp_env_t *proc_env(ddp_sys_t *sys, const ddp_plan_t *plan, const ddp_plan_proc_t *x,
                           int netns, int env_clear, const char *run_id, const char *logs)
{
    ddp_env_t *env = base_env(sys, plan, x, env_clear);
    if (!env)
        return NULL;
    /* The run's identity: rank 0 leaves it in its store and every rank
     * checks it there, so a rank that reaches another run's store on the
     * same port is refused instead of joining it (DDP_RUN_ID_ENV). */
    ddp_env_set(env, DDP_RUN_ID_ENV, run_id);
    const ddp_env_t *mine = ddp_sys_env(sys);
    const char *path = ddp_env_get(mine, "PATH");
    ddp_env_set(env, "PATH", path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
    static const char *const pass[] = {"GCOV_PREFIX", "GCOV_PREFIX_STRIP", "HOME"};
    for (size_t k = 0; k < sizeof pass / sizeof pass[0]; k++)
        if (ddp_env_get(mine, pass[k]) && !ddp_env_has(env, pass[k]))
            ddp_env_set(env, pass[k], ddp_env_get(mine, pass[k]));
    /* One machine's GPUs shared out: node i gets its own slice, as if the
     * nodes were hosts (NCCL refuses two ranks on one device). */
    int per_node = plan->entry.gpus;
    if (per_node > 0 && !ddp_env_has(env, "CUDA_VISIBLE_DEVICES")) {
        char list[256] = "";
        for (int g = 0; g < per_node; g++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%d", g ? "," : "", x->node * per_node + g);
        }
        ddp_env_set(env, "CUDA_VISIBLE_DEVICES", list);
    }
    if (!foreign(plan, x)) {
        const char *lvl = ddp_env_get(mine, "DDP_LOG");
        ddp_env_set(env, "DDP_LOG", lvl ? lvl : "off");
        return env;
    }
    const char *m = ddp_env_get(env, "MASTER_ADDR");
    for (int i = 0; m && i < plan->nnodes; i++)
        if (!strcmp(plan->nodes[i].host, m)) {
            ddp_env_set(env, "MASTER_ADDR", plan->nodes[i].addr);
            break;
        }
    if (x->kind == DDP_PLAN_AGENT) /* torch's own agent */
        agent_env(env, plan, x, logs);
    else if (hosted_store(plan) >= 0) { /* torch's ranks are then all clients */
        if (!ddp_env_has(env, "TORCHELASTIC_USE_AGENT_STORE"))
            ddp_env_set(env, "TORCHELASTIC_USE_AGENT_STORE", "True");
        if (!ddp_env_has(env, "TORCHELASTIC_RESTART_COUNT"))
            ddp_env_set(env, "TORCHELASTIC_RESTART_COUNT", "0");
    }
    ddp_env_setf(env, "DDPSIM_TIMEOUT_S", "%.3f",
                 (double)(plan->entry.timeout_ns ? plan->entry.timeout_ns
                                                 : DDP_DEFAULT_PG_TIMEOUT_S * DDP_NS_PER_S) / 1e9);
    ddp_env_setf(env, "DDPSIM_TRAIN_S", "%.3f", (double)plan->entry.train_ns / 1e9);
    /* In a namespace this machine's host name resolves to loopback: gloo
     * (and NCCL) must use the node's own interface, as ddpsim's tcp backend
     * uses its node's name (DDPSIM_HOSTNAME) and address. */
    if (netns) {
        if (!ddp_env_has(env, "GLOO_SOCKET_IFNAME"))
            ddp_env_set(env, "GLOO_SOCKET_IFNAME", "eth0");
        if (!ddp_env_has(env, "NCCL_SOCKET_IFNAME"))
            ddp_env_set(env, "NCCL_SOCKET_IFNAME", "eth0");
    }
    return env;
}

/* Where a foreign program's stdout / stderr go. */
static void out_path(char *buf, size_t n, const char *base, int task, const char *what)
{
    snprintf(buf, n, "%s.%d.%s", base, task, what);
}

/* The MASTER_PORT a job's processes get (job 0: the run's, 1: its
 * second_job's): every launch exports it unless `port none`; then
 * torch's and ours default to 29500. */
long ddp__real_job_port(const ddp_plan_t *plan, int job)
{
    for (int i = 0; i < plan->nprocs; i++)
        if (plan->procs[i].job == job && !is_service(plan->procs[i].kind)) {
            const ddp_env_t *env = plan->procs[i].env;
            long port = 29500; /* unset: torch's default and ours */
            ddp_errsave_t *keep = ddp_err_save();
            int rc = ddp_env_has(env, "MASTER_PORT")
                         ? ddp_env_get_long(env, "MASTER_PORT", 1, 65535, &port) : 0;
            ddp_err_restore(keep);
            return rc ? -1 : port;
        }
    return 29500;
}
#define job_port ddp__real_job_port

static long master_port(const ddp_plan_t *plan);

/* A foreign program's outcome, from how it ended, its stderr and what
 * the hosted store saw of it (hosted: the run hosts the store; sure: every
 * joined connection's rank is known, so a rank without one never joined).
 * Its stderr text goes to *err (the caller frees it). */
static void exec_outcome(const ddp_plan_t *plan, const proc_t *p, const char *base,
                         int64_t grace, int hosted, int sure, ddp_sim_outcome_t *x, char **err)
{
    char path[320], ph[40], head[160];
    ddp_sim_outcome_init(x);
    x->name = plan->procs[p->task].name;
    x->job = plan->procs[p->task].job;
    x->rank = p->rank;
    x->node = p->node;
    x->world = plan->expected_world;
    x->end_ns = p->end_ns;
    x->state = DDP_SIM_TASK_EXITED;
    x->connect_ns = -1;
    x->join_ns = p->contact_ns;
    x->foreign = 1;
    if (hosted)
        snprintf(x->progress, sizeof x->progress, "%s", phase_text(p, ph, sizeof ph));
    else
        snprintf(ph, sizeof ph, "unknown (its own store)");
    /* rank R (node N, ADDR), exit S after T s, last phase P */
    int n = snprintf(head, sizeof head, "%s %d (node %d, %s), ", p->agent ? "agent" : "rank",
                     p->agent ? p->node : p->rank, p->node,
                     p->node >= 0 && p->node < plan->nnodes ? plan->nodes[p->node].addr : "?");
    x->agent = p->agent;
    if (p->agent)
        x->world = -1; /* a launcher, not a rank */
    out_path(path, sizeof path, base, p->task, "err");
    char *text = *err = ddp__real_slurp(path);
    if (p->at_limit) { /* its own timeouts never ended it: hung, not timed out */
        x->rc = x->code = DDP_EHUNG;
        ddp_sim_outcome_set_message(
            x, "%shung: still running at its own deadline plus %.0f s of grace "
               "(%.1f s, counted from its %s at %.1f s), last phase %s: killed", head,
            (double)grace / 1e9, (double)p->deadline_ns / 1e9,
            p->contact_ns >= 0 && p->contact_ns == p->from_ns ? "first store contact" : "start",
            (double)p->from_ns / 1e9, ph);
        return;
    }
    snprintf(head + n, sizeof head - (size_t)n, "exit %d after %.1f s, last phase %s",
             p->status, (double)(p->end_ns - p->start_ns) / 1e9, ph);
    x->rc = p->status;
    char why[DDP_ERR_MSG_MAX];
    x->code = ddp__real_classify(p->status, text ? text : "", why, sizeof why);
    /* classify's "exit status S: LINE": the line, after our head */
    const char *line = strstr(why, ": ") ? strstr(why, ": ") + 2 : "";
    char failure[300];
    if (p->agent && text && ddp__real_agent_failure(text, failure, sizeof failure))
        line = failure; /* the agent's table names the worker that failed */
    if (p->status == 0 && hosted && sure && p->phase < DDP_STORE_CLIENT_JOINED) {
        /* exit 0 proves nothing about the job: it never used its store */
        x->rc = 1;
        x->code = DDP_ENO_JOIN;
        ddp_sim_outcome_set_message(x, "%s: exited 0 without ever joining the job's store "
                                       "(at %s:%ld): not a distributed run",
                                    head, plan->nodes[0].addr,
                                    job_port(plan, plan->procs[p->task].job));
    } else if (p->status == 0) {
        if (!p->agent) /* an agent connects nothing itself */
            x->connect_ns = p->end_ns; /* it got through init_process_group */
    } else if (p->status == 127) {
        ddp_sim_outcome_set_message(x, "%s: %s", head,
                                    text && *text ? text : "the program could not be started");
    } else {
        ddp_sim_outcome_set_message(x, "%s: %s", head, *line ? line : "nothing on stderr");
    }
    if (strchr(x->message, '\n')) /* its first line */
        ddp_sim_outcome_set_message(x, "%.*s", (int)strcspn(x->message, "\n"), x->message);
}

static void drop_outputs(ddp_sys_t *sys, const ddp_plan_t *plan, const proc_t *ps, int np,
                         const char *base, const char *logs)
{
    if (torch_agents(plan))
        RUN_SILENT("rm", "-rf", (char *)logs);
    for (int i = 0; i < np; i++) {
        char path[320];
        if (!foreign(plan, &plan->procs[ps[i].task]))
            continue;
        out_path(path, sizeof path, base, ps[i].task, "out");
        remove(path);
        out_path(path, sizeof path, base, ps[i].task, "err");
        remove(path);
    }
}

/* Moves a file (a copy where rename cannot cross file systems). */
static int move_file(const char *from, const char *to)
{
    if (rename(from, to) == 0)
        return 0;
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[8192];
    size_t k;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (k = fread(buf, 1, sizeof buf, in)) > 0)
        rc = fwrite(buf, 1, k, out) == k ? 0 : -1;
    if (in)
        fclose(in);
    if (out && fclose(out))
        rc = -1;
    remove(from);
    return rc;
}

/* The run's output folder into dir, made: --keep-output's
 * DIR/SCENARIO.ACCEL[.netns], else a fresh one per run,
 * TMPDIR/ddpsim-output/SCENARIO.ACCEL[.netns].XXXXXX (two runs of one
 * scenario at once never share one). 0 or a negative code (ddp_err). */
static int output_dir(const ddp_real_opts_t *o, const char *tmpdir, const char *stem,
                      const char *accel, char *dir, size_t n)
{
    const char *ns = o->netns ? ".netns" : "";
    if (o->keep_output) {
        snprintf(dir, n, "%s/%s.%s%s", o->keep_output, stem, accel, ns);
        return ddp_sys_make_dirs(dir);
    }
    snprintf(dir, n, "%s/ddpsim-output", tmpdir);
    int rc = ddp_sys_make_dirs(dir);
    if (rc)
        return rc;
    snprintf(dir, n, "%s/ddpsim-output/%s.%s%s.XXXXXX", tmpdir, stem, accel, ns);
    if (!mkdtemp(dir))
        return ddp_err_set(-errno, "cannot create a folder %s: %s", dir, strerror(errno));
    return 0;
}

/* Each foreign rank's stdout and stderr go to the run's folder,
 * DIR/SCENARIO.ACCEL[.netns]/rankR.{out,err} (replacing the last run's):
 * DIR is --keep-output's (every run kept; --artifacts': failing and vacuous
 * runs only, keep_failing), else a folder of its own under
 * TMPDIR/ddpsim-output (failing and vacuous runs only; a passing run's are
 * removed). r->output
 * names the folder and each failing rank's stderr file. */
static void keep_outputs(ddp_sys_t *sys, const ddp_scenario_t *s, const char *accel,
                         const ddp_real_opts_t *o, const char *tmpdir, const ddp_plan_t *plan,
                         const proc_t *ps, int np, const char *base, const char *logs,
                         const ddp_sim_outcome_t *outs, int n, ddp_scn_result_t *r)
{
    if ((!o->keep_output || o->keep_failing) && r->pass) {
        drop_outputs(sys, plan, ps, np, base, logs);
        return;
    }
    char dir[600], stem[200];
    const char *b = strrchr(s->file, '/');
    snprintf(stem, sizeof stem, "%s", s->file[0] ? (b ? b + 1 : s->file) : "scenario");
    size_t sl = strlen(stem);
    if (sl > 4 && !strcmp(stem + sl - 4, ".scn"))
        stem[sl - 4] = '\0';
    if (output_dir(o, tmpdir, stem, accel, dir, sizeof dir)) {
        snprintf(r->output, sizeof r->output, "not kept: %s", ddp_err_message());
        drop_outputs(sys, plan, ps, np, base, logs);
        return;
    }
    size_t off = (size_t)snprintf(r->output, sizeof r->output, "%s/", dir);
    if (torch_agents(plan)) { /* torch's log dirs: workers/agentN/RUN_ID_X/attempt_A/L/ */
        char to[700];
        snprintf(to, sizeof to, "%s/workers", dir);
        RUN_SILENT("rm", "-rf", to);
        if (rename(logs, to))
            RUN_SILENT("rm", "-rf", (char *)logs);
    }
    for (int i = 0; i < np; i++) {
        const proc_t *p = &ps[i];
        if (!foreign(plan, &plan->procs[p->task]))
            continue;
        char from[320], to[700], name[32];
        if (p->agent)
            snprintf(name, sizeof name, "agent%d", p->node);
        else
            snprintf(name, sizeof name, "rank%d", p->rank);
        for (int k = 0; k < 2; k++) {
            out_path(from, sizeof from, base, p->task, k ? "err" : "out");
            snprintf(to, sizeof to, "%s/%s.%s", dir, name, k ? "err" : "out");
            if (p->started)
                move_file(from, to);
        }
        int failed = 0;
        for (int k = 0; k < n && !failed; k++)
            failed = outs[k].rank == p->rank && outs[k].name == plan->procs[p->task].name &&
                     (outs[k].rc != 0 || outs[k].state == DDP_SIM_TASK_CRASHED);
        if (failed && off < sizeof r->output)
            off += (size_t)snprintf(r->output + off, sizeof r->output - off, "%s%s.err",
                                    off == strlen(dir) + 1 ? ": " : ", ", name);
    }
}

/* Foreign programs' traffic to the store goes through the delay proxy
 * when the plan has a latency or delay faults (netns only). */
/* The MASTER_PORT the processes get (every launch exports it unless
 * `port none`; then torch's and ours default to 29500). */
static long master_port(const ddp_plan_t *plan)
{
    return job_port(plan, 0);
}

/* On loopback the run shares the host's ports: a process that already
 * listens on MASTER_PORT (another job, or another real run beside this
 * one) would be the master this run's ranks reach, and its ranks would
 * join this run's store. Either way the verdict would be about someone
 * else. A port freed a moment ago (the last run's processes were killed
 * and waited for) binds at once: SO_REUSEADDR. Waits up to 3 s. */
static int port_free(ddp_sys_t *sys, long port)
{
    if (port < 0)
        return 0; /* no fixed port: nothing of this host's to look at */
    ddp_addr_t a;
    ddp_addr_parse("::", (uint16_t)port, &a);
    int64_t until = ddp_sys_deadline_in(sys, 3 * DDP_NS_PER_S);
    for (;;) {
        int fd = ddp_sys_listen(sys, &a, 1);
        if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL) { /* no IPv6 */
            ddp_addr_parse("0.0.0.0", (uint16_t)port, &a);
            fd = ddp_sys_listen(sys, &a, 1);
        }
        if (fd >= 0) {
            ddp_sys_close(sys, fd);
            return 0;
        }
        if (fd != -EADDRINUSE || ddp_sys_now(sys) >= until)
            break;
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 50 * DDP_NS_PER_MS));
    }
    ddp_err_set(-EADDRINUSE, "port %ld on this host was taken before the run "
                "started (waited 3.0 s): its ranks would reach whoever holds it",
                port);
    return ddp_err_hint("another job or a process left by an earlier run "
                        "listens there (`ss -ltnp 'sport = :%ld'` names it): "
                        "stop it, give the scenario another `port`, or run "
                        "it with --netns", port);
}

/* Every job's MASTER_PORT (a second job's too, on a port of its own). */
static int master_port_free(ddp_sys_t *sys, const ddp_plan_t *plan)
{
    int rc = port_free(sys, job_port(plan, 0));
    for (int i = 0; rc == 0 && i < plan->nprocs; i++)
        if (plan->procs[i].job == 1 && !is_service(plan->procs[i].kind)) {
            if (job_port(plan, 1) != job_port(plan, 0))
                rc = port_free(sys, job_port(plan, 1));
            break;
        }
    return rc;
}

static int start_proxy(ddp_sys_t *sys, ddp_plan_t *plan, const ddp_netns_t *ns, int64_t t0,
                       ddp_real_proxy_t **proxy)
{
    *proxy = NULL;
    unsigned all = plan->latency_ns > 0, nodes = 0;
    for (int i = 0; i < plan->nfaults; i++)
        if (plan->faults[i].kind == DDP_FAULT_DELAY) {
            if (plan->faults[i].node < 0)
                all = 1;
            else
                nodes |= 1u << (plan->faults[i].node & 31);
        }
    if (!all && !nodes)
        return 0;
    long mport = master_port(plan);
    if (mport < 0)
        return ddp_err_set(DDP_ECONFIG, "the delay proxy sits on the job's MASTER_PORT, and "
                                        "this one is set to no fixed port (0, or out of "
                                        "1..65535): give the scenario a `port`");
    ddp_addr_t listen, target;
    ddp_addr_parse(DDP_REAL_BRIDGE_ADDR, 0, &listen);
    ddp_addr_parse(plan->nodes[0].addr, (uint16_t)mport, &target);
    uint16_t pport = 0;
    int rc = ddp__real_proxy_start(sys, plan, t0, &listen, &target, proxy, &pport);
    for (int i = 0; rc == 0 && i < plan->nnodes; i++)
        if (all || (nodes >> (i & 31) & 1))
            rc = ddp__real_dnat(sys, ns, i, plan->nodes[0].addr, (uint16_t)mport, pport);
    return rc;
}

/* The scenario line of the first delay fault, 0 when there is none. */
static int delay_fault_line(const ddp_plan_t *plan)
{
    for (int i = 0; i < plan->nfaults; i++)
        if (plan->faults[i].kind == DDP_FAULT_DELAY)
            return plan->fault_line[i] > 0 ? plan->fault_line[i] : -1;
    return 0;
}

/* A run given up before its processes start: its proxy, namespaces and
 * files go. */
/* A foreign process's own deadline, and where it counts from: its first
 * contact with the hosted store (its join; a program may take long to get
 * there, a torch import or its own sleep), else its start (never before
 * the master's, master_late): from + timeout + train + grace. */
static int64_t rank_deadline(const ddp_scenario_t *s, const proc_t *p, int64_t grace,
                             int64_t *from)
{
    int64_t f = p->spawn_ns > s->master_late_ns ? p->spawn_ns : s->master_late_ns;
    if (p->contact_ns > f)
        f = p->contact_ns;
    *from = f;
    return f + s->timeout_ns + s->train_ns + grace;
}

/* The run's own limit under exec: the latest any process's deadline can
 * be (a late start, a join just before its start's deadline). The hosted
 * store serves until then. */
static int64_t exec_limit(const ddp_scenario_t *s, const ddp_plan_t *plan, int64_t grace)
{
    int64_t late = 0, own = s->timeout_ns + s->train_ns + grace;
    for (int i = 0; i < plan->nfaults; i++)
        if (plan->faults[i].kind == DDP_FAULT_LATE && plan->faults[i].delay_ns > late)
            late = plan->faults[i].delay_ns;
    return s->master_late_ns + late + 2 * own;
}

/* Foreign processes past their own deadline (rank_deadline): killed, hung. */
static void kill_hung(ddp_sys_t *sys, const ddp_scenario_t *s, const ddp_plan_t *plan,
                      proc_t *ps, int np, int64_t now, int64_t grace, ddp_sys_guard_t *guard)
{
    for (int i = 0; i < np; i++) {
        proc_t *p = &ps[i];
        int64_t from, deadline;
        if (!p->started || p->done || !foreign(plan, &plan->procs[p->task]) ||
            now <= (deadline = rank_deadline(s, p, grace, &from)))
            continue;
        ddp_sys_kill(sys, -p->pid, 18);
        ddp_sys_kill(sys, -p->pid, 9);
        ddp_sys_kill(sys, p->pid, 9);
        ddp_sys_wait(sys, p->pid, &p->status, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S));
        ddp_sys_guard_watch(guard, (long)p->pid, 0);
        p->done = p->at_limit = 1;
        p->from_ns = from;
        p->deadline_ns = deadline;
        p->end_ns = now;
    }
}

/* argv[k..] for a foreign program's command line: its own words where
 * it is one simple command (exec'd by setsid, it keeps the parent-death
 * signal, which a shell's forked child would not have), else /bin/sh -c
 * CMD. words (n bytes) holds the words. The new k. */
#define EXEC_WORDS 64
static int exec_argv(char **argv, int k, const char *cmd, char *words, size_t n)
{
    int w = ddp__real_exec_words(cmd, words, n, argv + k, EXEC_WORDS);
    if (w > 0)
        return k + w;
    argv[k++] = "/bin/sh", argv[k++] = "-c";
    argv[k++] = (char *)cmd;
    return k;
}

/* The warm start's fork server (harness/real_warm.c: one per process,
 * kept from run to run), or NULL: every rank starts cold, and where the
 * server cannot start a line says why. */
static ddp_real_warm_t *warm_up(ddp_sys_t *sys, const ddp_plan_t *plan,
                                const ddp_real_opts_t *o, const char *run_id,
                                const char *logs, const char *tmpdir)
{
    char buf[sizeof plan->entry.exec], *words[EXEC_WORDS + 1];
    int nw = ddp__real_exec_words(plan->entry.exec, buf, sizeof buf, words, EXEC_WORDS);
    if (o->cold || torch_agents(plan) || !ddp__real_warm_command(words, nw))
        return NULL;
    const ddp_plan_proc_t *x = NULL; /* the first foreign process: its environment */
    for (int i = 0; !x && i < plan->nprocs; i++)
        if (foreign(plan, &plan->procs[i]))
            x = &plan->procs[i];
    if (!x)
        return NULL;
    const char *mods = ddp_env_get(ddp_sys_env(sys), "DDPSIM_WARM_IMPORT");
    char errp[320];
    snprintf(errp, sizeof errp, "%s/ddpsim-real-%ld-zygote.err", tmpdir, ddp_sys_pid());
    ddp_real_warm_where_t at = {.ddpsim = o->ddpsim, .errpath = errp};
    ddp_env_t *env = proc_env(sys, plan, x, o->netns, o->env_clear, run_id, logs);
    ddp_real_warm_t *w = NULL;
    if (!env || ddp__real_warm_get(sys, &at, words[0], mods ? mods : "torch", env, &w))
        fprintf(stderr, "ddpsim: warm start: %s: the ranks start cold\n",
                env ? ddp_err_message() : "out of memory");
    ddp_env_free(env);
    return w;
}

/* Rank p started by the fork server, in its node's namespace nsname (""
 * for none), or, where there is none or it cannot, as a process of its
 * own (sp). */
static int spawn_rank(ddp_sys_t *sys, ddp_real_warm_t *w, const char *nsname,
                      const ddp_spawn_t *sp, ddp_pid_t *pid)
{
    int k = 0;
    while (w && sp->argv[k] && strcmp(sp->argv[k], "setsid"))
        k++; /* after `ip netns exec NS`: the rank joins NS itself */
    if (w && sp->argv[k]) {
        if (ddp__real_warm_spawn(w, nsname, sp->argv + k + 1, sp->env, sp->stdout_path,
                                 sp->stderr_path, pid) == 0)
            return 0;
        fprintf(stderr, "ddpsim: %s: this rank starts cold\n", ddp_err_message());
    }
    return ddp_sys_spawn(sys, sp, pid);
}

static void abandon(ddp_sys_t *sys, ddp_real_proxy_t *proxy, ddp_netns_t *ns,
                    ddp_plan_t *plan, const char *plan_path)
{
    ddp__real_proxy_stop(proxy, NULL, 0);
    ddp__real_netns_down(sys, ns, NULL, 0);
    remove(plan->results);
    remove(plan_path);
    ddp_plan_free(plan);
}

/* A step that ended the run early and well (a skip): ddp_real_run returns 0. */
#define RUN_STOP 1

/* One real run's state, shared by the steps of ddp_real_run. */
typedef struct run {
    ddp_sys_t *sys;
    const ddp_scenario_t *s;
    const char *accel;
    const ddp_real_opts_t *o;
    ddp_scn_result_t *r;
    ddp_plan_t *plan;
    int exec;   /* a foreign program is every rank (entry.exec) */
    int hosted; /* ... and the run hosts its store */
    char agent_cmd[sizeof ((ddp_plan_entry_t *)0)->exec + 64];
    proc_t ps[MAX_PROCS + 2];
    int np;
    ddp_netns_t ns;
    ddp_real_proxy_t *proxy;
    ddp_real_warm_t *warm; /* the process's fork server, not the run's */
    const char *tmpdir;
    char plan_path[300], base[280], run_id[80];
    char logs[300]; /* torch's agents' --log_dir: logs/agentN */
    char nft_scratch[320];
    int64_t t0, grace;
    /* The faults the runner realises, through the one faultset
     * (ddp/faults.h): each window is switched on and off as its state
     * changes, on a time or on the spawn and exit events the runner sees.
     * hits[i] < 0: this executor cannot count what fault i acted on. */
    ddp_faultset_t rfs;
    long long hits[DDP_SCN_MAX_FAULTS];
    unsigned char on[DDP_SCN_MAX_FAULTS];
    by_t by[DDP_SCN_MAX_FAULTS];
    long events_off;
    ddp_real_workers_t *ws; /* torch's agents' workers */
    int64_t next_poll;
    progress_t *pg; /* what the hosted store sees of each rank (P records) */
    ddp_sys_guard_t *guard;
    int timed_out;
    char holder_why[400];
    int nleft; /* namespaces that could not be deleted, the first named: */
    char ns_left[32];
} run_t;

static int run_why(run_t *x, int rc)
{
    snprintf(x->r->why, sizeof x->r->why, "%s", ddp_err_message());
    return rc;
}

/* When a hosted store starts: with node 0's first process of its job, as
 * its agent would. */
static int64_t store_start(const ddp_plan_t *plan, int k, int job)
{
    int64_t start = -1;
    for (int i = 0; i < k; i++)
        if (plan->procs[i].node == 0 && plan->procs[i].job == job &&
            !is_service(plan->procs[i].kind) &&
            (start < 0 || plan->procs[i].start_ns < start))
            start = plan->procs[i].start_ns;
    return start < 0 ? 0 : start;
}

/* A foreign job's store is the runner's, on node 0 at MASTER_PORT, as
 * torchrun's agent hosts it: every rank is a client, and the store's
 * events (joins, keys, the barrier, marks) reach the faults. Not when
 * the port is taken (that scenario is about rank 0 binding it).
 * A second job (second_job) on a port of its own has a store of its own. */
static int host_stores(run_t *x)
{
    ddp_plan_t *plan = x->plan;
    for (int job = 0; x->exec && !x->o->no_host_store && !x->s->port_taken && job < 2; job++) {
        long port = job_port(plan, job); /* before the store joins the processes */
        int any = 0;
        for (int i = 0; i < plan->nprocs; i++)
            any |= plan->procs[i].job == job && !is_service(plan->procs[i].kind);
        if (!any || port < 0 || (job && port == job_port(plan, 0)))
            continue; /* no second job, the same port (the same store), or no
                         fixed port (the job's rank 0 serves its own) */
        int k = ddp_plan_add_proc(plan, job ? "store2" : "store", 0, -1, 0, DDP_PLAN_STORE,
                                  NULL);
        if (k < 0)
            return k;
        ddp_plan_proc_t st = plan->procs[k];
        st.port = (uint16_t)port;
        st.job = job;
        st.start_ns = store_start(plan, k, job);
        memmove(&plan->procs[1], &plan->procs[0], sizeof *plan->procs * (size_t)k);
        plan->procs[0] = st; /* started first: the ranks connect to it */
    }
    return 0;
}

/* The plan, and whether this host can run it (RUN_STOP: skipped, why said). */
static int run_plan(run_t *x)
{
    ddp_scn_result_t *r = x->r;
    int rc = ddp_scenario_plan(x->s, x->accel, x->o->seed, &x->plan);
    if (rc) {
        snprintf(r->why, sizeof r->why, "cannot build the run: %s", ddp_err_message());
        return rc;
    }
    ddp_plan_t *plan = x->plan;
    char why[300];
    x->exec = plan->entry.exec[0] != '\0';
    const char *lent = ddp_env_get(ddp_sys_env(x->sys), "DDPSIM_REAL_GPUS");
    if ((x->exec && (rc = ddp_real_check_exec(x->sys, plan->entry.exec)) != 0) ||
        (torch_agents(plan) &&
         (rc = ddp__real_agent_cmd(plan->entry.exec, x->agent_cmd, sizeof x->agent_cmd)) != 0)) {
        run_why(x, rc);
    } else if (plan_unsupported(plan, x->o->netns, lent ? atoi(lent) : 0, why, sizeof why)) {
        r->skipped = 1;
        snprintf(r->why, sizeof r->why, "skipped: %s", why);
        rc = RUN_STOP;
    } else if ((rc = host_stores(x)) == 0 && !x->o->netns &&
               (rc = master_port_free(x->sys, plan)) != 0) {
        run_why(x, rc);
    }
    if (rc) {
        ddp_plan_free(plan);
        x->plan = NULL;
    }
    return rc;
}

/* The run's files, named, and its limit. */
static void run_names(run_t *x)
{
    ddp_plan_t *plan = x->plan;
    const ddp_real_opts_t *o = x->o;
    int64_t t0 = ddp_sys_now(x->sys);
    x->tmpdir = o->tmpdir ? o->tmpdir : "/tmp";
    unsigned long long tag = (unsigned long long)(t0 ^ (int64_t)plan->seed);
    /* The runner's pid in the name: a run killed by SIGKILL cannot remove
     * its files, and the next run tells them from a live run's. */
    ddp_sys_sweep_stale(x->tmpdir, "ddpsim-real-");
    char started[48];
    ddp_sys_wall_text(started, sizeof started);
    snprintf(x->run_id, sizeof x->run_id, "%016llx@%s",
             (unsigned long long)ddp_sys_random_u64(), started);
    snprintf(x->base, sizeof x->base, "%s/ddpsim-real-%ld-%llx", x->tmpdir, ddp_sys_pid(), tag);
    snprintf(plan->results, sizeof plan->results, "%s.tsv", x->base);
    snprintf(x->plan_path, sizeof x->plan_path, "%s.plan", x->base);
    snprintf(x->logs, sizeof x->logs, "%s.logs", x->base);
    snprintf(x->nft_scratch, sizeof x->nft_scratch, "%s.nft", x->base);
    plan->discover = o->tap != NULL;
    x->grace = o->exec_grace_ns > 0 ? o->exec_grace_ns : EXEC_GRACE_NS;
    plan->limit_ns = x->exec ? exec_limit(x->s, plan, x->grace)
                             : x->s->master_late_ns + x->s->timeout_ns + x->s->train_ns +
                                   SLACK_NS;
    for (int i = 0; i < plan->nnodes; i++)
        ddp__real_node_ip(o->netns, i, plan->nodes[i].addr, sizeof plan->nodes[i].addr);
}

/* The results file (empty) and the plan file, both closed, always. */
static int write_run_files(run_t *x)
{
    FILE *rf = fopen(x->plan->results, "w");
    FILE *pf = rf ? fopen(x->plan_path, "w") : NULL;
    int wrote = pf && ddp_plan_write(x->plan, pf) == 0;
    int pf_closed = !(pf && fclose(pf)), rf_closed = !(rf && fclose(rf)); /* both, always */
    if (wrote && pf_closed && rf_closed)
        return 0;
    return ddp_err_set(-EIO, "cannot write %s: %s", rf ? x->plan_path : x->plan->results,
                       strerror(errno));
}

/* The namespaces, the fork servers, the files, the proxy: the world the
 * processes start in. The run's clock starts here. */
static int run_world(run_t *x)
{
    const ddp_real_opts_t *o = x->o;
    ddp_plan_t *plan = x->plan;
    int rc;
    /* A foreign program's latency is the proxy's: netem is for ddpsim's own. */
    if (o->netns &&
        (rc = ddp__real_netns_up(x->sys, &x->ns, plan->nnodes, x->exec ? 0 : plan->latency_ns)))
        return run_why(x, rc);
    /* the fork server's imports (seconds, the first run only) before the
     * run's clock starts */
    x->warm = x->exec ? warm_up(x->sys, plan, o, x->run_id, x->logs, x->tmpdir) : NULL;
    x->t0 = plan->t0 = ddp_sys_now(x->sys);
    if ((rc = write_run_files(x)) != 0 ||
        (o->netns && x->exec && (rc = start_proxy(x->sys, plan, &x->ns, x->t0, &x->proxy))))
        return run_why(x, rc);
    /* The scenario's own interfaces and addresses, in each node's namespace;
     * for torch's agents each node's name (below) resolving to its address */
    if (o->netns && ((plan->nnet && (rc = ddp__real_netns_ifaces(x->sys, &x->ns, plan))) ||
                     (torch_agents(plan) && (rc = ddp__real_netns_hosts(&x->ns, plan)))))
        return run_why(x, rc);
    /* A delay of ddpsim's own processes is tc netem: where the kernel has
     * none, the run would go undelayed and pass for the wrong reason. */
    int dline = o->netns && !x->exec ? delay_fault_line(plan) : 0;
    if (dline && ddp__real_netem_probe(x->sys, &x->ns) != 0) {
        x->r->skipped = 1;
        snprintf(x->r->why, sizeof x->r->why,
                 "skipped: fault delay (line %d) is tc netem in the node namespaces, "
                 "and this kernel has no sch_netem (`tc qdisc add ... netem` fails "
                 "there): the run would not be delayed", dline);
        return RUN_STOP;
    }
    return 0;
}

/* The processes, and the faults the runner realises: which of it does
 * what, the late starts drawn now. */
static int run_faults(run_t *x)
{
    ddp_plan_t *plan = x->plan;
    for (int t = 0; t < plan->nprocs && x->np < MAX_PROCS + 2; t++) {
        const ddp_plan_proc_t *pp = &plan->procs[t];
        x->ps[x->np++] = (proc_t){.task = t, .node = pp->node, .rank = pp->rank,
                                  .start_ns = pp->start_ns, .contact_ns = -1,
                                  .agent = pp->kind == DDP_PLAN_AGENT && x->exec};
    }
    ddp_rng_t rrng;
    ddp_rng_seed(&rrng, plan->seed * 104729 + 1);
    int rc = ddp_faultset_init(&x->rfs, plan->faults, plan->nfaults, 0, &rrng,
                               plan->expected_world);
    if (rc)
        return run_why(x, rc);
    for (int i = 0; i < plan->nfaults && i < DDP_SCN_MAX_FAULTS; i++) {
        const ddp_fault_t *f = &plan->faults[i];
        x->by[i] = realised_by(f, x->exec);
        x->hits[i] = hits_start(f, x->by[i], x->exec, x->o->netns);
        for (int k = 0; f->kind == DDP_FAULT_LATE && k < x->np; k++)
            if (proc_aimed(f, &x->ps[k]) && ddp_faultset_draw(&x->rfs, i)) {
                x->ps[k].start_ns += f->delay_ns; /* held before it starts */
                x->hits[i]++;
            }
    }
    return 0;
}

/* Everything before the loop; on an error or a skip, what was set up is
 * taken down again. */
static int run_setup(run_t *x)
{
    run_names(x);
    int rc = run_world(x);
    if (!rc)
        rc = run_faults(x);
    if (rc) {
        abandon(x->sys, x->proxy, &x->ns, x->plan, x->plan_path);
        return rc;
    }
    ddp_plan_t *plan = x->plan;
    x->ws = torch_agents(plan) ? calloc(1, sizeof *x->ws) : NULL;
    x->hosted = x->exec && hosted_store(plan) >= 0;
    x->pg = x->hosted ? calloc(1, sizeof *x->pg) : NULL;
    for (int i = 0; x->pg && i < plan->nprocs; i++)
        if (plan->procs[i].kind == DDP_PLAN_STORE)
            x->pg->store_port[plan->procs[i].job ? 1 : 0] = plan->procs[i].port;
    /* the processes' groups die with the runner, SIGKILL of it included */
    if (ddp_sys_guard_start(&x->guard) != 0)
        fprintf(stderr, "ddpsim: warning: %s: a SIGKILL of this run may leave its "
                        "processes' children running\n", ddp_err_message());
    return 0;
}

/* A crash window opens: SIGKILL (a silent node's crash on loopback: a freeze). */
static void fault_kill(run_t *x, int i, int64_t now)
{
    const ddp_fault_t *f = &x->plan->faults[i];
    if (silent_node_crash(f) && !x->o->netns) {
        x->hits[i] += freeze_node(x->sys, x->ps, x->np, f, now);
        return;
    }
    if (silent_node_crash(f) && ddp__real_silence(x->sys, &x->ns, f->node, i))
        fprintf(stderr, "ddpsim: fault crash (line %d) is not silent: %s\n",
                x->plan->fault_line[i], ddp_err_message());
    x->hits[i] += signal_procs(x->sys, x->ps, x->np, f, 9);
    if (x->ws)
        x->hits[i] += kill_workers(x->sys, x->ws, f);
}

/* Fault i's window opened (want) or closed: the runner acts. */
static void fault_switch(run_t *x, int i, int want, int64_t now)
{
    const ddp_fault_t *f = &x->plan->faults[i];
    switch (x->by[i]) {
    case BY_KILL: fault_kill(x, i, now); break;
    case BY_STOP:
        if (want)
            x->hits[i] += signal_procs(x->sys, x->ps, x->np, f, 19);
        else
            signal_procs(x->sys, x->ps, x->np, f, 18);
        break;
    case BY_NFT:
        if (!want) /* its counters go with its rules */
            x->hits[i] += ddp__real_nft_hits(x->sys, &x->ns, x->plan, i, x->nft_scratch);
        ddp__real_nft(x->sys, &x->ns, x->plan, i, want);
        break;
    case BY_PROXY: ddp__real_proxy_set(x->proxy, i, want); break;
    case BY_LINK:
        if (!want && x->o->netns) /* its counters go with its qdiscs */
            x->hits[i] += ddp__real_link_hits(x->sys, &x->ns, f, x->nft_scratch);
        if (ddp__real_link_cmd(x->sys, &x->ns, f, want) && want)
            fprintf(stderr, "ddpsim: fault %s (line %d) is not in force: %s\n",
                    ddp_fault_kind_name(f->kind), x->plan->fault_line[i], ddp_err_message());
        break;
    default: break;
    }
}

/* Every process's events (E records), then the windows: one open at 0
 * holds before anyone starts. */
static void run_events(run_t *x, int64_t now)
{
    ddp_plan_t *plan = x->plan;
    ddp__real_acks_t acks = {.now = now};
    ddp_faultset_t *fsp = &x->rfs;
    if (x->rfs.events)
        ddp__real_events_read(plan->results, &x->events_off, &fsp, 1, 0, &acks);
    if (x->pg)
        progress_read(plan->results, x->pg, x->ps, x->np);
    for (int i = 0; i < plan->nfaults && i < DDP_SCN_MAX_FAULTS; i++) {
        int want = ddp_faultset_active(&x->rfs, i, now);
        by_t by = x->by[i];
        if (by == BY_OTHERS || by == BY_NONE || want == x->on[i] || (by == BY_KILL && x->on[i]))
            continue;
        x->on[i] = (unsigned char)want;
        fault_switch(x, i, want, now);
    }
    /* the processes that saw those events go on now (ddp__real_ack_wait) */
    for (int a = 0; a < acks.n; a++)
        ddp__real_ack_write(plan->results, acks.v[a]);
}

/* A pause open at its spawn: it starts at the pause's end, as a process
 * stopped at birth would go on then. 1 when one holds p. */
static int held_by_pause(run_t *x, proc_t *p)
{
    int pause = -1;
    for (int k = 0; k < x->plan->nfaults && k < DDP_SCN_MAX_FAULTS && pause < 0; k++)
        if (x->by[k] == BY_STOP && x->on[k] && proc_aimed(&x->plan->faults[k], p))
            pause = k;
    if (pause < 0)
        return 0;
    if (!p->held)
        x->hits[pause]++; /* held once, however long */
    p->held = 1;
    return 1;
}

/* The words of a process's command line, and where they live. */
typedef struct argv_buf {
    char *argv[16 + EXEC_WORDS];
    char nsname[32], idx[16], outp[320], errp[320];
    char words[sizeof ((ddp_plan_entry_t *)0)->exec + sizeof ((run_t *)0)->agent_cmd];
} argv_buf_t;

/* In a node's namespace: `ip netns exec`; torch's agent names its node by
 * gethostname() (MASTER_ADDR for its workers: socket.getfqdn()): the
 * node's own name, in a UTS namespace of its own. Returns the next word. */
static int netns_words(run_t *x, const proc_t *p, argv_buf_t *b, int k)
{
    char **argv = b->argv;
    ddp__real_ns_name(&x->ns, p->node, b->nsname, sizeof b->nsname);
    argv[k++] = "ip", argv[k++] = "netns", argv[k++] = "exec", argv[k++] = b->nsname;
    if (p->agent) {
        argv[k++] = "unshare", argv[k++] = "--uts", argv[k++] = "/bin/sh";
        argv[k++] = "-c", argv[k++] = "hostname \"$0\" && exec \"$@\"";
        argv[k++] = x->plan->nodes[p->node].host;
    }
    return k;
}

/* Process p's command line in b->argv: a foreign program (its output in
 * files of its own) or `ddpsim train --plan ... --process N`. */
static void proc_argv(run_t *x, const proc_t *p, ddp_spawn_t *sp, argv_buf_t *b)
{
    char **argv = b->argv;
    int k = x->o->netns ? netns_words(x, p, b, 0) : 0;
    argv[k++] = "setsid";
    if (foreign(x->plan, &x->plan->procs[p->task])) {
        k = exec_argv(argv, k, p->agent ? x->agent_cmd : x->plan->entry.exec, b->words,
                      sizeof b->words);
        out_path(b->outp, sizeof b->outp, x->base, p->task, "out");
        out_path(b->errp, sizeof b->errp, x->base, p->task, "err");
        sp->stdout_path = b->outp;
        sp->stderr_path = b->errp;
    } else {
        snprintf(b->idx, sizeof b->idx, "%d", p->task);
        argv[k++] = (char *)x->o->ddpsim;
        argv[k++] = "train", argv[k++] = "--plan", argv[k++] = x->plan_path;
        argv[k++] = "--process", argv[k++] = b->idx;
    }
    argv[k] = NULL;
    sp->argv = argv;
}

/* How long a port holder or hosted store may take to listen: on a loaded
 * host a process can take seconds to start. */
#define HOLD_S 30

/* A holder that never held the port would turn a port-taken test into a
 * clean start that passes or fails by chance; a store that never served,
 * a job that cannot join. The run ends with why. */
static void holder_failed(run_t *x, proc_t *p, int exited, int st)
{
    const ddp_plan_proc_t *pp = &x->plan->procs[p->task];
    const char *what = pp->kind == DDP_PLAN_STORE ? "the hosted store" : "the port holder",
               *lost = pp->kind == DDP_PLAN_STORE
                           ? "the job had no store (--no-host-store lets rank 0 host its own)"
                           : "the port-taken fault was not in force";
    if (exited) {
        p->done = 1;
        p->status = st;
        snprintf(x->holder_why, sizeof x->holder_why,
                 "%s (%s train --process %d, on port %u) exited with status %d before it "
                 "listened (its stderr is above): %s",
                 what, x->o->ddpsim, p->task, (unsigned)pp->port, st, lost);
    } else {
        snprintf(x->holder_why, sizeof x->holder_why,
                 "%s (%s train --process %d) did not listen on port %u within %d s: %s", what,
                 x->o->ddpsim, p->task, (unsigned)pp->port, HOLD_S, lost);
    }
}

/* The port must be held before anyone else starts (in a namespace,
 * starting takes long enough to lose that race). One that exits at the
 * bound (HOLD_S) is still named as exited. */
static void hold_port(run_t *x, proc_t *p)
{
    ddp_sys_t *sys = x->sys;
    int64_t until = ddp_sys_deadline_in(sys, HOLD_S * DDP_NS_PER_S);
    int st = 0, exited = 0;
    while (!port_held(x->plan->results) && ddp_sys_now(sys) < until &&
           !(exited = ddp_sys_wait(sys, p->pid, &st, 0) == 0))
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS));
    if (!port_held(x->plan->results) && !exited)
        exited = ddp_sys_wait(sys, p->pid, &st, 0) == 0;
    if (!port_held(x->plan->results))
        holder_failed(x, p, exited, st);
}

/* Process p starts now (a failed spawn: it ended with 127). */
static void start_proc(run_t *x, proc_t *p, int64_t now)
{
    ddp_plan_t *plan = x->plan;
    const ddp_plan_proc_t *pp = &plan->procs[p->task];
    ddp_env_t *env = proc_env(x->sys, plan, pp, x->o->netns, x->o->env_clear, x->run_id, x->logs);
    argv_buf_t b;
    ddp_spawn_t sp = {.env = env, .name = pp->name, .die_with_parent = 1, .guard = x->guard};
    proc_argv(x, p, &sp, &b);
    ddp_real_warm_t *wm = foreign(plan, pp) && !p->agent ? x->warm : NULL;
    int src = env ? spawn_rank(x->sys, wm, x->o->netns ? b.nsname : "", &sp, &p->pid) : -ENOMEM;
    ddp_env_free(env);
    if (!src && wm) /* its group: setsid makes it one, named by its pid (a cold
                       start's is watched before it execs: ddp_spawn_t.guard) */
        ddp_sys_guard_watch(x->guard, (long)p->pid, 1);
    p->started = 1;
    p->spawn_ns = now;
    proc_event(plan, &x->rfs, p, DDP_TRIG_SPAWN, now);
    if (!src && x->pg && foreign(plan, pp))
        session_record(plan->results, p);
    if (src) {
        p->done = 1;
        p->status = 127;
        p->end_ns = now;
    }
    if (!src && is_service(pp->kind))
        hold_port(x, p);
}

/* Start what is due, until a port holder fails (holder_why). */
static void start_due(run_t *x, int64_t now)
{
    for (int i = 0; i < x->np && !x->holder_why[0]; i++) {
        proc_t *p = &x->ps[i];
        if (p->started || now < p->start_ns || held_by_pause(x, p))
            continue;
        start_proc(x, p, now);
    }
}

/* torch's agents' workers, every WORKER_POLL_NS */
static void poll_workers(run_t *x, int64_t now)
{
    if (!x->ws || now < x->next_poll)
        return;
    x->next_poll = now + WORKER_POLL_NS;
    for (int i = 0; i < x->np; i++)
        if (x->ps[i].agent && x->ps[i].started && !x->ps[i].done)
            ddp__real_workers_poll(x->ws, (long)x->ps[i].pid, i, x->ps[i].node, now);
    workers_seen(x->plan, &x->rfs, x->ws, now);
}

static void reap(run_t *x)
{
    for (int i = 0; i < x->np; i++) {
        proc_t *p = &x->ps[i];
        int st;
        if (!p->started || p->done || ddp_sys_wait(x->sys, p->pid, &st, 0) != 0)
            continue;
        if (x->pg) /* its connections, before its sockets go */
            progress_read(x->plan->results, x->pg, x->ps, x->np);
        p->done = 1;
        p->status = st;
        p->end_ns = ddp_sys_now(x->sys) - x->t0;
        proc_event(x->plan, &x->rfs, p, DDP_TRIG_EXIT, p->end_ns);
        /* orphans of a killed process go with it */
        ddp_sys_kill(x->sys, -p->pid, 9);
        ddp_sys_guard_watch(x->guard, (long)p->pid, 0);
    }
}

/* 1 when the loop ends: everyone started and ended, the limit, an interrupt. */
static int run_over(run_t *x, int64_t now)
{
    int pending = 0, others = 0;
    for (int i = 0; i < x->np; i++) {
        pending |= !x->ps[i].started;
        /* the port holder only ends at the limit: not waited for */
        others += x->ps[i].started && !x->ps[i].done &&
                  !is_service(x->plan->procs[x->ps[i].task].kind);
    }
    if (!pending && others == 0)
        return 1;
    if (now > x->plan->limit_ns) {
        x->timed_out = 1;
        return 1;
    }
    return x->o->interrupted && *x->o->interrupted;
}

#define LOOP_MIN_NS (5 * DDP_NS_PER_MS)
#define LOOP_MAX_NS (20 * DDP_NS_PER_MS)
int64_t ddp__real_loop_sleep(int64_t prev, int changed, int64_t due_in)
{
    int64_t d = changed || prev < LOOP_MIN_NS ? LOOP_MIN_NS
                : prev >= LOOP_MAX_NS / 2 ? LOOP_MAX_NS : 2 * prev;
    return due_in > 0 && due_in < d ? due_in : d; /* overdue: held by a pause */
}

/* What the loop has seen: the records read, the processes started and
 * ended, the faults on. Another value: something happened. */
static uint64_t loop_seen(const run_t *x)
{
    uint64_t h = (uint64_t)x->events_off * 31 + (uint64_t)(x->pg ? x->pg->off : 0);
    for (int i = 0; i < x->np; i++)
        h = h * 31 + (uint64_t)(x->ps[i].started + 2 * x->ps[i].done);
    for (int i = 0; i < x->plan->nfaults && i < DDP_SCN_MAX_FAULTS; i++)
        h = h * 31 + x->on[i];
    return h;
}

/* The time until the next process is due to start (INT64_MAX: none). */
static int64_t next_start_in(const run_t *x, int64_t now)
{
    int64_t in = INT64_MAX;
    for (int i = 0; i < x->np; i++)
        if (!x->ps[i].started && x->ps[i].start_ns - now < in)
            in = x->ps[i].start_ns - now;
    return in;
}

static void run_loop(run_t *x)
{
    int64_t nap = 0;
    uint64_t seen = loop_seen(x);
    for (;;) {
        int64_t now = ddp_sys_now(x->sys) - x->t0;
        run_events(x, now);
        start_due(x, now);
        if (x->holder_why[0])
            break;
        poll_workers(x, now);
        reap(x);
        if (x->exec)
            kill_hung(x->sys, x->s, x->plan, x->ps, x->np, now, x->grace, x->guard);
        if (run_over(x, now))
            break;
        uint64_t was = seen;
        seen = loop_seen(x);
        nap = ddp__real_loop_sleep(nap, seen != was, next_start_in(x, now));
        ddp_sys_sleep_until(x->sys, ddp_sys_deadline_in(x->sys, nap));
    }
}

/* Every process still there is killed: a silent node's (frozen: they end
 * with the run), then the rest. */
static void end_procs(run_t *x)
{
    ddp_sys_t *sys = x->sys;
    proc_t *ps = x->ps;
    int st;
    for (int i = 0; i < x->np; i++)
        if (ps[i].frozen) {
            ddp_sys_kill(sys, -ps[i].pid, 9);
            ddp_sys_kill(sys, ps[i].pid, 9);
            ddp_sys_wait(sys, ps[i].pid, &st, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S));
        }
    for (int i = 0; i < x->np; i++)
        if (ps[i].started && !ps[i].done) {
            ddp_sys_kill(sys, -ps[i].pid, 18);
            ddp_sys_kill(sys, -ps[i].pid, 9);
            ddp_sys_wait(sys, ps[i].pid, &st, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S));
            ps[i].done = 1;
            ps[i].at_limit = x->timed_out && !is_service(x->plan->procs[ps[i].task].kind);
            ps[i].end_ns = ddp_sys_now(sys) - x->t0;
            ps[i].deadline_ns = x->plan->limit_ns;
            ps[i].from_ns = 0;
        }
}

/* The processes, the fork servers, the proxy and the namespaces go; the
 * counters of the faults still in force are read first. */
static void run_stop(run_t *x)
{
    ddp_plan_t *plan = x->plan;
    int ended = !x->timed_out && !x->holder_why[0] && !(x->o->interrupted && *x->o->interrupted);
    if (x->pg && ended) /* every rank exited: the store's last records first */
        progress_settle(x->sys, plan->results, x->pg, x->ps, x->np);
    else if (x->pg)
        progress_read(plan->results, x->pg, x->ps, x->np);
    end_procs(x);
    ddp_sys_guard_end(x->guard);
    ddp__real_proxy_stop(x->proxy, x->hits, plan->nfaults);
    for (int i = 0; i < plan->nfaults && i < DDP_SCN_MAX_FAULTS; i++) {
        /* still in force: its counters go with the namespaces */
        if (x->by[i] == BY_NFT && x->on[i])
            x->hits[i] += ddp__real_nft_hits(x->sys, &x->ns, plan, i, x->nft_scratch);
        if (x->by[i] == BY_LINK && x->on[i] && x->o->netns)
            x->hits[i] += ddp__real_link_hits(x->sys, &x->ns, &plan->faults[i], x->nft_scratch);
    }
    x->nleft = ddp__real_netns_down(x->sys, &x->ns, x->ns_left, sizeof x->ns_left);
}

/* A foreign program leaves no record: its exit and stderr say it (sure:
 * every joined connection's rank is known); torch's agents' workers too. */
static int foreign_outcomes(run_t *x, ddp_sim_outcome_t **outs, int n, int sure)
{
    int agent_status[MAX_PROCS + 2];
    char *agent_err[MAX_PROCS + 2] = {0}; /* each foreign process's stderr */
    const proc_t *ps = x->ps;
    for (int i = 0; x->exec && n >= 0 && i < x->np; i++) {
        agent_status[i] = ps[i].killed ? 137 : ps[i].at_limit ? -1 : ps[i].status;
        /* killed, or never started (the run ended before its late start):
         * no exit of its own to judge */
        if (!foreign(x->plan, &x->plan->procs[ps[i].task]) || ps[i].killed || !ps[i].started)
            continue;
        ddp_sim_outcome_t *no = realloc(*outs, sizeof **outs * (size_t)(n + 1));
        if (!no)
            break;
        *outs = no;
        exec_outcome(x->plan, &ps[i], x->base, x->grace, x->hosted, sure, &(*outs)[n++],
                     &agent_err[i]);
    }
    if (x->ws && n >= 0)
        n = ddp__real_worker_outcomes(x->plan, x->ws, agent_status,
                                      (const char *const *)agent_err, outs, n);
    for (int i = 0; i < x->np; i++)
        free(agent_err[i]);
    return n;
}

/* Every process's outcome (the results file's R records, then the foreign
 * ones) and the hits its processes counted; their count, or < 0. */
static int run_outcomes(run_t *x, ddp_sim_outcome_t **outs)
{
    ddp_plan_t *plan = x->plan;
    int *fired = calloc((size_t)plan->nfaults + 1, sizeof *fired);
    int n = read_results(plan->results, x->ps, x->np, plan, outs, fired);
    for (int i = 0; fired && i < plan->nfaults && i < DDP_SCN_MAX_FAULTS; i++)
        if (ddp__real_in_process(&plan->faults[i]) && x->by[i] == BY_OTHERS)
            x->hits[i] = fired[i];
    ddp_faultset_free(&x->rfs);
    free(fired);
    if (x->pg) /* the store's last words (the ranks' connections closing) */
        progress_read(plan->results, x->pg, x->ps, x->np);
    int sure = x->pg && progress_unknown_joined(x->pg) == 0;
    if (x->pg)
        ddp_sys_tcp_owners_free(x->pg->owners);
    free(x->pg);
    x->pg = NULL;
    return foreign_outcomes(x, outs, n, sure);
}

/* The verdict: the judge's, then what the runner itself saw go wrong. */
static void run_verdict(run_t *x, const ddp_sim_outcome_t *outs, int n)
{
    const ddp_real_opts_t *o = x->o;
    ddp_scn_result_t *r = x->r;
    /* A foreign program killed at the limit is a timeout outcome, not a
     * harness that lost track of it. */
    r->first_rank = -1; /* no rank's message wanted */
    ddp__scenario_judge(x->s, outs, n, x->plan->expected_world,
                        x->timed_out && !x->exec ? DDP_SIM_TIME_LIMIT : DDP_SIM_DONE, NULL,
                        o->report, o->report_len, r);
    ddp__scenario_account(x->plan, x->hits, r, o->report, o->report_len);
    if (x->holder_why[0]) { /* the cause: whatever the ranks did follows from it */
        r->pass = 0;
        snprintf(r->why, sizeof r->why, "%s", x->holder_why);
        snprintf(r->first_error, sizeof r->first_error, "%s", x->holder_why);
        r->first_rank = -1;
    }
    if (o->interrupted && *o->interrupted) {
        r->pass = 0;
        snprintf(r->why, sizeof r->why, "interrupted: its processes were killed%s",
                 o->netns ? " and its namespaces deleted" : "");
    }
    if (x->nleft) {
        r->pass = r->invariants_ok = 0;
        snprintf(r->why, sizeof r->why,
                 "%d network namespace(s) could not be deleted (first %s): "
                 "remove with `ip netns del %s` or `make netns-clean`",
                 x->nleft, x->ns_left, x->ns_left);
    }
    if (x->exec)
        keep_outputs(x->sys, x->s, x->accel, o, x->tmpdir, x->plan, x->ps, x->np, x->base,
                     x->logs, outs, n, r);
}

/* Outcomes, verdict, and the run's files and memory gone. */
static int run_finish(run_t *x)
{
    ddp_sim_outcome_t *outs = NULL;
    int n = run_outcomes(x, &outs);
    if (x->o->tap)
        ddp__real_events_tap(x->plan->results, x->o->tap, x->o->tap_arg);
    remove(x->plan->results);
    remove(x->plan_path);
    if (n < 0)
        drop_outputs(x->sys, x->plan, x->ps, x->np, x->base, x->logs);
    else
        run_verdict(x, outs, n);
    for (int i = 0; i < n; i++)
        ddp_sim_outcome_clear(&outs[i]);
    if (n >= 0)
        free(outs);
    free(x->ws);
    ddp_plan_free(x->plan);
    return n < 0 ? n : 0;
}

int ddp_real_run(ddp_sys_t *sys, const ddp_scenario_t *s, const char *accel,
                 const ddp_real_opts_t *o, ddp_scn_result_t *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->accelerator, sizeof r->accelerator, "%s", accel);
    run_t x = {.sys = sys, .s = s, .accel = accel, .o = o, .r = r};
    int rc = run_plan(&x);
    if (!rc)
        rc = run_setup(&x);
    if (!rc) {
        run_loop(&x);
        run_stop(&x);
        rc = run_finish(&x);
    }
    return rc == RUN_STOP ? 0 : rc;
}
