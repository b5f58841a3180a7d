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
#include <stdint.h>
#include <string.h>

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
/* acc[i] = acc[i] OP in[i] for n elements of type t (sum, prod, max, min),
 * as an NCCL reduction does: for libraries that implement the table (the
 * simulated NCCL, tests/fake_nccl). in may be unaligned. 0, or -1 for a
 * type it does not know. */
#define DDP__NCCL_RED(T)                                                       \
    do {                                                                       \
        T *d_ = (T *)acc, x_;                                                  \
        for (size_t i_ = 0; i_ < n; i_++) {                                    \
            memcpy(&x_, (const char *)in + i_ * sizeof x_, sizeof x_);         \
            d_[i_] = op == ncclSum    ? (T)(d_[i_] + x_)                       \
                     : op == ncclProd ? (T)(d_[i_] * x_)                       \
                     : op == ncclMax  ? (d_[i_] > x_ ? d_[i_] : x_)            \
                                      : (d_[i_] < x_ ? d_[i_] : x_);           \
        }                                                                      \
    } while (0)

static inline int ddp_nccl_reduce(void *acc, const void *in, size_t n, ncclDataType_t t,
                                  ncclRedOp_t op)
{
    switch (t) {
    case ncclInt8: DDP__NCCL_RED(int8_t); break;
    case ncclUint8: DDP__NCCL_RED(uint8_t); break;
    case ncclInt32: DDP__NCCL_RED(int32_t); break;
    case ncclUint32: DDP__NCCL_RED(uint32_t); break;
    case ncclInt64: DDP__NCCL_RED(int64_t); break;
    case ncclUint64: DDP__NCCL_RED(uint64_t); break;
    case ncclFloat32: DDP__NCCL_RED(float); break;
    case ncclFloat64: DDP__NCCL_RED(double); break;
    default: return -1;
    }
    return 0;
}
#undef DDP__NCCL_RED
#endif /* DDP_HAVE_NCCL_H */

#endif
