/* backends/backends_priv.h — what the backends share privately: their ops
 * tables (listed by the registry) and the common-header helper. */
#ifndef DDP_BACKENDS_PRIV_H
#define DDP_BACKENDS_PRIV_H

#include "ddp/pg.h"

extern const ddp_pg_ops_t ddp__pg_tcp_ops;  /* backends/tcp.c */
extern const ddp_pg_ops_t ddp__pg_nccl_ops; /* backends/nccl.c */

/* Checks init arguments (sys/store/prefix present, prefix fits the header,
 * 0 <= rank < world): 0 or DDP_ECONFIG / -EINVAL with an error naming the
 * backend and the bad field. ddp_pg_new calls it; a backend that builds
 * init arguments itself (split) calls it too. */
int ddp__pg_init_check(const char *backend, const ddp_pg_init_t *in);

/* Fills a group's common header from its init arguments. Call after
 * ddp__pg_init_check. */
void ddp__pg_header_init(ddp_pg_t *pg, const ddp_pg_ops_t *ops,
                         const ddp_pg_init_t *in);

#endif
