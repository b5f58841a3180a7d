/* harness/check.c — `ddpsim check` (docs/check.md): baselines, discovery,
 * aimed and random runs judged by the oracles, every finding shrunk to a
 * scenario file whose replay is checked to reproduce it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_priv.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/plugin.h"
#include "ddp/real.h"
#include "ddp/sys.h"
#include "progress.h"
#include "scenario_priv.h"

#define CHK_DEFAULT_RUNS 3000
#define CHK_DEFAULT_BUDGET_S 300.0
#define CHK_DEFAULT_RANDOM 200
#define CHK_EXEC_RUNS 30          /* a foreign program's aimed real runs */
#define CHK_EXEC_BUDGET_S 1200.0
#define CHK_BASE_SEEDS 3
#define CHK_MAX_SEEN 64 /* distinct findings remembered for deduplication */

typedef struct chk {
    const ddp_check_opts_t *o;
    const ddp_plugin_t *p;
    ddp_check_report_t *rep;
    FILE *log;
    ddp_sys_t *wall;
    int64_t t0;
    int real;              /* a foreign program, in real runs */
    ddp_real_opts_t ro;
    char seen[CHK_MAX_SEEN][96]; /* findings already reported (dedup keys) */
    int nseen;
} chk_t;

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double elapsed(const chk_t *c)
{
    return (double)(ddp_sys_now(c->wall) - c->t0) / 1e9;
}

/* The lines that say what runs: the plugin, or the foreign program as
 * torchrun would start it on its own port. */
static int what_runs(const chk_t *c, char *buf, size_t n)
{
    if (!c->real)
        return snprintf(buf, n, "plugin %s\n", c->p->name);
    char q[1200];
    size_t o = 0;
    for (const char *p = c->o->exec; *p && o + 3 < sizeof q; p++) {
        if (*p == '"' || *p == '\\')
            q[o++] = '\\';
        q[o++] = *p;
    }
    q[o] = '\0';
    return snprintf(buf, n, "launcher torchrun\nport %u\nexec \"%s\"\n",
                    c->o->port ? c->o->port : 31700, q);
}

/* The run's scenario: a shape, what runs, the candidate's faults. */
static ddp_scenario_t *scenario_of(const chk_t *c, const chk_cand_t *k, uint64_t seed,
                                   const char *title)
{
    char text[4096];
    int off = snprintf(text, sizeof text,
                       "scenario \"check %s: %s\"\nnodes %d\ndevices %d\ntimeout %ds\n"
                       "accelerators %s\nseed %" PRIu64 "\n",
                       c->real ? "exec" : c->p->name, title, k->nodes, k->devices,
                       CHK_TIMEOUT_S, k->accel, seed);
    off += what_runs(c, text + off, sizeof text - (size_t)off);
    for (int i = 0; i < k->nf && off < (int)sizeof text; i++)
        off += snprintf(text + off, sizeof text - (size_t)off, "%s\n", k->faults[i]);
    snprintf(text + off, sizeof text - (size_t)off, "expect invariants\n");
    ddp_scenario_t *s = NULL;
    char err[512];
    if (ddp_scenario_parse(text, "check.scn", NULL, &s, err, sizeof err)) {
        fprintf(c->log, "check: internal: a generated scenario does not parse: %s\n", err);
        return NULL;
    }
    if (!c->real)
        ddp_scenario_use_plugin(s, c->p);
    return s;
}

/* The oracles, on the simulator or on real processes. */
static int judge(const chk_t *c, const ddp_scenario_t *s, const char *accel, int baseline,
                 ddp_check_discovery_t *tap, ddp_scn_result_t *r, chk_verdict_t *v)
{
    if (!c->real)
        return ddp__check_judge(s, accel, baseline, tap, r, v);
    ddp_real_opts_t ro = c->ro;
    ro.tap = tap ? ddp__check_tap : NULL;
    ro.tap_arg = tap;
    return ddp__check_judge_real(c->wall, s, accel, &ro, baseline, r, v);
}

/* ---- findings ---- */

typedef struct {
    int oracle;
} keep_t;

static int still_shows(void *arg, const ddp_scenario_t *s, const char *accel,
                       ddp_scn_result_t *r)
{
    const keep_t *k = arg;
    chk_verdict_t v;
    int o = ddp__check_judge(s, accel, k->oracle == CHK_BASELINE, NULL, r, &v);
    return o == k->oracle || (k->oracle == CHK_NOFAULT && o == CHK_BASELINE);
}

/* The expectation a replay of the finding fails on. */
static void set_expect(ddp_scenario_t *m, const chk_verdict_t *v)
{
    memset(m->expect, 0, sizeof m->expect);
    m->nexpect = 1;
    ddp_scn_expect_t *e = &m->expect[0];
    if (v->oracle == CHK_INVARIANT) {
        e->kind = DDP_EXPECT_INVARIANTS;
    } else if (v->oracle == CHK_CAUSE) {
        e->kind = DDP_EXPECT_FAIL;
        snprintf(e->ranks, sizeof e->ranks, "%d", v->rank);
        if (v->phase[0]) {
            snprintf(e->mentions[0], sizeof e->mentions[0], "%s", v->phase);
            e->nmentions = 1;
        } else { /* the store client's words for a request after a failure */
            snprintf(e->excludes[0], sizeof e->excludes[0], "is gone (earlier: lost the connection");
            e->nexcludes = 1;
        }
    } else {
        e->kind = DDP_EXPECT_OK;
    }
}

/* Parses the written text back and runs it: the replay must fail its
 * expectation as the finding did (in the simulator, with the same trace). */
static int replay_reproduces(const chk_t *c, const char *text, const char *accel,
                             const ddp_scn_result_t *want)
{
    ddp_scenario_t *p = NULL;
    char err[512];
    if (!text || ddp_scenario_parse(text, "finding.scn", NULL, &p, err, sizeof err))
        return 0;
    ddp_scn_result_t r;
    int ok;
    if (c->real) {
        ok = ddp_real_run(c->wall, p, accel, &c->ro, &r) == 0 && !r.pass && !r.skipped;
    } else {
        ddp_scn_run_opts_t ro = {0};
        ok = ddp_scenario_run(p, accel, &ro, &r) == 0 && !r.pass && !r.vacuous &&
             r.trace_hash == want->trace_hash;
    }
    ddp_scenario_free(p);
    return ok;
}

static int put_text(FILE *f, void *text)
{
    fputs(text, f); /* a write error is ddp_out_write's to report */
    return 0;
}

static void write_finding(chk_t *c, ddp_check_finding_t *f, uint64_t seed)
{
    const char *self = c->o->self ? c->o->self : "ddpsim";
    char file[64];
    snprintf(file, sizeof file, "check-%" PRIu64 "-%d.scn", c->o->seed ? c->o->seed : 1,
             c->rep->nfindings + 1);
    if (c->o->out_dir && *c->o->out_dir && f->scenario) {
        snprintf(f->path, sizeof f->path, "%s/%s", c->o->out_dir, file);
        if (ddp_sys_make_dirs(c->o->out_dir) != 0 ||
            ddp_out_write(f->path, "the finding's scenario", put_text, f->scenario) != 0) {
            fprintf(c->log, "check: could not write %s: %s\n", f->path, ddp_err_message());
            f->path[0] = '\0';
        }
    }
    const char *lib = c->real ? NULL : ddp_plugin_library(c->p);
    snprintf(f->replay, sizeof f->replay, "%s replay %s --accelerator %s --seed %" PRIu64 "%s%s%s",
             self, f->path[0] ? f->path : file, f->accel, seed, lib ? " --plugin " : "",
             lib ? lib : "", !c->real ? "" : c->o->netns ? " --netns" : " --real");
}

/* The dedup key: where the run's first error came from (its class and
 * the phase its message names), so one bug seen by several oracles is one
 * finding; an invariant by its own words; a cause by its phase. */
static int already_seen(chk_t *c, const chk_verdict_t *v, const ddp_scn_result_t *r)
{
    char key[96];
    const char *m = r->first_error, *comma = strchr(m, ',');
    const char *colon = comma ? strchr(comma, ':') : NULL;
    int len = comma && colon ? (int)(colon - comma) : 0;
    const char *inv = strstr(r->why, "invariant: ");
    if (v->oracle == CHK_INVARIANT) { /* its words, numbers left out */
        int o = snprintf(key, sizeof key, "invariant ");
        for (const char *q = inv ? inv + 11 : r->why; *q && o < 60; q++)
            if ((*q < '0' || *q > '9') && *q != '.')
                key[o++] = *q;
        key[o] = '\0';
    }
    else if (v->oracle == CHK_CAUSE)
        snprintf(key, sizeof key, "cause %s", v->phase[0] ? v->phase : "gone");
    else
        snprintf(key, sizeof key, "%s %.*s", ddp_scn_error_class(r->first_code), len,
                 comma ? comma : "");
    for (int i = 0; i < c->nseen; i++)
        if (!strcmp(c->seen[i], key))
            return 1;
    if (c->nseen < CHK_MAX_SEEN)
        snprintf(c->seen[c->nseen++], sizeof c->seen[0], "%s", key);
    return 0;
}

/* A copy of s, through its text. */
static ddp_scenario_t *clone_of(const ddp_scenario_t *s)
{
    char *text = ddp_scenario_text(s), err[256];
    ddp_scenario_t *m = NULL;
    if (text && ddp_scenario_parse(text, "finding.scn", NULL, &m, err, sizeof err))
        m = NULL;
    free(text);
    return m;
}

static void record(chk_t *c, const ddp_scenario_t *s, const char *accel,
                   const chk_verdict_t *v, const ddp_scn_result_t *r)
{
    c->rep->findings_total++;
    int max = c->o->max_findings > 0 ? c->o->max_findings : 10;
    if (already_seen(c, v, r) || c->rep->nfindings >= max)
        return;
    ddp_check_finding_t *fs = realloc(c->rep->findings,
                                      sizeof *fs * (size_t)(c->rep->nfindings + 1));
    if (!fs)
        return;
    c->rep->findings = fs;
    ddp_check_finding_t *f = &fs[c->rep->nfindings];
    memset(f, 0, sizeof *f);
    snprintf(f->oracle, sizeof f->oracle, "%s", ddp__check_oracle_name(v->oracle));
    snprintf(f->sentence, sizeof f->sentence, "%s", v->sentence);
    snprintf(f->accel, sizeof f->accel, "%s", accel);
    keep_t k = {v->oracle};
    int runs = 0;
    f->result = *r;
    /* a real run is seconds (a torch import): a foreign program's finding
     * is the run as aimed, one fault on 2 x 2 ranks already */
    ddp_scenario_t *m = c->real ? clone_of(s)
                                : ddp__explore_shrink_by(s, accel, still_shows, &k,
                                                         &f->shrink_steps, &runs, &f->result);
    if (!m)
        return;
    snprintf(m->name, sizeof m->name, "check %s: %s%s", c->real ? "exec" : c->p->name,
             f->oracle, c->real ? "" : " (shrunk)");
    set_expect(m, v);
    f->scenario = ddp_scenario_text(m);
    write_finding(c, f, m->seed);
    f->replayed = replay_reproduces(c, f->scenario, accel, &f->result);
    ddp_scenario_free(m);
    c->rep->nfindings++;
}

/* ---- the runs ---- */

static int put_current(FILE *f, void *arg)
{
    const void *const *a = arg;
    fprintf(f, "%s\n", (const char *)a[0]);
    return ddp_scenario_write(a[1], f);
}

static void run_one(chk_t *c, const ddp_scenario_t *s, const char *accel, int baseline,
                    ddp_check_discovery_t *tap)
{
    ddp_scn_result_t r;
    chk_verdict_t v;
    if (c->o->current_path) {
        const void *arg[2] = {accel, s};
        (void)ddp_out_write(c->o->current_path, "the current run", put_current, arg);
    }
    if (judge(c, s, accel, baseline, tap, &r, &v) > 0)
        record(c, s, accel, &v, &r);
}

static const struct {
    int nodes, devices;
    const char *accel;
} shapes[] = {{1, 2, "ddp"},     {2, 2, "ddp"},    {2, 2, "ddp_spawn"},   {2, 2, "ddp_cpu"},
              {2, 2, "ddp2"},    {2, 2, "ddp_hpc"}, {2, 2, "ddp_cpu_hpc"}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* Fault-free runs of every shape, CHK_BASE_SEEDS schedules each; the
 * user's plugin's events go to the discovery, the default's to dflt. */
static void baselines(chk_t *c, ddp_check_discovery_t *dflt)
{
    /* a foreign program: 1 node and 2 nodes of 2, once each (real runs) */
    size_t nshapes = c->real ? 2 : NSHAPES;
    int seeds = c->real ? 1 : CHK_BASE_SEEDS;
    for (size_t i = 0; i < nshapes; i++)
        for (int k = 0; k < seeds; k++) {
            chk_cand_t cand = {.nodes = shapes[i].nodes, .devices = shapes[i].devices,
                               .random = -1};
            snprintf(cand.accel, sizeof cand.accel, "%s", shapes[i].accel);
            uint64_t seed = 1 + (mix64(c->o->seed ^ (i * 16 + (size_t)k)) & 0xffffffffull);
            ddp_scenario_t *s = scenario_of(c, &cand, seed, "fault-free");
            if (!s)
                continue;
            int before = c->rep->findings_total;
            run_one(c, s, cand.accel, 1, &c->rep->disc);
            c->rep->baseline_runs++;
            c->rep->baseline_failed += c->rep->findings_total > before;
            if (k == 0 && !c->real) { /* the same shape under the default plugin */
                ddp_scenario_t d;
                memcpy(&d, s, sizeof d);
                d.plugin[0] = d.plugin_lib[0] = '\0';
                ddp_scn_result_t r;
                ddp_scn_run_opts_t ro = {.tap = ddp__check_tap, .tap_arg = dflt};
                (void)ddp_scenario_run(&d, cand.accel, &ro, &r);
            }
            ddp_scenario_free(s);
        }
}

static int over_budget(chk_t *c, int done)
{
    int runs = c->o->runs > 0 ? c->o->runs : c->real ? CHK_EXEC_RUNS : CHK_DEFAULT_RUNS;
    double budget = c->o->budget_s > 0 ? c->o->budget_s
                    : c->real          ? CHK_EXEC_BUDGET_S
                                       : CHK_DEFAULT_BUDGET_S;
    if (done < runs && elapsed(c) < budget)
        return 0;
    c->rep->budget_hit = 1;
    return 1;
}

static ddp_scenario_t *random_draw(chk_t *c, int i, char *accel, size_t n)
{
    ddp_explore_opts_t eo = {.ranks = 4, .seed = c->o->seed ? c->o->seed : 1,
                             .max_faults = 2, .plugin = c->p->name};
    ddp_scenario_t *s = ddp_explore_draw(&eo, i, accel, n);
    if (s) {
        s->timeout_ns = (int64_t)CHK_TIMEOUT_S * DDP_NS_PER_S;
        s->store_timeout_ns = 0;
        if (!strcmp(accel, "ddp2") && s->nodes == 1) /* a world of 1: not a */
            s->nodes = 2, s->devices = 2;              /* shape the baselines ask */
    }
    return s;
}

static void sweep(chk_t *c, const chk_cands_t *cands, int nrandom)
{
    ddp_progress_t pg = {0}; /* its clock and interval: the defaults */
    long long total = cands->n + nrandom, done = 0;
    ddp_progress_start(&pg, "check", "runs", ddp_shard_size(&c->o->shard, total),
                       c->o->progress == 1 ? DDP_PROGRESS_BAR
                       : c->o->progress ? DDP_PROGRESS_LINES : DDP_PROGRESS_OFF, NULL);
    for (long long i = 0; i < total && !over_budget(c, (int)done); i++) {
        if (!ddp_shard_owns(&c->o->shard, i))
            continue;
        char accel[16] = "";
        ddp_scenario_t *s;
        if (i < cands->n) {
            const chk_cand_t *k = &cands->v[i];
            snprintf(accel, sizeof accel, "%s", k->accel);
            s = scenario_of(c, k, 1 + (mix64(c->o->seed + (uint64_t)i) & 0xffffffffull),
                            "aimed");
            c->rep->aimed_runs++;
        } else {
            s = random_draw(c, (int)(i - cands->n), accel, sizeof accel);
            c->rep->random_runs++;
        }
        if (s)
            run_one(c, s, accel, 0, NULL);
        ddp_scenario_free(s);
        char note[64];
        snprintf(note, sizeof note, "%d finding(s)", c->rep->nfindings);
        ddp_progress_update(&pg, ++done, note);
    }
    ddp_progress_end(&pg, 0);
}

/* The candidates, then the sweep: aimed runs, then random ones (the
 * simulator only). */
static int explore_all(chk_t *c)
{
    chk_cands_t cands = {0};
    int rc = c->real ? ddp__check_aim_exec(&c->rep->disc, c->o->netns, &cands)
                     : ddp__check_aim(&c->rep->disc, c->p, &cands);
    c->rep->candidates = cands.n;
    int nrandom = c->real || c->o->random_runs < 0 ? 0
                  : c->o->random_runs              ? c->o->random_runs
                                                   : CHK_DEFAULT_RANDOM;
    if (rc == 0)
        sweep(c, &cands, nrandom);
    ddp__check_cands_free(&cands);
    return rc;
}

int ddp_check(const ddp_check_opts_t *o, ddp_check_report_t *rep)
{
    memset(rep, 0, sizeof *rep);
    chk_t c = {.o = o, .rep = rep, .log = o->log ? o->log : stdout, .real = o->exec != NULL};
    c.p = o->plugin ? ddp_plugin_find(o->plugin) : NULL;
    if (!c.p && !c.real)
        return ddp_err_ctx()->code ? ddp_err_ctx()->code : DDP_ENOT_FOUND;
    /* torch 1.13 may wait twice its timeout after a peer died (the store
     * then gloo's mesh): a rank is hung when still running one timeout
     * and 30 s more past its deadline */
    c.ro = (ddp_real_opts_t){.ddpsim = o->self, .netns = o->netns, .cold = o->cold,
                             .exec_grace_ns = (int64_t)(CHK_TIMEOUT_S + 30) * DDP_NS_PER_S};
    c.wall = ddp_sys_posix_new(NULL); /* the clock; real runs: the user's environment */
    if (!c.wall)
        return ddp_err_set(-12, "check: out of memory");
    c.t0 = ddp_sys_now(c.wall);
    ddp_check_discovery_t dflt;
    memset(&dflt, 0, sizeof dflt);
    baselines(&c, &dflt);
    if (!c.real)
        ddp__check_mark_user(&rep->disc, &dflt);
    int rc = o->list_only ? 0 : explore_all(&c);
    rep->wall_s = elapsed(&c);
    ddp_sys_free(c.wall);
    return rc;
}

void ddp_check_report_free(ddp_check_report_t *rep)
{
    for (int i = 0; i < rep->nfindings; i++)
        free(rep->findings[i].scenario);
    free(rep->findings);
    memset(rep, 0, sizeof *rep);
}
