/* tests/util.c — helpers shared by the suites. */
#include "test.h"

#include "ddp/env.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"

struct ddp_sys *ddp_test_sys(void) { return ddp_sys_posix_new(ddp_env_new()); }

long long ddp_test_deadline_ms(struct ddp_sys *sys, long long ms)
{
    return ddp_sys_deadline_in(sys, ms * DDP_NS_PER_MS);
}

/* The level a quiet suite replaced (suites run one at a time). */
static ddp_log_level_t g_saved_level;
static int g_quieted;

int ddp_test_suite_sys_init(struct ddp_sys **sys, int quiet)
{
    if (quiet) {
        g_saved_level = ddp_log_level();
        g_quieted = 1;
        ddp_log_set_level(DDP_LOG_ERROR);
    }
    *sys = ddp_test_sys();
    return *sys ? 0 : -1;
}

int ddp_test_suite_sys_cleanup(struct ddp_sys **sys)
{
    ddp_sys_free(*sys);
    *sys = NULL;
    if (g_quieted) {
        ddp_log_set_level(g_saved_level);
        g_quieted = 0;
    }
    return 0;
}

ddp_store_server_t *ddp_test_server_start(ddp_sys_t *sys,
                                          const ddp_store_server_opts_t *o)
{
    ddp_store_server_t *srv = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_new(sys, o, &srv), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_start_thread(srv), 0);
    return srv;
}

ddp_store_server_t *ddp_test_server_start_loopback(ddp_sys_t *sys,
                                                   unsigned short port)
{
    ddp_store_server_opts_t o = {.host = "127.0.0.1", .port = port};
    return ddp_test_server_start(sys, &o);
}

void ddp_test_server_end(ddp_store_server_t *srv)
{
    ddp_store_server_join_thread(srv);
    ddp_store_server_free(srv);
}
