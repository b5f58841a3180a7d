/* harness/worker_env.c — the per-worker environment of torch 1.13's agent
 * (torch/distributed/elastic/agent/server/local_elastic_agent.py,
 * _start_workers; OMP_NUM_THREADS from torch/distributed/run.py,
 * config_from_args). */
#include "worker_env.h"

int ddp_worker_env(ddp_env_t *env, const ddp_worker_place_t *p)
{
    long world = p->group_world * p->nproc, rank = p->group_rank * p->nproc + p->local_rank;
    int e = 0;
    e |= ddp_env_setf(env, "RANK", "%ld", rank);
    e |= ddp_env_setf(env, "LOCAL_RANK", "%ld", p->local_rank);
    e |= ddp_env_setf(env, "GROUP_RANK", "%ld", p->group_rank);
    e |= ddp_env_setf(env, "ROLE_RANK", "%ld", rank);
    e |= ddp_env_set(env, "ROLE_NAME", "default");
    e |= ddp_env_setf(env, "LOCAL_WORLD_SIZE", "%ld", p->nproc);
    e |= ddp_env_setf(env, "WORLD_SIZE", "%ld", world);
    e |= ddp_env_setf(env, "GROUP_WORLD_SIZE", "%ld", p->group_world);
    e |= ddp_env_setf(env, "ROLE_WORLD_SIZE", "%ld", world);
    e |= ddp_env_set(env, "MASTER_ADDR", p->master_addr);
    e |= ddp_env_setf(env, "MASTER_PORT", "%ld", p->master_port);
    e |= ddp_env_setf(env, "TORCHELASTIC_RESTART_COUNT", "%ld", p->restarts);
    e |= ddp_env_setf(env, "TORCHELASTIC_MAX_RESTARTS", "%ld", p->max_restarts);
    e |= ddp_env_set(env, "TORCHELASTIC_RUN_ID", p->run_id);
    e |= ddp_env_set(env, "TORCHELASTIC_USE_AGENT_STORE", p->agent_store ? "True" : "False");
    /* torch 1.13's name (TORCH_NCCL_ASYNC_ERROR_HANDLING is torch >= 2.2's;
     * they still read this one) */
    if (!ddp_env_has(env, "NCCL_ASYNC_ERROR_HANDLING"))
        e |= ddp_env_set(env, "NCCL_ASYNC_ERROR_HANDLING", "1");
    /* torchrun sets it in its own environment, which the workers inherit */
    if (p->nproc > 1 && !ddp_env_has(env, "OMP_NUM_THREADS"))
        e |= ddp_env_set(env, "OMP_NUM_THREADS", "1");
    return e;
}
