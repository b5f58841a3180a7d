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

int ddp_sim_add_fault(ddp_sim_t *sim, const ddp_fault_t *f)
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
    ddp_rankset_t rs;
    if (ddp_rankset_parse(f->ranks, &rs))
        return DDP_ECONFIG;
    sim->nbandwidth += f->kind == DDP_FAULT_BANDWIDTH;
    ddp_fault_t *nf = realloc(sim->faults, sizeof *nf * (size_t)(sim->nfaults + 1));
    if (!nf)
        abort();
    sim->faults = nf;
    sim->faults[sim->nfaults] = *f;
    sim->faults[sim->nfaults].point = fp ? fp->name : NULL; /* static text */
    return sim->nfaults++;
}

long long ddp_sim_fault_hits(const ddp_sim_t *sim, int i)
{
    return i >= 0 && i < sim->fs.n ? sim->fs.st[i].hits : 0;
}

static int active(const ddp_sim_t *sim, int i)
{
    return ddp_faultset_active(&sim->fs, i, sim->vt);
}

/* The rank a task is aimed by: the identity it set, else its launcher's. */
static int task_rank(const ddp_sim_task_t *t)
{
    return t == ddp__sim_current() && ddp_ident_rank() >= 0 ? ddp_ident_rank() : t->out.rank;
}

static int aims_at(const ddp_sim_t *sim, int i, const ddp_sim_task_t *t)
{
    return ddp_faultset_aims(&sim->fs, i, t->out.node, task_rank(t), t->id);
}

/* When a window holding a link fault closes: its close time, -1 while an
 * event has yet to close it, 0 never. */
static int64_t closes(const ddp_sim_t *sim, int i)
{
    const ddp_fault_t *f = &sim->faults[i];
    int64_t c = sim->fs.st[i].close_at;
    if (c != DDP_FAULT_NEVER)
        return c;
    return f->end_on.kind != DDP_TRIG_TIME ? -1 : 0;
}

int ddp__sim_link(ddp_sim_t *sim, int from, int to, int64_t *extra,
                  int64_t *heal_at)
{
    int dropped = 0;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_fault_t *f = &sim->faults[i];
        if (!active(sim, i))
            continue;
        if (f->kind == DDP_FAULT_PARTITION) {
            int a = from < 64 && (f->node_set >> from & 1);
            int b = to < 64 && (f->node_set >> to & 1);
            if (a != b) {
                dropped = 1;
                ddp_faultset_hit(&sim->fs, i, 1);
                int64_t c = closes(sim, i);
                if (c <= 0) { /* forever, or until an event: held */
                    *heal_at = c;
                    return 1;
                }
                if (*heal_at >= 0 && c > *heal_at)
                    *heal_at = c;
            }
        } else if (f->kind == DDP_FAULT_DELAY) {
            int match = (f->node < 0 || f->node == from || f->node == to) &&
                        (f->peer_node < 0 || f->peer_node == from ||
                         f->peer_node == to);
            if (match) {
                *extra += f->delay_ns;
                ddp_faultset_hit(&sim->fs, i, 1);
            }
        }
    }
    return dropped;
}

int64_t ddp__sim_uplink(ddp_sim_t *sim, int from, int64_t at, size_t len)
{
    uint64_t rate = 0;
    int which = -1;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_BANDWIDTH && (f->node < 0 || f->node == from) &&
            active(sim, i) && (!rate || f->rate_bps < rate)) {
            rate = f->rate_bps;
            which = i;
        }
    }
    if (!rate || !sim->uplink_free)
        return at;
    int64_t *free_at = &sim->uplink_free[from];
    if (*free_at > at) {
        at = *free_at;
        ddp_faultset_hit(&sim->fs, which, 1); /* queued behind the limit */
    }
    /* ceil(len * 8 s / rate) in ns, exact in 64 bits: the remainder is
     * below the rate (at most DDP_SIM_RATE_MAX), times 1e9 below 2^64 */
    uint64_t bits = (uint64_t)len * 8u, ns = (uint64_t)DDP_NS_PER_S;
    *free_at = at + (int64_t)(bits / rate * ns + ((bits % rate) * ns + rate - 1) / rate);
    return *free_at;
}

int64_t ddp__sim_reset_after(ddp_sim_t *sim, int src, int dst, uint16_t port)
{
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_RESET && f->after_bytes > 0 && active(sim, i) &&
            (f->node < 0 || f->node == src) &&
            (f->peer_node < 0 || f->peer_node == dst) &&
            (f->port == 0 || f->port == port) && ddp_faultset_draw(&sim->fs, i)) {
            ddp_faultset_hit(&sim->fs, i, 1);
            return f->after_bytes;
        }
    }
    return -1;
}

/* A call of task t at a point the faults aim at by its details. */
static int call_match(ddp_sim_task_t *t, ddp_fault_call_t *c, int *err)
{
    c->node = t->out.node;
    c->rank = task_rank(t);
    c->task = t->id;
    c->now = t->sim->vt;
    return ddp_faultset_match(&t->sim->fs, c, err);
}

/* The sim's observer: every event the job produces (ddp_fault_notify from
 * a task: phases, the store server and client) may open or close a
 * window. */
static void fault_windows_changed(ddp_sim_t *sim);

static void sim_event(ddp_sim_t *sim, const ddp_fault_event_t *ev)
{
    if (sim->o.tap) {
        ddp_sim_task_t *t = ddp__sim_current();
        sim->o.tap(sim->o.tap_arg, ev, t ? t->out.node : -1, sim->vt - VT0);
    }
    if (sim->fs.events && ddp_faultset_event(&sim->fs, ev, sim->vt)) {
        ddp__sim_trace(sim, -1, "window", "\"event\":\"%s\",\"name\":\"%s\",\"rank\":%d",
                       ddp_trigger_kind_name(ev->kind), ev->name ? ev->name : "", ev->rank);
        fault_windows_changed(sim);
    }
}

static void observer(void *arg, const ddp_fault_event_t *ev)
{
    (void)arg;
    ddp_sim_task_t *t = ddp__sim_current();
    if (t && (t->sim->fs.events || t->sim->o.tap))
        sim_event(t->sim, ev);
}

/* A task's process started or exited: spawn/exit events of its rank. */
void ddp__sim_proc_event(ddp_sim_t *sim, ddp_sim_task_t *t, ddp_trigger_kind_t kind)
{
    if ((!sim->fs.events && !sim->o.tap) || t->out.thread)
        return;
    ddp_fault_event_t ev = {.kind = kind, .rank = t->out.rank, .name = t->name, .value = -1};
    sim_event(sim, &ev);
}

/* Every phase change is traced; the rank identity and the moment the
 * plugin reports "connected" become the task's outcome; a crash fault
 * aimed at the phase kills the task; leave/enter events go to the
 * windows. */
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
    /* leaving "store connect": its store client connected (from=join) */
    if (!strcmp(t->phase, "store connect") && strcmp(phase, "store connect") &&
        t->out.join_ns <= 0)
        t->out.join_ns = sim->vt - VT0;
    if (sim->fs.events || sim->o.tap) {
        ddp_fault_event_t ev = {.kind = DDP_TRIG_LEAVE, .rank = t->out.rank,
                                .name = t->phase, .value = -1};
        if (t->phase[0])
            sim_event(sim, &ev);
        ev.kind = DDP_TRIG_ENTER;
        ev.name = phase;
        sim_event(sim, &ev);
    }
    size_t n = strnlen(phase, sizeof t->phase - 1); /* a copy: no printf per phase */
    memcpy(t->phase, phase, n);
    t->phase[n] = '\0';
    ddp_fault_call_t c = {.point = DDP_FP_DDP_PHASE_ENTER, .peer_node = -1, .phase = phase};
    int i = call_match(t, &c, NULL);
    if (i >= 0 && sim->faults[i].kind == DDP_FAULT_STALL) {
        /* this thread only: its process, store thread and sockets go on */
        ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"stall\",\"phase\":\"%s\"", phase);
        t->stall = i + 1;
    } else if (i >= 0) {
        ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"crash\",\"phase\":\"%s\"", phase);
        ddp__sim_kill_task(sim, t, 1);
    }
}

/* A `point` fault on this point: it fires with the point's default errno
 * (failinfo NULL). */
static int point_hook(ddp_sim_task_t *t, const ddp_fault_info_t *fp)
{
    ddp_fault_call_t c = {.point = fp->id, .peer_node = -1};
    if (call_match(t, &c, NULL) < 0)
        return 0;
    ddp__sim_trace(t->sim, t->id, "fault", "\"fault\":\"point\",\"point\":\"%s\"", fp->name);
    return 1;
}

/* The one libfiu callback of the points the engine arms that carry no
 * call details (the phase point, `point` faults' points). */
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
    return fp ? point_hook(t, fp) : 0;
}

/* A crash whose window opened (at its time, or on its event): the targets
 * die. Counts the processes it killed. */
void ddp__sim_crash(ddp_sim_t *sim, int fault)
{
    const ddp_fault_t *f = &sim->faults[fault];
    if (!active(sim, fault))
        return;
    /* node= alone is the node; with ranks= those of its ranks (the docs) */
    if (f->task < 0 && f->node >= 0 && !f->ranks) {
        if (sim->nodes[f->node].crashed)
            return;
        /* silent: the node goes quiet, its sockets close without a word and
         * what reaches it is lost; mode=kill: its processes die and their
         * sockets close as a kernel closes them (peers read EOF, connects
         * are refused) */
        sim->nodes[f->node].crashed = !f->kill_mode;
        ddp__sim_trace(sim, -1, "fault", "\"fault\":\"crash\",\"node\":\"%s\",\"mode\":\"%s\"",
                       sim->nodes[f->node].host, f->kill_mode ? "kill" : "silent");
        for (int i = 0; i < sim->ntasks; i++) {
            ddp_sim_task_t *t = sim->tasks[i];
            if (t->out.node != f->node)
                continue;
            ddp_faultset_hit(&sim->fs, fault, !t->killed && !t->finished && !t->out.thread);
            ddp__sim_kill_task(sim, t, 1);
        }
        return;
    }
    for (int i = 0; i < sim->ntasks; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        if (t->out.thread || t->killed || t->finished || !aims_at(sim, fault, t) ||
            (f->task < 0 && !f->ranks))
            continue; /* a crash aims at a task, a node or ranks */
        ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"crash\"");
        ddp_faultset_hit(&sim->fs, fault, 1);
        ddp__sim_kill_task(sim, t, 1);
    }
}

/* A retransmitted SYN of task's connect to (dst, port): still swallowed by
 * an active black hole? (The first SYN goes through the per-call point.) */
int ddp__sim_blackholed(ddp_sim_t *sim, int task, int dst_node, uint16_t port)
{
    const ddp_sim_task_t *t = sim->tasks[task];
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_BLACKHOLE && active(sim, i) &&
            (f->peer_node < 0 || f->peer_node == dst_node) &&
            (f->port == 0 || f->port == port) &&
            ddp_faultset_aims(&sim->fs, i, t->out.node, t->out.rank, t->id)) {
            ddp_faultset_hit(&sim->fs, i, 1);
            return 1;
        }
    }
    return 0;
}

int ddp__sim_call_fault(ddp_sim_task_t *t, ddp_fault_id_t point, int dst_node,
                        uint16_t port)
{
    ddp_fault_call_t c = {.point = point, .peer_node = dst_node, .port = port};
    int err = 0, i = call_match(t, &c, &err);
    if (i >= 0) {
        ddp__sim_trace(t->sim, t->id, "fault", "\"fault\":\"%s\",\"port\":%u",
                       ddp_fault_kind_name(t->sim->faults[i].kind), (unsigned)port);
        return err;
    }
    /* A point enabled by hand (ddp_fault_enable with failinfo = errno). */
    if (!ddp_fault_hit(point))
        return 0;
    intptr_t fi = (intptr_t)fiu_failinfo();
    return fi > 0 ? (int)fi : ddp_fault_info(point)->deferr;
}

/* Holds t while fault i's window is open (a stall, a pause). 1 when the
 * task was cancelled meanwhile. */
static int hold(ddp_sim_task_t *t, int i, const char *why)
{
    ddp_sim_t *sim = t->sim;
    while (active(sim, i)) {
        int64_t until = sim->fs.st[i].close_at;
        int64_t wake = until == DDP_FAULT_NEVER ? ddp__sim_task_now(t) + DDP_NS_PER_S / 10
                                                : until + sim->nodes[t->out.node].skew;
        if (ddp__sim_park(t, wake, NULL, 0, &(sim_wait_t){.text = why}))
            return 1;
    }
    return 0;
}

int ddp__sim_pause_point(ddp_sim_task_t *t)
{
    ddp_sim_t *sim = t->sim;
    if (t->stall) {
        int i = t->stall - 1;
        t->stall = 0;
        if (hold(t, i, "stalled by a fault"))
            return 1;
    }
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_fault_t *f = &sim->faults[i];
        if (f->kind != DDP_FAULT_PAUSE || !active(sim, i) || !aims_at(sim, i, t))
            continue;
        int64_t close = sim->fs.st[i].close_at;
        if (close == DDP_FAULT_NEVER && f->end_on.kind == DDP_TRIG_TIME)
            continue; /* a pause without an end never parses */
        ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"pause\",\"until\":%lld",
                       (long long)(close == DDP_FAULT_NEVER ? -1 : close - VT0));
        ddp_faultset_hit(&sim->fs, i, 1);
        /* until its window closes: a time, or an event some other task
         * produces (re-checked at every wake) */
        if (hold(t, i, "paused by a fault"))
            return 1;
    }
    return 0;
}

/* A late fault aimed at a process about to start: how much later. */
int64_t ddp__sim_late(ddp_sim_t *sim, const ddp_sim_task_t *t)
{
    int64_t late = 0;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_LATE && f->delay_ns > late &&
            ddp_faultset_aims(&sim->fs, i, t->out.node, t->out.rank, t->id) &&
            (f->ranks || f->node >= 0 || f->task >= 0) && ddp_faultset_draw(&sim->fs, i)) {
            ddp_faultset_hit(&sim->fs, i, 1);
            late = f->delay_ns;
        }
    }
    return late;
}

/* Arms (on = 1) or disarms the points the faults need: always
 * ddp/phase/enter (the trace and the outcomes), each `point` fault's
 * point. Connects and resolves ask the engine directly (with the call's
 * details); disarming also turns them off if a test had enabled them by
 * hand. */
static void arm_points(ddp_sim_t *sim, int on)
{
    unsigned char need[DDP_FP_COUNT] = {0};
    need[DDP_FP_DDP_PHASE_ENTER] = 1;
    need[DDP_FP_SYS_NET_CONNECT] = need[DDP_FP_SYS_NET_RESOLVE] = !on;
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_fault_t *f = &sim->faults[i];
        if (f->kind == DDP_FAULT_POINT)
            need[ddp_fault_point_find(f->point)->id] = 1;
    }
    for (int id = 0; id < DDP_FP_COUNT; id++) {
        const char *name = ddp_fault_name((ddp_fault_id_t)id);
        if (need[id] && on)
            ddp_fault_enable_external(name, 1, NULL, 0, engine_cb);
        else if (need[id])
            ddp_fault_disable(name);
    }
    ddp_fault_observe(on ? observer : NULL, NULL);
}

/* Timed crashes whose window opened and are not queued yet. */
static void queue_crashes(ddp_sim_t *sim)
{
    for (int i = 0; i < sim->nfaults; i++) {
        const ddp_fault_t *f = &sim->faults[i];
        int64_t at = sim->fs.st[i].open_at;
        if (f->kind != DDP_FAULT_CRASH || (f->phase && f->phase[0]) || at == DDP_FAULT_NEVER ||
            sim->crash_queued[i])
            continue;
        sim->crash_queued[i] = 1;
        sim_event_t ev = {.t = at < sim->vt ? sim->vt : at, .type = EV_CRASH, .a = -1,
                          .b = -1, .x = i};
        ddp__sim_push_event(sim, ev);
    }
}

static void fault_windows_changed(ddp_sim_t *sim)
{
    queue_crashes(sim);
    ddp__sim_net_release_held(sim);
}

void ddp__sim_faults_arm(ddp_sim_t *sim)
{
    if (sim->nbandwidth && !sim->uplink_free && sim->nnodes > 0) {
        sim->uplink_free = calloc((size_t)sim->nnodes, sizeof *sim->uplink_free);
        if (!sim->uplink_free)
            abort();
    }
    if (ddp_faultset_init(&sim->fs, sim->faults, sim->nfaults, VT0, &sim->rng, sim->o.world))
        abort(); /* every rank set was parsed when its fault was added */
    if (sim->nfaults &&
        !(sim->crash_queued = calloc((size_t)sim->nfaults, sizeof *sim->crash_queued)))
        abort();
    queue_crashes(sim);
    arm_points(sim, 1);
}

void ddp__sim_faults_disarm(ddp_sim_t *sim) { arm_points(sim, 0); }
