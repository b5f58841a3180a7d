/* core/sys_posix_nccl.c — the POSIX sys's NCCL library: the real
 * libnccl.so.2 and CUDA runtime, dlopen'ed at the first nccl init, never
 * linked, so one binary runs on machines with and without GPUs (a machine
 * without them gets an error, not a loader failure at start-up). Part of
 * the POSIX sys implementation: the only place that dlopens NCCL. The
 * simulator's counterpart is sim/sim_nccl.c. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/nccl_api.h"
#include "sys_nccl_priv.h"

#ifndef DDP_HAVE_NCCL_H

int ddp__nccl_api_posix(const ddp_nccl_api_t **out)
{
    *out = NULL;
    ddp_err_set(DDP_ENOT_BUILT,
                "nccl backend: not built (nccl.h was not found at build time; "
                "install the CUDA toolkit and rebuild)");
    return ddp_err_hint("or use the tcp backend");
}

#else

#include <dlfcn.h>



static ddp_nccl_api_t g_api;
static int g_api_rc;          /* 0 loaded, else the code every init returns */
static char g_api_err[512];   /* ... and its sentence */
static char g_api_hint[256];
static pthread_once_t g_api_once = PTHREAD_ONCE_INIT;

/* dlsym returns an object pointer; POSIX guarantees function pointers have
 * the same representation, and memcpy is the conversion C11 allows. */
_Static_assert(sizeof(void (*)(void)) == sizeof(void *),
               "function pointers must fit a void *");

typedef struct sym {
    const char *name;
    void *slot; /* address of the function pointer in g_api */
    int optional;
} sym_t;

static int resolve(void *lib, const char *libname, const sym_t *syms,
                   size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dlerror();
        void *addr = dlsym(lib, syms[i].name);
        if (!addr) {
            if (syms[i].optional)
                continue;
            const char *why = dlerror();
            snprintf(g_api_err, sizeof g_api_err,
                     "nccl backend: %s has no %s (%s)", libname, syms[i].name,
                     why ? why : "symbol not found");
            return DDP_EUNSUPPORTED;
        }
        memcpy(syms[i].slot, &addr, sizeof addr);
    }
    return 0;
}

/* Runs once per process: the libraries stay loaded for good (NCCL starts
 * threads that would outlive a dlclose). */
static void api_load_once(void)
{
    const sym_t nccl_syms[] = {
        {"ncclGetVersion", &g_api.get_version, 0},
        {"ncclGetErrorString", &g_api.error_string, 0},
        {"ncclGetLastError", &g_api.last_error, 1},
        {"ncclGetUniqueId", &g_api.get_unique_id, 0},
        {"ncclCommInitRankConfig", &g_api.init_rank_config, 0},
        {"ncclCommGetAsyncError", &g_api.get_async_error, 0},
        {"ncclCommAbort", &g_api.comm_abort, 0},
        {"ncclCommDestroy", &g_api.comm_destroy, 0},
        {"ncclCommFinalize", &g_api.comm_finalize, 0},
        {"ncclAllReduce", &g_api.allreduce, 0},
        {"ncclBroadcast", &g_api.broadcast, 0},
        {"ncclAllGather", &g_api.allgather, 0},
        {"ncclCommSplit", &g_api.comm_split, 1},
        {"ncclCommCount", &g_api.comm_count, 0},
        {"ncclCommUserRank", &g_api.comm_user_rank, 0},
    };
    const sym_t cuda_syms[] = {
        {"cudaGetDeviceCount", &g_api.get_device_count, 0},
        {"cudaSetDevice", &g_api.set_device, 0},
        {"cudaMalloc", &g_api.cuda_malloc, 0},
        {"cudaFree", &g_api.cuda_free, 0},
        {"cudaMemcpy", &g_api.memcpy, 0},
        {"cudaStreamCreate", &g_api.stream_create, 0},
        {"cudaStreamDestroy", &g_api.stream_destroy, 0},
        {"cudaStreamQuery", &g_api.stream_query, 0},
        {"cudaGetErrorString", &g_api.cuda_error_string, 0},
    };
    /* RTLD_LOCAL: NCCL's and CUDA's symbols must not satisfy anything else
     * in the process by accident. */
    void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!nccl) {
        const char *why = dlerror();
        g_api_rc = DDP_ENOT_FOUND;
        snprintf(g_api_err, sizeof g_api_err,
                 "nccl backend: libnccl.so.2 not found: %s",
                 why ? why : "dlopen failed");
        snprintf(g_api_hint, sizeof g_api_hint,
                 "install NCCL (the CUDA toolkit ships it in lib64; Python: "
                 "the nvidia-nccl-cu13 package) and make it findable "
                 "(ldconfig or LD_LIBRARY_PATH), or use the tcp backend");
        return;
    }
    if ((g_api_rc = resolve(nccl, "libnccl.so.2", nccl_syms,
                            sizeof nccl_syms / sizeof nccl_syms[0])) != 0) {
        snprintf(g_api_hint, sizeof g_api_hint,
                 "NCCL >= 2.14 is needed (non-blocking init and finalize)");
        return;
    }
    if (g_api.get_version(&g_api.version) != ncclSuccess)
        g_api.version = 0;
    int maj, min, patch;
    ddp_nccl_version_parts(g_api.version, &maj, &min, &patch);
    if (g_api.version < 21400) {
        g_api_rc = DDP_EUNSUPPORTED;
        snprintf(g_api_err, sizeof g_api_err,
                 "nccl backend: libnccl.so.2 is NCCL %d.%d.%d; non-blocking "
                 "init needs 2.14 or newer",
                 maj, min, patch);
        snprintf(g_api_hint, sizeof g_api_hint, "install a newer NCCL");
        return;
    }

    /* Newest runtime first: NCCL links its own runtime statically, so any
     * of these works with it (they share the driver's primary context). */
    static const char *const cudarts[] = {"libcudart.so.13", "libcudart.so.12",
                                          "libcudart.so"};
    void *cudart = NULL;
    char why[256] = "";
    for (size_t i = 0; !cudart && i < sizeof cudarts / sizeof cudarts[0]; i++) {
        cudart = dlopen(cudarts[i], RTLD_NOW | RTLD_LOCAL);
        if (cudart) {
            snprintf(g_api.cudart_name, sizeof g_api.cudart_name, "%s",
                     cudarts[i]);
        } else {
            const char *e = dlerror();
            snprintf(why, sizeof why, "%s", e ? e : "dlopen failed");
        }
    }
    if (!cudart) {
        g_api_rc = DDP_ENOT_FOUND;
        snprintf(g_api_err, sizeof g_api_err,
                 "nccl backend: CUDA runtime not found (tried libcudart.so.13, "
                 "libcudart.so.12, libcudart.so): %s",
                 why);
        snprintf(g_api_hint, sizeof g_api_hint,
                 "install the CUDA runtime and make it findable (ldconfig or "
                 "LD_LIBRARY_PATH)");
        return;
    }
    if ((g_api_rc = resolve(cudart, g_api.cudart_name, cuda_syms,
                            sizeof cuda_syms / sizeof cuda_syms[0])) != 0) {
        snprintf(g_api_hint, sizeof g_api_hint, "install CUDA 12 or newer");
        return;
    }
    ddp_debug("nccl backend: NCCL %d.%d.%d, CUDA runtime %s", maj, min, patch,
              g_api.cudart_name);
}

int ddp__nccl_api_posix(const ddp_nccl_api_t **out)
{
    pthread_once(&g_api_once, api_load_once);
    *out = NULL;
    if (g_api_rc == 0) {
        *out = &g_api;
        return 0;
    }
    ddp_err_set(g_api_rc, "%s", g_api_err);
    if (g_api_hint[0])
        ddp_err_hint("%s", g_api_hint);
    return g_api_rc;
}

#endif /* DDP_HAVE_NCCL_H */
