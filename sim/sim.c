/* sim/sim.c — the deterministic scheduler and virtual clock.
 *
 * Only one task runs at a time. A task that blocks parks itself and hands
 * on to a runnable task drawn from the run's PRNG; when none is runnable,
 * the parking task advances virtual time to the next event and processes
 * it. So exactly one task touches the simulation at any moment, and the
 * order of everything is a function of the seed alone.
 *
 * How a hand-off happens is the one thing the two task implementations
 * differ in (transfer): by default each task is a user-space context on
 * the thread that called ddp_sim_run, and a hand-off is a context switch
 * (sim_ctx.c); with DDP_SIM_TASKS_THREADS each task is a pthread that runs
 * only while it holds its baton (an eventfd, or a semaphore).
 */
#include <errno.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/fmt.h"
#include "ddp/host.h"
#include "ddp/log.h"
#include "sim_priv.h"

/* The running task: per thread in threads mode; in contexts mode the
 * thread's current context, set at every switch. */
static _Thread_local ddp_sim_task_t *tls_task;

ddp_sim_task_t *ddp__sim_current(void) { return tls_task; }

/* An outcome's message when it has none: not on the heap (ddp_sim_outcome_clear). */
static const char no_message[] = "";

/* Sanitizers need far bigger stacks than the code itself. Without them a
 * rank of the full init touches 4 KiB of its stack, one page (its result is
 * on the heap, and no frame of its connects holds a table of interfaces;
 * 7.9 KiB, two pages, before), and the deepest task
 * of every bundled scenario under every accelerator (error paths, elastic
 * agents, the subgroups and rpc plugins) 9.9 KiB, since error contexts are
 * kept off the stack (ddp_err_save) and no frame holds a table of
 * interfaces, an agent's rendezvous state, a node list's pieces or rank
 * 0's batch of addresses (14.4 KiB with them, 19 before that). 16 KiB
 * leaves 1.61x, and tests/test_scenario.c's stack margin check fails below
 * 1.5x. The slot (stack, guard page, ~100 bytes of identity state: its
 * error context and message buffer are allocated when first written) is
 * ~20 KiB of address space. A thread (tasks as threads) gets
 * THREAD_TLS_ROOM more: glibc cuts its static TLS (the identity state, an
 * error context or two and a message buffer, 6 KiB) from its stack. A
 * plugin library's
 * code is not ours: the scenario runner gives its runs
 * DDP_SIM_STACK_FOREIGN. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MIN_STACK (512 * 1024)
#else
#define MIN_STACK (16 * 1024)
#endif
#define THREAD_TLS_ROOM (8 * 1024)

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        ddp__sim_oom("realloc", n);
    return q;
}

/* ---- wait queues ---- */
void ddp__waitq_add(waitq_t *q, int id)
{
    for (int i = 0; i < q->n; i++)
        if (q->ids[i] == id)
            return;
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 4;
        q->ids = xrealloc(q->ids, sizeof *q->ids * (size_t)q->cap);
    }
    q->ids[q->n++] = id;
}

void ddp__waitq_wake_all(ddp_sim_t *sim, waitq_t *q)
{
    for (int i = 0; i < q->n; i++)
        ddp__sim_wake(sim, q->ids[i]);
    q->n = 0;
}

void ddp__waitq_free(waitq_t *q)
{
    free(q->ids);
    q->ids = NULL;
    q->n = q->cap = 0;
}

/* ---- event heap: ordered by (time, sequence) so ties are deterministic ---- */
static int ev_less(const sim_event_t *a, const sim_event_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void ddp__sim_push_event(ddp_sim_t *sim, sim_event_t ev)
{
    if (ev.t < sim->vt)
        ev.t = sim->vt;
    ev.seq = sim->seq++;
    if (sim->nheap == sim->heap_cap) {
        sim->heap_cap = sim->heap_cap ? sim->heap_cap * 2 : 1024;
        sim->heap = xrealloc(sim->heap, sizeof *sim->heap * sim->heap_cap);
    }
    size_t i = sim->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&ev, &sim->heap[p]))
            break;
        sim->heap[i] = sim->heap[p];
        i = p;
    }
    sim->heap[i] = ev;
}

static sim_event_t pop_event(ddp_sim_t *sim)
{
    sim_event_t top = sim->heap[0], last = sim->heap[--sim->nheap];
    size_t i = 0, n = sim->nheap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const sim_event_t *best = &last;
        if (l < n && ev_less(&sim->heap[l], best)) {
            m = l;
            best = &sim->heap[l];
        }
        if (r < n && ev_less(&sim->heap[r], best))
            m = r;
        if (m == i)
            break;
        sim->heap[i] = sim->heap[m];
        i = m;
    }
    if (n)
        sim->heap[i] = last;
    return top;
}

/* ---- runnable set ---- */
void ddp__sim_wake(ddp_sim_t *sim, int id)
{
    ddp_sim_task_t *t = sim->tasks[id];
    if (!t->parked || t->runnable_idx >= 0)
        return;
    t->runnable_idx = sim->nrunnable;
    sim->runnable[sim->nrunnable++] = id;
}

static void make_runnable(ddp_sim_t *sim, ddp_sim_task_t *t)
{
    if (t->runnable_idx >= 0)
        return;
    t->runnable_idx = sim->nrunnable;
    sim->runnable[sim->nrunnable++] = t->id;
}

static ddp_sim_task_t *pick_runnable(ddp_sim_t *sim)
{
    int i = (int)ddp_rng_below(&sim->rng, (uint64_t)sim->nrunnable);
    ddp_sim_task_t *t = sim->tasks[sim->runnable[i]];
    int last = sim->runnable[--sim->nrunnable];
    if (i < sim->nrunnable) {
        sim->runnable[i] = last;
        sim->tasks[last]->runnable_idx = i;
    }
    t->runnable_idx = -1;
    return t;
}

int64_t ddp__sim_task_now(ddp_sim_task_t *t)
{
    return t->sim->vt + t->sim->nodes[t->out.node].skew;
}

/* ---- timers: a parked task's deadline ----
 * Only the timer of a task's latest park can still fire, and only while
 * the task is parked. So timers are not events but a heap of their own,
 * keyed by (time, sequence number) drawn from the events' counter: taken
 * together with the event heap in that order, they fire exactly when one
 * heap of both would fire them. An entry that a later park replaced, or
 * that a park without a deadline or an exit cancelled, is dead for good and
 * is dropped when met, or when dead entries outnumber the tasks (a heap of
 * every park's timer, most far in the future, made every pop of an event
 * walk ~74,000 dead timers at 4,096 ranks). */
#define TIMER_NONE UINT64_MAX

static int timer_less(const sim_timer_t *a, const sim_timer_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void timer_down(sim_timer_t *h, int n, int i)
{
    sim_timer_t tm = h[i];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const sim_timer_t *best = &tm;
        if (l < n && timer_less(&h[l], best)) {
            m = l;
            best = &h[l];
        }
        if (r < n && timer_less(&h[r], best))
            m = r;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = tm;
}

/* Replaced or cancelled: never fires (unlike a stale timer, below). */
static int timer_dead(const ddp_sim_t *sim, const sim_timer_t *tm)
{
    return sim->tasks[tm->id]->timer_seq != tm->seq;
}

static void timer_pop(ddp_sim_t *sim)
{
    sim->timers[0] = sim->timers[--sim->ntimers];
    if (sim->ntimers)
        timer_down(sim->timers, sim->ntimers, 0);
}

/* t's timer for this park, at virtual time vt (never in the past). */
static void timer_set(ddp_sim_t *sim, ddp_sim_task_t *t, int64_t vt)
{
    if (sim->ntimers == sim->timers_cap) {
        /* Drop the dead entries first; grow when few are dead. */
        int n = 0;
        for (int i = 0; i < sim->ntimers; i++)
            if (!timer_dead(sim, &sim->timers[i]))
                sim->timers[n++] = sim->timers[i];
        sim->ntimers = n;
        for (int i = n / 2 - 1; i >= 0; i--)
            timer_down(sim->timers, n, i);
        if (n * 2 >= sim->timers_cap) {
            sim->timers_cap = sim->timers_cap ? sim->timers_cap * 2 : 256;
            sim->timers = xrealloc(sim->timers, sizeof *sim->timers * (size_t)sim->timers_cap);
        }
    }
    sim_timer_t tm = {.t = vt < sim->vt ? sim->vt : vt, .seq = sim->seq++, .id = t->id};
    t->timer_seq = tm.seq;
    t->timer_of = t->timer_gen;
    int i = sim->ntimers++;
    while (i > 0 && timer_less(&tm, &sim->timers[(i - 1) / 2])) {
        sim->timers[i] = sim->timers[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    sim->timers[i] = tm;
}

static void timer_clear(ddp_sim_task_t *t) { t->timer_seq = TIMER_NONE; }

/* A live entry whose task woke for another reason or left: it fires into
 * nothing and must not move the clock (as in the one-heap design). */
static int timer_stale(const ddp_sim_task_t *t)
{
    return !t->parked || t->timer_gen != t->timer_of;
}

/* What comes next: 1 the event heap's top, 2 the earliest timer, 0 nothing. */
static int next_due(ddp_sim_t *sim, int64_t *at)
{
    while (sim->ntimers && timer_dead(sim, &sim->timers[0]))
        timer_pop(sim);
    const sim_timer_t *tm = sim->ntimers ? &sim->timers[0] : NULL;
    if (!sim->nheap && !tm)
        return 0;
    if (!tm || (sim->nheap && (sim->heap[0].t < tm->t ||
                               (sim->heap[0].t == tm->t && sim->heap[0].seq < tm->seq)))) {
        *at = sim->heap[0].t;
        return 1;
    }
    *at = tm->t;
    return 2;
}

/* The earliest timer: its task wakes unless the timer is stale. */
static void fire_timer(ddp_sim_t *sim)
{
    ddp_sim_task_t *t = sim->tasks[sim->timers[0].id];
    sim->events++;
    int live = !timer_stale(t);
    timer_pop(sim);
    timer_clear(t);
    if (live)
        ddp__sim_wake(sim, t->id);
}

static void process_event(ddp_sim_t *sim, sim_event_t *ev)
{
    sim->events++;
    switch (ev->type) {
    case EV_START: {
        ddp_sim_task_t *t = sim->tasks[ev->a];
        if (t->out.state != DDP_SIM_TASK_NEW || sim->nodes[t->out.node].crashed)
            break;
        if (!t->out.thread && !t->late_done) { /* a late fault holds it */
            t->late_done = 1;
            int64_t late = ddp__sim_late(sim, t);
            if (late > 0) {
                ddp__sim_trace(sim, t->id, "fault", "\"fault\":\"late\",\"by\":%lld",
                               (long long)late);
                sim_event_t again = {.t = sim->vt + late, .type = EV_START, .a = t->id};
                ddp__sim_push_event(sim, again);
                break;
            }
        }
        make_runnable(sim, t);
        if (!t->out.thread)
            ddp__sim_proc_event(sim, t, DDP_TRIG_SPAWN);
        break;
    }
    case EV_CRASH:
        ddp__sim_crash(sim, (int)ev->x);
        break;
    default:
        ddp__sim_net_event(sim, ev);
    }
    ddp__sim_seg_free(sim, ev->data); /* data nobody took (only EV_DATA has any) */
}

/* Advances virtual time until some task is runnable. 0: nothing left to do
 * (or the time limit). */
static int advance_time(ddp_sim_t *sim)
{
    if (sim->cancelling)
        return 0;
    while (sim->nrunnable == 0) {
        int64_t t, at;
        int next = sim->unfinished ? next_due(sim, &t) : 0;
        if (!next)
            return 0;
        /* A stale timer (its task woke or left) must not move the clock. */
        if (next == 2 && timer_stale(sim->tasks[sim->timers[0].id])) {
            timer_clear(sim->tasks[sim->timers[0].id]);
            timer_pop(sim);
            continue;
        }
        if (t > sim->o.time_limit_ns + VT0) {
            sim->time_limited = 1;
            return 0;
        }
        sim->vt = t;
        while ((next = next_due(sim, &at)) && at == t) {
            if (next == 2) {
                fire_timer(sim);
                continue;
            }
            sim_event_t ev = pop_event(sim);
            process_event(sim, &ev);
        }
    }
    return 1;
}

static void *task_thread(void *arg);
static void task_entry(void);

/* The baton. An eventfd per task when the fd limit allows: a blocked read
 * waits on that eventfd's own queue, whereas thousands of threads parked on
 * futexes share the kernel's futex hash buckets and every wake-up scans
 * them (measured: 77% of the time at 16,384 tasks). Else a semaphore. */
static void baton_init(ddp_sim_task_t *t)
{
    t->efd = t->sim->contexts ? -1 : eventfd(0, EFD_CLOEXEC);
    if (t->sim->contexts)
        return;
    if (t->efd < 0)
        sem_init(&t->sem, 0, 0);
}

static void baton_give(ddp_sim_task_t *t)
{
    if (t->efd < 0) {
        sem_post(&t->sem);
        return;
    }
    uint64_t one = 1;
    while (write(t->efd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

static void baton_take(ddp_sim_task_t *t)
{
    if (t->efd < 0) {
        while (sem_wait(&t->sem) != 0 && errno == EINTR)
            ;
        return;
    }
    uint64_t v;
    while (read(t->efd, &v, sizeof v) < 0 && errno == EINTR)
        ;
}

static void baton_free(ddp_sim_task_t *t)
{
    if (t->sim->contexts)
        return;
    if (t->efd >= 0)
        close(t->efd);
    else
        sem_destroy(&t->sem);
}

/* ---- contexts ---- */
size_t ddp__sim_stack_size(const ddp_sim_t *sim)
{
    return sim->o.stack_size < MIN_STACK ? MIN_STACK : sim->o.stack_size;
}

/* The context that left for good (an exiting task's) is off its stack now:
 * the stack, with the identity state in its aux block, goes back for the next
 * task to start. */
static void reap(ddp_sim_t *sim)
{
    ddp_sim_task_t *z = sim->zombie;
    if (!z)
        return;
    sim->zombie = NULL;
    ddp__ctx_retire(&z->ctx);
    if (z->ident)
        ddp_ident_state_fini(z->ident); /* its error message, if it had one */
    z->ident = NULL;
    if (z->abandoned)
        return; /* its frames may still be pointed at: unmapped at the end */
    if (ddp__stacks_put(&sim->stacks, &z->ctx.stack) == 0)
        memset(&z->ctx.stack, 0, sizeof z->ctx.stack);
}

/* Leaves the running context (sim->cur) for to's (NULL: the thread's own,
 * in ddp_sim_run). keep 0: the running task has exited and is never
 * resumed. Returns when the running context is resumed. Each task has its
 * own identity state and errno; tls_task follows the switch. */
static void switch_to(ddp_sim_t *sim, ddp_sim_task_t *to, int keep)
{
    ddp_sim_task_t *from = sim->cur;
    int saved_errno = errno;
    if (!keep)
        sim->zombie = from;
    sim->cur = to;
    tls_task = to ? to : sim->outer_task;
    ddp_ident_state_use(to ? to->ident : sim->outer_ident);
    ddp__ctx_switch(from ? &from->ctx : &sim->main_ctx, to ? &to->ctx : &sim->main_ctx,
                    keep);
    reap(sim);
    errno = saved_errno;
}

/* A task's first turn in contexts mode: a stack (a finished task's, or a
 * new slot), a fresh identity state in the slot's aux block, and a context
 * that starts in task_entry. The identity state (~100 bytes; its error
 * context is allocated on a failure) is not on the stack: there it pushed a
 * simulated rank's deepest frames onto a second page, a page per rank. */
static void start_context(ddp_sim_t *sim, ddp_sim_task_t *t)
{
    size_t size = ddp__sim_stack_size(sim);
    int rc = ddp__stacks_get(&sim->stacks, size, ddp_ident_state_size(), &t->ctx.stack);
    if (rc != 0) {
        char what[160];
        snprintf(what, sizeof what, "a %zu KiB stack for task %s (%s)", size / 1024, t->name,
                 strerror(-rc));
        ddp__sim_oom(what, ddp__stacks_slot_bytes(size, ddp_ident_state_size()));
    }
    ddp__ctx_start(&t->ctx, task_entry);
    t->ident = (ddp_ident_state_t *)t->ctx.stack.aux;
    /* A new slot's bytes are the mapping's zeros: only the fields that are
     * not zero are written. */
    if (t->ctx.stack.fresh)
        ddp_ident_state_init_zeroed(t->ident);
    else
        ddp_ident_state_init(t->ident);
}

/* Gives the turn to t (starting it the first time). keep: as switch_to. */
static void transfer(ddp_sim_t *sim, ddp_sim_task_t *t, int keep)
{
    sim->handoffs++;
    if (sim->contexts) {
        if (!t->started) {
            t->started = 1;
            start_context(sim, t);
        }
        switch_to(sim, t, keep);
        return;
    }
    if (!t->started) {
        t->started = 1;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, ddp__sim_stack_size(sim) + THREAD_TLS_ROOM);
        int rc = pthread_create(&t->th, &at, task_thread, t);
        pthread_attr_destroy(&at);
        if (rc != 0) {
            fprintf(stderr, "ddpsim sim: cannot start task %s: %s\n", t->name,
                    strerror(rc));
            abort();
        }
        return;
    }
    baton_give(t);
}

/* Called by the running task (self, or NULL for the main thread / an exiting
 * task) to hand the baton on. Returns when self holds it again. In contexts
 * mode the main thread's context is resumed when the run is over (as the
 * main thread's semaphore is posted in threads mode), and an exiting task's
 * call never returns. */
static void dispatch(ddp_sim_t *sim, ddp_sim_task_t *self, int self_waits)
{
    int keep = self_waits || (sim->contexts && !sim->cur);
    for (;;) {
        if (sim->nrunnable == 0 && !advance_time(sim)) {
            /* the run is over (or cancelling) */
            if (!sim->contexts)
                sem_post(&sim->main_sem);
            else if (sim->cur)
                switch_to(sim, NULL, keep);
            break;
        }
        if (sim->nrunnable == 0)
            continue;
        ddp_sim_task_t *next = pick_runnable(sim);
        if (next == self)
            return;
        transfer(sim, next, keep);
        break;
    }
    if (!sim->contexts && self_waits && self)
        baton_take(self);
}

/* The main thread (ddp_sim_run) starts the tasks and waits until nothing
 * can run any more. */
static void run_tasks(ddp_sim_t *sim)
{
    dispatch(sim, NULL, 0);
    if (!sim->contexts)
        sem_wait(&sim->main_sem);
}

/* Each kind's words, cut where the buffer they were formatted into when
 * every park formatted them cut them (the reports' bytes are the same). */
const char *ddp__sim_wait_words(const sim_wait_t *w, char *buf, size_t n)
{
    char a[DDP_ADDR_STRLEN];
    size_t cap = w->kind == SIM_WAIT_POLL || w->kind == SIM_WAIT_EPOLL ? 64
                 : w->kind == SIM_WAIT_CHILD                          ? 80
                                                                      : 96;
    n = n < cap ? n : cap;
    if (w->kind == SIM_WAIT_CONNECT || w->kind == SIM_WAIT_SEND || w->kind == SIM_WAIT_RECV)
        ddp_addr_format(&w->addr, a, sizeof a);
    switch (w->kind) {
    case SIM_WAIT_ACCEPT:
        ddp_fmt(buf, n, "accept on port %u", (unsigned)w->num);
        break;
    case SIM_WAIT_CONNECT:
        ddp_fmt(buf, n, "connect to %s", a);
        break;
    case SIM_WAIT_SEND:
        ddp_fmt(buf, n, "send to %s (receive window full)", a);
        break;
    case SIM_WAIT_RECV:
        ddp_fmt(buf, n, "recv from %s", a);
        break;
    case SIM_WAIT_POLL:
        ddp_fmt(buf, n, "poll on %d socket(s)", w->num);
        break;
    case SIM_WAIT_CHILD:
        ddp_fmt(buf, n, "wait for child %s", w->text);
        break;
    case SIM_WAIT_EPOLL:
        ddp_fmt(buf, n, "epoll_wait on set %d", w->num);
        break;
    default:
        ddp_fmt(buf, n, "%s", w->text ? w->text : "");
    }
    return buf;
}

static void tick(ddp_sim_t *sim);

int ddp__sim_park(ddp_sim_task_t *t, int64_t deadline, waitq_t **qs, int nq,
                  const sim_wait_t *w)
{
    ddp_sim_t *sim = t->sim;
    /* A park counts as a sim call: a loop that parks again and again at
     * one instant (a wait whose deadline is already past, retried) is a
     * livelock too, though it makes no further call of its own. */
    tick(sim);
    if (t->killed)
        return DDP_ECANCELED;
    for (int i = 0; i < nq; i++)
        ddp__waitq_add(qs[i], t->id);
    t->timer_gen++;
    if (deadline != DDP_DEADLINE_NEVER)
        timer_set(sim, t, deadline - sim->nodes[t->out.node].skew);
    else
        timer_clear(t); /* the last one can never fire now */
    t->parked = 1;
    t->parked_since = sim->vt;
    t->wait = *w;
    dispatch(sim, t, 1);
    t->parked = 0;
    return t->killed ? DDP_ECANCELED : 0;
}

void ddp__sim_park_unwinding(ddp_sim_task_t *t, waitq_t *q, const sim_wait_t *w)
{
    ddp_sim_t *sim = t->sim;
    ddp__waitq_add(q, t->id);
    t->parked = 1;
    t->parked_since = sim->vt;
    t->wait = *w;
    dispatch(sim, t, 1);
    t->parked = 0;
}

/* Stops the run from inside a task's sim call: every task is cancelled
 * (its next sim call fails with DDP_ECANCELED, a parked one wakes), and the
 * report names the tasks that were running, with what they last waited on. */
static void halt(ddp_sim_t *sim, ddp_sim_result_t why, const char *what)
{
    sim->halted = why;
    sim->cancelling = 1;
    size_t cap = 512 + (size_t)sim->ntasks * 200, len = 0;
    free(sim->deadlock);
    sim->deadlock = xrealloc(NULL, cap);
    int running = 0;
    for (int i = 0; i < sim->ntasks; i++)
        running += sim->tasks[i]->started && !sim->tasks[i]->finished;
    len += (size_t)snprintf(sim->deadlock, cap, "%s at virtual %.6f s: %d task(s) running\n",
                            what, (double)(sim->vt - VT0) / 1e9, running);
    for (int i = 0; i < sim->ntasks; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        if (t->out.state == DDP_SIM_TASK_NEW) {
            t->out.state = DDP_SIM_TASK_CANCELED;
            t->killed = 1;
            sim->unfinished--;
            continue;
        }
        if (!t->started || t->finished)
            continue;
        char words[96];
        const char *was = t->parked ? ddp__sim_wait_words(&t->wait, words, sizeof words)
                                    : "running";
        if (len < cap)
            len += (size_t)snprintf(sim->deadlock + len, cap - len,
                                    "  task %s (node %s): %s\n", t->name,
                                    sim->nodes[t->out.node].host, was);
        ddp_sim_outcome_set_message(&t->out, "harness: %s; the task was %s", what, was);
        t->killed = 1;
        if (t->parked)
            make_runnable(sim, t);
    }
    ddp__sim_trace(sim, -1, why == DDP_SIM_LIVELOCK ? "livelock" : "wall_limit",
                   "\"running\":%d", running);
}

/* 1 when the run is past its wall-clock limit: the real time since it
 * began, or with o.wall_stall since this virtual instant was first checked
 * (4096 calls into it), so time spent making progress never counts. */
static int wall_over(ddp_sim_t *sim)
{
    int64_t now = ddp_sys_now(sim->o.wall_clock);
    if (sim->o.wall_stall && sim->wall_vt != sim->vt) {
        sim->wall_vt = sim->vt;
        sim->wall_start = now;
        return 0;
    }
    return now - sim->wall_start > sim->o.wall_limit_ns;
}

/* Every sim call of a task passes here (ddp__sim_check_killed): the bounds
 * of the run beyond virtual time. */
static void tick(ddp_sim_t *sim)
{
    if (sim->halted || sim->cancelling)
        return;
    if (sim->vt != sim->tick_vt) {
        sim->tick_vt = sim->vt;
        sim->tick_calls = 0;
        return;
    }
    uint64_t n = ++sim->tick_calls;
    if (n > (sim->o.livelock_calls ? sim->o.livelock_calls : 10000000ull)) {
        char what[160];
        snprintf(what, sizeof what, "livelock: virtual time stood still for %llu sim calls",
                 (unsigned long long)(n - 1));
        halt(sim, DDP_SIM_LIVELOCK, what);
    } else if (sim->o.wall_clock && sim->o.wall_limit_ns > 0 && (n & 4095) == 0 &&
               wall_over(sim)) {
        char what[160];
        snprintf(what, sizeof what,
                 sim->o.wall_stall ? "wall-clock limit: virtual time stood still for more "
                                     "than %.3g s of real time"
                                   : "wall-clock limit: still running after %.3g s of real "
                                     "time",
                 (double)sim->o.wall_limit_ns / 1e9);
        halt(sim, DDP_SIM_WALL_LIMIT, what);
    }
}

int ddp__sim_check_killed(ddp_sim_task_t *t)
{
    tick(t->sim);
    if (!t->killed)
        return 0;
    /* A task that ignores DDP_ECANCELED forever would never unwind. */
    if (++t->kill_calls > 100000) {
        fprintf(stderr, "ddpsim sim: task %s ignores cancellation (100,000 sim "
                        "calls since it was %s); stopping it\n", t->name,
                t->out.state == DDP_SIM_TASK_CRASHED ? "crashed" : "cancelled");
        t->out.state = t->out.state == DDP_SIM_TASK_CRASHED
                           ? DDP_SIM_TASK_CRASHED
                           : DDP_SIM_TASK_CANCELED;
        t->abandoned = 1;
        dispatch(t->sim, NULL, 0);
        if (t->sim->contexts)
            abort(); /* a context left for good is never resumed */
        pthread_exit(NULL);
    }
    ddp_err_set(DDP_ECANCELED, "task %s was %s", t->name,
                t->out.state == DDP_SIM_TASK_CRASHED ? "crashed by a fault"
                                                      : "cancelled");
    return 1;
}

static void kill_one(ddp_sim_t *sim, ddp_sim_task_t *t, int crashed);

/* A crash takes the whole process: the task and its threads. */
void ddp__sim_kill_task(ddp_sim_t *sim, ddp_sim_task_t *t, int crashed)
{
    kill_one(sim, t, crashed);
    if (!crashed)
        return;
    for (int i = 0; i < sim->ntasks; i++)
        if (sim->tasks[i] != t && sim->tasks[i]->proc == t->proc)
            kill_one(sim, sim->tasks[i], crashed);
}

static void kill_one(ddp_sim_t *sim, ddp_sim_task_t *t, int crashed)
{
    if (t->killed || t->out.state == DDP_SIM_TASK_EXITED)
        return;
    t->killed = 1;
    if (crashed) {
        t->out.state = DDP_SIM_TASK_CRASHED;
        t->out.end_ns = sim->vt - VT0;
        ddp_sim_outcome_set_message(&t->out, "crashed by a fault");
        snprintf(t->out.phase, sizeof t->out.phase, "%s", t->phase);
        /* A dead process's sockets close; a dead node says nothing. */
        ddp__sim_close_task_socks(sim, t->id, !sim->nodes[t->out.node].crashed);
        if (!t->out.thread && t->started)
            ddp__sim_proc_event(sim, t, DDP_TRIG_EXIT);
    }
    if (!t->started) {
        if (t->runnable_idx >= 0)
            return; /* starts, sees it is killed, exits at once */
        t->out.state = crashed ? DDP_SIM_TASK_CRASHED : DDP_SIM_TASK_CANCELED;
        t->finished = 1;
        sim->unfinished--;
        return; /* never started: nothing to unwind */
    }
    if (t->parked)
        make_runnable(sim, t);
}

/* A task's life, from its first turn to its exit; then it hands on for good. */
static void task_run(ddp_sim_task_t *t)
{
    ddp_sim_t *sim = t->sim;
    ddp_ident_set_rank(t->out.rank);
    if (t->out.state == DDP_SIM_TASK_NEW)
        t->out.state = DDP_SIM_TASK_RUNNING;
    /* Where the task runs and what it is: the Chrome export's tracks. */
    ddp__sim_trace(sim, t->id, "start",
                   "\"node\":\"%s\",\"node_index\":%d,\"rank\":%d,\"thread\":%d",
                   sim->nodes[t->out.node].host, t->out.node, t->out.rank, t->out.thread);
    /* A process whose pause window is open when it starts is stopped at
     * birth, before its first instruction (as the real runner holds it):
     * a master paused at its spawn never listens until the pause ends. */
    int rc = t->killed || (!t->out.thread && ddp__sim_pause_point(t))
                 ? DDP_ECANCELED
                 : 0;
    int64_t asked = VT0 + (t->start_ns > 0 ? t->start_ns : 0);
    if (!t->out.thread && sim->vt > asked)
        t->out.held_ns = sim->vt - asked;
    if (rc == 0)
        rc = t->fn(&t->sys, t->arg);
    t->out.rc = rc;
    /* A process's exit status is small; the error context keeps the code. */
    t->out.code = t->reported_code ? t->reported_code
                  : rc < 0               ? rc
                  : rc && ddp_err_ctx()->code ? ddp_err_ctx()->code
                                              : rc;
    if (rc != 0 && !t->out.message[0])
        ddp_sim_outcome_set_message(&t->out, "%s", ddp_err_message());
    if (t->out.state == DDP_SIM_TASK_RUNNING) {
        t->out.state = t->killed ? DDP_SIM_TASK_CANCELED : DDP_SIM_TASK_EXITED;
        t->out.end_ns = sim->vt - VT0;
    }
    t->exit_status = rc < 0 ? 1 : rc > 255 ? 255 : rc;
    sim->unfinished--;
    ddp__sim_trace(sim, t->id, "exit", "\"rc\":%d,\"state\":%d", rc,
                   (int)t->out.state);
    if (!t->out.thread)
        ddp__sim_proc_event(sim, t, DDP_TRIG_EXIT);
    ddp__sim_close_task_socks(sim, t->id, 1);
    t->finished = 1;
    ddp__waitq_wake_all(sim, &t->exitq);
    t->killed = 1; /* no more calls from this task */
    timer_clear(t);
    dispatch(sim, NULL, 0);
}

static void *task_thread(void *arg)
{
    ddp_sim_task_t *t = arg;
    tls_task = t;
    ddp_fault_thread_armed_only(1); /* only the armed points cost anything */
    task_run(t);
    return NULL;
}

/* Where a new context starts (the switch set tls_task to its task). */
static void task_entry(void)
{
    ddp__ctx_entered();
    ddp_sim_task_t *t = tls_task;
    reap(t->sim);
    task_run(t);
    abort(); /* its last dispatch left this context for good */
}

/* Contexts mode, at the end of a run: no task runs any more; a task that
 * never finished unwinding is dropped. The stacks stay mapped until
 * ddp_sim_free, which frees the rest of the simulation too. */
static void end_contexts(ddp_sim_t *sim)
{
    for (int i = 0; i < sim->ntasks; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        ddp__ctx_retire(&t->ctx);
        if (t->ident)
            ddp_ident_state_fini(t->ident);
        t->ident = NULL;
    }
    ddp__ctx_free(&sim->main_ctx);
}

/* ---- public API ---- */
ddp_sim_t *ddp_sim_new(const ddp_sim_opts_t *opts)
{
    ddp_sim_t *sim = calloc(1, sizeof *sim);
    if (!sim)
        return NULL;
    if (opts)
        sim->o = *opts;
    if (sim->o.latency_ns <= 0)
        sim->o.latency_ns = 100 * 1000;
    if (sim->o.bandwidth_Bps <= 0)
        sim->o.bandwidth_Bps = 10e9;
    if (sim->o.time_limit_ns <= 0)
        sim->o.time_limit_ns = 4 * 3600 * DDP_NS_PER_S;
    if (sim->o.somaxconn <= 0)
        sim->o.somaxconn = 4096;
    if (sim->o.rcvbuf == 0)
        sim->o.rcvbuf = 256 * 1024;
    sim->contexts = sim->o.tasks != DDP_SIM_TASKS_THREADS;
    ddp_rng_seed(&sim->rng, sim->o.seed);
    sim->vt = VT0;
    ddp__sim_oom_scope(sim); /* what it builds runs out of memory: say why */
    sim->trace_hash = 0xcbf29ce484222325ull;
    sem_init(&sim->main_sem, 0, 0);
    fiu_init(0);
    /* One eventfd per task (the baton): allow as many fds as we may (a
     * failure leaves the limit, and the caller's error context, as they were). */
    if (!sim->contexts) {
        ddp_errsave_t *keep = ddp_err_save();
        long before, after;
        ddp_sys_host_fd_limit_raise(&before, &after);
        ddp_err_restore(keep);
    }
    return sim;
}

/* ---- the node index: host name or IPv4 address -> node ----
 * Every connect, listen and resolve looks a node up, and clusters have
 * thousands: two open-addressing tables of node + 1 (0: empty). */
static size_t hash_host(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return (size_t)(h ^ h >> 29);
}

static size_t hash_ip(const uint8_t ip[4])
{
    uint32_t v;
    memcpy(&v, ip, 4);
    return (size_t)(((uint64_t)v * 0x9e3779b97f4a7c15ull) >> 20);
}

static void index_add(ddp_sim_t *sim, int node)
{
    size_t m = sim->index_cap - 1;
    size_t i = hash_host(sim->nodes[node].host) & m;
    while (sim->by_host[i])
        i = (i + 1) & m;
    sim->by_host[i] = node + 1;
    i = hash_ip(sim->nodes[node].addr.ip) & m;
    while (sim->by_ip[i])
        i = (i + 1) & m;
    sim->by_ip[i] = node + 1;
}

/* Room for one more node (at most half full). */
static void index_reserve(ddp_sim_t *sim)
{
    if ((size_t)(sim->nnodes + 1) * 2 <= sim->index_cap)
        return;
    sim->index_cap = sim->index_cap ? sim->index_cap * 2 : 64;
    free(sim->by_host);
    free(sim->by_ip);
    sim->by_host = calloc(sim->index_cap, sizeof *sim->by_host);
    sim->by_ip = calloc(sim->index_cap, sizeof *sim->by_ip);
    if (!sim->by_host || !sim->by_ip)
        ddp__sim_oom("the host index", sim->index_cap * sizeof *sim->by_host);
    for (int i = 0; i < sim->nnodes; i++)
        index_add(sim, i);
}

int ddp__sim_node_by_host(const ddp_sim_t *sim, const char *host)
{
    if (!sim->index_cap)
        return -1;
    size_t m = sim->index_cap - 1;
    for (size_t i = hash_host(host) & m; sim->by_host[i]; i = (i + 1) & m)
        if (!strcmp(sim->nodes[sim->by_host[i] - 1].host, host))
            return sim->by_host[i] - 1;
    return -1;
}

int ddp__sim_node_by_ipv4(const ddp_sim_t *sim, const uint8_t ip[4])
{
    if (!sim->index_cap)
        return -1;
    size_t m = sim->index_cap - 1;
    for (size_t i = hash_ip(ip) & m; sim->by_ip[i]; i = (i + 1) & m)
        if (!memcmp(sim->nodes[sim->by_ip[i] - 1].addr.ip, ip, 4))
            return sim->by_ip[i] - 1;
    return -1;
}

int ddp_sim_add_node(ddp_sim_t *sim, const char *hostname, const char *addr,
                     int64_t skew)
{
    ddp_addr_t a;
    if (ddp_addr_parse(addr, 0, &a) != 0 || a.family != 4)
        return ddp_err_set(DDP_ECONFIG, "node %s: \"%s\" is not an IPv4 address",
                           hostname, addr);
    if (ddp__sim_node_by_host(sim, hostname) >= 0 || ddp__sim_node_by_ipv4(sim, a.ip) >= 0)
        return ddp_err_set(DDP_ECONFIG,
                           "node %s (%s): name or address already used",
                           hostname, addr);
    if (sim->nnodes == sim->nodes_cap) {
        sim->nodes_cap = sim->nodes_cap ? sim->nodes_cap * 2 : 8;
        sim->nodes = xrealloc(sim->nodes, sizeof *sim->nodes * (size_t)sim->nodes_cap);
    }
    sim_node_t *n = &sim->nodes[sim->nnodes];
    memset(n, 0, sizeof *n);
    snprintf(n->host, sizeof n->host, "%s", hostname);
    n->addr = a;
    n->skew = skew;
    index_reserve(sim);
    index_add(sim, sim->nnodes);
    return sim->nnodes++;
}

int ddp_sim_node_count(const ddp_sim_t *sim) { return sim->nnodes; }

const ddp_env_t *ddp_sim_task_env(const ddp_sim_t *sim, int task)
{
    return task >= 0 && task < sim->ntasks ? sim->tasks[task]->sys.env : NULL;
}

int64_t ddp_sim_task_start(const ddp_sim_t *sim, int task)
{
    return task >= 0 && task < sim->ntasks ? sim->tasks[task]->start_ns : 0;
}

const char *ddp_sim_node_hostname(const ddp_sim_t *sim, int node)
{
    return node >= 0 && node < sim->nnodes ? sim->nodes[node].host : NULL;
}

static const char *const default_ifs[][3] = {
    {"lo", "127.0.0.1", "8"}, {"lo", "::1", "128"}};

int ddp__sim_node_ifs(const ddp_sim_t *sim, int node, ddp_ifaddr_t *out, int max)
{
    const sim_node_t *nd = &sim->nodes[node];
    int n = 0;
    for (int i = 0; i < 2 && n < max; i++, n++) {
        snprintf(out[n].name, sizeof out[n].name, "%s", default_ifs[i][0]);
        ddp_addr_parse(default_ifs[i][1], 0, &out[n].addr);
        out[n].prefix = atoi(default_ifs[i][2]);
    }
    if (!nd->eth0_set && n < max) {
        snprintf(out[n].name, sizeof out[n].name, "eth0");
        out[n].addr = nd->addr;
        out[n].addr.port = 0;
        out[n++].prefix = 8; /* the cluster's 10/8: every node reaches every node */
    }
    for (int i = 0; i < nd->nifs && n < max; i++)
        out[n++] = nd->ifs[i];
    for (int i = 0, next = 1; i < n; i++) { /* one index per name, in order */
        out[i].index = 0;
        for (int k = 0; k < i && !out[i].index; k++)
            if (!strcmp(out[k].name, out[i].name))
                out[i].index = out[k].index;
        if (!out[i].index)
            out[i].index = (uint32_t)next++;
        if (out[i].addr.family == 6 && ddp_addr_is_link_local(&out[i].addr))
            out[i].addr.scope = out[i].index; /* as getifaddrs gives it */
    }
    return n;
}

static int add_iface1(ddp_sim_t *sim, int node, const char *name, const ddp_addr_t *a,
                      int prefix)
{
    sim_node_t *nd = &sim->nodes[node];
    if (!strcmp(name, "eth0"))
        nd->eth0_set = 1;
    nd->ifs = xrealloc(nd->ifs, sizeof *nd->ifs * (size_t)(nd->nifs + 1));
    ddp_ifaddr_t *f = &nd->ifs[nd->nifs++];
    snprintf(f->name, sizeof f->name, "%s", name);
    f->addr = *a;
    f->prefix = prefix;
    sim->custom_ifs = 1;
    return 0;
}

int ddp_sim_add_iface(ddp_sim_t *sim, int node, const char *name, const char *cidr)
{
    char host[DDP_ADDR_STRLEN];
    const char *slash = strchr(cidr, '/');
    size_t hl = slash ? (size_t)(slash - cidr) : strlen(cidr);
    ddp_addr_t a;
    if (hl >= sizeof host)
        return ddp_err_set(DDP_ECONFIG, "iface %s: \"%s\" is not ADDR/PREFIX", name, cidr);
    memcpy(host, cidr, hl);
    host[hl] = '\0';
    if (ddp_addr_parse(host, 0, &a) != 0)
        return ddp_err_set(DDP_ECONFIG, "iface %s: \"%s\" is not an IPv4 or IPv6 address",
                           name, host);
    int bits = a.family == 4 ? 32 : 128;
    char *end = NULL;
    long prefix = slash ? strtol(slash + 1, &end, 10) : bits;
    if (slash && (!end || *end || end == slash + 1 || prefix < 0 || prefix > bits))
        return ddp_err_set(DDP_ECONFIG, "iface %s: \"%s\": the prefix is not 0..%d", name,
                           cidr, bits);
    if (!name[0] || strlen(name) >= 16)
        return ddp_err_set(DDP_ECONFIG, "iface \"%s\": not an interface name (1-15 "
                                        "characters)", name);
    if (node >= sim->nnodes)
        return ddp_err_set(DDP_ECONFIG, "iface %s: no node %d", name, node);
    for (int i = node < 0 ? 0 : node; i < (node < 0 ? sim->nnodes : node + 1); i++)
        add_iface1(sim, i, name, &a, (int)prefix);
    return 0;
}

int ddp_sim_add_hostent(ddp_sim_t *sim, int node, const char *name, const char *addr)
{
    ddp_addr_t a;
    if (ddp_addr_parse(addr, 0, &a) != 0)
        return ddp_err_set(DDP_ECONFIG, "resolve %s: \"%s\" is not an IPv4 or IPv6 address",
                           name, addr);
    if (node >= sim->nnodes || strlen(name) >= 64)
        return ddp_err_set(DDP_ECONFIG, "resolve %s: no node %d", name, node);
    sim->hostents = xrealloc(sim->hostents, sizeof *sim->hostents * (size_t)(sim->nhostents + 1));
    sim_hostent_t *h = &sim->hostents[sim->nhostents++];
    h->node = node;
    snprintf(h->name, sizeof h->name, "%s", name);
    h->addr = a;
    return 0;
}

int ddp_sim_set_somaxconn(ddp_sim_t *sim, int node, int somaxconn)
{
    if (node >= sim->nnodes || somaxconn < 1 || somaxconn > DDP_SIM_SOMAXCONN_MAX)
        return ddp_err_set(DDP_ECONFIG, "somaxconn %d on node %d: expected 1..%d on a "
                                        "node of the cluster", somaxconn, node,
                           DDP_SIM_SOMAXCONN_MAX);
    for (int i = node < 0 ? 0 : node; i < (node < 0 ? sim->nnodes : node + 1); i++)
        sim->nodes[i].somaxconn = somaxconn;
    return 0;
}

int ddp_sim_add_alias(ddp_sim_t *sim, const char *name, int node)
{
    if (node < 0 || node >= sim->nnodes)
        return ddp_err_set(DDP_ECONFIG, "alias %s: no node %d", name, node);
    sim->aliases = xrealloc(sim->aliases, sizeof *sim->aliases * (size_t)(sim->naliases + 1));
    sim->aliases[sim->naliases].name = strdup(name);
    sim->aliases[sim->naliases].node = node;
    sim->naliases++;
    return 0;
}

int ddp_sim_add_file(ddp_sim_t *sim, const char *path, const char *content)
{
    sim->files = xrealloc(sim->files, sizeof *sim->files * (size_t)(sim->nfiles + 1));
    sim->files[sim->nfiles].path = strdup(path);
    sim->files[sim->nfiles].content = strdup(content);
    sim->nfiles++;
    return 0;
}

static ddp_sim_task_t *new_task(ddp_sim_t *sim, int node, const char *name,
                                int rank, const ddp_env_t *env,
                                ddp_sim_main_fn fn, void *arg)
{
    if (sim->ntasks == sim->tasks_cap) {
        sim->tasks_cap = sim->tasks_cap ? sim->tasks_cap * 2 : 64;
        sim->tasks = xrealloc(sim->tasks, sizeof *sim->tasks * (size_t)sim->tasks_cap);
        sim->runnable = xrealloc(sim->runnable, sizeof *sim->runnable * (size_t)sim->tasks_cap);
    }
    ddp_sim_task_t *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    t->out.message = no_message;
    t->id = sim->ntasks;
    t->sim = sim;
    t->fn = fn;
    t->arg = arg;
    t->runnable_idx = -1;
    t->timer_seq = TIMER_NONE;
    t->parent = -1;
    t->proc = t->id;
    snprintf(t->name, sizeof t->name, "%s", name && *name ? name : "task");
    t->sys.ops = &ddp__sim_sys_ops;
    t->sys.env = env ? ddp_env_clone(env) : ddp_env_new();
    t->sys.impl = t;
    baton_init(t);
    t->out.name = t->name;
    t->out.node = node;
    t->out.rank = rank;
    t->out.state = DDP_SIM_TASK_NEW;
    t->out.connect_ns = -1;
    t->out.world = -1;
    sim->tasks[sim->ntasks++] = t;
    sim->unfinished++;
    return t;
}

int ddp_sim_add_task(ddp_sim_t *sim, const ddp_sim_task_opts_t *o,
                     ddp_sim_main_fn fn, void *arg)
{
    if (o->node < 0 || o->node >= sim->nnodes)
        return ddp_err_set(DDP_ECONFIG, "task %s: no node %d", o->name, o->node);
    ddp_sim_task_t *t = new_task(sim, o->node, o->name, o->rank, o->env, fn, arg);
    t->start_ns = o->start_ns > 0 ? o->start_ns : 0;
    t->out.job = o->job;
    t->out.agent = o->agent;
    sim_event_t ev = {.t = VT0 + (o->start_ns > 0 ? o->start_ns : 0),
                      .type = EV_START, .a = t->id};
    ddp__sim_push_event(sim, ev);
    return t->id;
}

int ddp__sim_spawn_child(ddp_sim_task_t *parent, const ddp_spawn_t *w,
                         ddp_pid_t *pid)
{
    ddp_sim_t *sim = parent->sim;
    if (!w->entry)
        return ddp_err_set(DDP_EUNSUPPORTED,
                           "the simulator runs tasks, not programs: spawn "
                           "needs an entry function (argv \"%s\")",
                           w->argv && w->argv[0] ? w->argv[0] : "");
    int rank = -1;
    const ddp_env_t *env = w->env ? w->env : parent->sys.env;
    /* The child's rank, when its RANK says one; read without
     * ddp_env_get_long, whose error for a missing RANK (most children of a
     * launcher have none) overwrote the caller's error context on a spawn
     * that succeeded, and cost a formatted sentence per child. */
    const char *rv = ddp_env_get(env, "RANK");
    long r;
    if (rv && ddp_env_parse_long(rv, &r) == 0 && r >= 0 && r <= 1 << 30)
        rank = (int)r;
    char name[48];
    snprintf(name, sizeof name, "%s", w->name ? w->name : "child");
    ddp_sim_task_t *t = new_task(sim, parent->out.node, name, rank, env,
                                 w->entry, w->arg);
    t->parent = parent->id;
    t->out.job = parent->out.job;
    t->out.attempt = w->attempt;
    sim->tasks[parent->proc]->out.spawned++;
    sim_event_t ev = {.t = sim->vt, .type = EV_START, .a = t->id};
    ddp__sim_push_event(sim, ev);
    ddp__sim_trace(sim, parent->id, "spawn", "\"child\":\"%s\"", t->name);
    *pid = t->id + 1; /* pids are > 0 */
    return 0;
}

int ddp__sim_thread(ddp_sim_task_t *parent, ddp_thread_fn fn, void *arg,
                    const char *name, ddp_thread_t *out)
{
    ddp_sim_t *sim = parent->sim;
    ddp_sim_task_t *t = new_task(sim, parent->out.node, name ? name : "thread",
                                 parent->out.rank, parent->sys.env, fn, arg);
    t->parent = parent->id;
    t->proc = parent->proc;
    t->out.thread = 1;
    t->out.job = parent->out.job;
    t->out.agent = parent->out.agent; /* an agent's store thread: its deadlines */
    sim->tasks[parent->proc]->nthreads++;
    sim_event_t ev = {.t = sim->vt, .type = EV_START, .a = t->id};
    ddp__sim_push_event(sim, ev);
    ddp__sim_trace(sim, parent->id, "thread", "\"thread\":\"%s\"", t->name);
    *out = t->id + 1;
    return 0;
}

/* The deadlock (or time limit) report: who waits on what. */
static void report_stuck(ddp_sim_t *sim, ddp_sim_result_t res, int stuck)
{
    size_t cap = 256 + (size_t)stuck * 256, len = 0;
    sim->deadlock = xrealloc(NULL, cap);
    len += (size_t)snprintf(sim->deadlock, cap, "%s at virtual %.6f s: %d task(s) waiting\n",
                            res == DDP_SIM_DEADLOCK ? "deadlock" : "time limit",
                            (double)(sim->vt - VT0) / 1e9, stuck);
    for (int i = 0; i < sim->ntasks && len < cap; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        if (!t->started || t->out.state != DDP_SIM_TASK_RUNNING)
            continue;
        char words[96];
        len += (size_t)snprintf(sim->deadlock + len, cap - len,
                                "  task %s (node %s): %s, since %.6f s\n", t->name,
                                sim->nodes[t->out.node].host,
                                ddp__sim_wait_words(&t->wait, words, sizeof words),
                                (double)(t->parked_since - VT0) / 1e9);
    }
    ddp__sim_trace(sim, -1, res == DDP_SIM_DEADLOCK ? "deadlock" : "time_limit",
                   "\"waiting\":%d", stuck);
}

/* Unwinds every parked task (after a halt or a deadlock): killed, made
 * runnable and run to its end; tasks never started are canceled. */
static void unwind_stuck(ddp_sim_t *sim, ddp_sim_result_t res)
{
    sim->cancelling = 1;
    for (int i = 0; i < sim->ntasks; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        if (t->out.state == DDP_SIM_TASK_NEW) {
            t->out.state = DDP_SIM_TASK_CANCELED;
            sim->unfinished--;
            continue;
        }
        if (t->started && t->out.state == DDP_SIM_TASK_RUNNING) {
            char words[96];
            if (!sim->halted)
                ddp_sim_outcome_set_message(&t->out, "%s: still waiting (%s)",
                                            res == DDP_SIM_DEADLOCK ? "deadlock" : "time limit",
                                            ddp__sim_wait_words(&t->wait, words, sizeof words));
            t->killed = 1;
            if (t->parked)
                make_runnable(sim, t);
        }
    }
    run_tasks(sim);
}

ddp_sim_result_t ddp_sim_run(ddp_sim_t *sim)
{
    /* Only one task runs at a time, so all of them share one CPU: a baton
     * pass is then a same-CPU switch, not a cross-CPU wake-up (an IPI, and
     * dear on VMs). Task threads inherit the mask; restored at the end. */
    ddp__sim_oom_scope(sim);
    cpu_set_t saved, one;
    int pinned = !sim->contexts &&
                 pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
    if (pinned) {
        CPU_ZERO(&one);
        int cpu = sched_getcpu();
        CPU_SET(cpu >= 0 ? cpu : 0, &one);
        pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    }
    /* Contexts: the tasks run on this thread, which checks armed points
     * only for as long as they do; the caller's task and identity (when a
     * task runs a simulation of its own) come back with its context. */
    int was_armed_only = 0;
    if (sim->contexts) {
        ddp__ctx_main(&sim->main_ctx);
        sim->cur = NULL;
        sim->outer_task = tls_task;
        sim->outer_ident = ddp_ident_state_use(NULL);
        ddp_ident_state_use(sim->outer_ident);
        was_armed_only = ddp_fault_thread_armed_only(1);
    }
    ddp_log_set_sink(ddp__sim_log_sink, sim);
    ddp__sim_faults_arm(sim);
    if (sim->o.wall_clock)
        sim->wall_start = ddp_sys_now(sim->o.wall_clock);
    sim->wall_vt = -1; /* no instant checked yet */
    sim->tick_vt = sim->vt;
    run_tasks(sim);

    ddp_sim_result_t res = sim->halted ? sim->halted : DDP_SIM_DONE;
    int stuck = 0;
    for (int i = 0; i < sim->ntasks; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        if (t->started && t->out.state == DDP_SIM_TASK_RUNNING)
            stuck++;
    }
    if (stuck) { /* after a halt: tasks that did not unwind yet */
        if (!sim->halted) {
            res = sim->time_limited ? DDP_SIM_TIME_LIMIT : DDP_SIM_DEADLOCK;
            report_stuck(sim, res, stuck);
        }
        unwind_stuck(sim, res);
    }
    for (int i = 0; i < sim->ntasks; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        if (t->out.state == DDP_SIM_TASK_NEW)
            t->out.state = DDP_SIM_TASK_CANCELED;
        if (t->started && !t->joined && !sim->contexts) {
            pthread_join(t->th, NULL);
            t->joined = 1;
        }
    }
    if (sim->contexts) {
        ddp_fault_thread_armed_only(was_armed_only);
        end_contexts(sim);
    }
    ddp__sim_faults_disarm(sim);
    ddp_log_set_sink(NULL, NULL);
    if (pinned)
        pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    ddp__sim_trace(sim, -1, "end", "\"result\":%d,\"handoffs\":%llu", (int)res,
                   (unsigned long long)sim->handoffs);
    return res;
}

void ddp_sim_free(ddp_sim_t *sim)
{
    if (!sim)
        return;
    ddp__sim_oom_scope(NULL);
    for (int i = 0; i < sim->ntasks; i++) {
        ddp_sim_task_t *t = sim->tasks[i];
        if (t->started && !t->joined && !sim->contexts)
            pthread_join(t->th, NULL);
        baton_free(t);
        ddp__ctx_free(&t->ctx);
        ddp_env_free(t->sys.env);
        ddp__waitq_free(&t->exitq);
        free(t->fds);
        free(t->nccl_err);
        ddp_sim_outcome_clear(&t->out);
        free(t);
    }
    ddp__sim_net_free(sim);
    for (size_t i = 0; i < sim->nheap; i++)
        free(sim->heap[i].data);
    free(sim->heap);
    free(sim->tasks);
    free(sim->runnable);
    free(sim->timers);
    for (int i = 0; i < sim->nnodes; i++)
        free(sim->nodes[i].ifs);
    free(sim->nodes);
    free(sim->hostents);
    free(sim->by_host);
    free(sim->by_ip);
    for (int i = 0; i < sim->naliases; i++)
        free(sim->aliases[i].name);
    free(sim->aliases);
    for (int i = 0; i < sim->nfiles; i++) {
        free(sim->files[i].path);
        free(sim->files[i].content);
    }
    free(sim->files);
    for (int i = 0; i < sim->nowned; i++)
        free(sim->owned[i]);
    free(sim->owned);
    free(sim->faults);
    free(sim->crash_queued);
    ddp_faultset_free(&sim->fs);
    free(sim->uplink_free);
    free(sim->trace);
    free(sim->deadlock);
    free(sim->nccl_roots);
    ddp__stacks_free(&sim->stacks);
    sem_destroy(&sim->main_sem);
    free(sim);
}

void ddp_sim_own(ddp_sim_t *sim, void *ptr)
{
    sim->owned = xrealloc(sim->owned, sizeof *sim->owned * (size_t)(sim->nowned + 1));
    sim->owned[sim->nowned++] = ptr;
}

int ddp_sim_task_count(const ddp_sim_t *sim) { return sim->ntasks; }

const ddp_sim_outcome_t *ddp_sim_outcome(const ddp_sim_t *sim, int task)
{
    return task >= 0 && task < sim->ntasks ? &sim->tasks[task]->out : NULL;
}

ddp_sim_t *ddp_sim_of(ddp_sys_t *sys)
{
    return sys && sys->ops == &ddp__sim_sys_ops
               ? ((ddp_sim_task_t *)sys->impl)->sim
               : NULL;
}

int ddp_sim_task_of(ddp_sys_t *sys)
{
    return sys && sys->ops == &ddp__sim_sys_ops
               ? ((ddp_sim_task_t *)sys->impl)->id
               : -1;
}

/* ---- outcomes' messages: stored only when set (no_message: none) ---- */
void ddp_sim_outcome_init(ddp_sim_outcome_t *o)
{
    memset(o, 0, sizeof *o);
    o->message = no_message;
}

void ddp_sim_outcome_clear(ddp_sim_outcome_t *o)
{
    if (o->message && o->message != no_message)
        free((char *)o->message);
    o->message = no_message;
}

void ddp_sim_outcome_set_message(ddp_sim_outcome_t *o, const char *fmt, ...)
{
    char *m = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&m, fmt, ap); /* first: an argument may be the old one */
    va_end(ap);
    if (n < 0) { /* no memory (m undefined): no message */
        m = NULL;
    } else if (n == 0) { /* empty: none stored */
        free(m);
        m = NULL;
    } else if (n >= DDP_ERR_MSG_MAX) {
        m[DDP_ERR_MSG_MAX - 1] = '\0';
    }
    ddp_sim_outcome_clear(o);
    if (m)
        o->message = m;
}

void ddp_sim_report(ddp_sys_t *sys, int code, const char *message)
{
    if (ddp_sim_of(sys)) {
        ddp_sim_task_t *t = ddp__sim_current() ? ddp__sim_current() : sys->impl;
        ddp_sim_outcome_set_message(&t->out, "%s", message);
        t->reported_code = code;
    }
}

void ddp_sim_mark_connected(ddp_sys_t *sys)
{
    if (ddp_sim_of(sys)) {
        ddp_sim_task_t *t = sys->impl;
        t->out.connect_ns = t->sim->vt - VT0;
        ddp__sim_trace(t->sim, t->id, "connected", "\"rank\":%d", t->out.rank);
    }
}

void ddp_sim_stats(const ddp_sim_t *sim, ddp_sim_stats_t *out)
{
    out->virtual_ns = sim->vt - VT0;
    out->handoffs = sim->handoffs;
    out->events = sim->events;
    out->trace_hash = sim->trace_hash;
    out->trace_lines = sim->trace_lines;
    out->rx_peak_bytes = sim->rx_peak;
}

const char *ddp_sim_deadlock_report(const ddp_sim_t *sim)
{
    return sim->deadlock ? sim->deadlock : "";
}

const char *ddp_sim_trace(const ddp_sim_t *sim, size_t *len)
{
    if (len)
        *len = sim->trace_len;
    return sim->trace ? sim->trace : "";
}
