/* harness/explore.c — `ddpsim explore`: random fault schedules, the invariants
 * checked on every run, and a greedy shrinker for each violation
 * (docs/explore.md).
 *
 * Run i of seed S is drawn from a ddp_rng_t seeded with a mix of S and i, so
 * any run can be drawn again on its own. Each run is a scenario (cluster,
 * accelerator, faults, `expect invariants`) run by ddp_scenario_run, which
 * checks the invariants. A violating scenario is shrunk (fewest faults, then
 * the smallest cluster, then simpler faults), written in the file format,
 * parsed back and run again to check that the replay is identical.
 *
 * Wall time is read here only for the figures (runs/s); it never reaches a
 * decision, so the runs, the shrinking and the output are deterministic.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/host.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"
#include "progress.h"
#include "scenario_priv.h"

/* Explore's runs: a short group deadline keeps stalled runs cheap (virtual
 * waits cost no wall time, but rank 0 polls the store every 10 ms). */
#define EXPLORE_TIMEOUT_NS (30 * DDP_NS_PER_S)
#define EXPLORE_MAX_PER_NODE 64 /* processes one node script may launch */
#define SHRINK_MAX_RUNS 400     /* bound on the runs one shrink may cost */

static const char *const explore_accels[] = {"ddp",     "ddp_spawn", "ddp_cpu",
                                             "ddp2",    "ddp_hpc",   "ddp_cpu_hpc"};
#define NACCELS (sizeof explore_accels / sizeof explore_accels[0])

static const char *const explore_phases[] = {"store connect", "wait for workers",
                                             "process group init", "barrier",
                                             "configure_ddp"};
#define NPHASES (sizeof explore_phases / sizeof explore_phases[0])

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static char *dup_str(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d)
        abort();
    memcpy(d, s, n);
    return d;
}

/* ---- scenarios: world size, copies, text ---- */

static int is_ddp2(const char *accel) { return !strcmp(accel, "ddp2"); }

static int world_of(const ddp_scenario_t *s, const char *accel)
{
    return is_ddp2(accel) ? s->nodes : s->nodes * s->devices;
}

/* Ownership as ddp_scenario_free has it: host names, environment values and
 * each fault's ranks are malloc'd; a fault's phase points to static text
 * (the parser's table, explore_phases here).
 *
 * Frees what a scenario owns and clears the pointers: for the fresh
 * scenario a copy overwrites. */
static void scn_release(ddp_scenario_t *c)
{
    for (int i = 0; c->hosts && i < c->nhosts; i++)
        free(c->hosts[i]);
    free(c->hosts);
    for (int i = 0; c->env && i < c->nenv; i++)
        free(c->env[i].value);
    free(c->env);
    for (int i = 0; i < c->nfaults; i++)
        free((char *)c->faults[i].ranks);
    c->hosts = NULL;
    c->env = NULL;
    c->nhosts = c->nenv = c->nfaults = 0;
}

/* A deep copy (phase pointers are shared: static text). */
static ddp_scenario_t *scn_clone(const ddp_scenario_t *s)
{
    ddp_scenario_t *c = ddp_scenario_new();
    if (!c)
        abort();
    scn_release(c);
    *c = *s;
    c->hosts = NULL;
    c->env = NULL;
    if (s->hosts && s->nhosts > 0) {
        c->hosts = calloc((size_t)s->nhosts, sizeof *c->hosts);
        if (!c->hosts)
            abort();
        for (int i = 0; i < s->nhosts; i++)
            c->hosts[i] = dup_str(s->hosts[i]);
    }
    if (s->env && s->nenv > 0) {
        c->env = calloc((size_t)s->nenv, sizeof *c->env);
        if (!c->env)
            abort();
        for (int i = 0; i < s->nenv; i++) {
            c->env[i] = s->env[i];
            c->env[i].value = dup_str(s->env[i].value);
        }
    }
    for (int i = 0; i < s->nfaults; i++)
        c->faults[i].ranks = dup_str(s->faults[i].ranks);
    return c;
}

static void fault_free(ddp_fault_t *f)
{
    free((char *)f->ranks);
    f->ranks = NULL;
}

static void drop_fault(ddp_scenario_t *s, int i)
{
    fault_free(&s->faults[i]);
    memmove(&s->faults[i], &s->faults[i + 1],
            sizeof s->faults[0] * (size_t)(s->nfaults - i - 1));
    memmove(&s->fault_line[i], &s->fault_line[i + 1],
            sizeof s->fault_line[0] * (size_t)(s->nfaults - i - 1));
    s->nfaults--;
    memset(&s->faults[s->nfaults], 0, sizeof s->faults[0]);
    s->fault_line[s->nfaults] = 0;
}

/* ---- drawing ---- */

/* Log-uniform in [lo, hi] ns: most fault windows must overlap the first
 * milliseconds, when a clean init happens, yet some reach far. */
static int64_t draw_log(ddp_rng_t *r, int64_t lo, int64_t hi)
{
    double a = log((double)lo), b = log((double)hi);
    int64_t v = (int64_t)exp(a + (b - a) * ddp_rng_double(r));
    return v < lo ? lo : v > hi ? hi : v;
}

static int draw_node(ddp_rng_t *r, int nodes, int any_pct)
{
    if ((int)ddp_rng_below(r, 100) < any_pct)
        return -1;
    return (int)ddp_rng_below(r, (uint64_t)nodes);
}

static char *draw_rank(ddp_rng_t *r, int world)
{
    char b[16];
    snprintf(b, sizeof b, "%d", (int)ddp_rng_below(r, (uint64_t)world));
    return dup_str(b);
}

/* A window [start, end) inside the group timeout: from 0 half the time. */
static void draw_window(ddp_rng_t *r, ddp_fault_t *f, int forever_pct)
{
    f->start_ns = ddp_rng_below(r, 2) ? 0
                                      : draw_log(r, DDP_NS_PER_MS / 2,
                                                 EXPLORE_TIMEOUT_NS / 2);
    if ((int)ddp_rng_below(r, 100) < forever_pct)
        f->end_ns = 0;
    else
        f->end_ns = f->start_ns + draw_log(r, DDP_NS_PER_MS, EXPLORE_TIMEOUT_NS / 2);
}

/* A fault point of the tcp backend or the store (ddp/faults.h), uniformly:
 * the protocol steps whose error paths the other kinds reach only through
 * the network. */
static const char *draw_point(ddp_rng_t *r)
{
    const char *pts[DDP_FP_COUNT];
    int n = 0;
    for (int id = 0; id < DDP_FP_COUNT; id++) {
        const ddp_fault_info_t *fp = ddp_fault_info((ddp_fault_id_t)id);
        if (fp->layer == DDP_FP_LAYER_PG_TCP || fp->layer == DDP_FP_LAYER_STORE_CLIENT ||
            fp->layer == DDP_FP_LAYER_STORE_SERVER)
            pts[n++] = fp->name;
    }
    return pts[ddp_rng_below(r, (uint64_t)n)];
}

/* A phase to aim at: the default plugin's, or (half the time, for a plugin
 * that declares phases of its own) one of the plugin's: its own steps are
 * where its bugs are. The extra draw is made only for such a plugin, so
 * the default's sweeps are the ones they were. */
static const char *draw_phase(ddp_rng_t *r, const ddp_plugin_t *pl)
{
    size_t own = 0;
    while (pl && pl->phases && pl->phases[own])
        own++;
    if (own && ddp_rng_below(r, 2))
        return pl->phases[ddp_rng_below(r, own)];
    return explore_phases[ddp_rng_below(r, NPHASES)];
}

/* Turns fault f's time window into one opened by an event of the job (a
 * rank entering a phase, its store connect, its spawn, the N-th join, the
 * store barrier), its start time becoming a small offset and its end a
 * length. */
static void draw_event(ddp_rng_t *r, int world, const ddp_plugin_t *pl, ddp_fault_t *f)
{
    ddp_fault_trigger_t *t = &f->start_on;
    memset(t, 0, sizeof *t);
    int rank = (int)ddp_rng_below(r, (uint64_t)world);
    switch (ddp_rng_below(r, 5)) {
    case 0:
        t->kind = DDP_TRIG_ENTER;
        snprintf(t->arg, sizeof t->arg, "%s", draw_phase(r, pl));
        snprintf(t->ranks, sizeof t->ranks, "%d", rank);
        break;
    case 1:
        t->kind = DDP_TRIG_CONNECT;
        snprintf(t->ranks, sizeof t->ranks, "%d", rank);
        break;
    case 2:
        t->kind = DDP_TRIG_SPAWN;
        snprintf(t->ranks, sizeof t->ranks, "%d", rank);
        break;
    case 3:
        t->kind = DDP_TRIG_JOINED;
        t->n = 1 + (int)ddp_rng_below(r, (uint64_t)world);
        break;
    default:
        t->kind = DDP_TRIG_BARRIER;
        break;
    }
    int64_t len = f->end_ns ? f->end_ns - f->start_ns : 0;
    f->start_ns = ddp_rng_below(r, 2) ? 0 : draw_log(r, DDP_NS_PER_MS / 10, 50 * DDP_NS_PER_MS);
    f->end_ns = len;
}

/* One fault of kind k on a cluster of `nodes` nodes and `world` ranks.
 * Returns 0 when the kind cannot apply (a partition of one node). */
static int draw_fault(ddp_rng_t *r, ddp_fault_kind_t k, int nodes,
                      int world, const ddp_plugin_t *pl, ddp_fault_t *f)
{
    memset(f, 0, sizeof *f);
    f->kind = k;
    f->node = f->task = f->peer_node = -1;
    switch (k) {
    case DDP_FAULT_REFUSE:
    case DDP_FAULT_RESET:
    case DDP_FAULT_BLACKHOLE:
        f->node = draw_node(r, nodes, 50);
        f->peer_node = draw_node(r, nodes, 60);
        f->port = ddp_rng_below(r, 2) ? 29500 : 0;
        if (k == DDP_FAULT_RESET && ddp_rng_below(r, 2))
            f->after_bytes = 1 + (int64_t)ddp_rng_below(r, 2000);
        f->count = (int)ddp_rng_below(r, 6); /* 0: every call in the window */
        if (ddp_rng_below(r, 4) == 0)
            f->ranks = draw_rank(r, world);
        draw_window(r, f, f->count ? 70 : 20);
        break;
    case DDP_FAULT_DELAY:
        f->node = draw_node(r, nodes, 30);
        f->peer_node = draw_node(r, nodes, 60);
        f->delay_ns = draw_log(r, DDP_NS_PER_MS / 10, DDP_NS_PER_S / 2);
        draw_window(r, f, 40);
        break;
    case DDP_FAULT_PARTITION: {
        if (nodes < 2)
            return 0;
        uint64_t all = (nodes >= 64 ? ~0ull : (1ull << nodes) - 1);
        uint64_t set = 0;
        while (set == 0 || set == all)
            set = ddp_rng_next(r) & all;
        f->node_set = set;
        draw_window(r, f, 25);
        break;
    }
    case DDP_FAULT_CRASH:
        switch (ddp_rng_below(r, 3)) {
        case 0: /* a rank dies as it enters a phase */
            f->phase = draw_phase(r, pl);
            f->ranks = draw_rank(r, world);
            f->count = 1;
            break;
        case 1: /* a rank dies at a time */
            f->ranks = draw_rank(r, world);
            f->start_ns = draw_log(r, DDP_NS_PER_MS / 2, 200 * DDP_NS_PER_MS);
            break;
        default: /* a node dies at a time */
            f->node = (int)ddp_rng_below(r, (uint64_t)nodes);
            f->start_ns = draw_log(r, DDP_NS_PER_MS / 2, 200 * DDP_NS_PER_MS);
            break;
        }
        break;
    case DDP_FAULT_PAUSE:
        if (ddp_rng_below(r, 3))
            f->ranks = draw_rank(r, world);
        else
            f->node = (int)ddp_rng_below(r, (uint64_t)nodes);
        draw_window(r, f, 0); /* a pause needs an end */
        break;
    case DDP_FAULT_RESOLVE:
        f->node = draw_node(r, nodes, 50);
        f->count = (int)ddp_rng_below(r, 6);
        if (ddp_rng_below(r, 4) == 0)
            f->ranks = draw_rank(r, world);
        draw_window(r, f, f->count ? 70 : 20);
        break;
    case DDP_FAULT_POINT:
        f->point = draw_point(r);
        switch (ddp_rng_below(r, 4)) {
        case 0:
        case 1:
            f->ranks = draw_rank(r, world);
            break;
        case 2:
            f->node = (int)ddp_rng_below(r, (uint64_t)nodes);
            break;
        default: /* any rank */
            break;
        }
        f->count = (int)ddp_rng_below(r, 6); /* 0: every check in the window */
        if (ddp_rng_below(r, 4) == 0)
            f->probability = 0.05 + 0.9 * ddp_rng_double(r);
        draw_window(r, f, f->count ? 70 : 20);
        break;
    case DDP_FAULT_BANDWIDTH: /* 8 kbit/s .. 80 mbit/s on one uplink or all */
        f->node = draw_node(r, nodes, 50);
        f->rate_bps = (uint64_t)draw_log(r, 8000, 80 * 1000 * 1000);
        draw_window(r, f, 40);
        break;
    default:
        return 0;
    }
    return 1;
}

/* The node counts explore may use for `ranks`: 1..4 dividing it with at most
 * 64 processes per node; else the fewest nodes that allow that. */
static int node_choices(int ranks, int *out)
{
    int n = 0;
    for (int d = 1; d <= 4 && d <= ranks; d++)
        if (ranks % d == 0 && ranks / d <= EXPLORE_MAX_PER_NODE)
            out[n++] = d;
    for (int d = 5; n == 0 && d <= ranks; d++)
        if (ranks % d == 0 && ranks / d <= EXPLORE_MAX_PER_NODE)
            out[n++] = d;
    return n;
}

ddp_scenario_t *ddp_explore_draw(const ddp_explore_opts_t *o, int i, char *accel,
                                 size_t accel_len)
{
    int ranks = o->ranks > 0 ? o->ranks : 16;
    int max_faults = o->max_faults < 0 ? 0 : o->max_faults ? o->max_faults : 3;
    if (max_faults > DDP_SCN_MAX_FAULTS)
        max_faults = DDP_SCN_MAX_FAULTS;
    int choices[8];
    int nchoices = node_choices(ranks, choices);
    if (nchoices == 0) {
        ddp_err_set(DDP_ECONFIG, "explore: %d ranks cannot be split into nodes "
                                 "of at most %d processes",
                    ranks, EXPLORE_MAX_PER_NODE);
        return NULL;
    }
    ddp_rng_t r;
    ddp_rng_seed(&r, mix64(o->seed) ^ mix64(0x6578706c6f7265ull + (uint64_t)i));

    ddp_scenario_t *s = ddp_scenario_new();
    if (!s) {
        ddp_err_set(-12, "out of memory");
        return NULL;
    }
    const char *a = o->accelerator && *o->accelerator
                        ? o->accelerator
                        : explore_accels[ddp_rng_below(&r, NACCELS)];
    snprintf(accel, accel_len, "%s", a);
    s->nodes = choices[ddp_rng_below(&r, (uint64_t)nchoices)];
    s->devices = ranks / s->nodes;
    snprintf(s->name, sizeof s->name, "explore seed %" PRIu64 " run %d",
             o->seed, i);
    snprintf(s->tags[0], sizeof s->tags[0], "explore");
    s->ntags = 1;
    snprintf(s->accels[0], sizeof s->accels[0], "%s", a);
    s->naccels = 1;
    const ddp_plugin_t *pl = o->plugin && *o->plugin ? ddp_plugin_find(o->plugin) : NULL;
    if (pl)
        ddp_scenario_use_plugin(s, pl);
    s->timeout_ns = EXPLORE_TIMEOUT_NS;
    s->store_timeout_ns = EXPLORE_TIMEOUT_NS;
    /* 48 bits: a replay seed that reads well and survives any parser. */
    s->seed = ddp_rng_next(&r) & 0xffffffffffffull;
    if (s->seed == 0)
        s->seed = 1;

    const unsigned kinds_all = DDP_EXPLORE_KINDS_ALL;
    unsigned kinds = o->kinds ? o->kinds : kinds_all;
    ddp_fault_kind_t allowed[DDP_FAULT_KIND_COUNT];
    int nallowed = 0;
    for (int k = 0; k < DDP_FAULT_KIND_COUNT; k++)
        if (kinds >> k & 1)
            allowed[nallowed++] = (ddp_fault_kind_t)k;
    int nf = nallowed ? (int)ddp_rng_below(&r, (uint64_t)max_faults + 1) : 0;
    int world = world_of(s, a);
    for (int k = 0; k < nf; k++) {
        ddp_fault_t f;
        ddp_fault_kind_t kind = allowed[ddp_rng_below(&r, (uint64_t)nallowed)];
        if (draw_fault(&r, kind, s->nodes, world, pl, &f)) {
            /* a random fault may rightly act on nothing: a replay of the
             * run is judged by its expectations, never vacuous */
            f.may_miss = 1;
            s->faults[s->nfaults++] = f;
        }
    }
    /* A third of the windows open on an event of the job instead of a
     * time. Drawn from a stream of their own, so every draw above is the
     * one earlier versions made for the same seed and run. */
    ddp_rng_t ev;
    ddp_rng_seed(&ev, mix64(o->seed) ^ mix64(0x6576656e7473ull + (uint64_t)i));
    for (int k = 0; k < s->nfaults; k++) {
        ddp_fault_t *f = &s->faults[k];
        if (ddp_rng_below(&ev, 3) == 0 && !(f->kind == DDP_FAULT_CRASH && f->phase))
            draw_event(&ev, world, pl, f);
    }
    /* Timing: another link latency in a quarter of the runs; a master that
     * starts late in a tenth, unless --faults narrowed the kinds. */
    if (ddp_rng_below(&r, 4) == 0)
        s->latency_ns = draw_log(&r, 10 * 1000, 20 * DDP_NS_PER_MS);
    if (ddp_rng_below(&r, 10) == 0 && (o->kinds == 0 || o->kinds == kinds_all) &&
        o->max_faults >= 0)
        s->master_late_ns = draw_log(&r, DDP_NS_PER_MS, 20 * DDP_NS_PER_S);
    s->expect[0].kind = DDP_EXPECT_INVARIANTS;
    s->nexpect = 1;
    return s;
}

/* ---- shrinking ---- */

/* Which invariant a `why` names (ddp_scenario_run's texts), so that a
 * shrink keeps the symptom: a deadlock stays a deadlock. 0: unknown. */
static int invariant_class(const char *why)
{
    static const char *const marks[] = {
        "invariant: deadlock",   "simulator's time limit", "never finished",
        "past its deadline",     "(leaked)",               "without naming a cause",
        "disagree on the world", "outside 0..",            "both have rank"};
    const char *inv = strstr(why, "invariant: ");
    for (size_t k = 0; inv && k < sizeof marks / sizeof marks[0]; k++)
        if (strstr(inv, marks[k]))
            return (int)k + 1;
    return 0;
}

typedef struct {
    const char *accel;
    ddp__shrink_pred_fn pred; /* NULL: the same invariant as cls */
    void *pred_arg;
    int cls;            /* the invariant the original run broke (0: any) */
    int runs;           /* runs spent */
    ddp_scn_result_t last; /* the result of the last violating run */
} shrinker_t;

/* Runs c; 1 when it still violates the same invariant. */
static int still_fails(shrinker_t *sh, const ddp_scenario_t *c)
{
    if (sh->runs >= SHRINK_MAX_RUNS)
        return 0;
    sh->runs++;
    ddp_scn_result_t r;
    memset(&r, 0, sizeof r);
    if (sh->pred) {
        if (!sh->pred(sh->pred_arg, c, sh->accel, &r))
            return 0;
        sh->last = r;
        return 1;
    }
    ddp_scn_run_opts_t ro = {0};
    if (ddp_scenario_run(c, sh->accel, &ro, &r) != 0 || r.invariants_ok)
        return 0;
    if (sh->cls && invariant_class(r.why) != sh->cls)
        return 0;
    sh->last = r;
    return 1;
}

/* Re-aims c's faults at a cluster of c->nodes x c->devices: a fault aimed
 * past it is dropped, a rank list keeps the ranks that exist. */
/* The part of rank list `list` below `world`, written back into out; 0
 * when nothing is left. */
static int clip_ranks(const char *list, int world, char *out, size_t n)
{
    ddp_rankset_t rs;
    size_t off = 0;
    out[0] = '\0';
    if (ddp_rankset_parse(list, &rs))
        return 0;
    for (int k = 0; k < rs.n && off + 24 < n; k++) {
        int lo = rs.r[k].lo, hi = rs.r[k].hi < world - 1 ? rs.r[k].hi : world - 1;
        if (lo > hi)
            continue;
        off += (size_t)(lo == hi ? snprintf(out + off, n - off, "%s%d", off ? "," : "", lo)
                                 : snprintf(out + off, n - off, "%s%d-%d", off ? "," : "", lo,
                                            hi));
    }
    return out[0] != '\0';
}

static void fit_faults(ddp_scenario_t *c, const char *accel)
{
    int world = world_of(c, accel);
    uint64_t all = c->nodes >= 64 ? ~0ull : (1ull << c->nodes) - 1;
    for (int i = 0; i < c->nfaults; i++) {
        ddp_fault_t *f = &c->faults[i];
        int drop = f->node >= c->nodes || f->peer_node >= c->nodes;
        if (f->kind == DDP_FAULT_PARTITION) {
            f->node_set &= all;
            drop |= f->node_set == 0 || f->node_set == all;
        }
        if (f->ranks && *f->ranks) {
            char kept[128];
            if (!clip_ranks(f->ranks, world, kept, sizeof kept))
                drop = 1;
            else if (strcmp(kept, f->ranks)) {
                free((char *)f->ranks);
                f->ranks = dup_str(kept);
            }
        }
        ddp_fault_trigger_t *tr[2] = {&f->start_on, &f->end_on};
        for (int k = 0; k < 2; k++) { /* an event of a rank the world lost */
            char kept[sizeof tr[k]->ranks];
            if (tr[k]->ranks[0] && !clip_ranks(tr[k]->ranks, world, kept, sizeof kept))
                drop = 1;
            else if (tr[k]->ranks[0])
                snprintf(tr[k]->ranks, sizeof tr[k]->ranks, "%s", kept);
            if (tr[k]->kind == DDP_TRIG_JOINED && tr[k]->n > world)
                tr[k]->n = world;
        }
        if (drop)
            drop_fault(c, i--);
    }
}

/* Tries removing each fault; returns the accepted removals. */
static int shrink_faults(shrinker_t *sh, ddp_scenario_t **cur)
{
    int steps = 0;
    for (int i = 0; i < (*cur)->nfaults;) {
        ddp_scenario_t *c = scn_clone(*cur);
        drop_fault(c, i);
        if (still_fails(sh, c)) {
            ddp_scenario_free(*cur);
            *cur = c;
            steps++;
        } else {
            ddp_scenario_free(c);
            i++;
        }
    }
    return steps;
}

/* A rank list with one entry replaced ("9" -> "1"), or NULL. */
static char *replace_rank(const char *list, int idx, long to)
{
    char out[128] = "";
    size_t off = 0;
    int k = 0;
    for (const char *p = list; *p; k++) {
        char *end;
        long rk = strtol(p, &end, 10);
        if (end == p || off + 24 >= sizeof out)
            return NULL;
        off += (size_t)snprintf(out + off, sizeof out - off, "%s%ld", off ? "," : "",
                                k == idx ? to : rk);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return NULL;
    }
    return dup_str(out);
}

/* The k-th rank of a list (-1: none, or a range "2-5" there: ranges are
 * left as they are). */
static long rank_at(const char *list, int idx)
{
    int k = 0;
    for (const char *p = list; p && *p; k++) {
        char *end;
        long rk = strtol(p, &end, 10);
        if (end == p || *end == '-')
            return -1;
        if (k == idx)
            return rk;
        p = *end == ',' ? end + 1 : end;
    }
    return -1;
}

/* The value of target `which` of fault f: 0 node, 1 peer node, 2.. the
 * (which-2)-th rank of its list (-1: none). */
static long target_of(const ddp_fault_t *f, int which)
{
    return which == 0 ? f->node : which == 1 ? f->peer_node
                                             : f->ranks ? rank_at(f->ranks, which - 2) : -1;
}

static int set_target(ddp_fault_t *f, int which, long v)
{
    if (which == 0)
        f->node = (int)v;
    else if (which == 1)
        f->peer_node = (int)v;
    else {
        char *nr = replace_rank(f->ranks, which - 2, v);
        if (!nr)
            return -1;
        free((char *)f->ranks);
        f->ranks = nr;
    }
    return 0;
}

/* Lower targets: a fault aimed at rank 9 or node 3 may fail the same way
 * aimed at rank 1 or node 1, which a smaller cluster still has. Tries 0, 1
 * and half the number, lowest first, until none still fails. */
static int shrink_targets(shrinker_t *sh, ddp_scenario_t **cur)
{
    int steps = 0;
    for (int i = 0; i < (*cur)->nfaults; i++) {
        for (int which = 0; which < 2 + 16; which++) {
            if (which >= 2 && target_of(&(*cur)->faults[i], which) < 0)
                break;
            for (int progress = 1; progress;) {
                progress = 0;
                long v = target_of(&(*cur)->faults[i], which);
                long cand[3] = {0, 1, v / 2};
                for (int c = 0; c < 3 && v > 0 && !progress; c++) {
                    if (cand[c] >= v || (c == 2 && cand[2] <= 1))
                        continue;
                    ddp_scenario_t *t = scn_clone(*cur);
                    if (set_target(&t->faults[i], which, cand[c]) == 0 &&
                        still_fails(sh, t)) {
                        ddp_scenario_free(*cur);
                        *cur = t;
                        steps++;
                        progress = 1;
                    } else {
                        ddp_scenario_free(t);
                    }
                }
            }
        }
    }
    return steps;
}

static int try_cluster(shrinker_t *sh, ddp_scenario_t **cur, int nodes, int devices)
{
    ddp_scenario_t *c = scn_clone(*cur);
    c->nodes = nodes;
    c->devices = devices;
    while (c->hosts && c->nhosts > nodes) /* keep the names of the rest */
        free(c->hosts[--c->nhosts]);
    fit_faults(c, sh->accel);
    if (still_fails(sh, c)) {
        ddp_scenario_free(*cur);
        *cur = c;
        return 1;
    }
    ddp_scenario_free(c);
    return 0;
}

/* Fewer nodes, then fewer devices: the smallest first. */
static int shrink_cluster(shrinker_t *sh, ddp_scenario_t **cur)
{
    int steps = 0;
    for (int n = 1; n < (*cur)->nodes; n++)
        if (try_cluster(sh, cur, n, (*cur)->devices)) {
            steps++;
            break;
        }
    for (int d = 1; d < (*cur)->devices; d++)
        if (try_cluster(sh, cur, (*cur)->nodes, d)) {
            steps++;
            break;
        }
    return steps;
}

/* Simpler faults: from t = 0, one firing, always (no probability), shorter
 * windows, smaller delays. */
static int shrink_params(shrinker_t *sh, ddp_scenario_t **cur)
{
    int steps = 0;
    for (int i = 0; i < (*cur)->nfaults; i++) {
        for (int attempt = 0; attempt < 6; attempt++) {
            ddp_scenario_t *c = scn_clone(*cur);
            ddp_fault_t *f = &c->faults[i];
            int changed = 0;
            int timed_crash = f->kind == DDP_FAULT_CRASH && !(f->phase && *f->phase);
            switch (attempt) {
            case 0: /* start at 0 (a timed crash keeps its time) */
                if (f->start_ns > 0 && !timed_crash) {
                    if (f->end_ns)
                        f->end_ns -= f->start_ns;
                    f->start_ns = 0;
                    changed = 1;
                }
                break;
            case 1:
                if (f->count != 1 && f->kind != DDP_FAULT_DELAY &&
                    f->kind != DDP_FAULT_PARTITION && f->kind != DDP_FAULT_PAUSE &&
                    f->kind != DDP_FAULT_BANDWIDTH && !timed_crash) {
                    f->count = 1;
                    changed = 1;
                }
                break;
            case 2:
                if (f->probability > 0 && f->probability < 1) {
                    f->probability = 0;
                    changed = 1;
                }
                break;
            case 3: /* a forever window -> the run's deadline */
                if (f->end_ns == 0 && !timed_crash && f->kind != DDP_FAULT_CRASH) {
                    f->end_ns = f->start_ns + EXPLORE_TIMEOUT_NS;
                    changed = 1;
                }
                break;
            case 4: /* half the window */
                if (f->end_ns > f->start_ns + DDP_NS_PER_MS) {
                    f->end_ns = f->start_ns + (f->end_ns - f->start_ns) / 2;
                    changed = 1;
                }
                break;
            case 5:
                if (f->kind == DDP_FAULT_DELAY && f->delay_ns > DDP_NS_PER_MS / 10) {
                    f->delay_ns /= 2;
                    changed = 1;
                } else if (f->kind == DDP_FAULT_BANDWIDTH && f->rate_bps <= DDP_SIM_RATE_MAX / 2) {
                    f->rate_bps *= 2; /* a milder limit */
                    changed = 1;
                }
                break;
            }
            if (changed && still_fails(sh, c)) {
                ddp_scenario_free(*cur);
                *cur = c;
                steps++;
                if (attempt >= 4)
                    attempt--; /* halve again while it still fails */
            } else {
                ddp_scenario_free(c);
            }
        }
    }
    return steps;
}

/* The default latency and an on-time master, when the failure stays. */
static int shrink_timing(shrinker_t *sh, ddp_scenario_t **cur)
{
    int steps = 0;
    for (int which = 0; which < 2; which++) {
        int64_t *v = which ? &(*cur)->master_late_ns : &(*cur)->latency_ns;
        if (*v == 0)
            continue;
        ddp_scenario_t *c = scn_clone(*cur);
        if (which)
            c->master_late_ns = 0;
        else
            c->latency_ns = 0;
        if (still_fails(sh, c)) {
            ddp_scenario_free(*cur);
            *cur = c;
            steps++;
        } else {
            ddp_scenario_free(c);
        }
    }
    return steps;
}

static ddp_scenario_t *shrink(const ddp_scenario_t *s, const char *accel,
                              const char *cls_of_run, int *steps, shrinker_t *sh)
{
    sh->accel = accel;
    sh->runs = 0;
    memset(&sh->last, 0, sizeof sh->last);
    sh->cls = 0;
    if (sh->pred) {
        /* the predicate knows what it keeps */
    } else if (cls_of_run) {
        sh->cls = invariant_class(cls_of_run);
    } else {
        /* Which invariant does s break? (one run) */
        ddp_scn_result_t r;
        memset(&r, 0, sizeof r);
        ddp_scn_run_opts_t ro = {0};
        if (ddp_scenario_run(s, accel, &ro, &r) == 0 && !r.invariants_ok)
            sh->cls = invariant_class(r.why);
        sh->runs++;
    }
    ddp_scenario_t *cur = scn_clone(s);
    int total = 0;
    for (int round = 0; round < 8; round++) {
        int n = shrink_faults(sh, &cur);
        n += shrink_targets(sh, &cur);
        n += shrink_cluster(sh, &cur);
        total += n;
        if (n == 0)
            break;
    }
    total += shrink_params(sh, &cur);
    total += shrink_timing(sh, &cur);
    total += shrink_faults(sh, &cur);
    if (steps)
        *steps = total;
    return cur;
}

ddp_scenario_t *ddp_explore_shrink(const ddp_scenario_t *s, const char *accel,
                                   int *steps)
{
    shrinker_t sh = {0};
    return shrink(s, accel, NULL, steps, &sh);
}

ddp_scenario_t *ddp__explore_shrink_by(const ddp_scenario_t *s, const char *accel,
                                       ddp__shrink_pred_fn pred, void *arg, int *steps,
                                       int *runs, ddp_scn_result_t *last)
{
    shrinker_t sh = {.pred = pred, .pred_arg = arg};
    int n = 0;
    ddp_scenario_t *m = shrink(s, accel, NULL, &n, &sh);
    if (steps)
        *steps = n;
    if (runs)
        *runs = sh.runs;
    if (last && n)
        *last = sh.last;
    return m;
}

/* ---- the loop ---- */

static void print_scenario(FILE *log, const char *label, const char *text)
{
    fprintf(log, "  --- %s ---\n", label);
    if (text) {
        fputs(text, log);
        if (*text && text[strlen(text) - 1] != '\n')
            fputc('\n', log);
    } else {
        fprintf(log, "  (could not write the scenario: %s)\n", ddp_err_message());
    }
    fprintf(log, "  --- end ---\n");
}

static int put_text(FILE *f, void *text)
{
    fputs(text, f); /* a write error is ddp_out_commit's to report */
    return 0;
}

static int write_file(const char *path, const char *text)
{
    return ddp_out_write(path, "the scenario file", put_text, (void *)text);
}

/* Writes DIR/explore-S-I.scn (shrunk) and DIR/explore-S-I-original.scn (as
 * drawn); a text that is NULL, or a file that cannot be written, gets a
 * line on log. 0, or -1 when something was not written. */
static int write_scenarios(const char *dir, uint64_t seed, long long i, const char *shrunk,
                           const char *original, FILE *log)
{
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        char path[1024];
        const char *text = k ? original : shrunk;
        snprintf(path, sizeof path, "%s/explore-%" PRIu64 "-%lld%s.scn", dir, seed, i,
                 k ? "-original" : "");
        if (!text || write_file(path, text) != 0) {
            fprintf(log, "  could not write %s%s%s\n", path, text ? ": " : "",
                    text ? ddp_err_message() : "");
            rc = -1;
        }
    }
    return rc;
}

/* Parses the written text back and runs it: the replay must give the same
 * trace and still violate. */
static void check_replay(FILE *log, const char *text, const char *accel,
                         const ddp_scn_result_t *want)
{
    ddp_scenario_t *p = NULL;
    char err[512] = "";
    if (!text || ddp_scenario_parse(text, "explore.scn", NULL, &p, err, sizeof err)) {
        fprintf(log, "  replay check: the written scenario does not load: %s\n",
                err[0] ? err : ddp_err_message());
        return;
    }
    ddp_scn_result_t r;
    memset(&r, 0, sizeof r);
    ddp_scn_run_opts_t ro = {0};
    if (ddp_scenario_run(p, accel, &ro, &r) != 0)
        fprintf(log, "  replay check: the written scenario does not run: %s\n",
                ddp_err_message());
    else if (r.trace_hash != want->trace_hash || r.pass)
        fprintf(log, "  replay check: DIFFERS: trace hash %016" PRIx64 " (want %016"
                PRIx64 "), expectations %s\n",
                r.trace_hash, want->trace_hash, r.pass ? "held" : "failed");
    else
        fprintf(log, "  replay check: identical (trace hash %016" PRIx64 ")\n",
                r.trace_hash);
    ddp_scenario_free(p);
}

/* The oracle of a run that held every invariant: when no fault acted on
 * anything (every hit count 0, the master on time) the run is a clean run,
 * and a clean run must be ok: a plugin that fails fault-free runs is a
 * violation, whatever its error names. */
#define NOFAULT_WHY "oracle: no fault acted on anything (0 hits), yet the run failed: "

static int clean_ok(const ddp_scn_result_t *r)
{
    return r->failed == 0 && r->crashed == 0 && r->ok > 0;
}

static int nofault_failed(const ddp_scenario_t *s, const ddp_scn_result_t *r)
{
    if (clean_ok(r) || s->master_late_ns || r->skipped)
        return 0;
    for (int i = 0; i < s->nfaults && i < r->nhits; i++)
        if (r->hits[i] > 0)
            return 0;
    return 1;
}

/* The shrinker's predicate for such a run: still no fault acts, still not
 * ok. */
static int still_nofault(void *arg, const ddp_scenario_t *c, const char *accel,
                         ddp_scn_result_t *r)
{
    (void)arg;
    ddp_scn_run_opts_t ro = {0};
    return ddp_scenario_run(c, accel, &ro, r) == 0 && r->invariants_ok && nofault_failed(c, r);
}

/* " --plugin PATH" of a replay command, for a plugin from a library (the
 * scenario's plugin-library line says it too: the command works pasted
 * anywhere, with the scenario file or without --out). */
#define PLUGIN_ARG(s) ((s)->plugin_lib[0] ? " --plugin " : ""), (s)->plugin_lib

/* Reports run i's violation on log. With texts (a result row), the shrunk
 * and the drawn scenario's texts are handed over in it too. */
static void report_violation(const ddp_explore_opts_t *o, FILE *log, int i,
                             const ddp_scenario_t *s, const char *accel,
                             const ddp_scn_result_t *r, ddp_shard_row_t *texts)
{
    fprintf(log, "VIOLATION in run %d (seed %" PRIu64 "): %s on %d node(s) x %d "
                 "device(s), world %d, %d fault(s), sim seed %" PRIu64 "\n",
            i, o->seed, accel, s->nodes, s->devices, world_of(s, accel), s->nfaults,
            s->seed);
    fprintf(log, "  why: %s\n", r->why[0] ? r->why : "(no reason given)");
    int steps = 0;
    int nofault = !strncmp(r->why, NOFAULT_WHY, strlen(NOFAULT_WHY));
    shrinker_t sh = {.pred = nofault ? still_nofault : NULL};
    ddp_scenario_t *m = shrink(s, accel, r->why, &steps, &sh);
    if (nofault) { /* the replay fails where the run was not ok */
        m->expect[0].kind = DDP_EXPECT_OK;
        m->nexpect = 1;
        snprintf(sh.last.why, sizeof sh.last.why, "%s%s", NOFAULT_WHY, sh.last.first_error);
    }
    /* The last kept candidate is m itself; with nothing kept, m is s. */
    ddp_scn_result_t mr = steps ? sh.last : *r;
    snprintf(m->name, sizeof m->name, "explore seed %" PRIu64 " run %d (shrunk)",
             o->seed, i);
    fprintf(log, "  shrunk in %d step(s), %d run(s): %d node(s) x %d device(s), "
                 "world %d, %d fault(s)\n",
            steps, sh.runs, m->nodes, m->devices, world_of(m, accel), m->nfaults);
    if (steps)
        fprintf(log, "  shrunk why: %s\n", mr.why[0] ? mr.why : "(no reason given)");
    char *text = ddp_scenario_text(m);
    char *otext = texts || (o->out_dir && *o->out_dir) ? ddp_scenario_text(s) : NULL;
    char base[64], path[1024];
    snprintf(base, sizeof base, "explore-%" PRIu64 "-%d.scn", o->seed, i);
    if (o->out_dir && *o->out_dir) {
        snprintf(path, sizeof path, "%s/%s", o->out_dir, base);
        char orig[1024];
        snprintf(orig, sizeof orig, "%s/explore-%" PRIu64 "-%d-original.scn",
                 o->out_dir, o->seed, i);
        (void)write_scenarios(o->out_dir, o->seed, i, text, otext, log); /* said on log */
        fprintf(log, "  replay: ddpsim replay %s --seed %" PRIu64 "%s%s\n", path, m->seed,
                PLUGIN_ARG(s));
        fprintf(log, "  (the run as drawn: ddpsim replay %s --seed %" PRIu64 "%s%s)\n",
                orig, s->seed, PLUGIN_ARG(s));
    } else {
        fprintf(log, "  replay: ddpsim replay %s --seed %" PRIu64
                     "%s%s  (save the scenario below as %s, or pass --out DIR)\n",
                base, m->seed, PLUGIN_ARG(s), base);
    }
    check_replay(log, text, accel, &mr);
    print_scenario(log, base, text);
    if (texts) {
        texts->shrunk = text;
        texts->original = otext;
    } else {
        free(text);
        free(otext);
    }
    ddp_scenario_free(m);
    fflush(log);
}

/* The run that made the most hand-offs (what a run costs, the same for the
 * same run): a schedule that costs thousands of times the mean is a loop
 * worth a look even when every invariant held (a store barrier retrying a
 * WAIT that gave up at once cost 750,000 round trips, docs/explore.md).
 * With dir, its scenario as drawn is written there. 0, or -1 when the
 * file could not be written (said on log). */
static int print_costliest(FILE *log, const char *dir, uint64_t seed, long long runs,
                           uint64_t handoffs, long long idx, uint64_t most,
                           const char *accel, const char *text)
{
    if (!most || runs < 1)
        return 0;
    fprintf(log, "explore: costliest run: run %lld (%s), %" PRIu64 " hand-offs; the mean "
                 "run %" PRIu64 "\n",
            idx, accel, most, handoffs / (uint64_t)runs);
    if (!dir || !*dir || !text)
        return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/explore-%" PRIu64 "-%lld-costliest.scn", dir, seed, idx);
    if (write_file(path, text) != 0) {
        fprintf(log, "  could not write %s\n", path);
        return -1;
    }
    fprintf(log, "  its scenario as drawn: %s (ddpsim replay %s --timeline)\n", path, path);
    return 0;
}

/* The last line of a sweep (or of one shard of it). */
static void print_summary(FILE *log, long long runs, int ranks, uint64_t seed,
                          const ddp_shard_t *shard, long long violations, double wall_s)
{
    char sh[48] = "";
    if (shard && shard->n > 0)
        snprintf(sh, sizeof sh, ", shard %d/%d", shard->k, shard->n);
    fprintf(log, "explore: %lld run(s) of %d rank(s), seed %" PRIu64 "%s: %lld "
                 "violation(s) in %.1f s (%.1f runs/s)\n",
            runs, ranks, seed, sh, violations, wall_s, wall_s > 0 ? runs / wall_s : 0.0);
    fflush(log);
}

/* What the shards of one sweep share: every option that shapes a run. */
static void sweep_of(const ddp_explore_opts_t *o, int runs, char *buf, size_t n)
{
    /* the library's defaults spelled out: 0 kinds is all, 0 faults is 3 */
    unsigned all = DDP_EXPLORE_KINDS_ALL;
    const char *lib = o->plugin ? ddp_plugin_library(ddp_plugin_find(o->plugin)) : NULL;
    snprintf(buf, n, "explore --ranks %d --runs %d --seed %" PRIu64 " --faults 0x%x "
                     "--max-faults %d --accelerator %s --plugin %s",
             o->ranks > 0 ? o->ranks : 16, runs, o->seed, o->kinds ? o->kinds : all,
             o->max_faults == 0 ? 3 : o->max_faults < 0 ? 0 : o->max_faults,
             o->accelerator ? o->accelerator : "(drawn)",
             lib ? lib : o->plugin ? o->plugin : "default");
}

/* Runs s; a violation is reported on log (and, with results, kept as a
 * row). Returns 1 for a violation, else 0. */
static int run_one(const ddp_explore_opts_t *o, ddp_progress_t *pg, FILE *log, int i,
                   const ddp_scenario_t *s,
                   const char *accel, uint64_t *handoffs)
{
    ddp_scn_result_t r;
    memset(&r, 0, sizeof r);
    ddp_scn_run_opts_t ro = {0};
    int rc = ddp_scenario_run(s, accel, &ro, &r);
    *handoffs = r.handoffs;
    if (rc == 0 && r.invariants_ok && !nofault_failed(s, &r))
        return 0;
    if (rc == 0 && r.invariants_ok)
        snprintf(r.why, sizeof r.why, "%s%s", NOFAULT_WHY,
                 r.first_error[0] ? r.first_error : "(no message)");
    ddp_progress_clear(pg);
    /* With a result file the report is made in memory first: the row keeps
     * exactly what log gets. */
    ddp_shard_row_t *row = o->results ? ddp_shard_add_row(o->results) : NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = row ? open_memstream(&buf, &len) : NULL;
    FILE *out = mem ? mem : log;
    if (rc != 0) {
        fprintf(out, "VIOLATION in run %d (seed %" PRIu64 "): the scenario "
                     "could not be built: %s\n",
                i, o->seed, ddp_err_message());
        char *text = ddp_scenario_text(s);
        print_scenario(out, "scenario", text);
        if (row)
            row->original = text;
        else
            free(text);
    } else {
        report_violation(o, out, i, s, accel, &r, row);
    }
    if (mem) {
        fclose(mem);
        fputs(buf, log);
        fflush(log);
        row->text = buf;
    }
    if (row) {
        row->index = i;
        snprintf(row->name, sizeof row->name, "explore-%" PRIu64 "-%d", o->seed, i);
    }
    return 1;
}

int ddp_explore(const ddp_explore_opts_t *o, ddp_explore_stats_t *st)
{
    FILE *log = o->log ? o->log : stdout;
    int runs = o->runs > 0 ? o->runs : 100;
    ddp_explore_stats_t local = {0};
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    /* Shard K of N: the runs K-1, K-1+N, ... (the progress counts them). */
    const ddp_shard_t *sh = &o->shard;
    int first = sh->n > 0 ? sh->k - 1 : 0, stride = sh->n > 0 ? sh->n : 1;
    int mine = (int)ddp_shard_size(sh, runs);
    if (o->results) {
        ddp_shard_file_t *f = o->results;
        snprintf(f->kind, sizeof f->kind, "explore");
        f->shard = sh->n > 0 ? *sh : (ddp_shard_t){1, 1};
        sweep_of(o, runs, f->sweep, sizeof f->sweep);
        f->total = runs;
        f->ranks = o->ranks > 0 ? o->ranks : 16;
        f->seed = o->seed;
    }
    double t0 = wall_now();
    /* The progress (progress.h): o->progress 1 a bar on a terminal, 2 a
     * line on stderr every 10 s; the lines on log every 10 % of the runs
     * unless it is 1. */
    ddp_progress_t pg = {0};
    ddp_progress_start(&pg, "explore", "runs", mine,
                       o->progress == 1 ? DDP_PROGRESS_BAR
                       : o->progress == 2 ? DDP_PROGRESS_LINES : DDP_PROGRESS_OFF,
                       stderr);
    int step = mine >= 10 ? mine / 10 : 1;
    int keep_text = (o->out_dir && *o->out_dir) || o->results;
    char costliest_accel[16] = "", *costliest_text = NULL;
    for (int i = first; i < runs; i += stride) {
        char accel[16];
        ddp_scenario_t *s = ddp_explore_draw(o, i, accel, sizeof accel);
        if (!s) {
            ddp_progress_end(&pg, 0);
            fprintf(log, "explore: run %d: %s\n", i, ddp_err_message());
            free(costliest_text);
            st->wall_s = wall_now() - t0;
            return -1;
        }
        uint64_t h = 0;
        st->violations += run_one(o, &pg, log, i, s, accel, &h);
        st->runs++;
        st->handoffs += h;
        if (h > st->costliest_handoffs) { /* the first of a tie stays */
            st->costliest_handoffs = h;
            st->costliest = i;
            snprintf(costliest_accel, sizeof costliest_accel, "%s", accel);
            if (keep_text) {
                free(costliest_text);
                costliest_text = ddp_scenario_text(s);
            }
        }
        ddp_scenario_free(s);
        char note[48];
        snprintf(note, sizeof note, "%d violation(s)", st->violations);
        ddp_progress_update(&pg, st->runs, note);
        if (o->progress != 1 && (st->runs % step == 0 || st->runs == mine)) {
            char line[512];
            ddp_progress_format(line, sizeof line, "explore:", "runs", st->runs, mine,
                                wall_now() - t0, note);
            fprintf(log, "%s\n", line);
            fflush(log);
        }
    }
    ddp_progress_end(&pg, 1);
    st->wall_s = wall_now() - t0;
    /* a file it could not write is said on log, as for a violation's */
    (void)print_costliest(log, o->out_dir, o->seed, st->runs, st->handoffs, st->costliest,
                          st->costliest_handoffs, costliest_accel, costliest_text);
    if (o->results) {
        o->results->runs = st->runs;
        o->results->wall_s = st->wall_s;
        o->results->handoffs = st->handoffs;
        o->results->costliest = st->costliest;
        o->results->costliest_handoffs = st->costliest_handoffs;
        memcpy(o->results->costliest_accel, costliest_accel, sizeof costliest_accel);
        free(o->results->costliest_scn);
        o->results->costliest_scn = costliest_text;
        costliest_text = NULL;
    }
    free(costliest_text);
    print_summary(log, st->runs, o->ranks > 0 ? o->ranks : 16, o->seed, sh, st->violations,
                  st->wall_s);
    return 0;
}

int ddp_explore_print_merged(const ddp_shard_file_t *m, FILE *log, const char *out_dir)
{
    int rc = 0;
    for (int i = 0; i < m->nrows; i++) {
        const ddp_shard_row_t *row = &m->rows[i];
        if (row->text)
            fputs(row->text, log);
        /* A scenario that could not be built has no shrunk one, and the
         * unsharded run wrote no file for it either. */
        if (out_dir && *out_dir && row->shrunk &&
            write_scenarios(out_dir, m->seed, row->index, row->shrunk, row->original,
                            log) != 0)
            rc = -1;
    }
    if (print_costliest(log, out_dir, m->seed, m->runs, m->handoffs, m->costliest,
                        m->costliest_handoffs, m->costliest_accel, m->costliest_scn) != 0)
        rc = -1;
    print_summary(log, m->runs, m->ranks, m->seed, NULL, m->nrows, m->wall_s);
    return rc ? rc : m->nrows;
}
