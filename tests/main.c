/* tests/main.c — the CUnit runner for every suite.
 *
 *   ddpsim-test [--list] [--junit FILE] [--times FILE] [SUITE[/TEST] ...]
 *
 * Exit status comes from CU_get_number_of_failure_records() read BEFORE
 * CU_cleanup_registry() (CU_basic_run_tests returns 0 even on failures, and
 * the counts read 0 after cleanup). JUnit XML is written by us: CUnit 2.1-3's
 * own JUnit output is broken (toolchain-pitfalls.md).
 *
 * Every test runs through timed_run and every suite's init and cleanup
 * through timed_init and timed_cleanup, which time them (wall clock, for
 * the reader: nothing asserts on it); the run ends with each suite's wall
 * time and the ten slowest tests, and the JUnit file carries the times.
 * --times FILE: the same times into FILE as well (`make test` prints them
 * again at its very end).
 *
 * CUnit has no skip: a test that cannot run here calls ddp_test_skip(why)
 * and returns. It still counts as run (and passed) for CUnit, so the run
 * ends with a line "N passed, N failed, N skipped" of its own, prints
 * "skipped: why" where the test ran, and the JUnit file marks the test
 * <skipped message="why"/>. */
#include <CUnit/Basic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness/xml_priv.h"
#include "test.h"

static ddp_test_suite_t *g_suites;

void ddp_test_add_suite(ddp_test_suite_t *s)
{
    /* Constructors run in link order; keep suites sorted by name so the run
     * order does not depend on it. */
    ddp_test_suite_t **p = &g_suites;
    while (*p && strcmp((*p)->name, s->name) < 0)
        p = &(*p)->next;
    s->next = *p;
    *p = s;
}

/* A registered test, its real function and when it ran. */
typedef struct timed {
    CU_pTest test;
    const char *suite, *name;
    void (*fn)(void);
    double start, secs; /* secs < 0: never ended on its own (see timed_end) */
    int ran;
} timed_t;

static timed_t *g_timed;
static size_t g_ntimed;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A fatal assertion leaves the test by longjmp, past the end of
 * timed_run: such a test ends when the next one starts (or the run ends). */
static void timed_end(double at)
{
    for (size_t i = 0; i < g_ntimed; i++)
        if (g_timed[i].ran && g_timed[i].secs < 0)
            g_timed[i].secs = at - g_timed[i].start;
}

static void timed_run(void)
{
    CU_pTest t = CU_get_current_test();
    double t0 = now_s();
    timed_end(t0);
    for (size_t i = 0; i < g_ntimed; i++) {
        if (g_timed[i].test != t)
            continue;
        g_timed[i].ran = 1;
        g_timed[i].start = t0;
        g_timed[i].secs = -1;
        g_timed[i].fn();
        g_timed[i].secs = now_s() - t0;
        return;
    }
}

static const timed_t *timed_of(CU_pTest t)
{
    for (size_t i = 0; i < g_ntimed; i++)
        if (g_timed[i].test == t)
            return &g_timed[i];
    return NULL;
}

static double test_secs(CU_pTest t)
{
    const timed_t *x = timed_of(t);
    return x && x->ran && x->secs > 0 ? x->secs : 0;
}

/* A registered suite, its real init and cleanup and when it ran: many
 * suites do their work in init (the behave_* suites run their scenarios
 * there), so its wall time runs from its init's start to its cleanup's end. */
typedef struct timed_suite {
    CU_pSuite suite;
    const char *name;
    int (*init)(void), (*cleanup)(void);
    double start, end;
} timed_suite_t;

static timed_suite_t *g_suites_t;
static size_t g_nsuites_t;

static timed_suite_t *suite_of(CU_pSuite s)
{
    for (size_t i = 0; i < g_nsuites_t; i++)
        if (g_suites_t[i].suite == s)
            return &g_suites_t[i];
    return NULL;
}

static int timed_init(void)
{
    timed_suite_t *t = suite_of(CU_get_current_suite());
    if (!t)
        return 1;
    t->start = now_s();
    return t->init ? t->init() : 0;
}

static int timed_cleanup(void)
{
    timed_suite_t *t = suite_of(CU_get_current_suite());
    if (!t)
        return 1;
    int rc = t->cleanup ? t->cleanup() : 0;
    t->end = now_s();
    return rc;
}

static double suite_secs(const char *suite)
{
    for (size_t i = 0; i < g_nsuites_t; i++)
        if (!strcmp(g_suites_t[i].name, suite) && g_suites_t[i].end > 0)
            return g_suites_t[i].end - g_suites_t[i].start;
    return 0;
}

/* The tests that called ddp_test_skip, each with its reason. */
typedef struct skip {
    CU_pTest test;
    char why[256];
} skip_t;

static skip_t *g_skips;
static size_t g_nskips;

void ddp_test_skip(const char *fmt, ...)
{
    skip_t *ns = realloc(g_skips, (g_nskips + 1) * sizeof *ns);
    if (!ns) {
        CU_FAIL("out of memory recording a skipped test");
        return;
    }
    g_skips = ns;
    skip_t *k = &g_skips[g_nskips++];
    k->test = CU_get_current_test();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->why, sizeof k->why, fmt, ap);
    va_end(ap);
    printf("\n  skipped: %s\n", k->why);
}

static int test_failed(CU_pTest t)
{
    for (CU_pFailureRecord r = CU_get_failure_list(); r; r = r->pNext)
        if (r->pTest == t)
            return 1;
    return 0;
}

/* Why t was skipped, or NULL: a test that failed before it skipped is a
 * failure, not a skip. */
static const char *skip_of(CU_pTest t)
{
    for (size_t i = 0; i < g_nskips; i++)
        if (g_skips[i].test == t)
            return test_failed(t) ? NULL : g_skips[i].why;
    return NULL;
}

static unsigned skipped_in(CU_pSuite only)
{
    unsigned n = 0;
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
        for (CU_pTest t = s->pTest; t && (!only || s == only); t = t->pNext)
            n += skip_of(t) != NULL;
    return n;
}

static void print_counts(FILE *o)
{
    CU_pRunSummary sum = CU_get_run_summary();
    unsigned skipped = skipped_in(NULL);
    fprintf(o, "\n%u passed, %u failed, %u skipped\n",
            sum->nTestsRun - sum->nTestsFailed - skipped, sum->nTestsFailed, skipped);
}

static int slower(const void *a, const void *b)
{
    double x = (*(const timed_t *const *)a)->secs, y = (*(const timed_t *const *)b)->secs;
    return (x < y) - (x > y);
}

static void print_times(FILE *o)
{
    fprintf(o, "\nSuite wall times:\n");
    for (size_t i = 0; i < g_ntimed; i++)
        if (g_timed[i].ran && (i == 0 || strcmp(g_timed[i].suite, g_timed[i - 1].suite)))
            fprintf(o, "  %8.3f s  %s\n", suite_secs(g_timed[i].suite), g_timed[i].suite);
    const timed_t **order = malloc(g_ntimed * sizeof *order + 1);
    size_t n = 0;
    for (size_t i = 0; order && i < g_ntimed; i++)
        if (g_timed[i].ran)
            order[n++] = &g_timed[i];
    if (order)
        qsort(order, n, sizeof *order, slower);
    fprintf(o, "The %zu slowest tests:\n", n < 10 ? n : 10);
    for (size_t i = 0; i < n && i < 10; i++)
        fprintf(o, "  %8.3f s  %s/%s\n", order[i]->secs, order[i]->suite, order[i]->name);
    free(order);
}

static int selected(const char *suite, const char *test, int argc, char **argv,
                    int first)
{
    if (first >= argc)
        return 1;
    for (int i = first; i < argc; i++) {
        const char *slash = strchr(argv[i], '/');
        size_t sl = slash ? (size_t)(slash - argv[i]) : strlen(argv[i]);
        if (strlen(suite) != sl || strncmp(argv[i], suite, sl) != 0)
            continue;
        if (!slash || !test || strcmp(slash + 1, test) == 0)
            return 1;
    }
    return 0;
}


static int write_junit(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    CU_pRunSummary sum = CU_get_run_summary();
    double total = 0;
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
        total += suite_secs(s->pName);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<testsuites tests=\"%u\" failures=\"%u\" skipped=\"%u\" time=\"%.3f\">\n",
            sum->nTestsRun, sum->nTestsFailed, skipped_in(NULL), total);
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext) {
        unsigned ntests = 0;
        for (CU_pTest t = s->pTest; t; t = t->pNext)
            ntests++;
        fprintf(f, "  <testsuite name=\"");
        ddp__xml_text(f, s->pName);
        fprintf(f, "\" tests=\"%u\" skipped=\"%u\" time=\"%.3f\">\n", ntests, skipped_in(s),
                suite_secs(s->pName));
        for (CU_pTest t = s->pTest; t; t = t->pNext) {
            fprintf(f, "    <testcase classname=\"");
            ddp__xml_text(f, s->pName);
            fprintf(f, "\" name=\"");
            ddp__xml_text(f, t->pName);
            fprintf(f, "\" time=\"%.3f\"", test_secs(t));
            int failed = 0;
            for (CU_pFailureRecord r = CU_get_failure_list(); r; r = r->pNext)
                if (r->pTest == t) {
                    if (!failed)
                        fprintf(f, ">\n");
                    failed = 1;
                    fprintf(f, "      <failure message=\"");
                    ddp__xml_text(f, r->strCondition);
                    fprintf(f, "\">%s:%u</failure>\n",
                            r->strFileName ? r->strFileName : "?",
                            r->uiLineNumber);
                }
            const char *why = skip_of(t);
            if (why) {
                fprintf(f, ">\n      <skipped message=\"");
                ddp__xml_text(f, why);
                fprintf(f, "\"/>\n");
            }
            fprintf(f, failed || why ? "    </testcase>\n" : "/>\n");
        }
        fprintf(f, "  </testsuite>\n");
    }
    fprintf(f, "</testsuites>\n");
    return fclose(f);
}

static CU_pSuite add_suite(const ddp_test_suite_t *s)
{
    timed_suite_t *nt = realloc(g_suites_t, (g_nsuites_t + 1) * sizeof *nt);
    if (!nt)
        return NULL;
    g_suites_t = nt;
    CU_pSuite cs = CU_add_suite(s->name, timed_init, timed_cleanup);
    g_suites_t[g_nsuites_t++] = (timed_suite_t){.suite = cs, .name = s->name,
                                                .init = s->init, .cleanup = s->cleanup};
    return cs;
}

int main(int argc, char **argv)
{
    const char *junit = NULL, *times = NULL;
    int first = 1, list = 0;
    while (first < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--junit") == 0 && first + 1 < argc) {
            junit = argv[first + 1];
            first += 2;
        } else if (strcmp(argv[first], "--times") == 0 && first + 1 < argc) {
            times = argv[first + 1];
            first += 2;
        } else if (strcmp(argv[first], "--list") == 0) {
            list = 1;
            first++;
        } else {
            fprintf(stderr,
                    "usage: %s [--list] [--junit FILE] [--times FILE] [SUITE[/TEST] ...]\n",
                    argv[0]);
            return 2;
        }
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    unsigned matched = 0;
    for (ddp_test_suite_t *s = g_suites; s; s = s->next) {
        if (!selected(s->name, NULL, argc, argv, first))
            continue;
        CU_pSuite cs = NULL;
        for (size_t i = 0; i < s->ncases; i++) {
            if (!selected(s->name, s->cases[i].name, argc, argv, first))
                continue;
            if (list) {
                printf("%s/%s\n", s->name, s->cases[i].name);
                continue;
            }
            if (!cs && !(cs = add_suite(s)))
                return 2;
            timed_t *nt = realloc(g_timed, (g_ntimed + 1) * sizeof *nt);
            if (!nt)
                return 2;
            g_timed = nt;
            g_timed[g_ntimed++] = (timed_t){
                .test = CU_add_test(cs, s->cases[i].name, timed_run),
                .suite = s->name, .name = s->cases[i].name, .fn = s->cases[i].fn};
            matched++;
        }
    }
    if (list) {
        CU_cleanup_registry();
        return 0;
    }
    if (matched == 0 && first < argc) {
        fprintf(stderr, "ddpsim-test: no test matches the selection\n");
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    timed_end(now_s());
    print_times(stdout);
    print_counts(stdout);
    unsigned failures = CU_get_number_of_failure_records();
    if (times) {
        FILE *tf = fopen(times, "w");
        if (!tf) {
            perror(times);
            failures++;
        } else {
            print_times(tf);
            if (fclose(tf) != 0)
                failures++;
        }
    }
    if (junit && write_junit(junit) != 0)
        failures++;
    fflush(stdout);
    CU_cleanup_registry();
    free(g_timed);
    free(g_suites_t);
    free(g_skips);
    return failures ? 1 : 0;
}
