/* core/cluster_priv.h — what core/cluster.c (registry, wrappers) needs from
 * core/cluster_envs.c (the environments). Not installed, not public. */
#ifndef DDP_CORE_CLUSTER_PRIV_H
#define DDP_CORE_CLUSTER_PRIV_H

#include "ddp/cluster.h"

extern const ddp_cluster_ops_t ddp__cluster_torchelastic;
extern const ddp_cluster_ops_t ddp__cluster_slurm;
extern const ddp_cluster_ops_t ddp__cluster_lsf;
extern const ddp_cluster_ops_t ddp__cluster_mpi;
extern const ddp_cluster_ops_t ddp__cluster_lightning;
extern const ddp_cluster_ops_t ddp__cluster_kubeflow;

#endif
