/* harness/check_judge.c — `ddpsim check`'s oracles (docs/check.md): each
 * reads only the scenario, its run and, where it compares, the same run
 * under the default plugin; none knows how the faults were aimed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check_priv.h"
#include "ddp/err.h"
#include "ddp/real.h"
#include "scenario_priv.h"

const char *ddp__check_oracle_name(int oracle)
{
    static const char *const names[CHK_COUNT] = {"none",      "baseline",  "no-fault",
                                                 "invariant", "transient", "agreement",
                                                 "cause"};
    return oracle >= 0 && oracle < CHK_COUNT ? names[oracle] : "?";
}

/* The store client's words for a request made after the connection was
 * lost (core/store_client.c, check_alive): code that went on after a
 * failed request. (A lost connection only: the client itself makes a
 * second request after a WAIT that timed out, its CANCEL_WAIT.) The
 * default plugin never does. */
#define STORE_GONE "is gone (earlier: lost the connection"

static int all_ok(const ddp_scn_result_t *r)
{
    return r->invariants_ok && r->failed == 0 && r->crashed == 0 && r->ok > 0;
}

/* Did any fault act on anything (its hits)? */
static int acted(const ddp_scenario_t *s, const ddp_scn_result_t *r)
{
    for (int i = 0; i < s->nfaults && i < r->nhits; i++)
        if (r->hits[i] > 0)
            return 1;
    return 0;
}

/* A fault that ends well inside the group timeout: a pause, stall,
 * partition or delay of a bounded window, one refused connect, a start
 * a little late. A correct plugin survives it as the default does. */
static int transient_fault(const ddp_fault_t *f, int64_t timeout)
{
    int64_t len = f->end_ns - (f->start_on.kind == DDP_TRIG_TIME ? f->start_ns : 0);
    switch (f->kind) {
    case DDP_FAULT_PAUSE:
    case DDP_FAULT_STALL:
    case DDP_FAULT_PARTITION:
    case DDP_FAULT_DELAY:
        return f->end_on.kind == DDP_TRIG_TIME && f->end_ns > 0 && len <= timeout / 3 &&
               (f->kind != DDP_FAULT_DELAY || f->delay_ns <= timeout / 30);
    case DDP_FAULT_REFUSE:
        return f->count == 1;
    case DDP_FAULT_LATE:
        return f->delay_ns <= timeout / 3;
    default:
        return 0;
    }
}

/* A fault whose window ends by a time inside the group timeout: what it
 * did, TCP's retransmission and a retry undo (a partition that heals, a
 * pause, refused or black-holed connects for a while). Errors handed to
 * the plugin (reset, point), crashes and forever faults are not. */
static int healing_fault(const ddp_fault_t *f, int64_t timeout)
{
    int64_t len = f->end_ns - (f->start_on.kind == DDP_TRIG_TIME ? f->start_ns : 0);
    int windowed = f->end_on.kind == DDP_TRIG_TIME && f->end_ns > 0 && len <= timeout / 2;
    switch (f->kind) {
    case DDP_FAULT_PAUSE:
    case DDP_FAULT_STALL:
    case DDP_FAULT_PARTITION:
    case DDP_FAULT_DELAY:
    case DDP_FAULT_BLACKHOLE:
    case DDP_FAULT_REFUSE:
    case DDP_FAULT_BANDWIDTH:
        return windowed;
    default:
        return transient_fault(f, timeout);
    }
}

static int all_faults(const ddp_scenario_t *s, int (*pred)(const ddp_fault_t *, int64_t))
{
    for (int i = 0; i < s->nfaults; i++)
        if (!pred(&s->faults[i], s->timeout_ns))
            return 0;
    return s->nfaults > 0;
}

static int transient(const ddp_scenario_t *s) { return all_faults(s, transient_fault); }

static int default_phase(const char *phase)
{
    for (size_t i = 0; i < ddp_scenario_phase_count(); i++)
        if (!strcmp(ddp_scenario_phase_at(i), phase))
            return 1;
    return 0;
}

/* A store error injected into one rank while it is in one of the plugin's
 * own phases: `point store/client/... ranks=R start=enter:P@R
 * end=leave:P@R`. Returns R (its phase in phase) or -1. */
static int cause_of(const ddp_scenario_t *s, char *phase, size_t n)
{
    for (int i = 0; i < s->nfaults; i++) {
        const ddp_fault_t *f = &s->faults[i];
        ddp_rankset_t rs;
        if (f->kind != DDP_FAULT_POINT || !f->point || strncmp(f->point, "store/client/", 13) ||
            f->start_on.kind != DDP_TRIG_ENTER || f->end_on.kind != DDP_TRIG_LEAVE ||
            strcmp(f->start_on.arg, f->end_on.arg) || default_phase(f->start_on.arg) ||
            ddp_rankset_parse(f->ranks, &rs) || rs.n != 1 || rs.r[0].lo != rs.r[0].hi)
            continue;
        snprintf(phase, n, "%s", f->start_on.arg);
        return rs.r[0].lo;
    }
    return -1;
}

static void faults_text(const ddp_scenario_t *s, char *buf, size_t n)
{
    char *m = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&m, &len);
    for (int i = 0; f && i < s->nfaults; i++) {
        fputs(i ? "; " : "", f);
        ddp__scenario_put_fault(f, &s->faults[i]);
    }
    if (f)
        fclose(f);
    snprintf(buf, n, "%s", m && *m ? m : "no fault");
    free(m);
}

/* The same run under the default plugin: does the stack itself survive? */
static int run_default(const ddp_scenario_t *s, const char *accel, ddp_scn_result_t *d)
{
    ddp_scenario_t c;
    memcpy(&c, s, sizeof c); /* shallow: never freed */
    c.plugin[0] = c.plugin_lib[0] = '\0';
    ddp_scn_run_opts_t ro = {0};
    return ddp_scenario_run(&c, accel, &ro, d);
}

static int say(chk_verdict_t *v, int oracle, const char *fmt, const char *a, const char *b)
{
    v->oracle = oracle;
    snprintf(v->sentence, sizeof v->sentence, fmt, a, b);
    return oracle;
}

static int judge_invariant(const ddp_scn_result_t *r, const char *faults, chk_verdict_t *v)
{
    const char *hint = strstr(r->why, "past its deadline")
                           ? " A wait with no deadline, or bounded by the wrong timeout (the "
                             "group timeout of the run is 30 s)?"
                       : strstr(r->why, "leaked") ? " A socket the plugin opened and never "
                                                    "closed?"
                                                  : "";
    char why[900];
    snprintf(why, sizeof why, "%s.%s", r->why, hint);
    return say(v, CHK_INVARIANT, "%s Fault: %s.", why, faults);
}

/* The oracles of every run: the invariants, a fault-free baseline, a run
 * in which no fault acted. CHK_NONE with *go set: a fault acted and the
 * run was not ok, for the next oracles to judge. */
static int judge_common(const ddp_scenario_t *s, const ddp_scn_result_t *r, const char *faults,
                        int baseline, chk_verdict_t *v, int *go)
{
    if (!r->invariants_ok)
        return judge_invariant(r, faults, v);
    int ok = all_ok(r), act = acted(s, r);
    const char *first = r->first_error[0] ? r->first_error : r->why;
    if (!ok && !act && baseline)
        return say(v, CHK_BASELINE, "A fault-free run failed: %s%s", first, "");
    if (!ok && !act)
        return say(v, CHK_NOFAULT, "No fault acted on anything (0 hits: %s), yet the run "
                                   "was not ok: %s",
                   faults, first);
    *go = !ok;
    return CHK_NONE;
}

static int judge_compared(const ddp_scenario_t *s, const char *accel, const ddp_scn_result_t *r,
                          const char *faults, chk_verdict_t *v)
{
    ddp_scn_result_t d;
    if (run_default(s, accel, &d) != 0)
        return CHK_NONE;
    int d_act = acted(s, &d), d_ok = all_ok(&d);
    char what[1000];
    snprintf(what, sizeof what, "%s; the first error: %s", faults,
             r->first_error[0] ? r->first_error : r->why);
    if (transient(s) && (!d_act || d_ok))
        return say(v, CHK_TRANSIENT,
                   "A fault that heals well within the 30 s group timeout was not survived "
                   "(%s)%s",
                   what, d_act ? "; the default plugin survives it" : "");
    if (d_act && d_ok && all_faults(s, healing_fault))
        return say(v, CHK_AGREE, "The default plugin survives this fault, the plugin does "
                                 "not (%s)%s",
                   what, "");
    return CHK_NONE;
}

/* The phase the thread was in when a `point` fault first fired on it,
 * from the trace: its task's last phase line before the fault line. The
 * phase of a rank is per thread (its store server's thread has its own),
 * so the window's phase is not always the hit's. 0, or -1 (no hit). */
static int hit_phase(const char *trace, char *out, size_t n)
{
    enum { MAXT = 512 };
    char (*last)[48] = calloc(MAXT, sizeof *last); /* not TLS: it would grow every
                                                      thread's static TLS, and the
                                                      simulator's threads have small
                                                      stacks */
    if (!last)
        return -1;
    int rc = -1;
    for (const char *l = trace; l && *l;) {
        const char *e = strchr(l, '\n'), *id = strstr(l, "\"id\":");
        int t = id && (!e || id < e) ? atoi(id + 5) : -1;
        const char *ph = strstr(l, "\"kind\":\"phase\",\"phase\":\"");
        if (t >= 0 && t < MAXT && ph && (!e || ph < e)) {
            ph += 25;
            snprintf(last[t], sizeof last[t], "%.*s", (int)strcspn(ph, "\""), ph);
        } else if (t >= 0 && t < MAXT && strstr(l, "\"fault\":\"point\"") &&
                   (!e || strstr(l, "\"fault\":\"point\"") < e)) {
            snprintf(out, n, "%s", last[t]);
            rc = 0;
            break;
        }
        l = e ? e + 1 : NULL;
    }
    free(last);
    return rc;
}

int ddp__check_judge(const ddp_scenario_t *s, const char *accel, int baseline,
                     ddp_check_discovery_t *tap, ddp_scn_result_t *r, chk_verdict_t *v)
{
    memset(v, 0, sizeof *v);
    v->rank = cause_of(s, v->phase, sizeof v->phase);
    char *trace = NULL;
    ddp_scn_run_opts_t ro = {.explain_rank = v->rank + 1, .keep_trace = v->rank >= 0,
                             .trace_out = v->rank >= 0 ? &trace : NULL,
                             .tap = tap ? ddp__check_tap : NULL, .tap_arg = tap};
    int rc = ddp_scenario_run(s, accel, &ro, r);
    if (rc == 0 && trace && hit_phase(trace, v->phase, sizeof v->phase) != 0)
        v->rank = -1;
    free(trace);
    if (rc != 0)
        return -1;
    if (r->skipped)
        return CHK_NONE;
    char faults[600];
    faults_text(s, faults, sizeof faults);
    int go = 0, o = judge_common(s, r, faults, baseline, v, &go);
    if (o || !go)
        return o;
    if (strstr(r->first_error, STORE_GONE) || strstr(r->rank_error, STORE_GONE)) {
        const char *m = strstr(r->rank_error, STORE_GONE) ? r->rank_error : r->first_error;
        v->rank = strstr(r->rank_error, STORE_GONE) ? v->rank : r->first_rank;
        v->phase[0] = '\0';
        return say(v, CHK_CAUSE, "a rank made another store request after one of its "
                                 "requests had failed (an ignored store error?): \"%s\"%s",
                   m, "");
    }
    if (v->rank >= 0 && r->rank_error[0] && !strcasestr(r->rank_error, v->phase)) {
        char head[200];
        snprintf(head, sizeof head, "rank %d's store request failed in the plugin's phase "
                                    "\"%s\"",
                 v->rank, v->phase);
        return say(v, CHK_CAUSE, "%s, but the rank went on and failed elsewhere: \"%s\" (an "
                                 "ignored store error?)",
                   head, r->rank_error);
    }
    return judge_compared(s, accel, r, faults, v);
}

/* A foreign program's rank killed past its deadline plus the grace. */
static int hung(const ddp_scn_result_t *r)
{
    return r->first_code == DDP_EHUNG || strstr(r->classes, "hung") != NULL;
}

int ddp__check_judge_real(ddp_sys_t *sys, const ddp_scenario_t *s, const char *accel,
                          const ddp_real_opts_t *ro, int baseline, ddp_scn_result_t *r,
                          chk_verdict_t *v)
{
    memset(v, 0, sizeof *v);
    v->rank = -1;
    if (ddp_real_run(sys, s, accel, ro, r) < 0)
        return -1;
    if (r->skipped)
        return CHK_NONE;
    char faults[600];
    faults_text(s, faults, sizeof faults);
    const char *first = r->first_error[0] ? r->first_error : r->why;
    if (hung(r) && baseline)
        return say(v, CHK_BASELINE, "A fault-free run failed, a rank hung (still running "
                                    "past its deadline plus the grace): %s%s",
                   first, "");
    if (hung(r))
        return say(v, CHK_INVARIANT, "A rank was still running past its deadline plus the "
                                     "grace and was killed (hung): a wait without a deadline, "
                                     "or longer than the group timeout? %s. Fault: %s.",
                   first, faults);
    int go = 0, o = judge_common(s, r, faults, baseline, v, &go);
    if (o || !go)
        return o;
    if (transient(s))
        return say(v, CHK_TRANSIENT, "A fault that heals well within the group timeout was "
                                     "not survived (%s): %s",
                   faults, first);
    return CHK_NONE;
}
