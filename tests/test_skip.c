/* tests/test_skip.c — a test that cannot run here is a skip, not a pass.
 *
 * CUnit has no skip: tests/main.c records a test that calls ddp_test_skip
 * and reports it as skipped in the run's counts and in the JUnit file. The
 * test runs this program again on itself with DDP_TEST_PLANT_SKIP set, where
 * it skips, and reads what that run said and wrote. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/sys.h"
#include "test.h"

#define SKIP_SEL "skip/a skipped test is counted and marked skipped"

static int planted(void)
{
    ddp_sys_t *sys = ddp_sys_posix_new(NULL); /* the process's environment */
    int yes = sys && ddp_env_get(ddp_sys_env(sys), "DDP_TEST_PLANT_SKIP") != NULL;
    ddp_sys_free(sys);
    return yes;
}

static void test_skip_counted(void)
{
    if (planted()) {
        ddp_test_skip("planted <on purpose> & \"quoted\"");
        return;
    }
    char dir[64], xml[128], out[1 << 14], data[1 << 14];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "skip"));
    ddp_test_in(xml, sizeof xml, dir, "skip.xml");
    int rc = ddp_test_run_self_junit("DDP_TEST_PLANT_SKIP=1", xml, SKIP_SEL, out, sizeof out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "skipped: planted <on purpose> & \"quoted\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n0 passed, 0 failed, 1 skipped\n"));
    ddp_test_read_file(xml, data, sizeof data);
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "<testsuites tests=\"1\" failures=\"0\" skipped=\"1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(data, "<testsuite name=\"skip\" tests=\"1\" skipped=\"1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(
        data, "<skipped message=\"planted &lt;on purpose&gt; &amp; &quot;quoted&quot;\"/>"));
    if (rc != 0 || !strstr(data, "<skipped message="))
        printf("\n  the run said:\n%s\n  and wrote:\n%s\n", out, data);
    unlink(xml);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

DDP_SUITE("skip", NULL, NULL,
          {"a skipped test is counted and marked skipped", test_skip_counted})
