/* ddp/cluster.h — cluster environments and SLURM hostlists.
 *
 * A cluster environment reads a rank's environment map and answers where the
 * main (master) process is, how many ranks there are and which one this is.
 * Contracts: Lightning 2.x's, documented in docs/cluster-environments.md
 * (from the team's shared/reference/lightning-connection-setup.md, which is
 * not part of this repository).
 *
 * Every getter returns 0 or a negative code; a bad or missing variable gives
 * DDP_ECONFIG with an error context naming the variable, its value and the
 * expected form.
 */
#ifndef DDP_CLUSTER_H
#define DDP_CLUSTER_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ddp/env.h"
#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddp_cluster ddp_cluster_t;

typedef struct ddp_cluster_ops {
    const char *name; /* "lightning", "slurm", "torchelastic", "lsf",
                         "kubeflow", "mpi" */
    /* 1 if this environment's variables are present, else 0. */
    int (*detect)(const ddp_env_t *env);
    int (*main_address)(ddp_cluster_t *c, char *buf, size_t n);
    int (*main_port)(ddp_cluster_t *c, uint16_t *port);
    int (*world_size)(ddp_cluster_t *c, int *out);
    int (*global_rank)(ddp_cluster_t *c, int *out);
    int (*local_rank)(ddp_cluster_t *c, int *out);
    int (*node_rank)(ddp_cluster_t *c, int *out);
    /* 1 if an external launcher started the processes (srun, torchrun...). */
    int (*creates_processes_externally)(ddp_cluster_t *c);
    /* Checks the environment against the requested devices per node and
     * number of nodes (0 = not requested). */
    int (*validate)(ddp_cluster_t *c, int devices, int num_nodes);
    /* 1 if the external launcher started the Trainer's processes, one per
     * rank, so that an accelerator must launch none of its own (Lightning
     * 1.0.x turns ddp into ddp_slurm / ddp_torchelastic then). NULL: never
     * (the Lightning and Kubeflow environments). */
    int (*manages_tasks)(ddp_cluster_t *c, int devices, int num_nodes);
} ddp_cluster_ops_t;

struct ddp_cluster {
    const ddp_cluster_ops_t *ops;
    ddp_sys_t *sys;       /* env map, free-port, file reading (LSF) */
    const ddp_env_t *env; /* = ddp_sys_env(sys) unless overridden */
    /* Settable values (Lightning environment; others ignore). */
    int world_size_set, global_rank_set;
    int world_size_val, global_rank_val;
    /* Cached main port (Lightning picks a free port once). */
    int port_cached;
    uint16_t port_val;
    void *impl;
    /* Set when main_port picked a free port of this node's own because
     * MASTER_PORT was unset (Lightning): wrong for a world of several
     * nodes (ddp_cluster_check_port). */
    int port_picked;
};

/* Registry, in detection priority order: torchelastic, slurm, lsf, mpi,
 * lightning (always detects). kubeflow is only used when chosen by name. */
DDP_API size_t ddp_cluster_count(void);
DDP_API const ddp_cluster_ops_t *ddp_cluster_at(size_t i);
DDP_API const ddp_cluster_ops_t *ddp_cluster_find(const char *name);

/* name == NULL/""/"auto": detect in priority order; else by name
 * (DDP_ENOT_FOUND with the list of valid names). */
DDP_API int ddp_cluster_open(ddp_sys_t *sys, const char *name, ddp_cluster_t **out);
DDP_API void ddp_cluster_close(ddp_cluster_t *c);

DDP_API int ddp_cluster_main_address(ddp_cluster_t *c, char *buf, size_t n);
DDP_API int ddp_cluster_main_port(ddp_cluster_t *c, uint16_t *port);
DDP_API int ddp_cluster_world_size(ddp_cluster_t *c, int *out);
DDP_API int ddp_cluster_global_rank(ddp_cluster_t *c, int *out);
DDP_API int ddp_cluster_local_rank(ddp_cluster_t *c, int *out);
DDP_API int ddp_cluster_node_rank(ddp_cluster_t *c, int *out);
DDP_API int ddp_cluster_creates_processes_externally(ddp_cluster_t *c);
DDP_API int ddp_cluster_validate(ddp_cluster_t *c, int devices, int num_nodes);
/* ops->manages_tasks (0 when the environment has none). Never fails: a
 * value it cannot read means "no" (validation reports it later). */
DDP_API int ddp_cluster_manages_tasks(ddp_cluster_t *c, int devices, int num_nodes);
/* 0, or DDP_ECONFIG naming MASTER_PORT when main_port picked a free port
 * of this node's own (MASTER_PORT unset) and the world spans num_nodes > 1
 * nodes: every node would pick another (Lightning #2578). */
DDP_API int ddp_cluster_check_port(const ddp_cluster_t *c, int num_nodes);
/* Master-address sanity, before anything connects. addr is the main
 * address the environment gave (ddp_cluster_main_address); num_nodes the
 * nodes the world spans. DDP_ECONFIG, naming the address, when
 *  - the world spans several nodes and addr reaches only the host it is
 *    resolved on (loopback: a multi-node torchrun without --master-addr);
 *  - global_rank is 0 and addr resolves to none of this host's addresses:
 *    rank 0 serves the store here, so nobody would find it at addr.
 * A name that does not resolve is left to the connect, which retries it. */
DDP_API int ddp_cluster_check_master(ddp_cluster_t *c, const char *addr,
                                     int global_rank, int num_nodes);
/* Lightning: settable world size / global rank. */
DDP_API void ddp_cluster_set_world_size(ddp_cluster_t *c, int n);
DDP_API void ddp_cluster_set_global_rank(ddp_cluster_t *c, int r);

/* Everything derived, for `ddpsim env`: one "name: value" or
 * "name: error: ..." line per value, written with fn. */
DDP_API void ddp_cluster_describe(ddp_cluster_t *c,
                          void (*fn)(void *arg, const char *line), void *arg);

/* ---- SLURM hostlists ---- */

/* Expands a SLURM hostlist ("node[001-004,007],gpu[1-2]x") into a
 * malloc'd array of malloc'd host names, in SLURM's order (as
 * `scontrol show hostnames`). DDP_ECONFIG on an invalid expression, with an
 * error naming the position and what was expected. max_hosts bounds the
 * expansion (0 -> 1,000,000; more -> DDP_ELIMIT). */
DDP_API int ddp_hostlist_expand(const char *expr, size_t max_hosts, char ***hosts,
                        size_t *n);
DDP_API void ddp_hostlist_free(char **hosts, size_t n);
/* Compresses hosts into the shortest SLURM hostlist expression SLURM would
 * print (malloc'd). Expanding the result gives the same hosts in order. */
DDP_API int ddp_hostlist_compress(const char *const *hosts, size_t n, char **out);

#ifdef __cplusplus
}
#endif
#endif
