/* tools/cmd_demo.c — `ddpsim demo`: the default demo. N real processes on
 * loopback rendezvous through a real TCPStore-protocol server (rank 0's
 * store, here run by the parent): connect, wait-for-workers, store barrier.
 * Each rank publishes its outcome in the store; the parent prints a table. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "opt.h"

typedef struct {
    int rank, world;
    uint16_t port;
    int64_t timeout_ns;
} demo_rank_t;

static int demo_rank_main(ddp_sys_t *sys, void *arg)
{
    demo_rank_t *r = arg;
    ddp_ident_set_rank(r->rank);
    int64_t start = ddp_sys_now(sys);
    int64_t deadline = start + r->timeout_ns;
    ddp_store_client_opts_t o = {.host = "127.0.0.1",
                                 .port = r->port,
                                 .connect_deadline = deadline,
                                 .seed = (uint64_t)r->rank + 1};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(sys, &o, &err);
    if (!st) {
        fprintf(stderr, "%s\n", ddp_err_message());
        return 1;
    }
    int rc = ddp_store_wait_for_workers(st, r->rank, r->world, deadline);
    if (rc == 0)
        rc = ddp_store_barrier(st, "default_pg", r->world, deadline);
    char key[64], val[256];
    snprintf(key, sizeof key, "demo/result/%d", r->rank);
    if (rc == 0)
        snprintf(val, sizeof val, "ok %.1f ms, %d connect attempt(s)",
                 (double)(ddp_sys_now(sys) - start) / 1e6,
                 ddp_store_client_attempts(st));
    else
        snprintf(val, sizeof val, "FAIL %s", ddp_err_message());
    ddp_store_set_str(st, key, val, deadline);
    ddp_store_free(st);
    return rc == 0 ? 0 : 1;
}

static void demo_usage(FILE *f)
{
    fprintf(f, "usage: ddpsim demo [--ranks N] [--timeout SECONDS]\n\n"
               "Starts a TCPStore-protocol server on 127.0.0.1 (a free port), "
               "launches N rank\nprocesses (1..1024, default 4) that connect, wait "
               "for all workers and pass a\nstore barrier, and prints each rank's "
               "outcome. SECONDS: each rank's deadline, a\nwhole number 1..1000000 "
               "(default 60).\n\nExit status: 0 every rank connected, 1 some rank "
               "failed, 2 bad options.\n");
}

int ddp_cmd_demo(ddp_sys_t *sys, int argc, char **argv)
{
    long ranks = 4, timeout_s = 60;
    int n;
    const ddp_opt_t opts[] = {
        OPT_LONG("ranks", &ranks, 1, 1024),
        OPT_LONG("timeout", &timeout_s, 1, 1000000),
        OPT_HELP,
    };
    ddp_opt_spec_t spec = {DDP_OPT_SPEC("demo", opts, demo_usage), .max_operands = 0};
    DDP_OPT_PARSE_OR_RETURN(&spec, argc, argv, &n);
    ddp_store_server_opts_t so = {.host = "127.0.0.1"};
    ddp_store_server_t *srv = NULL;
    if (ddp_store_server_new(sys, &so, &srv) != 0) {
        fprintf(stderr, "ddpsim demo: %s\n", ddp_err_message());
        ddp_store_server_free(srv);
        return 1;
    }
    ddp_addr_t addr = ddp_store_server_addr(srv);
    char as[DDP_ADDR_STRLEN];
    printf("ddpsim demo: store on %s, %ld ranks\n",
           ddp_addr_format(&addr, as, sizeof as), ranks);
    fflush(stdout);

    demo_rank_t *rk = calloc((size_t)ranks, sizeof *rk);
    ddp_pid_t *pids = calloc((size_t)ranks, sizeof *pids);
    int failed = 0;
    for (long i = 0; rk && pids && i < ranks; i++) {
        rk[i] = (demo_rank_t){(int)i, (int)ranks, addr.port,
                              timeout_s * DDP_NS_PER_S};
        ddp_spawn_t sp = {.entry = demo_rank_main, .arg = &rk[i],
                          .name = "rank"};
        if (ddp_sys_spawn(sys, &sp, &pids[i]) != 0) {
            fprintf(stderr, "ddpsim demo: %s\n", ddp_err_message());
            pids[i] = 0;
            failed = 1;
        }
    }
    /* The server thread starts only after the forks: a thread inside a
     * libfiu point while we fork would leave its lock held in the child.
     * Until then the listening socket queues the ranks' connections. */
    if (ddp_store_server_start_thread(srv) != 0) {
        fprintf(stderr, "ddpsim demo: %s\n", ddp_err_message());
        failed = 1;
    }
    int64_t deadline = ddp_sys_deadline_in(sys, (timeout_s + 5) * DDP_NS_PER_S);
    for (long i = 0; rk && pids && i < ranks; i++) {
        int status = -1;
        if (pids[i] && ddp_sys_wait(sys, pids[i], &status, deadline) != 0) {
            ddp_sys_kill(sys, pids[i], 9);
            ddp_sys_wait(sys, pids[i], &status, DDP_DEADLINE_NEVER);
        }
        failed |= status != 0;
    }
    /* Read the outcomes back through a client, like any other peer would. */
    ddp_store_client_opts_t co = {.host = "127.0.0.1", .port = addr.port,
                                  .connect_deadline =
                                      ddp_sys_deadline_in(sys, DDP_NS_PER_S)};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(sys, &co, &err);
    printf("%-6s %s\n", "rank", "outcome");
    for (long i = 0; i < ranks; i++) {
        char key[64];
        ddp_buf_t v = {0};
        snprintf(key, sizeof key, "demo/result/%ld", i);
        int rc = st ? ddp_store_get(st, key, &v, ddp_sys_deadline_in(
                                                     sys, 100 * DDP_NS_PER_MS))
                    : err;
        printf("%-6ld %.*s\n", i, rc == 0 ? (int)v.len : 20,
               rc == 0 ? (const char *)v.data : "FAIL (no outcome)");
        failed |= rc != 0 || v.len < 2 || memcmp(v.data, "ok", 2) != 0;
        ddp_buf_free(&v);
    }
    ddp_store_free(st);
    ddp_store_server_join_thread(srv);
    ddp_store_server_free(srv);
    free(rk);
    free(pids);
    printf("ddpsim demo: %s\n", failed ? "FAILED" : "all ranks connected");
    return failed ? 1 : 0;
}
