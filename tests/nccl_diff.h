/* tests/nccl_diff.h — the NCCL family of `make differential`: which
 * interface NCCL's bootstrap uses under a generated NCCL_SOCKET_IFNAME
 * (and NCCL_SOCKET_FAMILY), the simulated NCCL's rule
 * (sim/sim_nccl_iface.c) against the real libnccl.so.2's choice on this
 * host (ncclGetUniqueId in a forked child, NCCL_DEBUG=INFO's "Bootstrap:
 * Using NAME:ADDR" line or its "no socket interface found"). No GPU is
 * needed: the bootstrap's interface search runs before any CUDA call. */
#ifndef DDP_TESTS_NCCL_DIFF_H
#define DDP_TESTS_NCCL_DIFF_H

#include <stddef.h>
#include <stdint.h>

typedef struct nd_stats {
    long tried, found; /* inputs; those where real NCCL found an interface */
    long disagreed;
    char first[400]; /* the first disagreement, said */
} nd_stats_t;

/* dlopen's handle of libnccl.so.2 and its ncclGetUniqueId, or 0 with why
 * (no NCCL here: the family is skipped). */
int nd_open(void **uid_fn, char *why, size_t n);
/* COUNT generated inputs from seed; 0, or -1 when a child could not be
 * run (st->first says why). */
int nd_run(void *uid_fn, uint64_t seed, long count, nd_stats_t *st);

#endif
