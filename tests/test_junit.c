/* tests/test_junit.c — the JUnit files CI tools read: `ddpsim run --junit`
 * (a testcase per run named scenario[accelerator], classed by its scenario
 * file, with its time and outcome text) and the CUnit runner's --junit
 * (`make test JUNIT=...`, with times). Both are validated against
 * tests/junit.xsd (the Jenkins/Ant schema) with xmllint from Debian's
 * libxml2-utils (scripts/deps.sh installs it); without xmllint that check
 * is skipped with one line and the others still run.
 *
 * It runs the built commands and skips outside `make test`. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* xmllint's verdict on path against tests/junit.xsd: 1 valid, 0 not (its
 * complaint printed unless quiet), -1 no xmllint. */
static int schema_valid(const char *path, int quiet)
{
    if (system("command -v xmllint >/dev/null 2>&1") != 0) {
        printf("\n  xmllint absent (Debian: libxml2-utils): JUnit schema check skipped\n");
        return -1;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "xmllint --noout --schema tests/junit.xsd %s 2>&1 | "
                              "grep -v ' validates$' %s", path, quiet ? ">/dev/null" : "");
    /* grep finds nothing (exit 1) when the only line is "PATH validates". */
    return system(cmd) != 0;
}

/* A passing, an expected-failure and a failing run: each a testcase named
 * scenario[accelerator], classname its file, a time, the outcome text. */
static void test_run_junit(void)
{
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    const char *xml = "build/test-junit-run.xml", *wrong = "build/test-junit-wrong.scn";
    CU_ASSERT_EQUAL_FATAL(ddp_test_write_file(wrong, DDP_TEST_WRONG_SCN), 0);
    remove(xml);
    char out[8192];
    CU_ASSERT_EQUAL(ddp_test_ddpsim("run scenarios/clean-start.scn scenarios/crash-joining.scn "
                                    "build/test-junit-wrong.scn --accelerator ddp "
                                    "--no-progress --junit build/test-junit-run.xml",
                                    0, out, sizeof out), 1);
    static char x[1 << 17];
    ddp_test_read_file(xml, x, sizeof x);
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<testcase classname=\"scenarios/clean-start\" "
                                     "name=\"clean-start[ddp]\" time=\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<testcase classname=\"scenarios/crash-joining\" "
                                     "name=\"crash-joining[ddp]\" time=\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<testcase classname=\"build/test-junit-wrong\" "
                                     "name=\"test-junit-wrong[ddp]\" time=\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "expected ok, actual ok, verdict ok, time "));
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "expected crash+fail, actual crash+fail, verdict ok"));
    /* the rank the crash fault killed, not rank 0's timeout waiting for it */
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "first error: rank 1, wait for workers: killed on node 0 "
                                     "by the fault on line 7 (crash)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<failure message=\"line 3: expected rank 0 to "
                                     "connect"));
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "tests=\"3\" failures=\"1\""));
    CU_ASSERT_NOT_EQUAL(schema_valid(xml, 0), 0);
    remove(xml);
    remove(wrong);
}

/* The CUnit runner's own file: every suite and testcase has its time. */
static void test_runner_junit(void)
{
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    const char *xml = "build/test-junit-cunit.xml";
    remove(xml);
    char self[512], cmd[1200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CU_ASSERT_FATAL(n > 0);
    self[n] = '\0';
    snprintf(cmd, sizeof cmd, "%s --junit %s hostlist >/dev/null 2>&1", self, xml);
    CU_ASSERT_EQUAL(system(cmd), 0);
    static char x[1 << 16];
    ddp_test_read_file(xml, x, sizeof x);
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<testsuite name=\"hostlist\" tests=\""));
    int cases = 0, timed = 0;
    for (const char *p = strstr(x, "<testcase "); p; p = strstr(p + 1, "<testcase ")) {
        const char *end = strchr(p, '>');
        const char *t = strstr(p, " time=\"");
        cases++;
        timed += t && end && t < end;
    }
    CU_ASSERT(cases > 3);
    CU_ASSERT_EQUAL(timed, cases);
    CU_ASSERT_NOT_EQUAL(schema_valid(xml, 0), 0);
    remove(xml);
}

/* The schema itself refuses what viewers cannot group or time. */
static void test_schema_refuses(void)
{
    static const char *const bad[] = {
        /* no classname */
        "<testsuites><testsuite name=\"s\" tests=\"1\" time=\"0\">"
        "<testcase name=\"a\" time=\"1\"/></testsuite></testsuites>",
        /* a time that is no number */
        "<testsuites><testsuite name=\"s\" tests=\"1\" time=\"0\">"
        "<testcase classname=\"c\" name=\"a\" time=\"fast\"/></testsuite></testsuites>",
        /* system-out before failure */
        "<testsuites><testsuite name=\"s\" tests=\"1\" time=\"0\">"
        "<testcase classname=\"c\" name=\"a\" time=\"1\"><system-out>x</system-out>"
        "<failure message=\"m\"/></testcase></testsuite></testsuites>",
    };
    const char *path = "build/test-junit-bad.xml";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(path, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs(bad[i], f);
        fclose(f);
        int v = schema_valid(path, 1);
        if (v < 0)
            break;
        CU_ASSERT_EQUAL(v, 0);
    }
    remove(path);
}

/* The checks of `make test` that are not CUnit (tests/check-junit.sh): a
 * testcase each with its time, a failing one with its exit status and
 * escaped output; valid; written at once when a check fails (make stops
 * there); an existing file refused. */
static void test_checks_junit(void)
{
    char dir[256], rec[300], xml[300], early[300], cmd[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "checks-junit"));
    ddp_test_in(rec, sizeof rec, dir, "rec");
    ddp_test_in(xml, sizeof xml, dir, "checks.xml");
    ddp_test_in(early, sizeof early, dir, "early.xml");
    snprintf(cmd, sizeof cmd, "sh tests/check-junit.sh run %s pass-check true >/dev/null", rec);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "sh tests/check-junit.sh run %s fail-check sh -c "
                              "'echo \"a <b> & c\"; exit 3' >/dev/null", rec);
    int st = system(cmd);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    snprintf(cmd, sizeof cmd, "sh tests/check-junit.sh write %s %s", rec, xml);
    CU_ASSERT_EQUAL(system(cmd), 0);
    static char x[8192];
    ddp_test_read_file(xml, x, sizeof x);
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<testsuites tests=\"2\" failures=\"1\" time=\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<testcase classname=\"make test\" name=\"pass-check\" "
                                     "time=\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<failure message=\"fail-check exited 3\">a &lt;b&gt; "
                                     "&amp; c"));
    CU_ASSERT_NOT_EQUAL(schema_valid(xml, 0), 0);
    CU_ASSERT_NOT_EQUAL(access(rec, F_OK), 0); /* the records went into the file */
    /* refused: the file exists */
    snprintf(cmd, sizeof cmd, "sh tests/check-junit.sh write %s %s 2>/dev/null", rec, xml);
    CU_ASSERT_NOT_EQUAL(system(cmd), 0);
    /* a failing check with CHECK_JUNIT_FILE: the file at once */
    snprintf(cmd, sizeof cmd, "CHECK_JUNIT_FILE=%s sh tests/check-junit.sh run %s stops-make "
                              "false >/dev/null", early, rec);
    CU_ASSERT_NOT_EQUAL(system(cmd), 0);
    ddp_test_read_file(early, x, sizeof x);
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "<failure message=\"stops-make exited 1\">"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

DDP_SUITE("junit", NULL, NULL,
          {"run --junit: scenario[accelerator], classname, time, outcome; valid",
           test_run_junit},
          {"the CUnit runner's --junit: times everywhere; valid", test_runner_junit},
          {"the schema refuses what viewers cannot group or time", test_schema_refuses},
          {"make test's other checks: a testcase each, timed; valid", test_checks_junit})
