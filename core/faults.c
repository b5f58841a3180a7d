/* core/faults.c — the fault-point table (ddp/faults.h), lookups, and the
 * armed flags that let a simulated task skip libfiu on points nobody armed.
 *
 * A flag mirrors libfiu's own state as far as ddpsim can see it: set when a
 * point is enabled through ddp_fault_enable*, cleared by ddp_fault_disable.
 * A point libfiu disables by itself (FIU_ONETIME) stays armed here, which
 * only costs the fiu_fail call it would have cost anyway. */
#include "ddp/faults.h"

#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "ddp/err.h"

static const ddp_fault_info_t table[DDP_FP_COUNT] = {
#define DDP__FP_ROW(ident, nm, ly, wh, de, fl)                                 \
    {.id = DDP_FP_##ident, .name = nm, .layer = ly, .where = wh, .deferr = de,   \
     .fails = fl},
    DDP_FAULT_POINTS(DDP__FP_ROW)
#undef DDP__FP_ROW
};

/* Relaxed: a flag only decides whether libfiu, which has its own lock, is
 * asked; arming happens before the run whose tasks read it. */
static atomic_uchar armed[DDP_FP_COUNT];
static _Thread_local int armed_only;

/* No lock across fork. libfiu guards its table with a rwlock (and a
 * ONETIME point with a mutex) that a fork can copy while another thread
 * holds it: the child (an elastic agent's worker) then blocks forever on
 * its first fault point. Every libfiu call of ddpsim is made under
 * fiu_lock (read: evaluate; write: enable, disable), and a fork takes it
 * for writing first (pthread_atfork), so no thread is inside libfiu when
 * the process is copied. A fault callback that waits (a stall) holds off
 * a fork of its process meanwhile. */
static pthread_rwlock_t fiu_lock = PTHREAD_RWLOCK_INITIALIZER;

static void fork_prepare(void) { pthread_rwlock_wrlock(&fiu_lock); }
static void fork_parent(void) { pthread_rwlock_unlock(&fiu_lock); }
/* glibc's rwlock knows its writer by thread id, which the child's thread
 * no longer has: a fresh lock (the child has one thread, nobody inside). */
static void fork_child(void) { pthread_rwlock_init(&fiu_lock, NULL); }

/* Not under TSan: it takes the child's fresh lock for the one the
 * parent's thread held and reports every later read lock ("read lock of a
 * write locked mutex"). A TSan build keeps the lock but not its fork
 * handling, as before issue 42; the plain and ASan builds have both. */
__attribute__((constructor)) static void fork_handlers(void)
{
#if defined(__SANITIZE_THREAD__)
    (void)fork_prepare, (void)fork_parent, (void)fork_child;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    (void)fork_prepare, (void)fork_parent, (void)fork_child;
#else
    pthread_atfork(fork_prepare, fork_parent, fork_child);
#endif
#else
    pthread_atfork(fork_prepare, fork_parent, fork_child);
#endif
}

static int locked_fail(const char *name)
{
    pthread_rwlock_rdlock(&fiu_lock);
    int r = fiu_fail(name);
    pthread_rwlock_unlock(&fiu_lock);
    return r;
}

const ddp_fault_info_t *ddp_fault_info(ddp_fault_id_t id)
{
    return id >= 0 && id < DDP_FP_COUNT ? &table[id] : NULL;
}

const ddp_fault_info_t *ddp_fault_point_find(const char *name)
{
    for (int i = 0; name && i < DDP_FP_COUNT; i++)
        if (!strcmp(table[i].name, name))
            return &table[i];
    return NULL;
}

int ddp_fault_point_matches(const char *pattern, ddp_fault_id_t id)
{
    const ddp_fault_info_t *f = ddp_fault_info(id);
    if (!f || !pattern)
        return 0;
    const char *star = strchr(pattern, '*');
    if (!star)
        return !strcmp(pattern, f->name);
    return !strncmp(pattern, f->name, (size_t)(star - pattern));
}

const char *ddp_fault_layer_name(ddp_fault_layer_t layer)
{
    static const char *const names[DDP_FP_LAYER_COUNT] = {
        "sys", "phase", "store client", "store server", "tcp backend",
        "nccl backend"};
    return layer >= 0 && layer < DDP_FP_LAYER_COUNT ? names[layer] : "?";
}

int ddp_fault_armed(ddp_fault_id_t id)
{
    if (id < 0 || id >= DDP_FP_COUNT)
        return 0;
    return !armed_only || atomic_load_explicit(&armed[id], memory_order_relaxed);
}

int ddp_fault_hit(ddp_fault_id_t id)
{
    return ddp_fault_armed(id) && locked_fail(table[id].name);
}

/* A point that fired: -failinfo when it is a positive errno, else -deferr
 * (EIO for a point without a default). */
static int fired(const char *name, int deferr)
{
    intptr_t fi = (intptr_t)fiu_failinfo();
    int e = fi > 0 ? (int)fi : deferr > 0 ? deferr : EIO;
    return ddp_err_set(-e, "fault point %s fired (%s)", name, strerror(e));
}

int ddp_fault_fire(ddp_fault_id_t id)
{
    return ddp_fault_hit(id) ? fired(table[id].name, table[id].deferr) : 0;
}

int ddp_fault_thread_armed_only(int on)
{
    int was = armed_only;
    armed_only = on != 0;
    return was;
}

static void set_armed(const char *name, unsigned char v)
{
    for (int i = 0; i < DDP_FP_COUNT; i++)
        if (ddp_fault_point_matches(name, (ddp_fault_id_t)i))
            atomic_store_explicit(&armed[i], v, memory_order_relaxed);
}

int ddp_fault_enable(const char *name, int failnum, void *failinfo,
                     unsigned int flags)
{
    set_armed(name, 1);
    pthread_rwlock_wrlock(&fiu_lock);
    int r = fiu_enable(name, failnum, failinfo, flags);
    pthread_rwlock_unlock(&fiu_lock);
    return r;
}

int ddp_fault_enable_random(const char *name, int failnum, void *failinfo,
                            unsigned int flags, float probability)
{
    set_armed(name, 1);
    pthread_rwlock_wrlock(&fiu_lock);
    int r = fiu_enable_random(name, failnum, failinfo, flags, probability);
    pthread_rwlock_unlock(&fiu_lock);
    return r;
}

int ddp_fault_enable_external(const char *name, int failnum, void *failinfo,
                              unsigned int flags, ddp_fault_cb_t cb)
{
    set_armed(name, 1);
    pthread_rwlock_wrlock(&fiu_lock);
    int r = fiu_enable_external(name, failnum, failinfo, flags, cb);
    pthread_rwlock_unlock(&fiu_lock);
    return r;
}

int ddp_fault_disable(const char *name)
{
    set_armed(name, 0);
    pthread_rwlock_wrlock(&fiu_lock);
    int r = fiu_disable(name);
    pthread_rwlock_unlock(&fiu_lock);
    return r;
}

/* The string form (err.h): a listed point behaves as its id does, with the
 * caller's default errno; a plugin's own point always asks libfiu. */
int ddp_fault_point(const char *name, int deferr)
{
    const ddp_fault_info_t *f = ddp_fault_point_find(name);
    if (f ? !ddp_fault_hit(f->id) : !locked_fail(name))
        return 0;
    return fired(name, deferr);
}
