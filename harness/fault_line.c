/* harness/fault_line.c — a fault line's parser, cluster check and writer
 * (harness/fault_line.h), used by the scenario parser and the plan reader. */
#include "fault_line.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "ddp/sys.h"

/* Phases the plugin enters (crash faults may name one). */
static const char *const phases[] = {
    "init_ddp_connection", "store server", "store connect", "wait for workers",
    "process group init", "barrier", "connected", "configure_ddp", "teardown"};
#define NPHASES (sizeof phases / sizeof phases[0])

/* Longest phase name that can match: ddp_ident_set_phase keeps this many
 * characters (the error context's phase field). */
#define PHASE_MAX (sizeof((ddp_errctx_t *)0)->phase - 1)

/* One fault line being parsed: the fault, where its targets were given,
 * and what the checks after the keys need. */
typedef struct fl {
    ddp__ln_t *l;
    const char *plugin;
    ddp_fault_t *f;
    ddp__where_t *at;
    const ddp__tok_t *kind;     /* the kind's word */
    const ddp__tok_t *not_bw;   /* the first key a bandwidth fault cannot take */
    int have_end, have_delay, end_col, nodes_col, rate_col, by_col, mode_col;
    int last;                   /* the column just past the line */
} fl_t;

static const char *plugin_phase(const ddp_plugin_t *pl, const char *v)
{
    for (const char *const *ph = pl && pl->phases ? pl->phases : NULL; ph && *ph; ph++)
        if (!strcmp(*ph, v))
            return *ph;
    return NULL;
}

size_t ddp_scenario_phase_count(void)
{
    return NPHASES;
}

const char *ddp_scenario_phase_at(size_t i)
{
    return i < NPHASES ? phases[i] : NULL;
}

static const char *default_phase(const char *v)
{
    for (size_t j = 0; j < NPHASES; j++)
        if (!strcmp(phases[j], v))
            return phases[j];
    return NULL;
}

/* The plugin a run uses ("default" without a name). */
static const ddp_plugin_t *run_plugin(const char *name)
{
    return ddp_plugin_find(name && *name ? name : "default");
}

/* The first registered plugin that declares phase v (or NULL). */
static const ddp_plugin_t *phase_owner(const char *v, const char **name)
{
    for (size_t i = 0; i < ddp_plugin_count(); i++)
        if ((*name = plugin_phase(ddp_plugin_at(i), v)))
            return ddp_plugin_at(i);
    return NULL;
}

/* `; or one plugin "x" declares: "a", "b"` for error messages. */
static const char *declared_phases(const ddp_plugin_t *pl, char *buf, size_t n)
{
    buf[0] = '\0';
    if (!pl || !pl->phases || !pl->phases[0])
        return buf;
    size_t off = (size_t)snprintf(buf, n, "; or one plugin \"%s\" declares:", pl->name);
    for (const char *const *ph = pl->phases; *ph && off < n; ph++)
        off += (size_t)snprintf(buf + off, n - off, "%s \"%s\"", ph == pl->phases ? "" : ",",
                                *ph);
    return buf;
}

/* phase=NAME: the default plugin's phases, those of the scenario's plugin
 * when its line came already, else those any registered plugin declares
 * (finish() then checks the scenario really runs that plugin). */
static int parse_phase(ddp__ln_t *l, const char *plugin, const char *v, int col,
                       const char **out)
{
    const ddp_plugin_t *pl = plugin && *plugin ? run_plugin(plugin) : NULL;
    const char *name = default_phase(v);
    if (!name)
        name = pl ? plugin_phase(pl, v) : (phase_owner(v, &name) ? name : NULL);
    if (!name) {
        char more[600];
        return ddp__ln_err(l, col, "expected a phase (\"init_ddp_connection\", \"store server\", "
                            "\"store connect\", \"wait for workers\", \"process group init\", "
                            "\"barrier\", \"connected\", \"configure_ddp\", \"teardown\"%s), "
                            "got \"%.60s\"",
                    pl ? declared_phases(pl, more, sizeof more)
                       : "; or one a registered plugin declares",
                    v);
    }
    if (strlen(name) > PHASE_MAX)
        return ddp__ln_err(l, col, "expected a phase name of at most %zu characters (what "
                            "ddp_ident_set_phase keeps), got one of %zu",
                    PHASE_MAX, strlen(name));
    *out = name;
    return 0;
}

/* start= / end=: a duration from the run's start, or an event with an
 * optional +offset (docs/scenario-format.md, "Triggers"). */

/* start= / end=: a duration from the run's start, or an event with an
 * optional +offset (docs/scenario-format.md, "Triggers"). */
static int parse_when(fl_t *x, const char *v, int col, ddp_fault_trigger_t *trig, int64_t *ns)
{
    memset(trig, 0, sizeof *trig);
    *ns = 0;
    if (isdigit((unsigned char)v[0]))
        return ddp__ln_duration(x->l, v, col, ns);
    char head[160];
    snprintf(head, sizeof head, "%s", v);
    char *plus = strrchr(head, '+');
    if (plus)
        *plus = '\0';
    if (ddp_trigger_parse(head, trig))
        return ddp__ln_err(x->l, col, "%s", ddp_err_ctx()->what);
    if (plus && ddp__ln_duration(x->l, plus + 1, col + (int)(plus - head) + 1, ns))
        return DDP_ECONFIG;
    if (trig->kind == DDP_TRIG_ENTER || trig->kind == DDP_TRIG_LEAVE) {
        const char *name;
        if (parse_phase(x->l, x->plugin, trig->arg,
                        col + (int)strlen(ddp_trigger_kind_name(trig->kind)) + 1, &name))
            return DDP_ECONFIG;
    }
    return 0;
}

/* The keys that name where a fault hits: node, peer, nodes, ranks, start,
 * end, phase. 1 when k is none of them. */
static int target_key(fl_t *x, const ddp__tok_t *t, int *rc)
{
    ddp_fault_t *f = x->f;
    const char *k = t->text, *v = t->eq;
    int c = t->vcol, slot = -1;
    if (!strcmp(k, "node"))
        *rc = ddp__ln_node(x->l, v, c, &f->node), slot = DDP__AT_NODE;
    else if (!strcmp(k, "peer"))
        *rc = ddp__ln_node(x->l, v, c, &f->peer_node), slot = DDP__AT_PEER;
    else if (!strcmp(k, "nodes")) {
        *rc = ddp__ln_node_set(x->l, v, c, &f->node_set), slot = DDP__AT_NODES;
        x->nodes_col = t->col;
    } else if (!strcmp(k, "ranks")) {
        char buf[128];
        *rc = ddp__ln_rank_list(x->l, v, c, buf, sizeof buf), slot = DDP__AT_RANKS;
        if (*rc == 0 && !(f->ranks = strdup(buf)))
            *rc = ddp__ln_err(x->l, c, "out of memory");
    } else if (!strcmp(k, "start"))
        *rc = parse_when(x, v, c, &f->start_on, &f->start_ns), slot = DDP__AT_START;
    else if (!strcmp(k, "end")) {
        *rc = parse_when(x, v, c, &f->end_on, &f->end_ns), slot = DDP__AT_END;
        x->have_end = 1;
        x->end_col = t->col;
    } else if (!strcmp(k, "phase"))
        *rc = parse_phase(x->l, x->plugin, v, c, &f->phase), slot = DDP__AT_PHASE;
    if (slot >= 0)
        x->at[slot] = ddp__ln_here(x->l, c);
    return slot < 0;
}

/* The keys that say how a fault acts: port, by (late), count, p, delay,
 * after, point, rate, mode. 1 when k is none of them. */
static int effect_key(fl_t *x, const ddp__tok_t *t, int *rc)
{
    ddp_fault_t *f = x->f;
    const char *k = t->text, *v = t->eq;
    int c = t->vcol, port = 0;
    long b = 0;
    if (!strcmp(k, "port")) {
        *rc = ddp__ln_int(x->l, v, c, 1, 65535, "a port", &port);
        f->port = (uint16_t)port;
    } else if (!strcmp(k, "by") && f->kind == DDP_FAULT_LATE) {
        *rc = ddp__ln_duration(x->l, v, c, &f->delay_ns);
        x->by_col = c;
    } else if (!strcmp(k, "count")) {
        *rc = ddp__ln_int(x->l, v, c, 1, INT_MAX, "a count", &f->count);
    } else if (!strcmp(k, "p")) {
        char *e;
        double pr = strtod(v, &e);
        if (!*v || *e || !(pr > 0 && pr <= 1))
            *rc = ddp__ln_err(x->l, c, "expected a probability in (0, 1], got \"%.60s\"", v);
        f->probability = pr;
    } else if (!strcmp(k, "delay")) {
        *rc = ddp__ln_duration(x->l, v, c, &f->delay_ns);
        x->have_delay = 1;
    } else if (!strcmp(k, "after")) {
        *rc = ddp__ln_long(x->l, v, c, 0, LONG_MAX, "a byte count", &b);
        f->after_bytes = b;
    } else if (!strcmp(k, "point")) {
        if (ddp_sim_fault_point_check(v) != 0)
            *rc = ddp__ln_err(x->l, c, "%s", ddp_err_ctx()->what);
        else
            f->point = ddp_fault_point_find(v)->name; /* static text */
    } else if (!strcmp(k, "rate")) {
        *rc = ddp__ln_rate(x->l, v, c, &f->rate_bps);
        x->rate_col = t->col;
    } else if (!strcmp(k, "mode")) {
        if (strcmp(v, "silent") && strcmp(v, "kill"))
            *rc = ddp__ln_err(x->l, c, "expected mode=silent (a power loss: nothing more "
                                       "leaves or reaches the node) or mode=kill (its "
                                       "processes die and their sockets close), got \"%.60s\"",
                              v);
        f->kill_mode = !strcmp(v, "kill");
        x->mode_col = t->col;
    } else
        return 1;
    return 0;
}

/* One word after the kind: key=value or may-miss. */
static int fault_word(fl_t *x, const ddp__tok_t *tok, int i)
{
    const ddp__tok_t *t = &tok[i];
    const char *k = t->text;
    if (!t->eq && !strcmp(k, "may-miss")) { /* a fault allowed to act on nothing */
        if (x->f->may_miss)
            return ddp__ln_err(x->l, t->col, "expected may-miss at most once, got it twice");
        x->f->may_miss = 1;
        return 0;
    }
    if (!t->eq)
        return ddp__ln_err(x->l, t->col, "expected key=value (node=, peer=, port=, nodes=, "
                                         "ranks=, start=, end=, count=, p=, delay=, after=, "
                                         "phase=, point=, rate=, mode=, by=) or may-miss, got "
                                         "\"%.60s\"", k);
    if (ddp__ln_once(x->l, tok, i, "a fault"))
        return DDP_ECONFIG;
    if (!x->not_bw && strcmp(k, "node") && strcmp(k, "start") && strcmp(k, "end") &&
        strcmp(k, "rate"))
        x->not_bw = t;
    int rc = 0;
    if (target_key(x, t, &rc) && effect_key(x, t, &rc))
        rc = ddp__ln_err(x->l, t->col, "expected a fault key (node, peer, port, nodes, ranks, "
                                       "start, end, count, p, delay, after, phase, point, "
                                       "rate, mode; by on late), got \"%.60s\"", k);
    return rc;
}

/* What a fault's window and a late line need. */
static int window_rules(const fl_t *x)
{
    const ddp_fault_t *f = x->f;
    ddp__ln_t *l = x->l;
    /* end=0s included: the window must hold some time (a pause that ends
     * at 0 never pauses; "no end" is no end= at all). */
    if (x->have_end && f->end_on.kind == DDP_TRIG_TIME && f->start_on.kind == DDP_TRIG_TIME &&
        f->end_ns <= f->start_ns)
        return ddp__ln_err(l, x->end_col, "expected end= after start=, got end <= start");
    if (f->kind != DDP_FAULT_LATE)
        return 0;
    if (!x->by_col || f->delay_ns <= 0)
        return ddp__ln_err(l, x->by_col ? x->by_col : x->last,
                           "expected by= (how late the processes start, more than 0s), got %s",
                           x->by_col ? "0" : "end of line");
    if (x->have_end || f->start_on.kind != DDP_TRIG_TIME || f->start_ns)
        return ddp__ln_err(l, x->kind->col, "expected ranks=, node= and by= on a late line (it "
                                            "holds processes before they start), got start= "
                                            "or end=");
    if (f->node < 0 && !f->ranks)
        return ddp__ln_err(l, x->last, "expected ranks= or node= (whose processes start late), "
                                       "got end of line");
    return 0;
}

/* Whom a kind hits and when it ends (checked in the order of the
 * keys' documentation, so the first error found stays the same). */
static int target_rules(const fl_t *x)
{
    const ddp_fault_t *f = x->f;
    ddp__ln_t *l = x->l;
    const char *kind = x->kind->text;
    int hits_process = f->kind == DDP_FAULT_CRASH || f->kind == DDP_FAULT_PAUSE ||
                       f->kind == DDP_FAULT_STALL;
    if (f->kind == DDP_FAULT_PARTITION && !f->node_set)
        return ddp__ln_err(l, x->last, "expected nodes= (one side of the partition), got end "
                                       "of line");
    if (f->node_set && f->kind != DDP_FAULT_PARTITION)
        return ddp__ln_err(l, x->nodes_col, "expected nodes= only on partition faults (a %s "
                                            "takes node= or ranks=), got it on %s",
                           kind, kind);
    if (f->kind == DDP_FAULT_DELAY && !x->have_delay)
        return ddp__ln_err(l, x->last, "expected delay= (extra latency), got end of line");
    if (hits_process && f->node < 0 && !f->ranks && f->task < 0)
        return ddp__ln_err(l, x->last, "expected ranks= or node= (whom the %s hits), got end "
                                       "of line", kind);
    if ((f->kind == DDP_FAULT_PAUSE || f->kind == DDP_FAULT_STALL) && !x->have_end)
        return ddp__ln_err(l, x->last, "expected end= (when the %s ends), got end of line",
                           kind);
    if (f->phase && f->kind != DDP_FAULT_CRASH && f->kind != DDP_FAULT_STALL)
        return ddp__ln_err(l, x->kind->col, "expected phase= only on crash and stall faults, "
                                            "got it on %s", kind);
    return 0;
}

/* The keys only some kinds take: point=, rate=, mode=. */
static int kind_rules(const fl_t *x)
{
    const ddp_fault_t *f = x->f;
    ddp__ln_t *l = x->l;
    const char *kind = x->kind->text;
    if (f->kind == DDP_FAULT_POINT && !f->point)
        return ddp__ln_err(l, x->last, "expected point= (a fault point such as "
                                       "pg/tcp/handshake; docs/fault-points.md), got end of "
                                       "line");
    if (f->point && f->kind != DDP_FAULT_POINT)
        return ddp__ln_err(l, x->kind->col, "expected point= only on point faults, got it on "
                                            "%s", kind);
    if (f->kind == DDP_FAULT_BANDWIDTH && !f->rate_bps)
        return ddp__ln_err(l, x->last, "expected rate= (the uplink's rate, such as "
                                       "rate=1mbit), got end of line");
    if (f->kind == DDP_FAULT_BANDWIDTH && x->not_bw)
        return ddp__ln_err(l, x->not_bw->col, "expected node=, start=, end= or rate= on a "
                                              "bandwidth fault (it limits a node's whole "
                                              "uplink, as tc tbf on its interface does), got "
                                              "%s=", x->not_bw->text);
    /* A process that dies has its sockets closed by its kernel; only a
     * whole node can go quiet. */
    if (x->mode_col && (f->kind != DDP_FAULT_CRASH || f->node < 0 || f->ranks || f->phase))
        return ddp__ln_err(l, x->mode_col, "expected mode= only on a node's crash (crash "
                                           "node=N, without ranks= or phase=: a process that "
                                           "dies always closes its sockets), got it on %s",
                           f->kind != DDP_FAULT_CRASH ? kind : "a process's crash");
    if (x->rate_col && f->kind != DDP_FAULT_BANDWIDTH)
        return ddp__ln_err(l, x->rate_col, "expected rate= only on bandwidth faults, got it on "
                                           "%s", kind);
    return 0;
}

static int parse_fault(ddp__ln_t *l, const char *plugin, const ddp__tok_t *tok, int ntok,
                       ddp_fault_t *f, ddp__where_t *at)
{
    char g[80], kinds[256];
    ddp_fault_kind_list(kinds, sizeof kinds); /* the kinds table's */
    if (ntok < 2)
        return ddp__ln_err(l, tok[0].col + 5, "expected a fault kind (%s), got end of line",
                           kinds);
    memset(f, 0, sizeof *f);
    memset(at, 0, sizeof *at * DDP__AT_COUNT);
    f->node = f->task = f->peer_node = -1;
    if (tok[1].eq || ddp_fault_kind_parse(tok[1].text, &f->kind) != 0)
        return ddp__ln_err(l, tok[1].col, "expected a fault kind (%s), got %s", kinds,
                           ddp__tok_got(&tok[1], g, sizeof g));
    fl_t x = {.l = l, .plugin = plugin, .f = f, .at = at, .kind = &tok[1],
              .last = DDP__TOK_END(tok[ntok - 1])};
    int rc = 0;
    for (int i = 2; rc == 0 && i < ntok; i++)
        rc = fault_word(&x, tok, i);
    if (rc == 0)
        rc = window_rules(&x);
    if (rc == 0)
        rc = target_rules(&x);
    if (rc == 0)
        rc = kind_rules(&x);
    if (rc) {
        free((char *)f->ranks);
        f->ranks = NULL;
    }
    return rc;
}

int ddp__fault_line_parse(ddp__ln_t *l, const char *plugin, const ddp__tok_t *tok, int ntok,
                          ddp_fault_t *f, ddp__where_t at[DDP__AT_COUNT])
{
    if (strcmp(tok[0].text, "late"))
        return parse_fault(l, plugin, tok, ntok, f, at);
    /* `late ranks=3 by=20s`: a fault of kind late, its kind word implied */
    ddp__tok_t *lt = malloc(sizeof *lt * (size_t)(ntok + 1));
    if (!lt)
        return ddp__ln_err(l, tok[0].col, "out of memory");
    lt[0] = tok[0];
    memset(&lt[1], 0, sizeof lt[1]);
    snprintf(lt[1].text, sizeof lt[1].text, "late");
    lt[1].col = tok[0].col;
    memcpy(&lt[2], &tok[1], sizeof *lt * (size_t)(ntok - 1));
    int rc = parse_fault(l, plugin, lt, ntok + 1, f, at);
    free(lt);
    return rc;
}

/* Event triggers (start=/end= on an event) against the cluster. */
static int check_triggers(ddp__ln_t *l, const ddp_fault_t *f, const ddp__where_t *at,
                          const ddp__fault_cluster_t *c)
{
    const ddp_fault_trigger_t *tr[2] = {&f->start_on, &f->end_on};
    for (int k = 0; k < 2; k++) {
        ddp_rankset_t rs;
        if (tr[k]->ranks[0] && ddp_rankset_parse(tr[k]->ranks, &rs) == 0 &&
            ddp_rankset_max(&rs) >= c->world)
            return ddp__ln_err_at(l, at[k ? DDP__AT_END : DDP__AT_START],
                                  "expected an event of ranks 0..%ld (%s), got rank %d",
                                  c->world - 1, c->world_why, ddp_rankset_max(&rs));
        if ((tr[k]->kind == DDP_TRIG_ENTER || tr[k]->kind == DDP_TRIG_LEAVE) &&
            !default_phase(tr[k]->arg) && !plugin_phase(run_plugin(c->plugin), tr[k]->arg))
            return ddp__ln_err_at(l, at[k ? DDP__AT_END : DDP__AT_START],
                                  "expected a phase the scenario's plugin \"%s\" enters, got "
                                  "\"%s\" (add the `plugin` line of the plugin that declares "
                                  "it)",
                                  c->plugin && *c->plugin ? c->plugin : "default", tr[k]->arg);
    }
    return 0;
}

/* phase= against the plugin the run uses. */
static int check_phase(ddp__ln_t *l, const ddp_fault_t *f, const ddp__where_t *at,
                       const ddp__fault_cluster_t *c)
{
    if (!f->phase || default_phase(f->phase))
        return 0;
    const ddp_plugin_t *pl = run_plugin(c->plugin);
    if (plugin_phase(pl, f->phase))
        return 0;
    const char *name = NULL;
    const ddp_plugin_t *owner = phase_owner(f->phase, &name);
    return ddp__ln_err_at(l, at[DDP__AT_PHASE], "expected a phase the scenario's plugin \"%s\" "
                                                "enters, got \"%s\", a phase of plugin \"%s\" "
                                                "(add `plugin %s`, or aim at another phase)",
                          pl ? pl->name : "default", f->phase, owner ? owner->name : "?",
                          owner ? owner->name : "?");
}

int ddp__fault_line_check(ddp__ln_t *l, const ddp_fault_t *f, const ddp__where_t *at,
                          const ddp__fault_cluster_t *c)
{
    if (at[DDP__AT_NODE].line &&
        ddp__ln_check_node(l, at[DDP__AT_NODE], f->node, c->nodes, "node= to be"))
        return DDP_ECONFIG;
    if (at[DDP__AT_PEER].line &&
        ddp__ln_check_node(l, at[DDP__AT_PEER], f->peer_node, c->nodes, "peer= to be"))
        return DDP_ECONFIG;
    for (int b = c->nodes; b < 64; b++)
        if (f->node_set >> b & 1)
            return ddp__ln_check_node(l, at[DDP__AT_NODES], b, c->nodes,
                                      "every node of nodes= to be");
    if (f->kind == DDP_FAULT_PARTITION && c->nodes <= 64 &&
        f->node_set == (c->nodes == 64 ? ~0ull : (1ull << c->nodes) - 1))
        return ddp__ln_err_at(l, at[DDP__AT_NODES], "expected a partition leaving some nodes "
                                                    "on the other side, got every node on one "
                                                    "side");
    ddp_rankset_t rs;
    long top = f->ranks && ddp_rankset_parse(f->ranks, &rs) == 0 ? ddp_rankset_max(&rs) : -1;
    if (f->ranks && top >= c->world)
        return ddp__ln_err_at(l, at[DDP__AT_RANKS], "expected ranks 0..%ld (%s), got rank %ld",
                              c->world - 1, c->world_why, top);
    if (check_triggers(l, f, at, c))
        return DDP_ECONFIG;
    return check_phase(l, f, at, c);
}

int ddp__fault_line_read(ddp__ln_t *l, const char *text, int col, const ddp__fault_cluster_t *c,
                         ddp_fault_t *f)
{
    ddp__tok_t tok[DDP__LN_MAX_TOKENS];
    ddp__where_t at[DDP__AT_COUNT];
    char g[80];
    int ntok = 0;
    if (ddp__ln_lex(l, text - (col - 1), (size_t)(col - 1), tok, &ntok))
        return DDP_ECONFIG;
    if (!ntok || tok[0].eq || tok[0].quoted ||
        (strcmp(tok[0].text, "fault") && strcmp(tok[0].text, "late")))
        return ddp__ln_err(l, ntok ? tok[0].col : col, "expected a fault line (fault KIND ... "
                                                       "or late ...), got %s",
                           ddp__tok_got(ntok ? &tok[0] : NULL, g, sizeof g));
    if (ddp__fault_line_parse(l, c->plugin, tok, ntok, f, at))
        return DDP_ECONFIG;
    if (ddp__fault_line_check(l, f, at, c) == 0)
        return 0;
    free((char *)f->ranks);
    f->ranks = NULL;
    return DDP_ECONFIG;
}

static void put_when(FILE *o, const char *key, const ddp_fault_trigger_t *t, int64_t ns)
{
    char ev[120];
    ddp_trigger_format(t, ev, sizeof ev);
    fprintf(o, " %s=", key);
    if (!ns) {
        ddp__put_word(o, ev);
        return;
    }
    char off[48];
    FILE *m = fmemopen(off, sizeof off, "w");
    if (!m)
        abort();
    ddp__put_duration(m, "+", ns);
    fclose(m);
    char all[200];
    snprintf(all, sizeof all, "%s%s", ev, off);
    ddp__put_word(o, all);
}

void ddp__fault_line_put(FILE *o, const ddp_fault_t *f)
{
    if (f->kind == DDP_FAULT_LATE)
        fputs("late", o);
    else
        fprintf(o, "fault %s", ddp_fault_kind_name(f->kind));
    if (f->node >= 0)
        fprintf(o, " node=%d", f->node);
    if (f->peer_node >= 0)
        fprintf(o, " peer=%d", f->peer_node);
    if (f->port)
        fprintf(o, " port=%u", (unsigned)f->port);
    if (f->node_set) {
        fprintf(o, " nodes=");
        int first = 1;
        for (int b = 0; b < 64; b++)
            if (f->node_set >> b & 1) {
                fprintf(o, "%s%d", first ? "" : ",", b);
                first = 0;
            }
    }
    if (f->ranks)
        fprintf(o, " ranks=%s", f->ranks);
    if (f->start_on.kind != DDP_TRIG_TIME)
        put_when(o, "start", &f->start_on, f->start_ns);
    else if (f->start_ns)
        ddp__put_duration(o, " start=", f->start_ns);
    /* A pause needs its end= and a delay its delay=, even at 0. */
    if (f->end_on.kind != DDP_TRIG_TIME)
        put_when(o, "end", &f->end_on, f->end_ns);
    else if (f->end_ns || f->kind == DDP_FAULT_PAUSE || f->kind == DDP_FAULT_STALL)
        ddp__put_duration(o, " end=", f->end_ns);
    if (f->count)
        fprintf(o, " count=%d", f->count);
    if (f->probability > 0)
        fprintf(o, " p=%.17g", f->probability);
    if (f->kind == DDP_FAULT_LATE)
        ddp__put_duration(o, " by=", f->delay_ns);
    else if (f->delay_ns || f->kind == DDP_FAULT_DELAY)
        ddp__put_duration(o, " delay=", f->delay_ns);
    if (f->after_bytes)
        fprintf(o, " after=%lld", (long long)f->after_bytes);
    if (f->phase) {
        fprintf(o, " phase=");
        ddp__put_quoted(o, f->phase);
    }
    if (f->point)
        fprintf(o, " point=%s", f->point);
    if (f->rate_bps)
        ddp__put_rate(o, f->rate_bps);
    if (f->kill_mode)
        fputs(" mode=kill", o);
    if (f->may_miss)
        fputs(" may-miss", o);
}
