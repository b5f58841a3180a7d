/* tests/test_core.c — errors, logging, the environment map and the PRNG. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/sys.h"
#include "test.h"

static void test_err_names(void)
{
    CU_ASSERT_STRING_EQUAL(ddp_err_name(DDP_ETIMEOUT), "DDP_ETIMEOUT");
    CU_ASSERT_STRING_EQUAL(ddp_err_name(DDP_EPEER_LOST), "DDP_EPEER_LOST");
    CU_ASSERT_STRING_EQUAL(ddp_err_name(-ECONNREFUSED), "ECONNREFUSED");
    CU_ASSERT_STRING_EQUAL(ddp_err_name(-EADDRINUSE), "EADDRINUSE");
    CU_ASSERT_STRING_EQUAL(ddp_err_name(0), "OK");
    CU_ASSERT_STRING_EQUAL(ddp_err_name(-99999), "E?-99999");
    CU_ASSERT_STRING_EQUAL(ddp_strerror(DDP_ECONFIG), "invalid configuration");
    CU_ASSERT_STRING_EQUAL(ddp_strerror(-ECONNREFUSED), "Connection refused");
    /* ddpsim's band never collides with errno values. */
    CU_ASSERT(DDP_ETIMEOUT < -4095);
}

static void test_err_context(void)
{
    ddp_ident_set_rank(3);
    ddp_ident_set_phase("store connect");
    int rc = ddp_err_set(-ECONNREFUSED, "could not connect to %s", "10.0.0.1:29500");
    CU_ASSERT_EQUAL(rc, -ECONNREFUSED);
    ddp_err_waited(30 * DDP_NS_PER_S);
    ddp_err_hint("start the master first");
    const char *m = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "rank 3, store connect: could not connect "
                                     "to 10.0.0.1:29500"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "after 30.0 s"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "ECONNREFUSED"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "hint: start the master first"));
    CU_ASSERT_EQUAL(ddp_err_wrap("during barrier"), -ECONNREFUSED);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_ctx()->what, "during barrier: could"));
    /* A new error resets the details. */
    ddp_err_set(DDP_ETIMEOUT, "x");
    CU_ASSERT_EQUAL(ddp_err_ctx()->waited_ns, -1);
    CU_ASSERT_STRING_EQUAL(ddp_err_ctx()->hint, "");
    ddp_ident_set_rank(-1);
    ddp_ident_set_phase(NULL);
}

static int collect_fn(void *arg, const char *k, const char *v)
{
    char *buf = arg;
    strcat(buf, k);
    strcat(buf, "=");
    strcat(buf, v);
    strcat(buf, ";");
    return 0;
}

static void test_env_map(void)
{
    char *init[] = {"B=2", "A=1", "NOEQUALS", "=skip", "C=x=y", NULL};
    ddp_env_t *e = ddp_env_from_array(init);
    CU_ASSERT_EQUAL(ddp_env_count(e), 3);
    CU_ASSERT_STRING_EQUAL(ddp_env_get(e, "C"), "x=y");
    CU_ASSERT_PTR_NULL(ddp_env_get(e, "NOEQUALS"));
    CU_ASSERT_EQUAL(ddp_env_set(e, "A", "one"), 0);
    CU_ASSERT_EQUAL(ddp_env_setf(e, "D", "%d", 4), 0);
    CU_ASSERT_NOT_EQUAL(ddp_env_set(e, "BAD=KEY", "v"), 0);
    CU_ASSERT_NOT_EQUAL(ddp_env_set(e, "", "v"), 0);
    char buf[256] = "";
    ddp_env_foreach(e, collect_fn, buf);
    CU_ASSERT_STRING_EQUAL(buf, "A=one;B=2;C=x=y;D=4;");
    ddp_env_unset(e, "B");
    ddp_env_unset(e, "nope");
    CU_ASSERT_FALSE(ddp_env_has(e, "B"));
    ddp_env_t *c = ddp_env_clone(e);
    ddp_env_set(c, "A", "changed");
    CU_ASSERT_STRING_EQUAL(ddp_env_get(e, "A"), "one");
    char **arr = ddp_env_to_array(c);
    CU_ASSERT_STRING_EQUAL(arr[0], "A=changed");
    CU_ASSERT_STRING_EQUAL(arr[1], "C=x=y");
    CU_ASSERT_PTR_NULL(arr[3]);
    ddp_env_free_array(arr);
    ddp_env_free(c);
    ddp_env_free(e);
}

static void test_env_get_long(void)
{
    ddp_env_t *e = ddp_env_new();
    long v = -1;
    ddp_env_set(e, "RANK", "7");
    CU_ASSERT_EQUAL(ddp_env_get_long(e, "RANK", 0, 10, &v), 0);
    CU_ASSERT_EQUAL(v, 7);
    ddp_env_set(e, "RANK", "7x");
    CU_ASSERT_EQUAL(ddp_env_get_long(e, "RANK", 0, 10, &v), DDP_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "RANK=\"7x\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "0..10"));
    ddp_env_set(e, "RANK", "11");
    CU_ASSERT_EQUAL(ddp_env_get_long(e, "RANK", 0, 10, &v), DDP_ECONFIG);
    ddp_env_set(e, "RANK", "");
    CU_ASSERT_EQUAL(ddp_env_get_long(e, "RANK", 0, 10, &v), DDP_ECONFIG);
    CU_ASSERT_EQUAL(ddp_env_get_long(e, "MISSING", 0, 10, &v), DDP_ENOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "MISSING is not set"));
    CU_ASSERT_EQUAL(v, 7);
    ddp_env_free(e);
}

static char g_last_line[512];
static void capture_sink(void *arg, ddp_log_level_t lvl, const char *line)
{
    (void)arg;
    (void)lvl;
    strncpy(g_last_line, line, sizeof g_last_line - 1);
}

static void test_log_levels(void)
{
    ddp_log_level_t saved = ddp_log_level(), l;
    ddp_env_t *e = ddp_env_new();
    CU_ASSERT_EQUAL(ddp_log_init_from_env(e), 0); /* unset: unchanged */
    CU_ASSERT_EQUAL(ddp_log_level(), saved);
    ddp_env_set(e, "DDP_LOG", "debug");
    CU_ASSERT_EQUAL(ddp_log_init_from_env(e), 0);
    CU_ASSERT_EQUAL(ddp_log_level(), DDP_LOG_DEBUG);
    ddp_env_set(e, "DDP_LOG", "loud");
    CU_ASSERT_EQUAL(ddp_log_init_from_env(e), DDP_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "DDP_LOG=\"loud\""));
    CU_ASSERT_EQUAL(ddp_log_parse_level("TRACE", &l), 0);
    CU_ASSERT_EQUAL(l, DDP_LOG_TRACE);
    ddp_log_set_sink(capture_sink, NULL);
    ddp_ident_set_rank(5);
    g_last_line[0] = '\0';
    ddp_debug("hello %d", 42);
    CU_ASSERT_STRING_EQUAL(g_last_line, "[ddp rank 5] debug: hello 42");
    ddp_log_set_level(DDP_LOG_WARN);
    g_last_line[0] = '\0';
    ddp_info("hidden");
    CU_ASSERT_STRING_EQUAL(g_last_line, "");
    ddp_ident_set_rank(-1);
    ddp_log_set_sink(NULL, NULL);
    ddp_log_set_level(saved);
    ddp_env_free(e);
}

static void test_rng(void)
{
    ddp_rng_t a, b, c;
    ddp_rng_seed(&a, 42);
    ddp_rng_seed(&b, 42);
    ddp_rng_seed(&c, 43);
    int same = 1, diff = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = ddp_rng_next(&a), y = ddp_rng_next(&b), z = ddp_rng_next(&c);
        same &= x == y;
        diff |= x != z;
    }
    CU_ASSERT_TRUE(same);
    CU_ASSERT_TRUE(diff);
    int inrange = 1;
    for (int i = 0; i < 1000; i++) {
        double d = ddp_rng_double(&a);
        inrange &= d >= 0.0 && d < 1.0 && ddp_rng_below(&a, 7) < 7;
    }
    CU_ASSERT_TRUE(inrange);
}

static void test_addr(void)
{
    ddp_addr_t a, b;
    char buf[DDP_ADDR_STRLEN];
    CU_ASSERT_EQUAL(ddp_addr_parse("10.0.0.1", 29500, &a), 0);
    CU_ASSERT_STRING_EQUAL(ddp_addr_format(&a, buf, sizeof buf), "10.0.0.1:29500");
    CU_ASSERT_EQUAL(ddp_addr_parse("::1", 80, &b), 0);
    CU_ASSERT_STRING_EQUAL(ddp_addr_format(&b, buf, sizeof buf), "[::1]:80");
    CU_ASSERT_EQUAL(ddp_addr_parse("[::1]", 80, &a), 0);
    CU_ASSERT_TRUE(ddp_addr_equal(&a, &b));
    CU_ASSERT_EQUAL(ddp_addr_parse("node1", 1, &a), DDP_ECONFIG);
    CU_ASSERT_EQUAL(ddp_addr_parse("0.0.0.0", 1, &a), 0);
    CU_ASSERT_TRUE(ddp_addr_is_any(&a));
}

DDP_SUITE("core", NULL, NULL,
          {"error names and descriptions", test_err_names},
          {"error context sentence", test_err_context},
          {"environment map", test_env_map},
          {"environment typed reads", test_env_get_long},
          {"log levels and prefix", test_log_levels},
          {"seeded prng", test_rng},
          {"addresses", test_addr})
