/* harness/worker_env.h — the environment torch 1.13's LocalElasticAgent
 * (_start_workers) gives each worker, written once for ddpsim's launchers:
 * `ddpsim launch` (tools/cmd_launch.c) and the elastic agent
 * (harness/elastic.c). Checked against torch's own code by
 * `make differential` (docs/fidelity.md, "Launch contracts"). */
#ifndef DDP_HARNESS_WORKER_ENV_H
#define DDP_HARNESS_WORKER_ENV_H

#include "ddp/env.h"

/* One worker's place in the run, as the agent knows it after its
 * rendezvous: every node runs nproc workers. */
typedef struct ddp_worker_place {
    long local_rank, nproc;        /* LOCAL_RANK, LOCAL_WORLD_SIZE */
    long group_rank, group_world;  /* the node's rank, the nodes */
    const char *master_addr;       /* MASTER_ADDR */
    long master_port;              /* MASTER_PORT */
    long restarts, max_restarts;   /* TORCHELASTIC_RESTART_COUNT, _MAX_RESTARTS */
    const char *run_id;            /* TORCHELASTIC_RUN_ID */
    int agent_store;               /* TORCHELASTIC_USE_AGENT_STORE: the agent hosts it */
} ddp_worker_place_t;

/* Sets p's variables in env, a copy of the agent's environment (an
 * inherited variable is kept where torch keeps it: NCCL_ASYNC_ERROR_HANDLING,
 * OMP_NUM_THREADS): 0, or nonzero when out of memory. */
int ddp_worker_env(ddp_env_t *env, const ddp_worker_place_t *p);

#endif
