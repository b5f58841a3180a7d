/* tests/test_store_prefix.c — PrefixStore over the memory store: the shared
 * conformance table, and how keys look on the base store. (Prefix over the
 * tcp client runs in the store_client suite.) */
#include <string.h>

#include "ddp/err.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "store_conformance.h"
#include "test.h"

static ddp_sys_t *g_sys;

static int suite_init(void) { return ddp_test_suite_sys_init(&g_sys, 0); }
static int suite_cleanup(void) { return ddp_test_suite_sys_cleanup(&g_sys); }

static int64_t dl(int ms) { return ddp_test_deadline_ms(g_sys, ms); }

static void test_conformance(void)
{
    ddp_store_t *base = ddp_store_memory_new(g_sys);
    ddp_store_t *p = ddp_store_prefix_new(base, "default_pg");
    ddp_test_store_conformance(p, p, "pfx");
    ddp_store_free(p);
    ddp_store_free(base);
}

static int has_key(char **ks, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ks[i], k))
            return 1;
    return 0;
}

static void test_keys_on_the_base(void)
{
    ddp_store_t *base = ddp_store_memory_new(g_sys);
    ddp_store_t *p = ddp_store_prefix_new(base, "default_pg");
    ddp_store_t *pp = ddp_store_prefix_new(p, "0"); /* group under it */
    CU_ASSERT_PTR_NOT_NULL_FATAL(pp);
    CU_ASSERT_EQUAL(ddp_store_set_str(pp, "rank0", "a", dl(10)), 0);
    CU_ASSERT_EQUAL(ddp_store_set_str(p, "x", "b", dl(10)), 0);
    CU_ASSERT_EQUAL(ddp_store_set_str(base, "plain", "c", dl(10)), 0);
    CU_ASSERT_EQUAL(ddp_store_set_str(base, "default_pgx", "d", dl(10)), 0);
    const char *full = "default_pg/0/rank0";
    CU_ASSERT_EQUAL(ddp_store_check(base, &full, 1, dl(10)), 1);

    char **ks = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_store_list_keys(p, &ks, &n, dl(10)), 0);
    CU_ASSERT_EQUAL(n, 2); /* "0/rank0" and "x"; not "plain"/"default_pgx" */
    CU_ASSERT(has_key(ks, n, "0/rank0") && has_key(ks, n, "x"));
    ddp_store_free_keys(ks, n);
    CU_ASSERT_EQUAL_FATAL(ddp_store_list_keys(pp, &ks, &n, dl(10)), 0);
    CU_ASSERT(n == 1 && !strcmp(ks[0], "rank0"));
    ddp_store_free_keys(ks, n);

    /* num_keys is the base's, unfiltered (as c10d::PrefixStore). */
    int64_t nk = 0;
    CU_ASSERT_EQUAL(ddp_store_num_keys(pp, &nk, dl(10)), 0);
    CU_ASSERT_EQUAL(nk, 4);

    /* Errors name the full key. */
    ddp_buf_t b = {0};
    CU_ASSERT_EQUAL(ddp_store_get(pp, "missing", &b, dl(20)), DDP_ETIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "default_pg/0/missing"));

    /* Freeing a prefix store leaves the base alone. */
    ddp_store_free(pp);
    ddp_store_free(p);
    CU_ASSERT_EQUAL(ddp_store_check(base, &full, 1, dl(10)), 1);
    ddp_store_free(base);
}

static void test_long_keys_and_empty_prefix(void)
{
    ddp_store_t *base = ddp_store_memory_new(g_sys);
    ddp_store_t *p = ddp_store_prefix_new(base, "");
    CU_ASSERT_EQUAL(ddp_store_set_str(p, "k", "v", dl(10)), 0);
    const char *k = "/k"; /* "" + "/" + key */
    CU_ASSERT_EQUAL(ddp_store_check(base, &k, 1, dl(10)), 1);
    /* A key longer than the on-stack join buffer. */
    char lk[1000];
    memset(lk, 'z', sizeof lk - 1);
    lk[sizeof lk - 1] = '\0';
    CU_ASSERT_EQUAL(ddp_store_set_str(p, lk, "long", dl(10)), 0);
    ddp_buf_t b = {0};
    CU_ASSERT_EQUAL(ddp_store_get(p, lk, &b, dl(10)), 0);
    CU_ASSERT(b.len == 4 && !memcmp(b.data, "long", 4));
    ddp_buf_free(&b);
    CU_ASSERT_PTR_NULL(ddp_store_prefix_new(NULL, "x"));
    CU_ASSERT_PTR_NULL(ddp_store_prefix_new(base, NULL));
    ddp_store_free(p);
    ddp_store_free(base);
}

DDP_SUITE("store_prefix", suite_init, suite_cleanup,
          {"conformance", test_conformance},
          {"keys_on_the_base", test_keys_on_the_base},
          {"long_keys_and_empty_prefix", test_long_keys_and_empty_prefix})
