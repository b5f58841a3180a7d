/* sim/sim_fault.c — the fault engine.
 *
 * Per-call faults (refuse / reset / black-hole a connect, fail a name
 * resolution, crash a rank entering a phase, fire any point of
 * ddp/faults.h) are realised through libfiu: the engine arms the same named
 * points the POSIX sys checks (sys/net/connect, sys/net/resolve,
 * ddp/phase/enter, and each `point` fault's point) with one external
 * callback. The callback runs in the calling task's thread, looks at that
 * task and the schedule, and draws any randomness from the run's seeded
 * PRNG, never libfiu's. Link faults (partition, delay, bandwidth) and timed
 * crashes act on the virtual network and the event queue. Points the engine did not arm
 * are not consulted at all in task threads (ddp_fault_thread_armed_only).
 */
#include <errno.h>
#include <fiu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "sim_priv.h"

static const char *const kind_names[DDP_FAULT_KIND_COUNT] = {
    "refuse", "reset", "blackhole", "delay", "partition", "crash", "pause",
    "resolve", "point", "bandwidth"};

const char *ddp_sim_fault_kind_name(ddp_sim_fault_kind_t k)
{
    return k >= 0 && k < DDP_FAULT_KIND_COUNT ? kind_names[k] : "?";
}

int ddp_sim_fault_kind_parse(const char *name, ddp_sim_fault_kind_t *out)
{
    for (int i = 0; i < DDP_FAULT_KIND_COUNT; i++)
        if (!strcasecmp(name, kind_names[i])) {
            *out = (ddp_sim_fault_kind_t)i;
            return 0;
        }
    return ddp_err_set(DDP_ECONFIG,
                       "unknown fault kind \"%s\"; expected one of refuse, "
                       "reset, blackhole, delay, partition, crash, pause, "
                       "resolve, point, bandwidth",
                       name);
}

/* The point a POINT fault fires, or NULL (error set) when the simulator
 * would never check it. */
static const ddp_fault_info_t *sim_point(const char *name)
{
    const ddp_fault_info_t *fp = ddp_fault_point_find(name);
    if (!fp)
        ddp_err_set(DDP_ECONFIG, "expected the name of a fault point "
                                 "(docs/fault-points.md), got \"%.60s\"",
                    name ? name : "");
    else if (fp->id == DDP_FP_DDP_PHASE_ENTER)
        ddp_err_set(DDP_ECONFIG, "expected a fault point that fails something, "
                                 "got %s (to crash a rank at a phase, use a "
                                 "crash fault with phase=)",
                    fp->name);
    else if (fp->where && !(fp->where & DDP_FP_SIM))
        ddp_err_set(DDP_ECONFIG, "expected a fault point the simulator checks, "
                                 "got %s (checked only by the POSIX sys)",
                    fp->name);
    else
        return fp;
    return NULL;
}

int ddp_sim_fault_point_check(const char *name)
{
    return sim_point(name) ? 0 : DDP_ECONFIG;
}

int ddp_sim_add_fault(ddp_sim_t *sim, const ddp_sim_fault_t *f)
{
    if (f->kind < 0 || f->kind >= DDP_FAULT_KIND_COUNT)
        return ddp_err_set(DDP_ECONFIG, "fault kind %d is not valid", f->kind);
    const ddp_fault_info_t *fp = NULL;
    if (f->kind == DDP_FAULT_POINT && !(fp = sim_point(f->point)))
        return DDP_ECONFIG;
    if (f->kind == DDP_FAULT_BANDWIDTH && (f->rate_bps == 0 || f->rate_bps > DDP_SIM_RATE_MAX))
        return ddp_err_set(DDP_ECONFIG, "a bandwidth fault needs a rate of 1 bit/s .. 10 "
                                        "gbit/s (rate=1mbit), got %llu bit/s",
                           (unsigned long long)f->rate_bps);
    sim->nbandwidth += f->kind == DDP_FAULT_BANDWIDTH;
    ddp_sim_fault_t *nf = realloc(sim->faults, sizeof *nf * (size_t)(sim->nfaults + 1));
    int *nc = realloc(sim->fault_fired, sizeof *nc * (size_t)(sim->nfaults + 1));
    if (!nf || !nc) {
        free(nf ? nf : sim->faults);
        abort();
    }
    sim->faults = nf;
    sim->fault_fired = nc;
    sim->faults[sim->nfaults] = *f;
    sim->faults[sim->nfaults].point = fp ? fp->name : NULL; /* static text */
    sim->fault_fired[sim->nfaults] = 0;
    return sim->nfaults++;
}

static int active(const ddp_sim_t *sim, const ddp_sim_fault_t *f)
{
    int64_t now = sim->vt - VT0;
    return now >= f->start_ns && (f->end_ns == 0 || now < f->end_ns);
}

/* Count and probability: may this fault fire once more? */
static int draw(ddp_sim_t *sim, int i)
{
    const ddp_sim_fault_t *f = &sim->faults[i];
    if (f->count > 0 && sim->fault_fired[i] >= f->count)
        return 0;
    if (f->probability > 0 && f->probability < 1 &&
        ddp_rng_double(&sim->rng) >= f->probability)
        return 0;
    sim->fault_fired[i]++;
    return 1;
}

/* "5,9" contains rank? (NULL: any rank) */
static int rank_listed(const char *list, int rank)
{
    if (!list || !*list)
        return 1;
    for (const char *p = list; *p;) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p)
            return 0;
        if (*end == '-') { /* a range "3-5" */
            const char *q = end + 1;
            b = strtol(q, &end, 10);
            if (end == q)
                return 0;
        }
        if (rank >= a && rank <= b)
            return 1;
        if (*end && *end != ',')
            return 0;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static int aims_at(const ddp_sim_fault_t *f, const ddp_sim_task_t *t)
{
    int rank = ddp_ident_rank() >= 0 ? ddp_ident_rank() : t->out.rank;
    return (f->task < 0 || f->task == t->id) &&
           (f->node < 0 || f->node == t->out.node) && rank_listed(f->ranks, rank);
}

int ddp__sim_link(ddp_sim_t *sim, int from, int to, int64_t *extra,
                  int64_t *heal_at)
{
    int dropped = 0;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        if (!active(sim, f))
            continue;
        if (f->kind == DDP_FAULT_PARTITION) {
            int a = from < 64 && (f->node_set >> from & 1);
            int b = to < 64 && (f->node_set >> to & 1);
            if (a != b) {
                dropped = 1;
                if (f->end_ns && VT0 + f->end_ns > *heal_at)
                    *heal_at = VT0 + f->end_ns;
                if (!f->end_ns) {
                    *heal_at = 0;
                    return 1;
                }
            }
        } else if (f->kind == DDP_FAULT_DELAY) {
            int match = (f->node < 0 || f->node == from || f->node == to) &&
                        (f->peer_node < 0 || f->peer_node == from ||
                         f->peer_node == to);
            if (match)
                *extra += f->delay_ns;
        }
    }
    return dropped;
}

int64_t ddp__sim_uplink(ddp_sim_t *sim, int from, int64_t at, size_t len)
{
    uint64_t rate = 0;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_BANDWIDTH && (f->node < 0 || f->node == from) &&
            active(sim, f) && (!rate || f->rate_bps < rate))
            rate = f->rate_bps;
    }
    if (!rate || !sim->uplink_free)
        return at;
    int64_t *free_at = &sim->uplink_free[from];
    if (*free_at > at)
        at = *free_at;
    /* ceil(len * 8 s / rate) in ns, exact in 64 bits: the remainder is
     * below the rate (at most DDP_SIM_RATE_MAX), times 1e9 below 2^64 */
    uint64_t bits = (uint64_t)len * 8u, ns = (uint64_t)DDP_NS_PER_S;
    *free_at = at + (int64_t)(bits / rate * ns + ((bits % rate) * ns + rate - 1) / rate);
    return *free_at;
}

int64_t ddp__sim_reset_after(ddp_sim_t *sim, int src, int dst, uint16_t port)
{
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_RESET && f->after_bytes > 0 && active(sim, f) &&
            (f->node < 0 || f->node == src) &&
            (f->peer_node < 0 || f->peer_node == dst) &&
            (f->port == 0 || f->port == port) && draw(sim, i))
            return f->after_bytes;
    }
    return -1;
}

/* What the current call looks like, for the callbacks. */
static _Thread_local struct {
    int dst_node;
    uint16_t port;
    int err;
} call;

/* The per-call points: which fault kinds each answers, and with what errno. */
static int call_errno(ddp_fault_id_t point, const ddp_sim_fault_t *f)
{
    if (point == DDP_FP_SYS_NET_RESOLVE)
        return f->kind == DDP_FAULT_RESOLVE ? EHOSTUNREACH : 0;
    if ((f->peer_node >= 0 && f->peer_node != call.dst_node) ||
        (f->port && f->port != call.port))
        return 0;
    return f->kind == DDP_FAULT_REFUSE      ? ECONNREFUSED
           : f->kind == DDP_FAULT_BLACKHOLE ? ETIMEDOUT
           : f->kind == DDP_FAULT_RESET && f->after_bytes <= 0 ? ECONNRESET
                                                              : 0;
}

/* A refuse/reset/blackhole or resolve fault for this connect/resolve. */
static int call_hook(ddp_sim_task_t *t, ddp_fault_id_t point)
{
    ddp_sim_t *sim = t->sim;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        int e = call_errno(point, f);
        if (e && active(sim, f) && aims_at(f, t) && draw(sim, i)) {
            call.err = e;
            ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"%s\",\"port\":%u",
                           kind_names[f->kind], (unsigned)call.port);
            return 1;
        }
    }
    return 0;
}

/* Every phase change is traced; the rank identity and the moment the
 * plugin reports "connected" become the task's outcome; a crash fault
 * aimed at the phase kills the task. */
static void phase_hook(ddp_sim_task_t *t)
{
    if (t->killed)
        return;
    ddp_sim_t *sim = t->sim;
    const char *phase = ddp_ident_phase();
    if (ddp_ident_rank() >= 0)
        t->out.rank = ddp_ident_rank();
    if (ddp_ident_world() > 0)
        t->out.world = ddp_ident_world();
    ddp__sim_trace(sim, t->id, "phase", "\"phase\":\"%s\",\"rank\":%d", phase,
                   t->out.rank);
    if (!strcmp(phase, "connected"))
        t->out.connect_ns = sim->vt - VT0;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_CRASH && f->phase && f->phase[0] &&
            !strcmp(f->phase, phase) && active(sim, f) && aims_at(f, t) &&
            draw(sim, i)) {
            ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"crash\",\"phase\":\"%s\"",
                           phase);
            ddp__sim_kill_task(sim, t, 1);
            return; /* the task's next sim call fails: it is dead */
        }
    }
}

/* A `point` fault on this point: it fires with the point's default errno
 * (failinfo NULL). */
static int point_hook(ddp_sim_task_t *t, const char *name)
{
    ddp_sim_t *sim = t->sim;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_POINT && !strcmp(f->point, name) &&
            active(sim, f) && aims_at(f, t) && draw(sim, i)) {
            ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"point\",\"point\":\"%s\"",
                           name);
            return 1;
        }
    }
    return 0;
}

/* The one callback of every point the engine arms. */
static int engine_cb(const char *name, int *failnum, void **failinfo,
                     unsigned int *flags)
{
    (void)failnum, (void)flags;
    ddp_sim_task_t *t = ddp__sim_current();
    *failinfo = NULL; /* libfiu keeps it per point: no errno left over */
    if (!t)
        return 0;
    /* The phase point first, by name: every rank enters phases many times,
     * and the table lookup compares every row. */
    if (!strcmp(name, ddp_fault_name(DDP_FP_DDP_PHASE_ENTER))) {
        phase_hook(t);
        return 0;
    }
    const ddp_fault_info_t *fp = ddp_fault_point_find(name);
    if (!fp)
        return 0;
    if ((fp->id == DDP_FP_SYS_NET_CONNECT || fp->id == DDP_FP_SYS_NET_RESOLVE) &&
        call_hook(t, fp->id))
        return 1;
    return point_hook(t, name);
}

/* A timed crash aimed at ranks: every process whose rank is listed dies. */
void ddp__sim_crash_ranks(ddp_sim_t *sim, int fault)
{
    const ddp_sim_fault_t *f = &sim->faults[fault];
    if (!f->ranks || !f->ranks[0])
        return;
    for (int i = 0; i < sim->ntasks; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        if (!t->out.thread && t->out.rank >= 0 && rank_listed(f->ranks, t->out.rank)) {
            ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"crash\"");
            ddp__sim_kill_task(sim, t, 1);
        }
    }
}

/* A retransmitted SYN of task's connect to (dst, port): still swallowed by
 * an active black hole? (The first SYN goes through the per-call point.) */
int ddp__sim_blackholed(ddp_sim_t *sim, int task, int dst_node, uint16_t port)
{
    const ddp_sim_task_t *t = sim->tasks[task];
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_BLACKHOLE && active(sim, f) &&
            (f->task < 0 || f->task == task) &&
            (f->node < 0 || f->node == t->out.node) &&
            (f->peer_node < 0 || f->peer_node == dst_node) &&
            (f->port == 0 || f->port == port) && rank_listed(f->ranks, t->out.rank))
            return 1;
    }
    return 0;
}

int ddp__sim_call_fault(ddp_sim_task_t *t, ddp_fault_id_t point, int dst_node,
                        uint16_t port)
{
    (void)t;
    call.dst_node = dst_node;
    call.port = port;
    call.err = 0;
    if (!ddp_fault_hit(point))
        return 0;
    /* A point enabled by hand (ddp_fault_enable with failinfo = errno) or a
     * `point` fault (failinfo NULL: the point's default) also works. */
    if (!call.err) {
        intptr_t fi = (intptr_t)fiu_failinfo();
        call.err = fi > 0 ? (int)fi : ddp_fault_info(point)->deferr;
    }
    return call.err;
}

int ddp__sim_pause_point(ddp_sim_task_t *t)
{
    ddp_sim_t *sim = t->sim;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        if (f->kind != DDP_FAULT_PAUSE || !active(sim, f) || !aims_at(f, t) ||
            f->end_ns == 0)
            continue;
        ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"pause\",\"until\":%lld",
                       (long long)f->end_ns);
        int64_t until = VT0 + f->end_ns + sim->nodes[t->out.node].skew;
        while (ddp__sim_task_now(t) < until)
            if (ddp__sim_park(t, until, NULL, 0, "paused by a fault"))
                return 1;
    }
    return 0;
}

/* Arms (on = 1) or disarms the points the faults need: always
 * ddp/phase/enter (the trace and the outcomes), sys/net/connect and
 * sys/net/resolve when a fault acts there, each `point` fault's point.
 * Disarming also turns off connect, resolve and phase if a test had
 * enabled them by hand. */
static void arm_points(ddp_sim_t *sim, int on)
{
    unsigned char need[DDP_FP_COUNT] = {0};
    need[DDP_FP_DDP_PHASE_ENTER] = 1;
    need[DDP_FP_SYS_NET_CONNECT] = need[DDP_FP_SYS_NET_RESOLVE] = !on;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        switch (f->kind) {
        case DDP_FAULT_REFUSE:
        case DDP_FAULT_BLACKHOLE:
            need[DDP_FP_SYS_NET_CONNECT] = 1;
            break;
        case DDP_FAULT_RESET:
            need[DDP_FP_SYS_NET_CONNECT] |= f->after_bytes <= 0;
            break;
        case DDP_FAULT_RESOLVE:
            need[DDP_FP_SYS_NET_RESOLVE] = 1;
            break;
        case DDP_FAULT_POINT:
            need[ddp_fault_point_find(f->point)->id] = 1;
            break;
        default:
            break;
        }
    }
    for (int id = 0; id < DDP_FP_COUNT; id++) {
        const char *name = ddp_fault_name((ddp_fault_id_t)id);
        if (need[id] && on)
            ddp_fault_enable_external(name, 1, NULL, 0, engine_cb);
        else if (need[id])
            ddp_fault_disable(name);
    }
}

void ddp__sim_faults_arm(ddp_sim_t *sim)
{
    if (sim->nbandwidth && !sim->uplink_free && sim->nnodes > 0) {
        sim->uplink_free = calloc((size_t)sim->nnodes, sizeof *sim->uplink_free);
        if (!sim->uplink_free)
            abort();
    }
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_sim_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_CRASH && !(f->phase && f->phase[0])) {
            sim_event_t ev = {.t = VT0 + f->start_ns, .type = EV_CRASH,
                              .a = f->task, .b = f->task < 0 ? f->node : -1,
                              .x = i};
            ddp__sim_push_event(sim, ev);
        }
    }
    arm_points(sim, 1);
}

void ddp__sim_faults_disarm(ddp_sim_t *sim) { arm_points(sim, 0); }
