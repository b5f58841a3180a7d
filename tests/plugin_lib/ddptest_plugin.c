/* tests/plugin_lib/ddptest_plugin.c — the plugin libraries of the loader's
 * tests (tests/test_plugin_lib.c), one source, a variant per -D:
 *   (none)          libddptest.so: plugin "ddptest", ABI DDP_PLUGIN_ABI_VERSION,
 *                   the default connection, then its own phase "ddptest step"
 *   DDPTEST_NOSYM   libddptest-nosym.so: no ddp_plugin_v1 at all
 *   DDPTEST_ABI     libddptest-abi.so: ddp_plugin_v1 of ABI version 99
 *   DDPTEST_CLASH   libddptest-clash.so: plugin "subgroups" (a built-in's name)
 *   DDPTEST_LEAK    libddptest-leak.so: plugin "ddptest_leak", which leaves a
 *                   connection to the store open (an invariant explore finds)
 *   DDPTEST_DEEP    libddptest-deep.so: plugin "ddptest_deep", which uses 40
 *                   KiB of stack first (more than the simulator's default
 *                   stack: a plugin library's runs get DDP_SIM_STACK_FOREIGN)
 * Built without -lddpsim: its ddp_* calls bind to the program loading it. */
#include <ddp/err.h>
#include <ddp/plugin.h>
#include <ddp/sys.h>

static const char *const phases[] = {"ddptest step", NULL};

#ifdef DDPTEST_DEEP
/* 40 KiB of frame, every page written: a user's code of its own depth. */
__attribute__((noinline)) static int deep_frame(int seed)
{
    volatile unsigned char frame[40 * 1024];
    for (unsigned i = 0; i < sizeof frame; i += 512)
        frame[i] = (unsigned char)(seed + (int)i);
    int sum = 0;
    for (unsigned i = 0; i < sizeof frame; i += 512)
        sum += frame[i];
    return sum;
}
#endif

static int ddptest_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                        int global_rank, int world_size)
{
#ifdef DDPTEST_DEEP
    if (deep_frame(global_rank) < 0)
        return -1;
#endif
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, global_rank, world_size);
    if (rc)
        return rc;
    ddp_ident_set_phase("ddptest step");
#ifdef DDPTEST_LEAK
    char addr[64];
    uint16_t port = 0;
    ddp_cluster_main_address(env, addr, sizeof addr);
    ddp_cluster_main_port(env, &port);
    (void)ddp_sys_connect_host(ctx->sys, addr, port, ctx->deadline); /* never closed */
#endif
    return 0;
}

#ifdef DDPTEST_CLASH
#define NAME "subgroups"
#elif defined DDPTEST_LEAK
#define NAME "ddptest_leak"
#elif defined DDPTEST_DEEP
#define NAME "ddptest_deep"
#else
#define NAME "ddptest"
#endif

static const ddp_plugin_t ddptest = {
    .name = NAME, .init_ddp_connection = ddptest_init, .phases = phases};

#ifdef DDPTEST_NOSYM
DDP_PLUGIN_EXPORT const ddp_plugin_t *ddptest_table(void);
DDP_PLUGIN_EXPORT const ddp_plugin_t *ddptest_table(void) { return &ddptest; }
#else
#ifdef DDPTEST_ABI
#define ABI 99
#else
#define ABI DDP_PLUGIN_ABI_VERSION
#endif
DDP_PLUGIN_EXPORT const ddp_plugin_v1_t ddp_plugin_v1 = {ABI, NAME, &ddptest};
#endif
