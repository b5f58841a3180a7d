/* ddp/accel.h — accelerators: launch mode and rank math, nothing else.
 *
 * An accelerator decides who starts the processes (this one relaunches
 * itself, a spawner forks workers, or an external launcher did it) and
 * computes global/local/node rank and world size. All connection work goes
 * through the DDP plugin (ddp/plugin.h): the shared driver in
 * accelerators/accel.c calls init_ddp_connection, configure_ddp and teardown
 * the same way for every accelerator.
 */
#ifndef DDP_ACCEL_H
#define DDP_ACCEL_H

#include "ddp/err.h"
#include "ddp/export.h"

#include "ddp/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one process did. */
typedef struct ddp_run_result {
    int rc;              /* 0 ok, else the failing step's code */
    char message[DDP_ERR_MSG_MAX]; /* the error, actionable */
    int global_rank, world_size, local_rank, node_rank;
    const char *accelerator;
    char backend[16];
    uint64_t checksum;   /* model checksum after configure_ddp */
    int children;        /* processes this one launched */
    int children_failed;
    int64_t start_ns;    /* ddp_sys_now when ddp_accel_run began */
    int64_t connect_ns;  /* when init_ddp_connection returned 0 (-1 never) */
    int64_t end_ns;      /* when ddp_accel_run returned */
} ddp_run_result_t;

typedef struct ddp_accel_ops {
    const char *name;
    /* Rank math and launching: fills ctx's ranks; a launcher that starts
     * the workers itself returns 1 when this process is only the launcher
     * (it then waits for them instead of training). */
    int (*setup)(ddp_ctx_t *ctx, ddp_run_result_t *res);
    /* 1 if this accelerator's GPU flavour (on_gpu default). */
    int gpu;
} ddp_accel_ops_t;

DDP_API size_t ddp_accel_count(void);
DDP_API const ddp_accel_ops_t *ddp_accel_at(size_t i);
DDP_API const ddp_accel_ops_t *ddp_accel_find(const char *name);

/* Lightning's selection (1.0.x order): the requested accelerator, turned
 * into ddp_hpc / ddp_cpu_hpc when SLURM manages the tasks or TorchElastic
 * launched them. Returns the name (static). */
DDP_API const char *ddp_accel_select(const ddp_trainer_cfg_t *cfg, ddp_cluster_t *env);

/* The "training script": select, set up, connect through the plugin,
 * configure, tear down, wait for launched children. */
DDP_API int ddp_accel_run(ddp_sys_t *sys, const ddp_trainer_cfg_t *cfg,
                  ddp_run_result_t *res);

/* For accelerator files: launch `n` copies of this script's process with
 * the given per-child environment edits (accelerators/accel.c). */
typedef struct ddp_child_env {
    const char *keys[8];
    char values[8][64];
    int n;
} ddp_child_env_t;
DDP_API void ddp_child_env_set(ddp_child_env_t *e, const char *key, const char *fmt,
                       ...) __attribute__((format(printf, 3, 4)));
DDP_API int ddp_accel_launch(ddp_ctx_t *ctx, const ddp_child_env_t *envs, int n,
                     ddp_run_result_t *res);
/* The common case: local processes first..first+count-1 of this node, each
 * told the master (the cluster environment's MASTER_ADDR/MASTER_PORT, a free
 * port if unset, also written into this process's environment so parent and
 * children agree), NODE_RANK, WORLD_SIZE and index_var = its index
 * (LOCAL_RANK for ddp, DDP_SPAWN_INDEX for the spawners). */
DDP_API int ddp_accel_launch_local(ddp_ctx_t *ctx, int first, int count,
                           const char *index_var, ddp_run_result_t *res);

#ifdef __cplusplus
}
#endif
#endif
