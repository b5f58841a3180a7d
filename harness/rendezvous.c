/* harness/rendezvous.c — a store rendezvous workload for tests and benches:
 * the real TCPStore server and client, unmodified, on the sim sys. */
#include <stdio.h>
#include <stdlib.h>

#include "ddp/err.h"
#include "ddp/launch.h"
#include "ddp/sim.h"
#include "ddp/store.h"

typedef struct {
    ddp_sim_rendezvous_t *rv;
    int rank;
} rank_arg_t;

static int server_main(ddp_sys_t *sys, void *arg)
{
    ddp_sim_rendezvous_t *rv = arg;
    ddp_store_server_opts_t so = {.port = rv->port};
    ddp_store_server_t *srv = NULL;
    int rc = ddp_store_server_new(sys, &so, &srv);
    if (rc)
        return rc;
    int64_t deadline = ddp_sys_deadline_in(sys, rv->timeout_ns + DDP_NS_PER_S);
    /* Serve until every rank is done (its sockets closed) or the deadline. */
    while (rc == 0 && rv->done < rv->ranks && ddp_sys_now(sys) < deadline)
        rc = ddp_store_server_step(srv, deadline);
    ddp_store_server_free(srv);
    return rc == DDP_ECANCELED ? rc : 0;
}

static int rank_main(ddp_sys_t *sys, void *arg)
{
    rank_arg_t *ra = arg;
    ddp_sim_rendezvous_t *rv = ra->rv;
    int64_t deadline = ddp_sys_deadline_in(sys, rv->timeout_ns);
    ddp_ident_set_phase("store connect");
    ddp_store_client_opts_t o = {.host = rv->master,
                                 .port = rv->port,
                                 .connect_deadline = deadline,
                                 .seed = (uint64_t)ra->rank * 7919u + 1};
    int rc = 0;
    ddp_store_t *st = ddp_store_client_connect(sys, &o, &rc);
    if (st) {
        ddp_ident_set_phase("wait for workers");
        rc = ddp_store_wait_for_workers(st, ra->rank, rv->ranks, deadline);
        if (rc == 0) {
            ddp_ident_set_phase("barrier");
            rc = ddp_store_barrier(st, "default_pg", rv->ranks, deadline);
        }
        if (rc == 0)
            ddp_sim_mark_connected(sys);
        ddp_store_free(st);
    }
    rv->done++;
    return rc;
}

int ddp_sim_rendezvous_build(ddp_sim_t *sim, ddp_sim_rendezvous_t *rv)
{
    int nodes = ddp_sim_node_count(sim);
    if (nodes < 1 || rv->ranks < 1)
        return ddp_err_set(DDP_ECONFIG, "rendezvous needs >= 1 node and rank");
    if (!rv->master)
        rv->master = "node0";
    if (!rv->port)
        rv->port = 29500;
    if (rv->timeout_ns <= 0)
        rv->timeout_ns = 300 * DDP_NS_PER_S;
    rv->done = 0;
    rv->server_task = -1;
    if (rv->server_start_ns >= 0)
        rv->server_task = ddp_sim_add_task(
            sim,
            &(ddp_sim_task_opts_t){.node = 0, .name = "store", .rank = -1,
                                   .start_ns = rv->server_start_ns},
            server_main, rv);
    /* The ranks' arguments live as long as the sim (ddp_sim_own). */
    rank_arg_t *args = calloc((size_t)rv->ranks, sizeof *args);
    if (!args)
        return ddp_err_set(-12, "out of memory");
    for (int r = 0; r < rv->ranks; r++) {
        char name[24];
        snprintf(name, sizeof name, "rank%d", r);
        args[r] = (rank_arg_t){rv, r};
        int id = ddp_sim_add_task(
            sim,
            &(ddp_sim_task_opts_t){.node = (int)((int64_t)r * nodes / rv->ranks),
                                   .name = name, .rank = r,
                                   .start_ns = rv->rank_start_ns},
            rank_main, &args[r]);
        if (r == 0)
            rv->first_rank_task = id;
    }
    ddp_sim_own(sim, args);
    return 0;
}
