/* core/sys_nccl_priv.h — the POSIX sys's NCCL library, for the two sys
 * implementations (core/sys_posix.c; sim/sim_net.c when a simulation asks
 * for the host's library: ddp_sim_opts_t.host_nccl). */
#ifndef DDP_SYS_NCCL_PRIV_H
#define DDP_SYS_NCCL_PRIV_H

#include "ddp/nccl_api.h"

/* libnccl.so.2 and libcudart loaded once per process
 * (core/sys_posix_nccl.c). 0, or a negative code with the error context
 * set (DDP_ENOT_FOUND: a library is missing; DDP_EUNSUPPORTED: too old;
 * DDP_ENOT_BUILT: no nccl.h at build time). */
int ddp__nccl_api_posix(const ddp_nccl_api_t **out);

#endif
