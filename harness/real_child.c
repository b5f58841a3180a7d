/* harness/real_child.c — one process of a real run, inside it: it reads
 * its part of the plan the runner wrote (`ddpsim train --plan FILE
 * --process N`), arms the plan's in-process faults with libfiu, runs its
 * entry with the POSIX sys, and appends its result record to the plan's
 * results file (docs/real-runs.md). Workers an accelerator forks inherit
 * all of it. */
#include <errno.h>
#include <fiu.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/accel.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/host.h"
#include "ddp/store.h"
#include "ddp/plan.h"
#include "ddp/real.h"
#include "elastic_priv.h"
#include "real_priv.h"
#include "scenario_priv.h"

/* This process's run: the plan, which process of it this is, the fault
 * draws. Forked workers inherit a copy. */
static struct {
    ddp_sys_t *sys;
    ddp_plan_t *p;
    int index;
    int node;
    ddp_fault_t *faults; /* the plan's in-process faults */
    int *plan_index;     /* each one's index in the plan */
    ddp_faultset_t fs;
    ddp_faultset_t all;  /* every fault of the plan: which events to share */
    ddp_faultset_t runner; /* the faults the runner realises: which to await */
    ddp_fault_t *rfaults;
    long events_off;     /* E records read so far (ddp__real_events_read) */
    ddp_rng_t rng;
    int attempt;         /* an elastic agent's worker: its group's start */
    int armed;           /* libfiu initialised and its points enabled here */
} self;

static void clean(char *s)
{
    for (; *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r')
            *s = ' ';
}

/* One write of one line: appends from concurrent processes do not mix. */
static void append_line(const char *line)
{
    if (!self.p || !self.p->results[0])
        return;
    FILE *f = fopen(self.p->results, "a");
    if (!f)
        return;
    setvbuf(f, NULL, _IOFBF, 4096);
    fputs(line, f);
    fclose(f);
}

static void append_to(const char *results, const char *line)
{
    FILE *f = results && results[0] ? fopen(results, "a") : NULL;
    if (!f)
        return;
    setvbuf(f, NULL, _IOFBF, 4096); /* one write: appends do not mix */
    fputs(line, f);
    fclose(f);
}

void ddp__real_event_write(const char *results, const ddp_fault_event_t *ev, int64_t t,
                           unsigned long long ack)
{
    char name[200], line[330];
    snprintf(name, sizeof name, "%s", ev->name ? ev->name : "");
    clean(name);
    snprintf(line, sizeof line, "E\t%d\t%d\t%lld\t%lld\t%llu\t%s\n", (int)ev->kind, ev->rank,
             ev->value, (long long)t, ack, name);
    append_to(results, line);
}

void ddp__real_ack_write(const char *results, unsigned long long ack)
{
    char line[48];
    snprintf(line, sizeof line, "A\t%llu\n", ack);
    append_to(results, line);
}

int ddp__real_ack_wait(ddp_sys_t *sys, const char *results, unsigned long long ack,
                       int64_t deadline)
{
    long off = 0;
    for (;;) {
        FILE *f = fopen(results, "r");
        char line[400];
        if (f && fseek(f, off, SEEK_SET) == 0)
            while (fgets(line, sizeof line, f)) {
                size_t len = strlen(line);
                if (!len || line[len - 1] != '\n')
                    break; /* still being written */
                off += (long)len;
                unsigned long long a;
                if (line[0] == 'A' && sscanf(line, "A\t%llu", &a) == 1 && a == ack) {
                    fclose(f);
                    return 0;
                }
            }
        if (f)
            fclose(f);
        if (ddp_sys_now(sys) >= deadline)
            return DDP_ETIMEOUT;
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 2 * DDP_NS_PER_MS));
    }
}

/* An E record ("E\tKIND\tRANK\tVALUE\tT\tACK\tNAME\n", the newline cut off
 * already) into ev (its name points into line); 0, or -1 for another
 * record. */
static int parse_event(char *line, ddp_fault_event_t *ev, long long *t, unsigned long long *ack)
{
    int kind, rank, name_at = 0;
    long long value;
    if (line[0] != 'E' ||
        sscanf(line, "E\t%d\t%d\t%lld\t%lld\t%llu\t%n", &kind, &rank, &value, t, ack,
               &name_at) != 5 || !name_at || kind <= 0 || kind >= DDP_TRIG_COUNT)
        return -1;
    *ev = (ddp_fault_event_t){.kind = (ddp_trigger_kind_t)kind, .rank = rank,
                              .name = line + name_at, .value = value};
    return 0;
}

/* Calls fn for every E record past *off that is whole, moving *off on,
 * until fn returns nonzero: that record stays for the next call. */
static void each_event(const char *results, long *off,
                       int (*fn)(void *arg, const ddp_fault_event_t *ev, long long t,
                                 unsigned long long ack),
                       void *arg)
{
    FILE *f = fopen(results, "r");
    if (!f)
        return;
    char line[400];
    if (fseek(f, *off, SEEK_SET) == 0)
        while (fgets(line, sizeof line, f)) {
            size_t len = strlen(line);
            if (!len || line[len - 1] != '\n')
                break; /* a line still being written: read it next time */
            line[len - 1] = '\0';
            ddp_fault_event_t ev;
            long long t;
            unsigned long long ack;
            if (parse_event(line, &ev, &t, &ack) == 0 && fn(arg, &ev, t, ack))
                break;
            *off += (long)len;
        }
    fclose(f);
}

typedef struct {
    ddp_faultset_t *const *fss;
    int nfs, changed;
    int64_t base;
    ddp__real_acks_t *acks;
} feed_t;

/* An event whose process waits for the runner's ack, when the acks are
 * full: left for the next read, never dropped (its process would wait
 * out its 10 s, and a hosted store's clients with it). Read late, it
 * counts at the runner's time (ddp__real_acks_t). */
static int feed(void *arg, const ddp_fault_event_t *ev, long long t, unsigned long long ack)
{
    feed_t *fd = arg;
    if (ack && fd->acks) {
        if (fd->acks->n >= (int)(sizeof fd->acks->v / sizeof fd->acks->v[0]))
            return 1;
        fd->acks->v[fd->acks->n++] = ack;
        if (t < fd->acks->now)
            t = fd->acks->now;
    }
    for (int i = 0; i < fd->nfs; i++)
        fd->changed += ddp_faultset_event(fd->fss[i], ev, fd->base + t);
    return 0;
}

int ddp__real_events_read(const char *results, long *off, ddp_faultset_t *const *fss, int nfs,
                          int64_t base, ddp__real_acks_t *acks)
{
    feed_t fd = {.fss = fss, .nfs = nfs, .base = base, .acks = acks};
    each_event(results, off, feed, &fd);
    return fd.changed;
}

typedef struct {
    void (*tap)(void *arg, const ddp_fault_event_t *ev, int node, int64_t t);
    void *arg;
} tap_t;

static int tap_one(void *arg, const ddp_fault_event_t *ev, long long t, unsigned long long ack)
{
    const tap_t *tp = arg;
    (void)ack;
    tp->tap(tp->arg, ev, -1, t);
    return 0;
}

void ddp__real_events_tap(const char *results,
                          void (*tap)(void *arg, const ddp_fault_event_t *ev, int node,
                                      int64_t t),
                          void *arg)
{
    long off = 0;
    tap_t tp = {tap, arg};
    each_event(results, &off, tap_one, &tp);
}

static void record_result(ddp_sys_t *sys, const ddp_run_result_t *r, void *arg)
{
    (void)arg;
    int64_t t0 = self.p->t0;
    char msg[DDP_ERR_MSG_MAX], line[DDP_ERR_MSG_MAX + 300];
    snprintf(msg, sizeof msg, "%s", r->message);
    clean(msg);
    snprintf(line, sizeof line,
             "R\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%lld\t%lld\t%lld\t%d\t%s\t%s\t%d\n", self.index,
             r->global_rank, r->world_size, r->local_rank, self.node, r->rc ? 1 : 0, r->rc,
             (long long)(r->start_ns - t0),
             (long long)(r->connect_ns >= 0 ? r->connect_ns - t0 : -1),
             (long long)(r->end_ns - t0), ddp_sys_posix_failed_connects(sys),
             r->accelerator ? r->accelerator : "-",
             msg[0] ? msg : "-", self.attempt);
    append_line(line);
}

/* A fault acted: the runner counts its hits from these records. */
static void record_hit(int i)
{
    char line[64];
    snprintf(line, sizeof line, "F\t%d\t%d\n", self.index, self.plan_index[i]);
    append_line(line);
}

/* The node an address belongs to, by the plan's node table (-1 none). */
static int node_of(const ddp_addr_t *a)
{
    char want[DDP_ADDR_STRLEN];
    ddp_addr_format_host(a, want, sizeof want);
    for (int i = 0; i < self.p->nnodes; i++)
        if (!strcmp(self.p->nodes[i].addr, want))
            return i;
    return -1;
}

/* Every process's events, in the results file's E records: this process's
 * windows open and close on what any process of the run saw. */
static void sync_events(void)
{
    ddp_faultset_t *fss[3] = {&self.all, &self.fs, &self.runner};
    if (self.all.events)
        ddp__real_events_read(self.p->results, &self.events_off, fss, 3, self.p->t0, NULL);
}

/* The sys seam's connects and resolves, with their details: the faultset
 * (ddp/faults.h) decides, as it does in the simulator. */
static int call_hook(void *arg, const ddp_fault_call_t *c, int *err)
{
    (void)arg;
    sync_events();
    ddp_fault_call_t x = *c;
    x.node = self.node;
    x.rank = ddp_ident_rank();
    x.peer_node = c->addr ? node_of(c->addr) : -1;
    x.now = ddp_sys_now(self.sys);
    int i = ddp_faultset_match(&self.fs, &x, err);
    if (i < 0)
        return 0;
    record_hit(i);
    return 1;
}

/* Events this process sees (its phases, its store connects, the store it
 * serves) that some window waits for go to every process of the run and
 * to the runner, as E records; each reads them back (sync_events). */
/* discover: is this the first time this process sees (kind, name)? The
 * first 1,024 distinct ones are recorded; joins are recorded each. */
static int first_seen(const ddp_fault_event_t *ev)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char seen[1024][64];
    static int nseen;
    char key[64];
    if (ev->kind == DDP_TRIG_JOINED)
        return 1;
    snprintf(key, sizeof key, "%d %s", (int)ev->kind, ev->name ? ev->name : "");
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < nseen && strcmp(seen[i], key))
        i++;
    int fresh = i == nseen && nseen < 1024;
    if (fresh)
        snprintf(seen[nseen++], sizeof seen[0], "%s", key);
    pthread_mutex_unlock(&mu);
    return fresh;
}

static void observer(void *arg, const ddp_fault_event_t *ev)
{
    (void)arg;
    if (!ddp_faultset_wants(&self.all, ev) && !(self.p->discover && first_seen(ev)))
        return;
    /* A window the runner puts in force: wait until it has (or 10 s), so
     * the fault is there when this process goes on, as in the simulator. */
    static unsigned long long seq;
    unsigned long long ack =
        ddp_faultset_wants(&self.runner, ev)
            ? (unsigned long long)ddp_sys_pid() << 24 | (__atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED) & 0xffffff)
            : 0;
    ddp__real_event_write(self.p->results, ev, ddp_sys_now(self.sys) - self.p->t0, ack);
    if (ack && ddp__real_ack_wait(self.sys, self.p->results, ack,
                                  ddp_sys_deadline_in(self.sys, 10 * DDP_NS_PER_S)))
        fprintf(stderr, "ddpsim: the runner did not put in force, within 10 s, the fault "
                        "window opened or closed by this process's event %s%s%s\n",
                ddp_trigger_kind_name(ev->kind), ev->name && ev->name[0] ? ":" : "",
                ev->name ? ev->name : "");
}

static int phase_cb(const char *name, int *failnum, void **failinfo, unsigned int *flags)
{
    (void)name, (void)failnum, (void)failinfo, (void)flags;
    static _Thread_local char last[48]; /* per thread, as the phase is */
    const char *phase = ddp_ident_phase();
    if (self.all.events) {
        ddp_fault_event_t ev = {.kind = DDP_TRIG_LEAVE, .rank = ddp_ident_rank(), .name = last,
                                .value = -1};
        if (last[0])
            observer(NULL, &ev);
        ev.kind = DDP_TRIG_ENTER;
        ev.name = phase;
        observer(NULL, &ev);
        snprintf(last, sizeof last, "%s", phase ? phase : "");
    }
    sync_events();
    ddp_fault_call_t c = {.point = DDP_FP_DDP_PHASE_ENTER, .node = self.node,
                          .rank = ddp_ident_rank(), .task = -1, .peer_node = -1,
                          .phase = phase, .now = ddp_sys_now(self.sys)};
    int i = phase ? ddp_faultset_match(&self.fs, &c, NULL) : -1;
    if (i < 0)
        return 0;
    record_hit(i);
    if (self.faults[i].kind == DDP_FAULT_STALL) {
        /* this thread waits while the window is open (its events may close
         * it), the run's limit at most; the process's other threads go on */
        int64_t limit = self.p->t0 + self.p->limit_ns;
        while (ddp_faultset_active(&self.fs, i, ddp_sys_now(self.sys)) &&
               ddp_sys_now(self.sys) < limit) {
            ddp_sys_sleep_until(self.sys, ddp_sys_deadline_in(self.sys, 10 * DDP_NS_PER_MS));
            sync_events();
        }
        return 0;
    }
    char line[256];
    snprintf(line, sizeof line, "C\t%d\t%d\t%d\t%lld\t%s\n", self.index, ddp_ident_rank(),
             self.node, (long long)(ddp_sys_now(self.sys) - self.p->t0), phase);
    append_line(line);
    ddp_sys_kill(self.sys, DDP_PID_SELF, 9);
    return 0;
}

/* The plan's in-process faults: a faultset over them, the sys seam's call
 * hook, the phase point and the event observer. */
static int arm_faults(void)
{
    int n = 0, rc;
    for (int i = 0; i < self.p->nfaults; i++)
        n += ddp__real_in_process(&self.p->faults[i]);
    if ((rc = ddp_faultset_init(&self.all, self.p->faults, self.p->nfaults, self.p->t0, NULL,
                                self.p->expected_world)))
        return rc;
    /* the runner's: under --exec it realises the in-process kinds too (nft) */
    int exec = self.p->entry.exec[0] != '\0', nr = 0;
    self.rfaults = calloc((size_t)self.p->nfaults + 1, sizeof *self.rfaults);
    if (!self.rfaults)
        return ddp_err_set(-ENOMEM, "out of memory");
    for (int i = 0; i < self.p->nfaults; i++)
        if ((exec || !ddp__real_in_process(&self.p->faults[i])) &&
            self.p->faults[i].kind != DDP_FAULT_LATE)
            self.rfaults[nr++] = self.p->faults[i];
    if ((rc = ddp_faultset_init(&self.runner, self.rfaults, nr, self.p->t0, NULL,
                                self.p->expected_world)))
        return rc;
    if (!n && !self.all.events && !self.p->discover)
        return 0;
    self.faults = calloc((size_t)n + 1, sizeof *self.faults);
    self.plan_index = calloc((size_t)n + 1, sizeof *self.plan_index);
    if (!self.faults || !self.plan_index)
        return ddp_err_set(-ENOMEM, "out of memory");
    n = 0;
    for (int i = 0; i < self.p->nfaults; i++)
        if (ddp__real_in_process(&self.p->faults[i])) {
            self.plan_index[n] = i;
            self.faults[n++] = self.p->faults[i];
        }
    ddp_rng_seed(&self.rng, self.p->seed * 7919 + (uint64_t)self.index);
    if ((rc = ddp_faultset_init(&self.fs, self.faults, n, self.p->t0, &self.rng,
                                self.p->expected_world)))
        return rc;
    fiu_init(0);
    self.armed = 1;
    if (n)
        ddp_fault_on_call(call_hook, NULL);
    if (self.all.events || self.p->discover)
        ddp_fault_observe(observer, NULL);
    if (ddp_fault_enable_external(ddp_fault_name(DDP_FP_DDP_PHASE_ENTER), 1, NULL, 0, phase_cb))
        return ddp_err_set(DDP_EINTERNAL, "libfiu: cannot enable the fault points");
    return 0;
}

/* Undoes arm_faults, however far it got: libfiu is only told to disable
 * what was enabled after its fiu_init (before it, fiu_disable crashes). */
static void disarm_faults(void)
{
    if (self.armed) {
        ddp_fault_on_call(NULL, NULL);
        ddp_fault_observe(NULL, NULL);
        ddp_fault_disable(ddp_fault_name(DDP_FP_DDP_PHASE_ENTER));
        self.armed = 0;
    }
    ddp_faultset_free(&self.fs);
    ddp_faultset_free(&self.all);
    ddp_faultset_free(&self.runner);
    free(self.rfaults);
    self.rfaults = NULL;
    free(self.faults);
    free(self.plan_index);
    self.faults = NULL;
    self.plan_index = NULL;
}

/* What the process needs of the plan besides its environment: host names
 * resolve to the plan's node addresses (the POSIX sys reads the
 * DDPSIM_HOSTS table, its node's resolve lines first), and its host name is
 * its node's (DDPSIM_HOSTNAME), not this machine's, which every process
 * shares. */
static int node_env(ddp_env_t *env)
{
    char *hosts = ddp_plan_hosts_table(self.p, self.node);
    int rc = hosts ? ddp_env_set(env, "DDPSIM_HOSTS", hosts) : -ENOMEM;
    free(hosts);
    if (rc == 0)
        rc = ddp_env_set(env, "DDPSIM_HOSTNAME", self.p->nodes[self.node].host);
    return rc;
}

static int hold_port(ddp_sys_t *sys, uint16_t port)
{
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", port, &any);
    int fd = ddp_sys_listen(sys, &any, 16);
    if (fd < 0)
        return 1;
    char line[64];
    snprintf(line, sizeof line, "H\t%u\n", (unsigned)port);
    append_line(line); /* the runner waits for this before it starts others */
    ddp_sys_sleep_until(sys, self.p->t0 + self.p->limit_ns);
    ddp_sys_close(sys, fd);
    return 0;
}

/* The plan process (task) whose process holds the client's end of a
 * connection to the hosted store (-1 not found): the runner's S records
 * name each rank's process (its session), and the kernel which session
 * holds the port. A second job's ranks have the same numbers: the task
 * tells them apart. The S records are read as they come (from where the
 * last read ended), and one index of the sessions' sockets serves every
 * client (ddp_sys_tcp_owner: a /proc scan only for a socket newer than
 * it), so a rendezvous of N clients costs a few scans, not N times the
 * ranks. */
static int task_of_client(uint16_t client_port, uint16_t store_port)
{
    static struct {
        long off, sid[256];
        int task[256], n;
        ddp_sys_tcp_owners_t *owners;
    } c;
    FILE *f = fopen(self.p->results, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    if (f && fseek(f, c.off, SEEK_SET) != 0)
        c.off = 0, rewind(f);
    while (f && c.n < 256 && (len = getline(&line, &cap, f)) > 0 && line[len - 1] == '\n') {
        c.off += (long)len; /* a record still being written is read next time */
        int task, r;
        if (line[0] == 'S' && sscanf(line, "S\t%d\t%d\t%ld", &task, &r, &c.sid[c.n]) == 3)
            c.task[c.n++] = task;
    }
    free(line);
    if (f)
        fclose(f);
    if (!c.owners && !(c.owners = ddp_sys_tcp_owners_new()))
        return -1;
    int i = ddp_sys_tcp_owner(c.owners, c.sid, c.n, client_port, store_port);
    return i >= 0 ? c.task[i] : -1;
}

/* A client's progress at the hosted store, as a P record (connection,
 * phase, time, the client's port, its plan process). The rank is looked up while
 * the client is surely alive: at its accept, and at its first request,
 * whose reply it is waiting for (this runs before the reply goes). */
static void note_client(void *arg, const ddp_store_client_note_t *n)
{
    (void)arg;
    static struct {
        unsigned long long id;
        int task;
    } known[256];
    int slot = (int)(n->id % 256), task = known[slot].id == n->id ? known[slot].task : -1;
    if (task < 0 && n->phase <= DDP_STORE_CLIENT_JOINED) {
        task = task_of_client(n->peer->port, self.p->procs[self.index].port);
        known[slot].id = n->id;
        known[slot].task = task;
    }
    char line[128];
    /* the id with the store's port above it: a second job's store numbers
     * its connections from 1 too */
    unsigned long long id = n->id | (unsigned long long)self.p->procs[self.index].port << 40;
    snprintf(line, sizeof line, "P\t%llu\t%d\t%lld\t%u\t%d\n", id, (int)n->phase,
             (long long)(ddp_sys_now(self.sys) - self.p->t0), (unsigned)n->peer->port, task);
    append_line(line);
}

/* The job's store, for a foreign program whose ranks are all clients
 * (torch's TORCHELASTIC_USE_AGENT_STORE): ddpsim's server, serving until
 * the run's limit. The events it sees (joins, sets, waits, the barrier,
 * marks) go to the run as E records through this process's observer. */
static int host_store(ddp_sys_t *sys, uint16_t port)
{
    ddp_store_server_opts_t so = {.port = port, .on_client = note_client,
                                  .world = self.p->expected_world,
                                  .max_memory = self.p->store_memory};
    ddp_store_server_t *srv = NULL;
    int rc = ddp_store_server_new(sys, &so, &srv);
    if (rc) {
        fprintf(stderr, "ddpsim: the hosted store: %s\n", ddp_err_message());
        return 1;
    }
    char line[64];
    snprintf(line, sizeof line, "H\t%u\n", (unsigned)port);
    append_line(line); /* the runner waits for this before it starts others */
    rc = ddp_store_server_run(srv, self.p->t0 + self.p->limit_ns);
    ddp_store_server_free(srv);
    return rc && rc != DDP_ETIMEOUT ? 1 : 0;
}

/* A restarted worker is a new process, with a copy of its agent's fault
 * draws: what earlier workers' faults fired (their F records) counts
 * against count= here too, as one simulation counts it. */
static void absorb_fired(void)
{
    FILE *f = fopen(self.p->results, "r");
    char line[128];
    while (f && fgets(line, sizeof line, f)) {
        int proc, fault;
        if (line[0] != 'F' || sscanf(line, "F\t%d\t%d", &proc, &fault) != 2)
            continue;
        for (int i = 0; i < self.fs.n; i++)
            if (self.plan_index[i] == fault)
                self.fs.st[i].fired++;
    }
    if (f)
        fclose(f);
}

/* An elastic agent's worker (a fork of the agent): the Trainer, its
 * records marked with its group's restart. */
static int agent_worker(ddp_sys_t *sys, void *arg)
{
    absorb_fired();
    long n = 0;
    ddp_env_get_long(ddp_sys_env(sys), "DDPSIM_WORKER_ATTEMPT", 0, 1 << 20, &n);
    self.attempt = (int)n;
    ddp_run_result_t res;
    int rc = ddp_accel_run(sys, arg, &res);
    return rc || res.children_failed ? 1 : 0;
}

/* The agent, and its own record (rank -1: no rank; how its run ended). */
static int run_agent(ddp_sys_t *sys, ddp_trainer_cfg_t *cfg)
{
    ddp_elastic_worker_t w = {.fn = agent_worker, .arg = cfg};
    ddp_run_result_t r = {.global_rank = -1, .world_size = -1, .local_rank = -1,
                          .start_ns = ddp_sys_now(sys), .connect_ns = -1,
                          .accelerator = cfg->accelerator};
    int restarts = 0;
    r.rc = ddp__elastic_agent(sys, &w, &restarts);
    if (r.rc)
        snprintf(r.message, sizeof r.message, "%s", ddp_err_message());
    r.end_ns = ddp_sys_now(sys);
    record_result(sys, &r, NULL);
    return r.rc ? 1 : 0;
}

int ddp_real_child(ddp_sys_t *sys, const char *plan_path, int index)
{
    ddp_plan_t *p = NULL;
    int rc = ddp_plan_read(sys, plan_path, &p);
    if (rc)
        return rc;
    if (index < 0 || index >= p->nprocs) {
        rc = ddp_err_set(DDP_ECONFIG, "%s: no process %d (the plan has %d)", plan_path,
                         index, p->nprocs);
        ddp_plan_free(p);
        return rc;
    }
    self.sys = sys;
    self.p = p;
    self.index = index;
    self.node = p->procs[index].node;
    if ((rc = node_env(ddp_sys_env(sys))) || (rc = arm_faults()))
        return rc;
    if (p->procs[index].kind == DDP_PLAN_PORT_HOLDER)
        return hold_port(sys, p->procs[index].port);
    if (p->procs[index].kind == DDP_PLAN_STORE) {
        rc = host_store(sys, p->procs[index].port);
        disarm_faults();
        ddp_plan_free(p);
        self.p = NULL;
        return rc;
    }
    ddp_trainer_cfg_t cfg;
    if ((rc = ddp_plan_trainer_cfg(p, &cfg)))
        return rc;
    cfg.on_result = record_result;
    if (p->procs[index].kind == DDP_PLAN_AGENT) {
        rc = run_agent(sys, &cfg);
        disarm_faults();
        ddp_plan_free(p);
        self.p = NULL;
        return rc;
    }
    ddp_run_result_t res;
    rc = ddp_accel_run(sys, &cfg, &res);
    /* Its workers have exited (ddp_accel_run waited for them). */
    disarm_faults();
    ddp_plan_free(p);
    self.p = NULL;
    return rc || res.children_failed ? 1 : 0;
}
