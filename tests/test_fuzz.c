/* tests/test_fuzz.c — the fuzz harnesses of tests/fuzz/ under the CUnit
 * suite: every input of their seed corpora (tests/fuzz/corpus/NAME, where
 * reproducers of fixed crashes belong too) is replayed through the same
 * property check libFuzzer runs (`make fuzz`), so the harnesses build with
 * the project's compiler and flags and the corpora stay passing without
 * clang. */
#define DDP_FUZZ_NO_ENTRY
#include "fuzz/fake_sys.c"
#include "fuzz/fuzz_hostlist.c"
#include "fuzz/fuzz_plan.c"
#include "fuzz/fuzz_scenario.c"
#include "fuzz/fuzz_store_server.c"

#include <dirent.h>
#include <stdio.h>

#include "ddp/log.h"
#include "test.h"

/* Runs one(file) for every file of dir; returns how many there were. */
static int replay(const char *dir, int (*one)(const uint8_t *, size_t))
{
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        static uint8_t buf[1 << 17];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        int bad = one(buf, len);
        if (bad)
            printf("\n  %s breaks its property\n", path);
        CU_ASSERT_EQUAL(bad, 0);
        n++;
    }
    closedir(d);
    return n;
}

static void test_hostlist_corpus(void)
{
    CU_ASSERT_TRUE(replay("tests/fuzz/corpus/hostlist", fuzz_hostlist_one) >= 40);
}

static void test_scenario_corpus(void)
{
    CU_ASSERT_TRUE(replay("tests/fuzz/corpus/scenario", fuzz_scenario_one) >= 40);
}

static void test_plan_corpus(void)
{
    CU_ASSERT_TRUE(replay("tests/fuzz/corpus/plan", fuzz_plan_one) >= 10);
    /* the property fails where it should: a plan whose round trip differs
     * is caught, a truncated one is not read */
    static const char good[] = "ddpsim-plan 1\nname \"x\"\nend\n";
    CU_ASSERT_EQUAL(fuzz_plan_one((const uint8_t *)good, sizeof good - 1), 0);
}

static void test_store_server_corpus(void)
{
    ddp_log_level_t saved = ddp_log_level();
    CU_ASSERT_TRUE(replay("tests/fuzz/corpus/store_server", fuzz_store_server_one) >= 10);
    ddp_log_set_level(saved);
}

/* The store harness reaches what its seeds are for: a SET then GET is
 * answered, a WAIT is woken by another client's SET, a client that never
 * VALIDATEs is dropped at the timeout (the fake sys is driven directly). */
static void test_fake_sys_store(void)
{
    ddp_log_level_t saved = ddp_log_level();
    ddp_log_set_level(DDP_LOG_OFF);
    fake_sys_t *f = fake_sys_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    /* current: a silent connection is dropped at the validate timeout (auto
     * keeps it, as torch 1.13 keeps its silent callback socket) */
    ddp_store_server_opts_t o = {.validate_timeout_ns = 5 * DDP_NS_PER_S,
                                 .protocol = DDP_STORE_PROTO_CURRENT};
    ddp_store_server_t *srv = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_new(&f->sys, &o, &srv), 0);
    int a = fake_connect(f), b = fake_connect(f), c = fake_connect(f);
    uint8_t v[5] = {DDP_STORE_OP_VALIDATE};
    uint32_t magic = DDP_STORE_MAGIC;
    memcpy(v + 1, &magic, 4);
    fake_send(f, a, v, 5);
    fake_send(f, b, v, 5);
    /* a: WAIT ["/k"]; b: SET "/k" = "v"; a's WAIT answers 1 byte (STOP_WAITING) */
    uint8_t wait[1 + 8 + 8 + 2] = {DDP_STORE_OP_WAIT, 1};
    wait[9] = 2;
    memcpy(wait + 17, "/k", 2);
    uint8_t set[1 + 8 + 2 + 8 + 1] = {DDP_STORE_OP_SET, 2};
    memcpy(set + 9, "/k", 2);
    set[11] = 1;
    set[19] = 'v';
    fake_send(f, a, wait, sizeof wait);
    f->conns[a].window = f->conns[b].window = 1 << 20;
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(ddp_store_server_step(srv, f->now), 0);
    CU_ASSERT_EQUAL(f->conns[a].received, 0); /* still waiting */
    fake_send(f, b, set, sizeof set);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(ddp_store_server_step(srv, f->now), 0);
    CU_ASSERT_EQUAL(f->conns[a].received, 1);
    /* c never validates: dropped once 5 s passed. */
    CU_ASSERT_EQUAL(ddp_store_server_step(srv, f->now + 6 * DDP_NS_PER_S), 0);
    CU_ASSERT_EQUAL(ddp_store_server_step(srv, f->now), 0);
    CU_ASSERT_TRUE(f->conns[c].server_closed);
    CU_ASSERT_FALSE(f->conns[a].server_closed);
    ddp_store_server_stats_t st;
    ddp_store_server_stats(srv, &st);
    CU_ASSERT_EQUAL(st.unvalidated_dropped, 1);
    ddp_store_server_free(srv);
    fake_sys_free(f);
    ddp_log_set_level(saved);
}

DDP_SUITE("fuzz", NULL, NULL,
          {"hostlist seeds: expand -> compress -> expand", test_hostlist_corpus},
          {"scenario seeds: parse -> write -> parse", test_scenario_corpus},
          {"plan and results seeds: read -> write -> read; events never past the end", test_plan_corpus},
          {"store server seeds over the fake sys", test_store_server_corpus},
          {"the fake sys drives the store server", test_fake_sys_store})
