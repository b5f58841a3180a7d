/* tests/fake_nccl/fake_cudart.c — a FAKE libcudart.so.13 (see fake.h): the
 * few CUDA runtime calls backends/nccl.c makes, over host memory. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static fake_cudart_state_t g_state = {.devices = 8};
/* initial-exec: the fakes are dlopen'ed, and a dynamic TLS block (what
 * the default model gives a dlopen'ed library) is what LeakSanitizer's
 * exit-time scan mistakes for glibc 2.19's layout at some addresses and
 * crashes on ("Tracer caught signal 11", google/sanitizers#1322): an
 * ASan child flaked at random. A few bytes of static TLS avoid it. */
#define FAKE_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static FAKE_TLS int t_device;

fake_cudart_state_t *fake_cudart_state(void) { return &g_state; }
int fake_cudart_current_device(void) { return t_device; }

static void count(int *field, int delta) { __atomic_add_fetch(field, delta, __ATOMIC_SEQ_CST); }

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = __atomic_load_n(&g_state.devices, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= __atomic_load_n(&g_state.devices, __ATOMIC_SEQ_CST)) {
        count(&g_state.bad_devices, 1);
        return cudaErrorInvalidDevice;
    }
    t_device = device;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    if (!*p)
        return cudaErrorMemoryAllocation;
    count(&g_state.live_allocs, 1);
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (p) {
        free(p);
        count(&g_state.live_allocs, -1);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    struct CUstream_st *st = calloc(1, sizeof *st);
    if (!st)
        return cudaErrorMemoryAllocation;
    st->magic = FAKE_STREAM_MAGIC;
    *s = st;
    count(&g_state.live_streams, 1);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s || s->magic != FAKE_STREAM_MAGIC)
        return cudaErrorInvalidResourceHandle;
    s->magic = 0;
    free(s);
    count(&g_state.live_streams, -1);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    if (!s || s->magic != FAKE_STREAM_MAGIC)
        return cudaErrorInvalidResourceHandle;
    return __atomic_load_n(&s->busy, __ATOMIC_SEQ_CST) ? cudaErrorNotReady : cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error (fake libcudart)";
    case cudaErrorNotReady: return "device not ready (fake libcudart)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (fake libcudart)";
    case cudaErrorMemoryAllocation: return "out of memory (fake libcudart)";
    default: return "error (fake libcudart)";
    }
}
