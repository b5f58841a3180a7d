/* tests/fake_nccl/fake.h — a FAKE libnccl.so.2 / libcudart.so.13 pair for
 * testing backends/nccl.c without a GPU (tests/test_behave_nccl.c).
 *
 * NOT NCCL and NOT CUDA. The two libraries carry the real sonames so that
 * the backend's dlopen("libnccl.so.2") and dlopen("libcudart.so.13") find
 * them when their directory ($(B)/fake_nccl) comes first in
 * LD_LIBRARY_PATH; they are built only for tests and never installed.
 *
 * What they model, in one process whose ranks are threads (real ones or
 * the simulator's tasks):
 *  - "device memory" is host memory (cudaMalloc = malloc, cudaMemcpy =
 *    memcpy), devices are numbers below fake_cudart_state()->devices;
 *  - a communicator joins the clique of its unique id; with config.blocking
 *    = 0 init returns ncclInProgress and ncclCommGetAsyncError says
 *    ncclInProgress until every rank has joined (a blocking init whose
 *    peers are still missing fails: it would hang the thread for good);
 *  - collectives are queued on the caller's stream (cudaStreamQuery says
 *    cudaErrorNotReady) and complete, with the right data, once every rank
 *    has queued the same one; they never complete while a rank is missing;
 *  - ncclCommSplit groups by color and orders by (key, parent rank);
 *  - ncclCommFinalize completes one poll later; abort and destroy free the
 *    communicator; a clique whose last member left is freed.
 * Nothing in them ever blocks, so they are safe under the simulator, where
 * only one rank runs at a time and a blocked rank would stall them all.
 *
 * The test reaches the state below with dlsym(fake_nccl_state) and
 * dlsym(fake_cudart_state): configuration first (before the first init),
 * counters after the run.
 */
#ifndef DDP_FAKE_NCCL_H
#define DDP_FAKE_NCCL_H

#define FAKE_STREAM_MAGIC 0x57ea4u
#define FAKE_MAX_RANKS 64
#define FAKE_MAX_INITS 256

/* A stream: busy while a queued collective has not completed. */
struct CUstream_st {
    unsigned magic;
    int busy; /* read and written with __atomic builtins */
};

/* One ncclCommInitRankConfig call, as the fake saw it. */
typedef struct fake_init_rec {
    int clique;   /* which unique id (numbered from 0 in order of first use) */
    int rank, nranks;
    int device;   /* the caller's current device (cudaSetDevice) */
    int blocking; /* config.blocking */
} fake_init_rec_t;

typedef struct fake_nccl_state {
    /* configuration */
    int version;        /* ncclGetVersion (default 22809, 2.28.9) */
    int fail_init_rank; /* >= 0: init of this rank returns ncclSystemError */
    int error_rank;     /* >= 0: this rank's communicator reports error_code */
    int error_after;    /* ... once it has queued this many collectives */
    int error_code;     /* ncclResult_t (default ncclRemoteError) */
    int hang_rank;      /* >= 0: this rank's collectives are never queued */
    /* counters (under the fake's lock; read them after the run) */
    int unique_ids;     /* ncclGetUniqueId calls */
    int inits, inits_blocking, init_failures;
    long polls;         /* ncclCommGetAsyncError calls */
    int collectives;    /* completed */
    int splits;         /* ncclCommSplit calls */
    int finalizes, destroys, destroyed_unfinalized, aborts;
    int live_comms;     /* created and neither destroyed nor aborted */
    int live_cliques;
    int cliques;        /* distinct unique ids seen */
    fake_init_rec_t init[FAKE_MAX_INITS];
    int ninit;
} fake_nccl_state_t;

typedef struct fake_cudart_state {
    int devices;        /* cudaGetDeviceCount (default 8) */
    int live_allocs;    /* cudaMalloc'ed and not cudaFree'd */
    int live_streams;
    int bad_devices;    /* cudaSetDevice of a device that does not exist */
} fake_cudart_state_t;

fake_nccl_state_t *fake_nccl_state(void);
fake_cudart_state_t *fake_cudart_state(void);
/* The calling thread's device (libcudart's, for libnccl's records). */
int fake_cudart_current_device(void);

#endif
