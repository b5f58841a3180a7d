/* tests/test_store_diff.c — the store family of the differential check
 * (tests/store_diff.c) in make test: a sample of generated request
 * sequences sent to torch 1.13's TCPStore server and to ddpsim's, replies
 * compared; and the driver shown to catch a server that answers
 * differently. Skipped (not passed) without torch. */
#include <stdio.h>
#include <string.h>

#include "ddp/store.h"
#include "store_diff.h"
#include "test.h"

static ddp_sys_t *g_sys;
static sd_torch_t g_torch;
static int g_torch_rc = -1;
static char g_why[300];

static int suite_init(void)
{
    if (ddp_test_suite_sys_init(&g_sys, 1) != 0)
        return -1;
    g_torch_rc = sd_torch_start(&g_torch, "tests/differential/store_torch.py", 0, g_why,
                                sizeof g_why);
    return 0;
}

static int suite_cleanup(void)
{
    if (g_torch_rc == 0)
        sd_torch_stop(&g_torch);
    g_torch_rc = -1;
    return ddp_test_suite_sys_cleanup(&g_sys);
}

/* count sequences from seed against torch and a ddpsim server with o's
 * limits; 0, or 1 when there is no torch (the test recorded as skipped). */
static int diff_run(const ddp_store_server_opts_t *o, uint64_t seed, long count, sd_stats_t *st)
{
    if (g_torch_rc == 1) {
        ddp_test_skip("%s", g_why);
        return 1;
    }
    CU_ASSERT_EQUAL_FATAL(g_torch_rc, 0);
    ddp_store_server_t *srv =
        o ? ddp_test_server_start(g_sys, o) : ddp_test_server_start_loopback(g_sys, 0);
    ddp_addr_t a[2];
    ddp_addr_parse("127.0.0.1", g_torch.port, &a[0]);
    a[1] = ddp_store_server_addr(srv);
    int rc = sd_run(g_sys, a, seed, count, 0, st);
    ddp_test_server_end(srv);
    CU_ASSERT_EQUAL(rc, 0);
    return 0;
}

/* 150 sequences (WAITs on up to 65,536 keys among them): no disagreement
 * but the named ones of docs/fidelity.md. */
static void test_sample_agrees(void)
{
    sd_stats_t st = {0};
    if (diff_run(NULL, 4100, 150, &st))
        return;
    if (st.disagreed)
        fprintf(stderr, "\n  %ld of %ld sequences disagree; first: %s", st.disagreed,
                st.sequences, st.first);
    CU_ASSERT_EQUAL(st.disagreed, 0);
    CU_ASSERT_EQUAL(st.sequences, 150);
    CU_ASSERT(st.agreed > 100);
    CU_ASSERT(st.waits_big > 0);
}

/* A ddpsim server that refuses keys over 64 bytes (torch takes 8 KiB and
 * more) disagrees, and the driver says so: the comparison can fail. */
static void test_catches_a_difference(void)
{
    ddp_store_server_opts_t o = {.host = "127.0.0.1", .max_key_len = 64};
    sd_stats_t st = {0};
    if (diff_run(&o, 4100, 12, &st))
        return;
    CU_ASSERT(st.disagreed > 0);
    CU_ASSERT(st.first[0] != '\0');
}

DDP_SUITE("store_diff", suite_init, suite_cleanup,
          {"generated sequences: ddpsim's store answers as torch 1.13's", test_sample_agrees},
          {"a server with another key limit is caught", test_catches_a_difference});
