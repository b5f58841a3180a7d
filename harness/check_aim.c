/* harness/check_aim.c — `ddpsim check`'s generator: what the plugin does,
 * from the events of its fault-free baselines, and the faults aimed at
 * each of those events for each rank class (docs/check.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_priv.h"
#include "ddp/err.h"
#include "ddp/plugin.h"

/* ---- discovery ---- */

static unsigned class_of(int rank, int node)
{
    return rank == 0 ? DDP_CHECK_RANK0 : node == 0 ? DDP_CHECK_LOCAL : DDP_CHECK_REMOTE;
}

/* The key as the program names it, digits generalised ("/default_pg/3" ->
 * "default_pg/ *" without the blank): a wait:GLOB matches it whatever rank
 * set it. */
static void glob_of(const char *key, char *out, size_t n)
{
    size_t o = 0;
    while (*key == '/')
        key++;
    for (const char *p = key; *p && o + 2 < n; p++) {
        if (*p >= '0' && *p <= '9') {
            while (p[1] >= '0' && p[1] <= '9')
                p++;
            out[o++] = '*';
        } else if (*p == '[' || *p == ']' || *p == '?' || *p == '*' || *p == '"' ||
                   (unsigned char)*p < 0x20) {
            out[o++] = '?';
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

static void add_phase(ddp_check_discovery_t *d, const char *name, unsigned cls)
{
    for (int i = 0; i < d->nphases; i++)
        if (!strcmp(d->phases[i].name, name)) {
            d->phases[i].classes |= cls;
            return;
        }
    if (d->nphases == DDP_CHECK_MAX_PHASES || strlen(name) >= sizeof d->phases[0].name)
        return;
    snprintf(d->phases[d->nphases].name, sizeof d->phases[0].name, "%s", name);
    d->phases[d->nphases].classes = cls;
    d->phases[d->nphases++].user = 1;
}

static void add_key(ddp_check_discovery_t *d, const char *key, unsigned op)
{
    char g[96];
    glob_of(key, g, sizeof g);
    for (int i = 0; i < d->nkeys; i++)
        if (!strcmp(d->keys[i].glob, g)) {
            if (strcmp(d->keys[i].example, key) && !(d->keys[i].ops & 8))
                d->keys[i].keys++, d->keys[i].ops |= 8; /* 8: more than one */
            d->keys[i].ops |= op;
            return;
        }
    if (d->nkeys == DDP_CHECK_MAX_KEYS)
        return;
    snprintf(d->keys[d->nkeys].glob, sizeof g, "%s", g);
    snprintf(d->keys[d->nkeys].example, sizeof d->keys[0].example, "%s", key);
    d->keys[d->nkeys].ops = op;
    d->keys[d->nkeys].keys = 1;
    d->keys[d->nkeys++].user = 1;
}

void ddp__check_tap(void *arg, const ddp_fault_event_t *ev, int node, int64_t vt)
{
    ddp_check_discovery_t *d = arg;
    (void)vt;
    switch (ev->kind) {
    case DDP_TRIG_ENTER:
        if (ev->name && ev->rank >= 0)
            add_phase(d, ev->name, class_of(ev->rank, node));
        break;
    case DDP_TRIG_SET:
    case DDP_TRIG_WAIT:
        if (ev->name && strncmp(ev->name, DDP_MARK_PREFIX, strlen(DDP_MARK_PREFIX)))
            add_key(d, ev->name, ev->kind == DDP_TRIG_SET ? 1 : 2);
        break;
    case DDP_TRIG_CONNECT:
        if (ev->rank >= 0)
            d->connects[ev->rank == 0 ? 0 : node == 0 ? 1 : 2]++;
        break;
    default:
        break;
    }
}

void ddp__check_mark_user(ddp_check_discovery_t *d, const ddp_check_discovery_t *dflt)
{
    for (int i = 0; i < d->nphases; i++)
        for (int k = 0; k < dflt->nphases; k++)
            if (!strcmp(d->phases[i].name, dflt->phases[k].name))
                d->phases[i].user = 0;
    for (int i = 0; i < d->nkeys; i++)
        for (int k = 0; k < dflt->nkeys; k++)
            if (!strcmp(d->keys[i].glob, dflt->keys[k].glob))
                d->keys[i].user = 0;
}

void ddp_check_print_discovery(const ddp_check_discovery_t *d, FILE *out)
{
    static const char *const cls[] = {"rank 0", "another rank of node 0",
                                      "a rank of another node"};
    fprintf(out, "phases entered (* the plugin's own), by rank class:\n");
    for (int i = 0; i < d->nphases; i++) {
        fprintf(out, "  %s %-28s", d->phases[i].user ? "*" : " ", d->phases[i].name);
        for (int c = 0, first = 1; c < 3; c++)
            if (d->phases[i].classes >> c & 1)
                fprintf(out, "%s%s", first ? "" : ", ", cls[c]), first = 0;
        fputc('\n', out);
    }
    fprintf(out, "store keys (* the plugin's own; aim with set:GLOB / wait:GLOB):\n");
    for (int i = 0; i < d->nkeys; i++)
        fprintf(out, "  %s %-32s %s%s%s  (%s%s)\n", d->keys[i].user ? "*" : " ",
                d->keys[i].glob, d->keys[i].ops & 1 ? "set" : "",
                (d->keys[i].ops & 3) == 3 ? ", " : "", d->keys[i].ops & 2 ? "waited on" : "",
                d->keys[i].example, d->keys[i].keys > 1 ? ", ..." : "");
    fprintf(out, "store connects: rank 0 %d, other ranks of node 0 %d, other nodes %d\n",
            d->connects[0], d->connects[1], d->connects[2]);
}

/* ---- aiming ---- */

static int push(chk_cands_t *c, const chk_cand_t *k)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 256;
        chk_cand_t *v = realloc(c->v, sizeof *v * (size_t)cap);
        if (!v)
            return ddp_err_set(-12, "check: out of memory");
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = *k;
    return 0;
}

void ddp__check_cands_free(chk_cands_t *c)
{
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* An event of the job a window may open on. */
typedef struct {
    char text[128];  /* "enter:kvx publish" (an @RANK is added per target) */
    int per_rank;    /* phase events: counted for the target rank only */
    char phase[48];  /* enter:PHASE: the phase */
    unsigned classes;
} chk_event_t;

/* The phases a fault may name: the default's and the plugin's declared. */
static int nameable(const ddp_plugin_t *p, const char *phase)
{
    for (size_t i = 0; i < ddp_scenario_phase_count(); i++)
        if (!strcmp(ddp_scenario_phase_at(i), phase))
            return 1;
    for (const char *const *q = p ? p->phases : NULL; q && *q; q++)
        if (!strcmp(*q, phase))
            return 1;
    return 0;
}

static int events_of(const ddp_check_discovery_t *d, const ddp_plugin_t *p, int user,
                     chk_event_t *ev, int max)
{
    int n = 0;
    for (int i = 0; i < d->nphases && n + 2 <= max; i++) {
        if (d->phases[i].user != user || !nameable(p, d->phases[i].name))
            continue;
        for (int leave = 0; leave < 1 + user; leave++) {
            chk_event_t *e = &ev[n++];
            snprintf(e->text, sizeof e->text, "%s:%s", leave ? "leave" : "enter",
                     d->phases[i].name);
            snprintf(e->phase, sizeof e->phase, "%s", leave ? "" : d->phases[i].name);
            e->per_rank = 1;
            e->classes = d->phases[i].classes;
        }
    }
    for (int i = 0; user && i < d->nkeys && n + 2 <= max; i++)
        for (int op = 1; op <= 2; op++)
            if ((d->keys[i].ops & op) && d->keys[i].user) {
                chk_event_t *e = &ev[n++];
                snprintf(e->text, sizeof e->text, "%s:%s", op == 1 ? "set" : "wait",
                         d->keys[i].glob);
                e->phase[0] = '\0';
                e->per_rank = 0;
                e->classes = 7;
            }
    return n;
}

/* start="EVENT[@r]": a phase event counts for rank r only. */
static void start_at(const chk_event_t *e, int r, char *at, size_t n)
{
    if (e->per_rank)
        snprintf(at, n, "start=\"%s@%d\"", e->text, r);
    else
        snprintf(at, n, "start=\"%s\"", e->text);
}

/* The fault lines aimed at rank r of node `node` when event e happens;
 * bit k of *heals: line k's fault heals (a bounded window, one refusal). */
static int lines_for(const chk_event_t *e, int r, int node, int multi, char out[][256],
                     unsigned *heals)
{
    char at[160];
    int n = 0;
    start_at(e, r, at, sizeof at);
    *heals = 0;
    snprintf(out[n++], 256, "fault crash ranks=%d %s", r, at);
    *heals |= 1u << n;
    snprintf(out[n++], 256, "fault stall ranks=%d %s end=%ds", r, at, CHK_HEAL_S);
    *heals |= 1u << n;
    snprintf(out[n++], 256, "fault pause ranks=%d %s end=%ds", r, at, CHK_HEAL_S);
    snprintf(out[n++], 256, "fault pause ranks=%d %s end=%ds", r, at, CHK_OUTLAST_S);
    if (multi) {
        *heals |= 1u << n;
        snprintf(out[n++], 256, "fault partition nodes=%d %s end=%ds", node, at, CHK_HEAL_S);
        snprintf(out[n++], 256, "fault partition nodes=%d %s", node, at);
    }
    *heals |= 3u << n;
    snprintf(out[n++], 256, "fault delay node=%d delay=200ms %s end=%ds", node, at,
             2 * CHK_HEAL_S);
    snprintf(out[n++], 256, "fault refuse node=%d %s count=1", node, at);
    snprintf(out[n++], 256, "fault reset ranks=%d %s count=1", r, at);
    /* a store request of rank r fails while it is in the phase: its first
     * one, or (p=0.5) any one of them */
    for (int k = 0; e->phase[0] && k < 4; k++)
        snprintf(out[n++], 256,
                 "fault point point=store/client/%s ranks=%d %s end=\"leave:%s@%d\" "
                 "count=1%s",
                 k & 1 ? "recv" : "send", r, at, e->phase, r, k < 2 ? "" : " p=0.5");
    return n;
}

static int aim_shape(const chk_event_t *ev, int nev, const char *accel, int nodes,
                     int devices, int transient_only, chk_cands_t *out)
{
    int world = !strcmp(accel, "ddp2") ? nodes : nodes * devices;
    int per_node = world / nodes;
    int targets[3] = {0, per_node > 1 ? 1 : -1, nodes > 1 ? per_node : -1};
    for (int i = 0; i < nev; i++)
        for (int t = 0; t < 3; t++) {
            int r = targets[t];
            if (r < 0 || !(ev[i].classes & (1u << t)))
                continue;
            char lines[20][256];
            unsigned heals;
            int n = lines_for(&ev[i], r, r / per_node, nodes > 1, lines, &heals);
            for (int k = 0; k < n; k++) {
                if (transient_only && !(heals >> k & 1))
                    continue;
                chk_cand_t c = {.nodes = nodes, .devices = devices, .nf = 1, .random = -1};
                snprintf(c.accel, sizeof c.accel, "%s", accel);
                snprintf(c.faults[0], sizeof c.faults[0], "%s", lines[k]);
                if (push(out, &c))
                    return -12;
            }
        }
    return 0;
}

/* Pairs: a rank dies at the plugin's event while another is paused there. */
static int aim_pairs(const chk_event_t *ev, int nev, chk_cands_t *out)
{
    static const int pair[][2] = {{2, 0}, {1, 2}, {0, 2}};
    for (int i = 0; i < nev; i++)
        for (size_t k = 0; k < sizeof pair / sizeof pair[0]; k++) {
            chk_cand_t c = {.nodes = 2, .devices = 2, .nf = 2, .random = -1};
            char at[160];
            snprintf(c.accel, sizeof c.accel, "ddp");
            start_at(&ev[i], pair[k][0], at, sizeof at);
            snprintf(c.faults[0], sizeof c.faults[0], "fault crash ranks=%d %s", pair[k][0], at);
            snprintf(c.faults[1], sizeof c.faults[1], "fault pause ranks=%d %s end=%ds",
                     pair[k][1], at, CHK_HEAL_S);
            if (push(out, &c))
                return -12;
        }
    return 0;
}

static int aim_late(chk_cands_t *out)
{
    for (int r = 0; r < 4; r += 1) {
        chk_cand_t c = {.nodes = 2, .devices = 2, .nf = 1, .random = -1};
        snprintf(c.accel, sizeof c.accel, "ddp");
        snprintf(c.faults[0], sizeof c.faults[0], "late ranks=%d by=%ds", r, CHK_HEAL_S);
        if (push(out, &c))
            return -12;
    }
    return 0;
}

int ddp__check_aim(const ddp_check_discovery_t *d, const ddp_plugin_t *p, chk_cands_t *out)
{
    static const char *const others[] = {"ddp_spawn", "ddp2", "ddp_cpu", "ddp_hpc",
                                         "ddp_cpu_hpc"};
    chk_event_t user[96], dflt[96];
    int nu = events_of(d, p, 1, user, 96), nd = events_of(d, p, 0, dflt, 96);
    int rc = aim_shape(user, nu, "ddp", 2, 2, 0, out);
    rc = rc ? rc : aim_late(out);
    rc = rc ? rc : aim_pairs(user, nu, out);
    for (size_t a = 0; rc == 0 && a < sizeof others / sizeof others[0]; a++)
        rc = aim_shape(user, nu, others[a], 2, 2, 1, out);
    rc = rc ? rc : aim_shape(dflt, nd, "ddp", 2, 2, 0, out);
    return rc;
}

/* ---- a foreign program (real runs) ---- */

static int push_exec(chk_cands_t *out, const char *line)
{
    chk_cand_t c = {.nodes = 2, .devices = 2, .nf = 1, .random = -1};
    snprintf(c.accel, sizeof c.accel, "ddp");
    snprintf(c.faults[0], sizeof c.faults[0], "%s", line);
    return push(out, &c);
}

/* The store events of a foreign program: its keys set and waited on, the
 * joins, the store barrier. */
static int exec_events(const ddp_check_discovery_t *d, char ev[][128], int max)
{
    int n = 0;
    for (int i = 0; i < d->nkeys && n + 2 <= max; i++)
        for (int op = 1; op <= 2; op++)
            if (d->keys[i].ops & op)
                snprintf(ev[n++], 128, "%s:%s", op == 1 ? "set" : "wait", d->keys[i].glob);
    if (n + 3 <= max) {
        snprintf(ev[n++], 128, "joined:2");
        snprintf(ev[n++], 128, "joined:4");
        snprintf(ev[n++], 128, "barrier");
    }
    return n;
}

int ddp__check_aim_exec(const ddp_check_discovery_t *d, int netns, chk_cands_t *out)
{
    char ev[96][128], line[256];
    int nev = exec_events(d, ev, 96), rc = 0;
    static const int late[] = {2, 0};
    for (size_t k = 0; rc == 0 && k < 2; k++) {
        snprintf(line, sizeof line, "late ranks=%d by=%ds", late[k], CHK_EXEC_HEAL_S);
        rc = push_exec(out, line);
    }
    /* rounds: each round aims one kind at one rank over every event */
    static const struct {
        const char *kind;
        int rank, net;
    } rounds[] = {{"crash", 2, 0}, {"pause", 0, 0}, {"crash", 1, 0}, {"pause", 2, 0},
                  {"partition", 2, 1}, {"crash", 0, 0}, {"refuse", 2, 1}};
    for (size_t k = 0; rc == 0 && k < sizeof rounds / sizeof rounds[0]; k++)
        for (int i = 0; rc == 0 && i < nev; i++) {
            if (rounds[k].net && !netns)
                continue;
            const char *what = rounds[k].kind;
            int r = rounds[k].rank;
            if (!strcmp(what, "crash"))
                snprintf(line, sizeof line, "fault crash ranks=%d start=\"%s\"", r, ev[i]);
            else if (!strcmp(what, "pause"))
                snprintf(line, sizeof line, "fault pause ranks=%d start=\"%s\" end=%ds", r,
                         ev[i], CHK_EXEC_HEAL_S);
            else if (!strcmp(what, "partition"))
                snprintf(line, sizeof line, "fault partition nodes=1 start=\"%s\" end=%ds",
                         ev[i], CHK_EXEC_HEAL_S);
            else
                snprintf(line, sizeof line, "fault refuse node=1 start=\"%s\" count=1", ev[i]);
            rc = push_exec(out, line);
        }
    return rc;
}
