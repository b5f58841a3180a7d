/* core/fault_model.c — the fault model of ddp/faults.h: the kinds table,
 * rank sets, triggers, and the faultset every executor matches calls
 * against (the simulator, a real process's in-process points, the real
 * runner's signals, nft rules and proxy).
 *
 * Why one file: "does fault f hit this call" used to be written once per
 * executor, and the copies drifted (they disagreed on an empty rank list).
 * Here it is written once, over a call whose details the caller passes in.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ddp/err.h"
#include "ddp/faults.h"

static const ddp_fault_kind_info_t kinds[DDP_FAULT_KIND_COUNT] = {
#define DDP__KIND_ROW(id, nm, on, eff, ex, hit)                                \
    {.kind = DDP_FAULT_##id, .name = nm, .acts_on = on, .effects = eff, .exec = ex, .hits = hit},
    DDP_FAULT_KINDS(DDP__KIND_ROW)
#undef DDP__KIND_ROW
};

const ddp_fault_kind_info_t *ddp_fault_kind_info(ddp_fault_kind_t k)
{
    return k >= 0 && k < DDP_FAULT_KIND_COUNT ? &kinds[k] : NULL;
}

const char *ddp_fault_kind_name(ddp_fault_kind_t k)
{
    return k >= 0 && k < DDP_FAULT_KIND_COUNT ? kinds[k].name : "?";
}

const char *ddp_fault_kind_list(char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < DDP_FAULT_KIND_COUNT && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "", kinds[i].name);
    return buf;
}

static const char *const exec_names[] = {"sim",    "inproc", "nft",   "proxy",
                                         "signal", "link",   "runner"};
_Static_assert(sizeof exec_names / sizeof exec_names[0] == 7 && DDP_EXEC_RUNNER == 1 << 6,
               "one name per DDP_EXEC_* bit, in bit order");

const char *ddp_fault_exec_names(unsigned mask, char *buf, size_t n)
{
    size_t off = 0;
    snprintf(buf, n, "none");
    for (unsigned i = 0; i < sizeof exec_names / sizeof exec_names[0] && off < n; i++)
        if (mask & 1u << i)
            off += (size_t)snprintf(buf + off, n - off, "%s%s", off ? ", " : "",
                                    exec_names[i]);
    return buf;
}

int ddp_fault_kind_parse(const char *name, ddp_fault_kind_t *out)
{
    for (int i = 0; i < DDP_FAULT_KIND_COUNT; i++)
        if (name && !strcasecmp(name, kinds[i].name)) {
            *out = (ddp_fault_kind_t)i;
            return 0;
        }
    char list[256];
    return ddp_err_set(DDP_ECONFIG, "unknown fault kind \"%s\"; expected one of %s",
                       name ? name : "", ddp_fault_kind_list(list, sizeof list));
}

/* ---- rank sets ---- */

#define RANK_TOP (1 << 30)

static int rank_at(const char **p, int *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return -1;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s++ - '0');
        if (v > RANK_TOP)
            return -1;
    }
    *out = (int)v;
    *p = s;
    return 0;
}

int ddp_rankset_parse(const char *text, ddp_rankset_t *out)
{
    out->n = 0;
    if (!text || !*text)
        return 0;
    const char *p = text;
    for (;;) {
        const char *part = p;
        int lo, hi;
        if (rank_at(&p, &lo))
            goto bad;
        hi = lo;
        if (*p == '-') {
            p++;
            if (rank_at(&p, &hi) || hi < lo)
                goto bad;
        }
        if (out->n == DDP_RANKSET_MAX) {
            out->n = 0;
            return ddp_err_set(DDP_ECONFIG, "expected at most %d ranks or ranges, got more "
                                            "(in \"%.60s\")",
                               DDP_RANKSET_MAX, text);
        }
        out->r[out->n].lo = lo;
        out->r[out->n].hi = hi;
        out->n++;
        if (!*p)
            return 0;
        if (*p != ',')
            goto bad;
        p++;
        continue;
    bad:
        out->n = 0;
        return ddp_err_set(DDP_ECONFIG, "expected a rank (0..%d) or a range a-b with a <= b, "
                                        "got \"%.40s\" (in \"%.60s\")",
                           RANK_TOP, part, text);
    }
}

int ddp_rankset_has(const ddp_rankset_t *s, int rank)
{
    if (!s->n)
        return 1;
    for (int i = 0; i < s->n; i++)
        if (rank >= s->r[i].lo && rank <= s->r[i].hi)
            return 1;
    return 0;
}

int ddp_rankset_max(const ddp_rankset_t *s)
{
    int top = -1;
    for (int i = 0; i < s->n; i++)
        if (s->r[i].hi > top)
            top = s->r[i].hi;
    return top;
}

/* ---- triggers ---- */

static const struct {
    const char *name;
    int arg; /* 0 none, 1 a name, 2 a count */
    int ranks; /* may take @RANKS */
} trig[DDP_TRIG_COUNT] = {
    [DDP_TRIG_TIME] = {"time", 0, 0},       [DDP_TRIG_ENTER] = {"enter", 1, 1},
    [DDP_TRIG_LEAVE] = {"leave", 1, 1},     [DDP_TRIG_CONNECT] = {"connect", 0, 1},
    [DDP_TRIG_JOINED] = {"joined", 2, 0},   [DDP_TRIG_SET] = {"set", 1, 0},
    [DDP_TRIG_WAIT] = {"wait", 1, 1},       [DDP_TRIG_BARRIER] = {"barrier", 0, 0},
    [DDP_TRIG_SPAWN] = {"spawn", 0, 1},     [DDP_TRIG_EXIT] = {"exit", 0, 1},
    [DDP_TRIG_MARK] = {"mark", 1, 0},
};

const char *ddp_trigger_kind_name(ddp_trigger_kind_t k)
{
    return k >= 0 && k < DDP_TRIG_COUNT ? trig[k].name : "?";
}

#define TRIG_EXPECT                                                                     \
    "a time or an event (enter:PHASE, leave:PHASE, connect, joined:N, set:GLOB, "       \
    "wait:GLOB, barrier, spawn, exit, mark:NAME; @RANKS and +OFFSET may follow)"

int ddp_trigger_parse(const char *text, ddp_fault_trigger_t *out)
{
    memset(out, 0, sizeof *out);
    char buf[160];
    if (!text || strlen(text) >= sizeof buf)
        return ddp_err_set(DDP_ECONFIG, "expected %s, got a text of %zu characters",
                           TRIG_EXPECT, text ? strlen(text) : 0);
    strcpy(buf, text);
    char *at = strchr(buf, '@');
    if (at)
        *at++ = '\0';
    char *colon = strchr(buf, ':');
    if (colon)
        *colon++ = '\0';
    int k = 1;
    while (k < DDP_TRIG_COUNT && strcmp(trig[k].name, buf))
        k++;
    if (k == DDP_TRIG_COUNT)
        return ddp_err_set(DDP_ECONFIG, "expected %s, got \"%.60s\"", TRIG_EXPECT, text);
    out->kind = (ddp_trigger_kind_t)k;
    if (trig[k].arg && (!colon || !*colon))
        return ddp_err_set(DDP_ECONFIG, "expected %s:%s, got \"%.60s\"", trig[k].name,
                           trig[k].arg == 2 ? "N (a client count)" : "NAME", text);
    if (!trig[k].arg && colon)
        return ddp_err_set(DDP_ECONFIG, "expected %s without :, got \"%.60s\"", trig[k].name,
                           text);
    if (trig[k].arg == 2) {
        char *e;
        long n = strtol(colon, &e, 10);
        if (*e || n < 1 || n > RANK_TOP)
            return ddp_err_set(DDP_ECONFIG, "expected joined:N with N >= 1, got \"%.60s\"",
                               text);
        out->n = (int)n;
    } else if (colon) {
        if (strlen(colon) >= sizeof out->arg)
            return ddp_err_set(DDP_ECONFIG, "expected a name of at most %zu characters after "
                                            "%s:, got one of %zu",
                               sizeof out->arg - 1, trig[k].name, strlen(colon));
        strcpy(out->arg, colon);
    }
    if (at) {
        if (!trig[k].ranks)
            return ddp_err_set(DDP_ECONFIG, "expected %s without @RANKS (the store sees it "
                                            "for the whole job), got \"%.60s\"",
                               trig[k].name, text);
        ddp_rankset_t rs;
        if (strlen(at) >= sizeof out->ranks || ddp_rankset_parse(at, &rs) || !*at)
            return ddp_err_set(DDP_ECONFIG, "expected ranks after @ (such as @1 or @0,2-3), "
                                            "got \"@%.40s\"",
                               at);
        strcpy(out->ranks, at);
    }
    return 0;
}

int ddp_trigger_format(const ddp_fault_trigger_t *t, char *buf, size_t n)
{
    if (t->kind <= DDP_TRIG_TIME || t->kind >= DDP_TRIG_COUNT)
        return snprintf(buf, n, "%s", "");
    int len = trig[t->kind].arg == 2   ? snprintf(buf, n, "%s:%d", trig[t->kind].name, t->n)
              : trig[t->kind].arg == 1 ? snprintf(buf, n, "%s:%s", trig[t->kind].name, t->arg)
                                       : snprintf(buf, n, "%s", trig[t->kind].name);
    if (t->ranks[0] && len >= 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, "@%s", t->ranks);
    return len;
}

/* ---- the observer and the call hook ---- */

/* One observer and one call hook per process, set before the run whose
 * code calls them (the simulator arms its own at each run; a real process
 * once). The argument is stored before the function and read after it. */
static _Atomic(ddp_fault_observer_fn) observer;
static _Atomic(ddp_fault_call_fn) call_hook;
static void *_Atomic observer_arg, *_Atomic call_arg;

void ddp_fault_observe(ddp_fault_observer_fn fn, void *arg)
{
    atomic_store(&observer_arg, arg);
    atomic_store(&observer, fn);
}

int ddp_fault_observed(void) { return atomic_load_explicit(&observer, memory_order_relaxed) != NULL; }

void ddp_fault_notify(const ddp_fault_event_t *ev)
{
    ddp_fault_observer_fn fn = atomic_load(&observer);
    if (fn)
        fn(atomic_load(&observer_arg), ev);
}

void ddp_fault_on_call(ddp_fault_call_fn fn, void *arg)
{
    atomic_store(&call_arg, arg);
    atomic_store(&call_hook, fn);
}

int ddp_fault_fire_call(const ddp_fault_call_t *c)
{
    ddp_fault_call_fn fn = atomic_load(&call_hook);
    int e = 0;
    if (fn && fn(atomic_load(&call_arg), c, &e) && e > 0)
        return ddp_err_set(-e, "fault point %s fired (%s)", ddp_fault_name(c->point),
                           strerror(e));
    return ddp_fault_fire(c->point);
}

/* ---- the faultset ---- */

int ddp_faultset_init(ddp_faultset_t *fs, const ddp_fault_t *faults, int n, int64_t t0,
                      ddp_rng_t *rng, int world)
{
    memset(fs, 0, sizeof *fs);
    fs->faults = faults;
    fs->n = n;
    fs->rng = rng;
    fs->world = world;
    if (n > 0 && !(fs->st = calloc((size_t)n, sizeof *fs->st)))
        return ddp_err_set(-ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const ddp_fault_t *f = &faults[i];
        ddp_fault_state_t *s = &fs->st[i];
        if (ddp_rankset_parse(f->ranks, &s->ranks) ||
            ddp_rankset_parse(f->start_on.ranks, &s->start_ranks) ||
            ddp_rankset_parse(f->end_on.ranks, &s->end_ranks)) {
            ddp_faultset_free(fs);
            return DDP_ECONFIG;
        }
        s->open_at = f->start_on.kind == DDP_TRIG_TIME ? t0 + f->start_ns : DDP_FAULT_NEVER;
        s->close_at = f->start_on.kind == DDP_TRIG_TIME && f->end_on.kind == DDP_TRIG_TIME &&
                              f->end_ns
                          ? t0 + f->end_ns
                          : DDP_FAULT_NEVER; /* an event's: set when it opens or closes */
        fs->events += ddp_fault_has_event(f);
    }
    return 0;
}

void ddp_faultset_free(ddp_faultset_t *fs)
{
    free(fs->st);
    fs->st = NULL;
    fs->n = 0;
}

/* A store key as the program named it matches glob: the key on the wire,
 * or what follows any '/' in it (TCPStore's "/" key prefix, a
 * PrefixStore's "default_pg/", torch's agent store "/worker/attempt_0/"). */
static int key_matches(const char *glob, const char *key)
{
    for (const char *k = key; k; k = strchr(k, '/'), k = k ? k + 1 : NULL)
        if (!fnmatch(glob, k, 0))
            return 1;
    return 0;
}

/* Does the event fire trigger t (with its parsed rank set)? */
static int fires(const ddp_faultset_t *fs, const ddp_fault_trigger_t *t,
                 const ddp_rankset_t *rs, const ddp_fault_event_t *ev)
{
    int ranked = rs->n == 0 || (ev->rank >= 0 && ddp_rankset_has(rs, ev->rank));
    const char *name = ev->name ? ev->name : "";
    switch (t->kind) {
    case DDP_TRIG_ENTER:
    case DDP_TRIG_LEAVE:
        return ev->kind == t->kind && ranked && !strcmp(name, t->arg);
    case DDP_TRIG_CONNECT:
    case DDP_TRIG_SPAWN:
    case DDP_TRIG_EXIT:
        return ev->kind == t->kind && ranked;
    case DDP_TRIG_JOINED:
        return ev->kind == DDP_TRIG_JOINED && ev->value >= t->n;
    case DDP_TRIG_SET:
    case DDP_TRIG_WAIT:
        return ev->kind == t->kind && ranked && key_matches(t->arg, name);
    case DDP_TRIG_BARRIER:
        /* the store-based barrier (torch's and ddpsim's): the ADD that
         * brings store_based_barrier_key... to the world size */
        return ev->kind == DDP_TRIG_SET && fs->world > 0 && ev->value >= fs->world &&
               strstr(name, "store_based_barrier_key");
    case DDP_TRIG_MARK: {
        /* ddpsim/mark/NAME, also under a store prefix ("/worker/attempt_0/"
         * of torch's agent store, "default_pg/" of a PrefixStore) */
        const char *m = NULL;
        for (const char *p = strstr(name, DDP_MARK_PREFIX); p; p = strstr(p + 1, DDP_MARK_PREFIX))
            if (p == name || p[-1] == '/')
                m = p;
        return ev->kind == DDP_TRIG_SET && m && !strcmp(m + strlen(DDP_MARK_PREFIX), t->arg);
    }
    default:
        return 0;
    }
}

int ddp_faultset_event(ddp_faultset_t *fs, const ddp_fault_event_t *ev, int64_t now)
{
    int changed = 0;
    if (!fs->events)
        return 0;
    for (int i = 0; i < fs->n; i++) {
        const ddp_fault_t *f = &fs->faults[i];
        ddp_fault_state_t *s = &fs->st[i];
        if (f->start_on.kind != DDP_TRIG_TIME && s->open_at == DDP_FAULT_NEVER &&
            fires(fs, &f->start_on, &s->start_ranks, ev)) {
            s->open_at = now + f->start_ns;
            /* with an event start, a time end is the window's length */
            if (f->end_on.kind == DDP_TRIG_TIME && f->end_ns)
                s->close_at = s->open_at + f->end_ns;
            changed++;
        }
        if (f->end_on.kind != DDP_TRIG_TIME && s->open_at != DDP_FAULT_NEVER &&
            s->close_at == DDP_FAULT_NEVER && fires(fs, &f->end_on, &s->end_ranks, ev)) {
            s->close_at = now + f->end_ns;
            changed++;
        }
    }
    return changed;
}

int ddp_faultset_wants(const ddp_faultset_t *fs, const ddp_fault_event_t *ev)
{
    for (int i = 0; fs->events && i < fs->n; i++) {
        const ddp_fault_t *f = &fs->faults[i];
        const ddp_fault_state_t *s = &fs->st[i];
        if ((f->start_on.kind != DDP_TRIG_TIME && s->open_at == DDP_FAULT_NEVER &&
             fires(fs, &f->start_on, &s->start_ranks, ev)) ||
            (f->end_on.kind != DDP_TRIG_TIME && s->close_at == DDP_FAULT_NEVER &&
             fires(fs, &f->end_on, &s->end_ranks, ev)))
            return 1;
    }
    return 0;
}

int ddp_faultset_active(const ddp_faultset_t *fs, int i, int64_t now)
{
    const ddp_fault_state_t *s = &fs->st[i];
    return now >= s->open_at && now < s->close_at;
}

int ddp_faultset_aims(const ddp_faultset_t *fs, int i, int node, int rank, int task)
{
    const ddp_fault_t *f = &fs->faults[i];
    const ddp_fault_state_t *s = &fs->st[i];
    return (f->task < 0 || f->task == task) && (f->node < 0 || f->node == node) &&
           (s->ranks.n == 0 || (rank >= 0 && ddp_rankset_has(&s->ranks, rank)));
}

int ddp_faultset_draw(ddp_faultset_t *fs, int i)
{
    const ddp_fault_t *f = &fs->faults[i];
    ddp_fault_state_t *s = &fs->st[i];
    if (f->count > 0 && s->fired >= f->count)
        return 0;
    if (f->probability > 0 && f->probability < 1 && fs->rng &&
        ddp_rng_double(fs->rng) >= f->probability)
        return 0;
    s->fired++;
    return 1;
}

/* The errno fault f gives call c, 0 when f does not act on such a call. */
static int effect(const ddp_fault_t *f, const ddp_fault_call_t *c)
{
    switch (c->point) {
    case DDP_FP_SYS_NET_RESOLVE:
        return f->kind == DDP_FAULT_RESOLVE ? EHOSTUNREACH : 0;
    case DDP_FP_SYS_NET_CONNECT:
        if ((f->peer_node >= 0 && f->peer_node != c->peer_node) ||
            (f->port && f->port != c->port))
            return 0;
        return f->kind == DDP_FAULT_REFUSE      ? ECONNREFUSED
               : f->kind == DDP_FAULT_BLACKHOLE ? ETIMEDOUT
               : f->kind == DDP_FAULT_RESET && f->after_bytes <= 0 ? ECONNRESET
                                                                  : 0;
    case DDP_FP_DDP_PHASE_ENTER:
        if (f->kind == DDP_FAULT_STALL) /* at phase= or at any phase change */
            return c->phase && (!f->phase || !strcmp(f->phase, c->phase)) ? EAGAIN : 0;
        return f->kind == DDP_FAULT_CRASH && f->phase && f->phase[0] && c->phase &&
                       !strcmp(f->phase, c->phase)
                   ? EINTR
                   : 0;
    default:
        if (f->kind != DDP_FAULT_POINT || !f->point ||
            strcmp(f->point, ddp_fault_name(c->point)))
            return 0;
        return ddp_fault_info(c->point)->deferr > 0 ? ddp_fault_info(c->point)->deferr : EIO;
    }
}

int ddp_faultset_match(ddp_faultset_t *fs, const ddp_fault_call_t *c, int *err)
{
    for (int i = 0; i < fs->n; i++) {
        int e = effect(&fs->faults[i], c);
        if (e && ddp_faultset_active(fs, i, c->now) &&
            ddp_faultset_aims(fs, i, c->node, c->rank, c->task) && ddp_faultset_draw(fs, i)) {
            fs->st[i].hits++;
            if (err)
                *err = e;
            return i;
        }
    }
    return -1;
}
