/* accelerators/accel_priv.h — the accelerators' ops tables (registry). */
#ifndef DDP_ACCEL_PRIV_H
#define DDP_ACCEL_PRIV_H

#include "ddp/accel.h"

extern const ddp_accel_ops_t ddp__accel_ddp;
extern const ddp_accel_ops_t ddp__accel_ddp_spawn;
extern const ddp_accel_ops_t ddp__accel_ddp_cpu;
extern const ddp_accel_ops_t ddp__accel_ddp2;
extern const ddp_accel_ops_t ddp__accel_ddp_hpc;
extern const ddp_accel_ops_t ddp__accel_ddp_cpu_hpc;

/* Shared rank math: global = node_rank * num_processes + local,
 * world = num_nodes * num_processes (all but ddp2). */
void ddp__accel_rank_math(ddp_ctx_t *ctx, int local_rank, int node_rank);
int ddp__accel_num_nodes(const ddp_ctx_t *ctx);
/* Node rank from the cluster environment, local index from `var` (0 when
 * unset), then the rank math. 1 if var was set, 0 if not, < 0 on error. */
int ddp__accel_local_ranks(ddp_ctx_t *ctx, const char *var);
int ddp__accel_num_processes(const ddp_ctx_t *ctx);

#endif
