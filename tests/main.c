/* tests/main.c — the CUnit runner for every suite.
 *
 *   ddpsim-test [--list] [--junit FILE] [SUITE[/TEST] ...]
 *
 * Exit status comes from CU_get_number_of_failure_records() read BEFORE
 * CU_cleanup_registry() (CU_basic_run_tests returns 0 even on failures, and
 * the counts read 0 after cleanup). JUnit XML is written by us: CUnit 2.1-3's
 * own JUnit output is broken (toolchain-pitfalls.md). */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void xml_escape(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static int write_junit(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    CU_pRunSummary sum = CU_get_run_summary();
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<testsuites tests=\"%u\" failures=\"%u\">\n",
            sum->nTestsRun, sum->nTestsFailed);
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext) {
        fprintf(f, "  <testsuite name=\"");
        xml_escape(f, s->pName);
        fprintf(f, "\">\n");
        for (CU_pTest t = s->pTest; t; t = t->pNext) {
            fprintf(f, "    <testcase classname=\"");
            xml_escape(f, s->pName);
            fprintf(f, "\" name=\"");
            xml_escape(f, t->pName);
            fprintf(f, "\"");
            int failed = 0;
            for (CU_pFailureRecord r = CU_get_failure_list(); r; r = r->pNext)
                if (r->pTest == t) {
                    if (!failed)
                        fprintf(f, ">\n");
                    failed = 1;
                    fprintf(f, "      <failure message=\"");
                    xml_escape(f, r->strCondition);
                    fprintf(f, "\">%s:%u</failure>\n",
                            r->strFileName ? r->strFileName : "?",
                            r->uiLineNumber);
                }
            fprintf(f, failed ? "    </testcase>\n" : "/>\n");
        }
        fprintf(f, "  </testsuite>\n");
    }
    fprintf(f, "</testsuites>\n");
    return fclose(f);
}

int main(int argc, char **argv)
{
    const char *junit = NULL;
    int first = 1, list = 0;
    while (first < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--junit") == 0 && first + 1 < argc) {
            junit = argv[first + 1];
            first += 2;
        } else if (strcmp(argv[first], "--list") == 0) {
            list = 1;
            first++;
        } else {
            fprintf(stderr,
                    "usage: %s [--list] [--junit FILE] [SUITE[/TEST] ...]\n",
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
            if (!cs && !(cs = CU_add_suite(s->name, s->init, s->cleanup)))
                return 2;
            CU_add_test(cs, s->cases[i].name, s->cases[i].fn);
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
    unsigned failures = CU_get_number_of_failure_records();
    if (junit && write_junit(junit) != 0)
        failures++;
    fflush(stdout);
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
