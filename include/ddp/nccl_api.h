/* ddp/nccl_api.h — the NCCL and CUDA runtime calls the nccl backend makes,
 * as one table that the sys seam hands out (ddp_sys_nccl_api).
 *
 * The POSIX sys fills it from the real libnccl.so.2 and libcudart (dlopen,
 * once per process); the simulator fills it with its simulated NCCL
 * (sim/sim_nccl.c: bootstrap over the virtual network, virtual GPUs). The
 * backend calls only through the table, so the code above the library is
 * the same in both (docs/architecture.md, "NCCL: two libraries").
 *
 * The types are NCCL's own, so the table exists only where nccl.h was found
 * at build time (DDP_HAVE_NCCL_H); elsewhere the struct stays incomplete and
 * the backend is its "not built" stub. */
#ifndef DDP_NCCL_API_H
#define DDP_NCCL_API_H

#include "ddp/sys.h"

struct ddp_nccl_api;
typedef struct ddp_nccl_api ddp_nccl_api_t;

#ifdef DDP_HAVE_NCCL_H
#include <nccl.h>

struct ddp_nccl_api {
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank_config)(ncclComm_t *, int, ncclUniqueId, int,
                                     ncclConfig_t *);
    ncclResult_t (*get_async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*comm_abort)(ncclComm_t);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*comm_finalize)(ncclComm_t);
    ncclResult_t (*allreduce)(const void *, void *, size_t, ncclDataType_t,
                              ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t,
                              int, ncclComm_t, cudaStream_t);
    ncclResult_t (*allgather)(const void *, void *, size_t, ncclDataType_t,
                              ncclComm_t, cudaStream_t);
    ncclResult_t (*comm_split)(ncclComm_t, int, int, ncclComm_t *,
                               ncclConfig_t *); /* optional: 2.18+ */
    ncclResult_t (*comm_count)(const ncclComm_t, int *);
    ncclResult_t (*comm_user_rank)(const ncclComm_t, int *);
    const char *(*error_string)(ncclResult_t);
    const char *(*last_error)(ncclComm_t); /* optional: 2.13+ */
    ncclResult_t (*get_version)(int *);

    cudaError_t (*get_device_count)(int *);
    cudaError_t (*set_device)(int);
    cudaError_t (*cuda_malloc)(void **, size_t);
    cudaError_t (*cuda_free)(void *);
    cudaError_t (*memcpy)(void *, const void *, size_t, enum cudaMemcpyKind);
    cudaError_t (*stream_create)(cudaStream_t *);
    cudaError_t (*stream_destroy)(cudaStream_t);
    cudaError_t (*stream_query)(cudaStream_t);
    const char *(*cuda_error_string)(cudaError_t);

    int version;          /* ncclGetVersion code */
    char cudart_name[32]; /* the runtime loaded, or "simulated" */
};

/* NCCL_VERSION switched from X*1000 to X*10000 at 2.9. */
static inline void ddp_nccl_version_parts(int code, int *maj, int *min,
                                          int *patch)
{
    if (code >= 10000) {
        *maj = code / 10000, *min = code % 10000 / 100, *patch = code % 100;
    } else {
        *maj = code / 1000, *min = code % 1000 / 100, *patch = code % 100;
    }
}
#endif /* DDP_HAVE_NCCL_H */

#endif
