/* tests/test_chrome.c — the Chrome trace export against the Trace Event
 * Format: every event of a run's trace has the format's fields with its
 * types (name string, ph string, ts number in µs, pid and tid integers,
 * args object; dur for complete events, s for instant ones), and an 8-rank
 * run shows 8 distinct tracks named "rank 0" .. "rank 7".
 *
 * The trace is parsed with the small JSON reader below (no JSON library is
 * a dependency): a viewer that refuses a type would show nothing, and a
 * string search cannot see a type. */
#include "test.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/scenario.h"
#include "ddp/sim.h"

/* ---- a JSON reader: just enough to look at types ---- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype_t;

typedef struct jval {
    jtype_t type;
    int integer;      /* J_NUM without fraction or exponent */
    double num;
    char *str;        /* J_STR */
    char **keys;      /* J_OBJ */
    struct jval *kid; /* J_ARR, J_OBJ: n children */
    int n;
} jval_t;

typedef struct {
    const char *p;
    int bad;
} jin_t;

static void jfree(jval_t *v)
{
    for (int i = 0; i < v->n; i++) {
        jfree(&v->kid[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->kid);
    free(v->keys);
    free(v->str);
}

static void jws(jin_t *in)
{
    while (isspace((unsigned char)*in->p))
        in->p++;
}

static char *jstring(jin_t *in)
{
    if (*in->p != '"') {
        in->bad = 1;
        return NULL;
    }
    const char *s = ++in->p;
    while (*in->p && *in->p != '"')
        in->p += *in->p == '\\' && in->p[1] ? 2 : 1;
    if (*in->p != '"') {
        in->bad = 1;
        return NULL;
    }
    char *out = strndup(s, (size_t)(in->p - s));
    in->p++;
    return out;
}

static void jvalue(jin_t *in, jval_t *v, int depth);

/* The members of an array (keys NULL) or an object, up to close. */
static void jmembers(jin_t *in, jval_t *v, char close, int depth)
{
    in->p++;
    jws(in);
    if (*in->p == close) {
        in->p++;
        return;
    }
    for (;;) {
        v->kid = realloc(v->kid, (size_t)(v->n + 1) * sizeof *v->kid);
        if (close == '}') {
            v->keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof *v->keys);
            jws(in);
            v->keys[v->n] = jstring(in);
            jws(in);
            if (*in->p++ != ':')
                in->bad = 1;
        }
        memset(&v->kid[v->n], 0, sizeof v->kid[0]);
        jvalue(in, &v->kid[v->n++], depth + 1);
        jws(in);
        if (in->bad)
            return;
        if (*in->p == ',') {
            in->p++;
            continue;
        }
        if (*in->p++ != close)
            in->bad = 1;
        return;
    }
}

static void jvalue(jin_t *in, jval_t *v, int depth)
{
    jws(in);
    if (depth > 32) {
        in->bad = 1;
        return;
    }
    if (*in->p == '{') {
        v->type = J_OBJ;
        jmembers(in, v, '}', depth);
    } else if (*in->p == '[') {
        v->type = J_ARR;
        jmembers(in, v, ']', depth);
    } else if (*in->p == '"') {
        v->type = J_STR;
        v->str = jstring(in);
    } else if (!strncmp(in->p, "true", 4) || !strncmp(in->p, "null", 4)) {
        v->type = *in->p == 't' ? J_BOOL : J_NULL;
        in->p += 4;
    } else if (!strncmp(in->p, "false", 5)) {
        v->type = J_BOOL;
        in->p += 5;
    } else {
        char *end;
        v->type = J_NUM;
        v->num = strtod(in->p, &end);
        if (end == in->p || (*in->p != '-' && !isdigit((unsigned char)*in->p))) {
            in->bad = 1;
            return;
        }
        v->integer = strcspn(in->p, ".eE") >= (size_t)(end - in->p);
        in->p = end;
    }
}

static const jval_t *jget(const jval_t *obj, const char *key)
{
    for (int i = 0; obj->type == J_OBJ && i < obj->n; i++)
        if (obj->keys[i] && !strcmp(obj->keys[i], key))
            return &obj->kid[i];
    return NULL;
}

static int jis(const jval_t *obj, const char *key, jtype_t type)
{
    const jval_t *v = jget(obj, key);
    return v && v->type == type;
}

/* ---- the checks ---- */

/* One event against the Trace Event Format; NULL or what is wrong. */
static const char *event_problem(const jval_t *e)
{
    static const char *const known[] = {"name", "cat", "ph", "ts", "dur", "pid",
                                        "tid", "s", "args"};
    if (e->type != J_OBJ)
        return "not an object";
    for (int i = 0; i < e->n; i++) {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(e->keys[i], known[k]))
            k++;
        if (k == sizeof known / sizeof known[0])
            return "a field the format does not define";
    }
    if (!jis(e, "name", J_STR) || !jis(e, "ph", J_STR) || !jis(e, "ts", J_NUM) ||
        !jis(e, "args", J_OBJ))
        return "name, ph, ts or args missing or of the wrong type";
    if (!jis(e, "pid", J_NUM) || !jget(e, "pid")->integer || !jis(e, "tid", J_NUM) ||
        !jget(e, "tid")->integer)
        return "pid or tid not an integer";
    if (jget(e, "cat") && !jis(e, "cat", J_STR))
        return "cat not a string";
    const char *ph = jget(e, "ph")->str;
    if (!strcmp(ph, "X"))
        return jis(e, "dur", J_NUM) && jget(e, "dur")->num >= 0 ? NULL
                                                                 : "X without a dur >= 0";
    if (!strcmp(ph, "i")) {
        const jval_t *s = jget(e, "s");
        return s && s->type == J_STR && strchr("gpt", s->str[0]) && s->str[0] && !s->str[1]
                   ? NULL
                   : "i without s of g, p or t";
    }
    if (!strcmp(ph, "M"))
        return strstr(jget(e, "name")->str, "sort_index") ||
                       jis(jget(e, "args"), "name", J_STR)
                   ? NULL
                   : "metadata without args.name";
    return "a phase other than X, i or M";
}

typedef struct {
    int events, bad, ranks_named, faults, phases;
    int rank_seen[64];
} chrome_sum_t;

/* Checks every event of trace's Chrome export into *sum (each problem
 * printed); 0 when the document parses. */
static int check_chrome(const char *trace, chrome_sum_t *sum)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f || ddp_sim_export_chrome(trace, f) != 0)
        return -1;
    fclose(f);
    jin_t in = {buf, 0};
    jval_t doc = {0};
    jvalue(&in, &doc, 0);
    jws(&in);
    int rc = in.bad || *in.p || !jis(&doc, "traceEvents", J_ARR) ? -1 : 0;
    if (rc)
        printf("\n  the Chrome trace does not parse near: %.60s\n", in.p);
    const jval_t *evs = rc ? NULL : jget(&doc, "traceEvents");
    memset(sum, 0, sizeof *sum);
    for (int i = 0; evs && i < evs->n; i++) {
        const jval_t *e = &evs->kid[i];
        const char *why = event_problem(e);
        sum->events++;
        if (why) {
            sum->bad++;
            printf("\n  event %d: %s\n", i, why);
            continue;
        }
        const char *name = jget(e, "name")->str, *ph = jget(e, "ph")->str;
        const jval_t *cat = jget(e, "cat");
        sum->phases += !strcmp(ph, "X");
        sum->faults += cat && !strcmp(cat->str, "fault") && !strcmp(ph, "i");
        int r, end = 0, tid = (int)jget(e, "tid")->num;
        const char *tn = !strcmp(name, "thread_name") ? jget(jget(e, "args"), "name")->str
                                                      : "";
        if (sscanf(tn, "rank %d%n", &r, &end) == 1 && !tn[end] && r == tid && r >= 0 &&
            r < 64 && !sum->rank_seen[r]++)
            sum->ranks_named++;
    }
    jfree(&doc);
    free(buf);
    return rc;
}

static char *run_trace(const char *path, const char *accel)
{
    ddp_scenario_t *s = NULL;
    char err[256];
    if (ddp_scenario_load(path, &s, err, sizeof err) != 0)
        return NULL;
    char *trace = NULL;
    ddp_scn_result_t r;
    ddp_scn_run_opts_t o = {.keep_trace = 1, .trace_out = &trace};
    ddp_scenario_run(s, accel, &o, &r);
    ddp_scenario_free(s);
    return trace;
}

/* 4 nodes x 2: each launcher's children, ranks 0..7, on tracks of their
 * own named after their rank; launchers and the store thread elsewhere. */
static void test_eight_ranks(void)
{
    static const char *const accels[] = {"ddp_spawn", "ddp", "ddp_hpc"};
    for (size_t a = 0; a < sizeof accels / sizeof accels[0]; a++) {
        char *trace = run_trace("scenarios/clean-4-nodes.scn", accels[a]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(trace);
        chrome_sum_t sum;
        CU_ASSERT_EQUAL(check_chrome(trace, &sum), 0);
        CU_ASSERT(sum.events > 50);
        CU_ASSERT_EQUAL(sum.bad, 0);
        CU_ASSERT(sum.phases > 8);
        if (sum.ranks_named != 8)
            printf("\n  %s: %d named rank tracks, want 8\n", accels[a], sum.ranks_named);
        CU_ASSERT_EQUAL(sum.ranks_named, 8);
        for (int r = 0; r < 8; r++)
            CU_ASSERT_EQUAL(sum.rank_seen[r], 1);
        free(trace);
    }
}

/* A crash fault is an instant event of category fault, well formed too. */
static void test_fault_instants(void)
{
    char *trace = run_trace("scenarios/crash-joining.scn", "ddp");
    CU_ASSERT_PTR_NOT_NULL_FATAL(trace);
    chrome_sum_t sum;
    CU_ASSERT_EQUAL(check_chrome(trace, &sum), 0);
    CU_ASSERT_EQUAL(sum.bad, 0);
    CU_ASSERT(sum.faults >= 1);
    free(trace);
}

/* A line the trace cut at 1,024 bytes may end inside a string: its fields
 * become one string argument, so the document still parses. */
static void test_cut_line(void)
{
    char trace[2048];
    int n = snprintf(trace, sizeof trace,
                     "{\"t\":5,\"task\":\"w\",\"id\":0,\"kind\":\"start\",\"node\":\"n0\","
                     "\"node_index\":0,\"rank\":0,\"thread\":0}\n");
    int line = n;
    n += snprintf(trace + n, sizeof trace - (size_t)n,
                  "{\"t\":6,\"task\":\"w\",\"id\":0,\"kind\":\"k3\",\"s\":\"");
    memset(trace + n, 'q', (size_t)(line + 1021 - n));
    memcpy(trace + line + 1021, "}\n", 3);
    chrome_sum_t sum;
    CU_ASSERT_EQUAL(check_chrome(trace, &sum), 0);
    CU_ASSERT_EQUAL(sum.bad, 0);
    CU_ASSERT_EQUAL(sum.ranks_named, 1);
}

/* The reader itself: the checks above are only as good as what it refuses. */
static void test_reader_refuses(void)
{
    static const struct {
        const char *json;
        const char *why; /* NULL: well formed */
    } c[] = {
        {"{\"name\":\"a\",\"ph\":\"i\",\"s\":\"t\",\"ts\":1.5,\"pid\":0,\"tid\":3,\"args\":{}}",
         NULL},
        {"{\"name\":\"a\",\"ph\":\"i\",\"s\":\"t\",\"ts\":1,\"pid\":0,\"tid\":\"r3\",\"args\":{}}",
         "pid or tid not an integer"},
        {"{\"name\":\"a\",\"ph\":\"i\",\"ts\":1,\"pid\":0,\"tid\":3,\"args\":{}}",
         "i without s of g, p or t"},
        {"{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"pid\":0,\"tid\":3,\"args\":{}}",
         "X without a dur >= 0"},
        {"{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":1.5,\"tid\":3,\"args\":{}}",
         "pid or tid not an integer"},
        {"{\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":2,\"pid\":1,\"tid\":3}",
         "name, ph, ts or args missing or of the wrong type"},
        {"{\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0,\"pid\":1,\"tid\":3,\"args\":{}}",
         "metadata without args.name"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        jin_t in = {c[i].json, 0};
        jval_t v = {0};
        jvalue(&in, &v, 0);
        CU_ASSERT_FALSE(in.bad);
        const char *why = event_problem(&v);
        CU_ASSERT_TRUE(c[i].why ? why && !strcmp(why, c[i].why) : !why);
        jfree(&v);
    }
}

DDP_SUITE("chrome_trace", NULL, NULL,
          {"every event has the format's fields and types; 8 ranks, 8 tracks",
           test_eight_ranks},
          {"faults are instant events", test_fault_instants},
          {"a cut trace line stays valid JSON", test_cut_line},
          {"the checker refuses what the format does not allow", test_reader_refuses})
