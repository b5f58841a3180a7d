/* backends/nccl.c — the `nccl` process-group backend (GPUs).
 *
 * Built against the CUDA toolkit's nccl.h when the Makefile finds it
 * (DDP_HAVE_NCCL_H), but never linked against libnccl or the CUDA runtime:
 * it calls them through the table its sys hands out (ddp_sys_nccl_api,
 * ddp/nccl_api.h). The POSIX sys dlopens the real libraries at the first
 * init (core/sys_posix_nccl.c), so one binary runs on machines with and
 * without GPUs; the simulator hands out its simulated NCCL (sim/sim_nccl.c),
 * whose bootstrap runs over the virtual network.
 *
 * Bootstrap (DESIGN §3.3, reference/rendezvous-and-backends.md):
 *  1. rank 0 calls ncclGetUniqueId and publishes the 128 bytes under
 *     "<prefix>/nccl/uid"; the others ddp_store_get it with the GROUP
 *     deadline (pytorch#107177: PyTorch used the store timeout there);
 *  2. every rank calls ncclCommInitRankConfig with blocking = 0 and polls
 *     ncclCommGetAsyncError until ncclSuccess or the deadline; at the
 *     deadline it calls ncclCommAbort (only safe on non-blocking
 *     communicators) and fails with DDP_ETIMEOUT.
 * Collectives stage host buffers through one device scratch buffer, run the
 * NCCL op on the group's stream and poll stream + communicator against the
 * deadline; any failure aborts the group (NCCL leaves a communicator that
 * saw an error unusable), so later calls fail fast with DDP_ECANCELED.
 *
 * Error codes (docs/hardware.md repeats them):
 *   DDP_ENOT_BUILT    nccl.h was not found at build time
 *   DDP_ENOT_FOUND    libnccl.so.2 or the CUDA runtime cannot be loaded, or
 *                     no CUDA device is visible: something the machine lacks,
 *                     as opposed to something this program does wrong
 *   DDP_EUNSUPPORTED  libnccl.so.2 is too old (no non-blocking init: < 2.14;
 *                     split needs ncclCommSplit: >= 2.18)
 *   DDP_ECONFIG       device (LOCAL_RANK) negative or >= the device count;
 *                     NCCL's invalid argument / invalid usage
 *   DDP_ETIMEOUT      unique-id wait, communicator init, split or a
 *                     collective passed its deadline (communicator aborted)
 *   DDP_EPROTOCOL     the value under "<prefix>/nccl/uid" is not 128 bytes
 *   DDP_EPEER_LOST    NCCL reported ncclRemoteError (a peer exited)
 *   DDP_ECANCELED     the group was aborted (by abort or an earlier failure)
 *   DDP_EINTERNAL     any other NCCL or CUDA failure (message has NCCL's)
 *
 * libfiu fault points (docs/fault-points.md):
 *   pg/nccl/uid   the unique-id exchange fails with -failinfo (default
 *                 ECONNRESET) before touching the store: rank 0 publishes
 *                 nothing, so the other ranks time out waiting for the id.
 *   pg/nccl/init  checked just before ncclCommInitRankConfig. failinfo > 0:
 *                 this rank fails with -failinfo without joining (its peers
 *                 then wait out their deadline and abort). failinfo 0: the
 *                 communicator is created but treated as never ready, so the
 *                 rank itself waits out its deadline and aborts a real
 *                 in-progress communicator (the only way to drive the abort
 *                 path on a one-GPU machine).
 */
#include <errno.h>
#include <fiu.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends_priv.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/log.h"
#include "ddp/pg.h"
#include "ddp/store.h"
#include "ddp/sys.h"

#ifndef DDP_HAVE_NCCL_H

/* ------------------------------------------------ built without nccl.h */

static int not_built(void)
{
    ddp_err_set(DDP_ENOT_BUILT,
                "nccl backend: not built (nccl.h was not found at build time; "
                "install the CUDA toolkit and rebuild)");
    return ddp_err_hint("or use the tcp backend");
}

static int nb_init(const ddp_pg_init_t *in, ddp_pg_t **out)
{
    (void)in;
    if (out)
        *out = NULL;
    return not_built();
}

/* No group can exist without init, so these only guard misuse. */
static int nb_barrier(ddp_pg_t *pg, int64_t deadline)
{
    (void)pg, (void)deadline;
    return not_built();
}
static int nb_broadcast(ddp_pg_t *pg, void *buf, size_t bytes, int root,
                        int64_t deadline)
{
    (void)pg, (void)buf, (void)bytes, (void)root, (void)deadline;
    return not_built();
}
static int nb_allreduce(ddp_pg_t *pg, void *buf, size_t count, ddp_dtype_t t,
                        ddp_redop_t op, int64_t deadline)
{
    (void)pg, (void)buf, (void)count, (void)t, (void)op, (void)deadline;
    return not_built();
}
static int nb_allgather(ddp_pg_t *pg, const void *in, size_t bytes, void *out,
                        int64_t deadline)
{
    (void)pg, (void)in, (void)bytes, (void)out, (void)deadline;
    return not_built();
}
static int nb_split(ddp_pg_t *pg, int color, int key, const char *name,
                    ddp_pg_t **out, int64_t deadline)
{
    (void)pg, (void)color, (void)key, (void)name, (void)deadline;
    if (out)
        *out = NULL;
    return not_built();
}
static void nb_abort(ddp_pg_t *pg) { (void)pg; }
static void nb_destroy(ddp_pg_t *pg) { (void)pg; }

const ddp_pg_ops_t ddp__pg_nccl_ops = {
    .name = "nccl",
    .init = nb_init,
    .barrier = nb_barrier,
    .broadcast = nb_broadcast,
    .allreduce = nb_allreduce,
    .allgather = nb_allgather,
    .split = nb_split,
    .abort = nb_abort,
    .destroy = nb_destroy,
};

#else /* DDP_HAVE_NCCL_H */

#include "ddp/nccl_api.h"

/* ------------------------------------------------------------ errors */

static const char *nccl_str(const ddp_nccl_api_t *api, ncclResult_t r)
{
    const char *s = api->error_string ? api->error_string(r) : NULL;
    return s ? s : "unknown NCCL result";
}

static const char *cuda_str(const ddp_nccl_api_t *api, cudaError_t e)
{
    const char *s = api->cuda_error_string ? api->cuda_error_string(e) : NULL;
    return s ? s : "unknown CUDA error";
}

static int code_of(ncclResult_t r)
{
    switch (r) {
    case ncclRemoteError:
        return DDP_EPEER_LOST;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
        return DDP_ECONFIG;
    default:
        return DDP_EINTERNAL;
    }
}

typedef struct npg {
    ddp_pg_t pg; /* first: the common header */
    /* mu serialises every NCCL/CUDA call on this group with abort(), which
     * may come from another thread (a watchdog) while a collective polls:
     * without it abort could free the communicator under the poller. It is
     * never held across a sleep. */
    pthread_mutex_t mu;
    const ddp_nccl_api_t *api; /* the sys's library (ddp_sys_nccl_api) */
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
    int aborted; /* under mu */
    void *dbuf;  /* device scratch, grown on demand */
    size_t dcap;
} npg_t;

static npg_t *N(ddp_pg_t *pg) { return (npg_t *)pg; }

/* Sets the context for an NCCL failure in `what` on this group. */
static int nccl_fail(const npg_t *p, const char *what, ncclResult_t r)
{
    /* NULL: the argument is unused by NCCL, and p->comm may be changing
     * under a concurrent abort. */
    const char *last = p->api->last_error ? p->api->last_error(NULL) : NULL;
    ddp_err_set(code_of(r),
                "nccl backend: rank %d of %d (group \"%s\"), %s: NCCL error "
                "%d: %s%s%s",
                p->pg.rank, p->pg.world, p->pg.prefix, what, (int)r,
                nccl_str(p->api, r), last && last[0] ? "; last NCCL error: " : "",
                last && last[0] ? last : "");
    if (r == ncclRemoteError)
        return ddp_err_hint("a peer's process exited or the network to it failed: the rank "
                            "NCCL's last error names has its own error (or was killed); "
                            "NCCL_DEBUG=INFO gives NCCL's own account");
    return ddp_err_hint("run with NCCL_DEBUG=INFO for NCCL's own account");
}

static int cuda_fail(const npg_t *p, const char *what, cudaError_t e)
{
    return ddp_err_set(e == cudaErrorMemoryAllocation ? -ENOMEM
                                                      : DDP_EINTERNAL,
                       "nccl backend: rank %d of %d (group \"%s\"), %s: CUDA "
                       "error %d: %s",
                       p->pg.rank, p->pg.world, p->pg.prefix, what, (int)e,
                       cuda_str(p->api, e));
}

static double secs(int64_t from, int64_t to) { return (double)(to - from) / 1e9; }


/* ------------------------------------------------------------ polling */

/* Sleep between polls: starts short so a fast collective costs microseconds,
 * grows to 1 ms so a long wait does not spin a core. */
#define POLL_MIN_NS (10 * 1000)
#define POLL_MAX_NS DDP_NS_PER_MS

enum { WAIT_DONE = 0, WAIT_TIMEOUT = 1, WAIT_ABORTED = 2 };

/* Polls the group's communicator (and `stream` when not NULL) until its state
 * is ncclSuccess and the stream has drained, or until the deadline. With
 * `stall` the communicator is never taken as ready (fault point). Returns
 * WAIT_DONE, WAIT_TIMEOUT, WAIT_ABORTED (the group was aborted meanwhile),
 * or a negative code with the context set (NCCL/CUDA error, sleep failed).
 * Called without p->mu; takes it around each query. */
static int wait_ready(npg_t *p, cudaStream_t stream, const char *what,
                      int stall, int64_t deadline)
{
    ddp_sys_t *sys = p->pg.sys;
    int64_t nap = POLL_MIN_NS;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        if (p->aborted) {
            pthread_mutex_unlock(&p->mu);
            return WAIT_ABORTED;
        }
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = p->api->get_async_error(p->comm, &st);
        cudaError_t ce = cudaSuccess;
        /* The stream counts only once NCCL has enqueued onto it: before
         * that an empty stream would read as "done". */
        if (r == ncclSuccess && st == ncclSuccess && stream)
            ce = p->api->stream_query(stream);
        pthread_mutex_unlock(&p->mu);
        if (r != ncclSuccess)
            return nccl_fail(p, what, r);
        if (st != ncclSuccess && st != ncclInProgress)
            return nccl_fail(p, what, st);
        if (ce != cudaSuccess && ce != cudaErrorNotReady)
            return cuda_fail(p, what, ce);
        if (st == ncclSuccess && ce == cudaSuccess && !stall)
            return WAIT_DONE;
        int64_t now = ddp_sys_now(sys);
        if (now >= deadline)
            return WAIT_TIMEOUT;
        int64_t wake = deadline - now > nap ? now + nap : deadline;
        int rc = ddp_sys_sleep_until(sys, wake);
        if (rc)
            return rc;
        if (nap < POLL_MAX_NS)
            nap = nap * 2 < POLL_MAX_NS ? nap * 2 : POLL_MAX_NS;
    }
}

/* Aborts the communicator once; later calls fail fast. Takes p->mu. */
static void abort_comm(npg_t *p)
{
    pthread_mutex_lock(&p->mu);
    if (!p->aborted) {
        p->aborted = 1;
        if (p->comm) {
            p->api->set_device(p->device);
            p->api->comm_abort(p->comm);
            p->comm = NULL;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

/* Frees what the group owns besides the communicator. */
static void free_npg(npg_t *p)
{
    if (p->stream || p->dbuf)
        p->api->set_device(p->device);
    if (p->stream)
        p->api->stream_destroy(p->stream);
    if (p->dbuf)
        p->api->cuda_free(p->dbuf);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static npg_t *new_npg(const ddp_nccl_api_t *api, const ddp_pg_init_t *in)
{
    npg_t *p = calloc(1, sizeof *p);
    if (!p) {
        ddp_err_set(-ENOMEM, "nccl backend: out of memory");
        return NULL;
    }
    ddp__pg_header_init(&p->pg, &ddp__pg_nccl_ops, in);
    p->api = api;
    p->device = in->device;
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

static ncclConfig_t nonblocking_config(const char *name)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* so a stuck init can be aborted (DESIGN §3.3) */
    cfg.commName = name; /* shows in NCCL_DEBUG output */
    return cfg;
}

/* ------------------------------------------------------------ init */

/* Device checks before anything touches the store: they are cheap and a
 * rank 0 that cannot join must not publish an id for the others to use. */
static int check_device(const ddp_nccl_api_t *api, const ddp_pg_init_t *in)
{
    int n = 0;
    cudaError_t e = api->get_device_count(&n);
    if (e != cudaSuccess || n <= 0) {
        if (e != cudaSuccess)
            ddp_err_set(DDP_ENOT_FOUND,
                        "nccl backend: no CUDA device visible "
                        "(cudaGetDeviceCount: CUDA error %d: %s)",
                        (int)e, cuda_str(api, e));
        else
            ddp_err_set(DDP_ENOT_FOUND, "nccl backend: no CUDA device visible "
                                        "(cudaGetDeviceCount returned 0)");
        return ddp_err_hint("check nvidia-smi, the driver and "
                            "CUDA_VISIBLE_DEVICES; without GPUs use the tcp "
                            "backend");
    }
    if (in->device >= n) {
        ddp_err_set(DDP_ECONFIG,
                    "nccl backend: rank %d wants CUDA device %d (LOCAL_RANK) "
                    "but %d device%s visible",
                    in->rank, in->device, n, n == 1 ? " is" : "s are");
        return ddp_err_hint("run at most %d rank%s per node, or fix "
                            "CUDA_VISIBLE_DEVICES",
                            n, n == 1 ? "" : "s");
    }
    e = api->set_device(in->device);
    if (e != cudaSuccess)
        return ddp_err_set(DDP_EINTERNAL,
                           "nccl backend: rank %d: cudaSetDevice(%d): CUDA "
                           "error %d: %s",
                           in->rank, in->device, (int)e, cuda_str(api, e));
    return 0;
}

/* Rank 0 creates and publishes the id; the others fetch it, bounded by the
 * group deadline. */
static int exchange_uid(npg_t *p, int64_t deadline, ncclUniqueId *uid)
{
    ddp_sys_t *sys = p->pg.sys;
    char key[sizeof p->pg.prefix + 16];
    snprintf(key, sizeof key, "%s/nccl/uid", p->pg.prefix);
    int64_t start = ddp_sys_now(sys);
    int rc = ddp_fault_fire(DDP_FP_PG_NCCL_UID);
    if (p->pg.rank == 0) {
        if (!rc) {
            ncclResult_t r = p->api->get_unique_id(uid);
            if (r != ncclSuccess)
                return nccl_fail(p, "ncclGetUniqueId", r);
            rc = ddp_store_set(p->pg.store, key, uid, sizeof *uid, deadline);
        }
        if (rc) {
            char why[sizeof ddp_err_ctx()->what];
            snprintf(why, sizeof why, "%s", ddp_err_ctx()->what);
            ddp_err_set(rc,
                        "nccl backend: rank 0 of %d (group \"%s\"), unique id "
                        "exchange: could not publish the NCCL unique id under "
                        "key \"%s\": %s",
                        p->pg.world, p->pg.prefix, key, why);
            ddp_err_waited(ddp_sys_now(sys) - start);
            return ddp_err_hint("the other ranks will time out waiting for "
                                "it; check the store");
        }
        return 0;
    }
    ddp_buf_t buf = {0};
    if (!rc)
        rc = ddp_store_get(p->pg.store, key, &buf, deadline);
    if (rc) {
        int64_t now = ddp_sys_now(sys);
        char why[sizeof ddp_err_ctx()->what];
        snprintf(why, sizeof why, "%s", ddp_err_ctx()->what);
        ddp_err_set(rc,
                    "nccl backend: rank %d of %d (group \"%s\"), unique id "
                    "exchange: no NCCL unique id under key \"%s\" after %.1f "
                    "s: %s",
                    p->pg.rank, p->pg.world, p->pg.prefix, key,
                    secs(start, now), why);
        ddp_err_waited(now - start);
        return ddp_err_hint("rank 0 publishes it when it reaches NCCL init: "
                            "check that rank 0 is alive and uses the same "
                            "store and prefix (this wait is bounded by the "
                            "group deadline, not the store timeout)");
    }
    if (buf.len != sizeof *uid) {
        ddp_err_set(DDP_EPROTOCOL,
                    "nccl backend: rank %d of %d (group \"%s\"): the value "
                    "under key \"%s\" is %zu bytes, an NCCL unique id is %zu",
                    p->pg.rank, p->pg.world, p->pg.prefix, key, buf.len,
                    sizeof *uid);
        ddp_buf_free(&buf);
        return ddp_err_hint("another program or group uses that key; give "
                            "this group its own prefix");
    }
    memcpy(uid, buf.data, sizeof *uid);
    ddp_buf_free(&buf);
    return 0;
}

/* Turns a wait_ready() outcome of a failed init/split into the error, and
 * aborts. */
static int fail_wait(npg_t *p, int w, const char *what, int64_t start,
                     const char *hint)
{
    int64_t now = ddp_sys_now(p->pg.sys);
    /* Formats before the abort: ncclGetLastError may read the comm. */
    if (w == WAIT_TIMEOUT) {
        ddp_err_set(DDP_ETIMEOUT,
                    "nccl backend: rank %d of %d (group \"%s\"): %s did not "
                    "complete after %.1f s; the communicator was aborted",
                    p->pg.rank, p->pg.world, p->pg.prefix, what,
                    secs(start, now));
        ddp_err_waited(now - start);
        ddp_err_hint("%s", hint);
    } else if (w == WAIT_ABORTED) {
        ddp_err_set(DDP_ECANCELED,
                    "nccl backend: rank %d of %d (group \"%s\"): aborted "
                    "during %s",
                    p->pg.rank, p->pg.world, p->pg.prefix, what);
    }
    int code = ddp_err_ctx()->code;
    abort_comm(p);
    return code;
}

static const char *const INIT_HINT =
    "every rank must reach NCCL init with the same unique id: a rank that "
    "died, hangs or never started keeps the others waiting (see its log; "
    "NCCL_DEBUG=INFO and NCCL_SOCKET_IFNAME help with network trouble)";

/* One interface name against NCCL_SOCKET_IFNAME's list, as NCCL reads it:
 * comma-separated prefixes, or exact names after a leading '='. */
static int ifname_matches(const char *spec, const char *name)
{
    int exact = spec[0] == '=';
    for (const char *p = spec + exact; *p;) {
        size_t len = strcspn(p, ",");
        if (len && strncmp(p, name, len) == 0 && (!exact || name[len] == '\0'))
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* NCCL_SOCKET_IFNAME picks only loopback interfaces here ("lo"): NCCL's
 * bootstrap then advertises 127.0.0.1, which the ranks of another node
 * cannot reach (they connect to their own loopback, NVIDIA/nccl #286,
 * pytorch #68893). The init timeout's hint then says so; else INIT_HINT. */
static const char *init_hint(ddp_sys_t *sys, char *buf, size_t n)
{
    const char *spec = ddp_env_get(ddp_sys_env(sys), "NCCL_SOCKET_IFNAME");
    if (!spec || strlen(spec) < 2 || spec[0] == '^')
        return INIT_HINT;
    ddp_ifaddr_t ifs[32];
    ddp_errsave_t *saved = ddp_err_save();
    int k = ddp_sys_ifaddrs(sys, ifs, 32), picked = 0;
    ddp_err_restore(saved);
    for (int i = 0; i < k; i++) {
        if (!ifname_matches(spec, ifs[i].name))
            continue;
        if (!ddp_addr_is_loopback(&ifs[i].addr))
            return INIT_HINT;
        picked = 1;
    }
    if (!picked)
        return INIT_HINT;
    snprintf(buf, n, "NCCL_SOCKET_IFNAME=%s picks only this host's loopback "
                     "interface, so NCCL's bootstrap advertises a loopback address "
                     "that the ranks of another node cannot reach (they connect "
                     "to their own): when the job spans nodes, set it to an "
                     "interface they share (NCCL_SOCKET_IFNAME=eth0) or ^lo",
             spec);
    return buf;
}

static int nccl_init(const ddp_pg_init_t *in, ddp_pg_t **out)
{
    if (!out)
        return ddp_err_set(-EINVAL, "nccl backend: init without a place for "
                                    "the group");
    *out = NULL;
    int rc = ddp__pg_init_check("nccl", in);
    if (rc)
        return rc;
    if (in->device < 0) {
        ddp_err_set(DDP_ECONFIG,
                    "nccl backend: rank %d has no CUDA device (device %d); "
                    "the nccl backend needs one per rank",
                    in->rank, in->device);
        return ddp_err_hint("pass LOCAL_RANK as the device");
    }
    const ddp_nccl_api_t *api;
    if ((rc = ddp_sys_nccl_api(in->sys, &api)) != 0)
        return rc;
    if ((rc = check_device(api, in)) != 0)
        return rc;

    npg_t *p = new_npg(api, in);
    if (!p)
        return -ENOMEM;
    int64_t start = ddp_sys_now(in->sys);
    ncclUniqueId uid;
    if ((rc = exchange_uid(p, in->deadline, &uid)) != 0) {
        free_npg(p);
        return rc;
    }

    int stall = 0;
    if (ddp_fault_hit(DDP_FP_PG_NCCL_INIT)) {
        intptr_t fi = (intptr_t)fiu_failinfo();
        if (fi > 0) {
            rc = ddp_err_set(-(int)fi,
                             "nccl backend: rank %d of %d (group \"%s\"): "
                             "fault point pg/nccl/init fired (%s)",
                             in->rank, in->world, p->pg.prefix,
                             strerror((int)fi));
            free_npg(p);
            return rc;
        }
        stall = 1;
    }
    ncclConfig_t cfg = nonblocking_config(p->pg.prefix);
    /* The current device is per host thread, and the unique id exchange
     * may have run other ranks on this one (the simulator's tasks share a
     * thread as contexts): set it again right before the init. */
    p->api->set_device(p->device);
    ncclResult_t r = p->api->init_rank_config(&p->comm, in->world, uid,
                                            in->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        rc = nccl_fail(p, "ncclCommInitRankConfig", r);
        abort_comm(p);
        free_npg(p);
        return rc;
    }
    int w = wait_ready(p, NULL, "NCCL communicator init", stall, in->deadline);
    if (w != WAIT_DONE) {
        char hint[512];
        rc = w < 0 ? w : fail_wait(p, w, "NCCL communicator init", start,
                                   init_hint(in->sys, hint, sizeof hint));
        if (w < 0)
            abort_comm(p);
        free_npg(p);
        return rc;
    }
    cudaError_t e = p->api->stream_create(&p->stream);
    if (e != cudaSuccess) {
        rc = cuda_fail(p, "cudaStreamCreate", e);
        abort_comm(p);
        free_npg(p);
        return rc;
    }
    ddp_debug("nccl group \"%s\": rank %d of %d on device %d ready after "
              "%.3f s",
              p->pg.prefix, in->rank, in->world, in->device,
              secs(start, ddp_sys_now(in->sys)));
    *out = &p->pg;
    return 0;
}

/* ------------------------------------------------------------ collectives */

typedef enum { C_ALLREDUCE, C_BROADCAST, C_ALLGATHER } kind_t;

typedef struct coll {
    kind_t kind;
    const char *name;
    const void *src; /* host data to upload (up bytes at dev offset off) */
    size_t up, off;
    void *dst;       /* host buffer for the result (down bytes) */
    size_t down;
    size_t dev;      /* device bytes needed */
    size_t count;    /* NCCL element count */
    ncclDataType_t dt;
    ncclRedOp_t op;
    int root;
} coll_t;

/* Runs one collective under p->mu except for the waits. */
static int run(npg_t *p, const coll_t *c, int64_t deadline)
{
    if (c->dev == 0)
        return 0; /* nothing to move; NCCL would only sync empty buffers */
    int64_t start = ddp_sys_now(p->pg.sys);
    pthread_mutex_lock(&p->mu);
    if (p->aborted) {
        pthread_mutex_unlock(&p->mu);
        ddp_err_set(DDP_ECANCELED,
                    "nccl backend: rank %d of %d (group \"%s\"): %s on an "
                    "aborted group",
                    p->pg.rank, p->pg.world, p->pg.prefix, c->name);
        return ddp_err_hint("create a new group after a failure or abort");
    }
    /* The current device is per thread; a group may be used from a thread
     * other than the one that created it. */
    cudaError_t e = p->api->set_device(p->device);
    const char *step = "cudaSetDevice";
    if (e == cudaSuccess && p->dcap < c->dev) {
        if (p->dbuf)
            p->api->cuda_free(p->dbuf);
        p->dbuf = NULL, p->dcap = 0;
        step = "cudaMalloc";
        if ((e = p->api->cuda_malloc(&p->dbuf, c->dev)) == cudaSuccess)
            p->dcap = c->dev;
        else
            p->dbuf = NULL;
    }
    uint8_t *d = p->dbuf;
    if (e == cudaSuccess && c->up) {
        step = "cudaMemcpy to the device";
        e = p->api->memcpy(d + c->off, c->src, c->up, cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&p->mu);
        int rc = cuda_fail(p, step, e);
        abort_comm(p); /* peers are (or will be) inside this collective */
        return rc;
    }
    ncclResult_t r;
    switch (c->kind) {
    case C_ALLREDUCE:
        r = p->api->allreduce(d, d, c->count, c->dt, c->op, p->comm, p->stream);
        break;
    case C_BROADCAST:
        r = p->api->broadcast(d, d, c->count, c->dt, c->root, p->comm,
                            p->stream);
        break;
    default: /* in place: rank r's block already sits at r * bytes */
        r = p->api->allgather(d + c->off, d, c->count, c->dt, p->comm,
                            p->stream);
        break;
    }
    pthread_mutex_unlock(&p->mu);
    if (r != ncclSuccess && r != ncclInProgress) {
        int rc = nccl_fail(p, c->name, r);
        abort_comm(p);
        return rc;
    }
    int w = wait_ready(p, p->stream, c->name, 0, deadline);
    if (w != WAIT_DONE) {
        if (w < 0) {
            abort_comm(p);
            return w;
        }
        char what[96];
        snprintf(what, sizeof what, "%s of %zu bytes", c->name, c->dev);
        return fail_wait(p, w, what, start,
                         "a peer rank did not enter the same collective (it "
                         "died, hangs, or called another one)");
    }
    if (c->down) {
        pthread_mutex_lock(&p->mu);
        e = p->aborted ? cudaSuccess
                       : p->api->memcpy(c->dst, d, c->down,
                                      cudaMemcpyDeviceToHost);
        int aborted = p->aborted;
        pthread_mutex_unlock(&p->mu);
        if (aborted)
            return ddp_err_set(DDP_ECANCELED,
                               "nccl backend: rank %d of %d (group \"%s\"): "
                               "aborted during %s",
                               p->pg.rank, p->pg.world, p->pg.prefix, c->name);
        if (e != cudaSuccess) {
            int rc = cuda_fail(p, "cudaMemcpy from the device", e);
            abort_comm(p);
            return rc;
        }
    }
    return 0;
}

static int map_dtype(ddp_dtype_t t, ncclDataType_t *out)
{
    switch (t) {
    case DDP_INT32: *out = ncclInt32; return 0;
    case DDP_INT64: *out = ncclInt64; return 0;
    case DDP_FLOAT: *out = ncclFloat32; return 0;
    case DDP_DOUBLE: *out = ncclFloat64; return 0;
    default: return -1;
    }
}

static int map_redop(ddp_redop_t op, ncclRedOp_t *out)
{
    switch (op) {
    case DDP_SUM: *out = ncclSum; return 0;
    case DDP_MAX: *out = ncclMax; return 0;
    case DDP_MIN: *out = ncclMin; return 0;
    default: return -1;
    }
}

static int nccl_allreduce(ddp_pg_t *pg, void *buf, size_t count,
                          ddp_dtype_t t, ddp_redop_t op, int64_t deadline)
{
    coll_t c = {.kind = C_ALLREDUCE, .name = "allreduce", .count = count};
    if (map_dtype(t, &c.dt) || map_redop(op, &c.op))
        return ddp_err_set(DDP_ECONFIG, "nccl backend: allreduce with unknown "
                                        "dtype %d or op %d",
                           (int)t, (int)op);
    size_t bytes = count * ddp_dtype_size(t);
    c.src = buf, c.up = bytes, c.dst = buf, c.down = bytes, c.dev = bytes;
    return run(N(pg), &c, deadline);
}

static int nccl_broadcast(ddp_pg_t *pg, void *buf, size_t bytes, int root,
                          int64_t deadline)
{
    coll_t c = {.kind = C_BROADCAST, .name = "broadcast", .count = bytes,
                .dt = ncclInt8, .root = root, .dst = buf, .down = bytes,
                .dev = bytes};
    if (root < 0 || root >= pg->world)
        return ddp_err_set(DDP_ECONFIG, "nccl backend: broadcast root %d is "
                                        "not a rank of a world of %d",
                           root, pg->world);
    if (pg->rank == root) /* only the root's bytes matter */
        c.src = buf, c.up = bytes, c.down = 0;
    return run(N(pg), &c, deadline);
}

static int nccl_allgather(ddp_pg_t *pg, const void *in, size_t bytes,
                          void *out, int64_t deadline)
{
    size_t total = bytes * (size_t)pg->world; /* the wrapper checked overflow */
    coll_t c = {.kind = C_ALLGATHER, .name = "allgather", .count = bytes,
                .dt = ncclInt8, .src = in, .up = bytes,
                .off = bytes * (size_t)pg->rank, .dst = out, .down = total,
                .dev = total};
    return run(N(pg), &c, deadline);
}

/* An allreduce of one int: cheap, and the sum proves everyone took part. */
static int nccl_barrier(ddp_pg_t *pg, int64_t deadline)
{
    int32_t one = 1;
    coll_t c = {.kind = C_ALLREDUCE, .name = "barrier", .count = 1,
                .dt = ncclInt32, .op = ncclSum, .src = &one, .up = sizeof one,
                .dst = &one, .down = sizeof one, .dev = sizeof one};
    int rc = run(N(pg), &c, deadline);
    if (rc == 0 && one != pg->world)
        return ddp_err_set(DDP_EPROTOCOL,
                           "nccl backend: rank %d (group \"%s\"): barrier "
                           "counted %d ranks in a world of %d",
                           pg->rank, pg->prefix, (int)one, pg->world);
    return rc;
}

/* ------------------------------------------------------------ split */

/* The subgroup of color (*sub NULL for DDP_PG_NO_COLOR), its store
 * prefix checked: 0 or an error. */
static int split_sub(ddp_pg_t *pg, const npg_t *p, int color, const char *name,
                     int64_t deadline, npg_t **sub)
{
    *sub = NULL;
    if (color == DDP_PG_NO_COLOR)
        return 0;
    ddp_pg_init_t in = {.sys = pg->sys, .store = pg->store,
                        .deadline = deadline, .device = p->device};
    char prefix[sizeof pg->prefix + 32];
    if (name && name[0])
        snprintf(prefix, sizeof prefix, "%s/%s", pg->prefix, name);
    else
        snprintf(prefix, sizeof prefix, "%s/split%d", pg->prefix, color);
    in.prefix = prefix;
    /* World and rank are known only once NCCL has split; check the
     * prefix with placeholders now. */
    in.rank = 0, in.world = 1;
    int rc = ddp__pg_init_check("nccl", &in);
    if (rc)
        return rc;
    if (!(*sub = new_npg(p->api, &in)))
        return -ENOMEM;
    return 0;
}

/* The child of a split that completed: its communicator ready, its rank,
 * world and stream. 0, or an error (its communicator aborted). */
static int split_child(ddp_pg_t *pg, npg_t *sub, ncclComm_t nc, int64_t start,
                       int64_t deadline)
{
    if (!nc)
        return ddp_err_set(DDP_EINTERNAL, "nccl backend: rank %d (group \"%s\"): "
                                          "ncclCommSplit completed without a "
                                          "communicator",
                           pg->rank, pg->prefix);
    sub->comm = nc;
    int w = wait_ready(sub, NULL, "split (child init)", 0, deadline);
    if (w != WAIT_DONE) {
        int rc = w < 0 ? w : fail_wait(sub, w, "split (child init)", start,
                                       "a rank of the subgroup did not finish "
                                       "the split");
        if (w < 0)
            abort_comm(sub);
        return rc;
    }
    int n = 0, me = 0, rc = 0;
    cudaError_t e = cudaSuccess;
    ncclResult_t r;
    if ((r = sub->api->comm_count(nc, &n)) != ncclSuccess ||
        (r = sub->api->comm_user_rank(nc, &me)) != ncclSuccess) {
        rc = nccl_fail(sub, "ncclCommCount/UserRank", r);
    } else if ((e = sub->api->stream_create(&sub->stream)) != cudaSuccess) {
        rc = cuda_fail(sub, "cudaStreamCreate", e);
    }
    if (rc) {
        abort_comm(sub);
        return rc;
    }
    sub->pg.rank = me;
    sub->pg.world = n;
    ddp_debug("nccl group \"%s\": split into \"%s\" as rank %d of %d",
              pg->prefix, sub->pg.prefix, me, n);
    return 0;
}

static int nccl_split(ddp_pg_t *pg, int color, int key, const char *name,
                      ddp_pg_t **out, int64_t deadline)
{
    npg_t *p = N(pg);
    if (!out)
        return ddp_err_set(-EINVAL, "nccl backend: split without a place for "
                                    "the subgroup");
    *out = NULL;
    if (!p->api->comm_split) {
        int maj, min, patch;
        ddp_nccl_version_parts(p->api->version, &maj, &min, &patch);
        ddp_err_set(DDP_EUNSUPPORTED,
                    "nccl backend: split needs ncclCommSplit (NCCL 2.18+); "
                    "libnccl.so.2 is NCCL %d.%d.%d",
                    maj, min, patch);
        return ddp_err_hint("install a newer NCCL");
    }
    npg_t *sub = NULL;
    int rc = split_sub(pg, p, color, name, deadline, &sub);
    if (rc)
        return rc;
    int64_t start = ddp_sys_now(pg->sys);
    pthread_mutex_lock(&p->mu);
    if (p->aborted) {
        pthread_mutex_unlock(&p->mu);
        if (sub)
            free_npg(sub);
        return ddp_err_set(DDP_ECANCELED,
                           "nccl backend: rank %d of %d (group \"%s\"): split "
                           "of an aborted group",
                           pg->rank, pg->world, pg->prefix);
    }
    p->api->set_device(p->device);
    ncclConfig_t cfg = nonblocking_config(sub ? sub->pg.prefix : NULL);
    ncclComm_t nc = NULL;
    ncclResult_t r = p->api->comm_split(
        p->comm, color == DDP_PG_NO_COLOR ? NCCL_SPLIT_NOCOLOR : color, key,
        &nc, &cfg);
    pthread_mutex_unlock(&p->mu);
    if (r != ncclSuccess && r != ncclInProgress) {
        rc = nccl_fail(p, "ncclCommSplit", r);
        abort_comm(p);
        goto fail;
    }
    /* The split runs as a job of the parent, and NCCL fills the child's
     * handle only once the parent leaves ncclInProgress (nccl#1472). */
    int w = wait_ready(p, NULL, "split", 0, deadline);
    if (w != WAIT_DONE) {
        if (sub && nc) {
            sub->comm = nc;
            abort_comm(sub);
        }
        rc = w < 0 ? w : fail_wait(p, w, "split", start,
                                   "every rank of the parent group must call "
                                   "split (DDP_PG_NO_COLOR to stay out); the "
                                   "parent group was aborted");
        if (w < 0)
            abort_comm(p);
        goto fail;
    }
    if (!sub)
        return 0; /* DDP_PG_NO_COLOR: joined no subgroup */
    if ((rc = split_child(pg, sub, nc, start, deadline)) != 0)
        goto fail;
    *out = &sub->pg;
    return 0;
fail:
    if (sub)
        free_npg(sub);
    return rc;
}

/* ------------------------------------------------------------ teardown */

static void nccl_abort(ddp_pg_t *pg) { abort_comm(N(pg)); }

/* How long destroy waits for ncclCommFinalize before aborting instead:
 * destroy has no deadline, but it must not hang on a dead peer either. */
#define FINALIZE_GRACE_NS (10 * DDP_NS_PER_S)

static void nccl_destroy(ddp_pg_t *pg)
{
    npg_t *p = N(pg);
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    ncclComm_t comm = p->aborted ? NULL : p->comm;
    ncclResult_t r = ncclSuccess;
    if (comm) {
        p->api->set_device(p->device);
        r = p->api->comm_finalize(comm);
    }
    pthread_mutex_unlock(&p->mu);
    if (comm) {
        int w = r == ncclSuccess || r == ncclInProgress
                    ? wait_ready(p, NULL, "finalize", 0,
                                 ddp_sys_deadline_in(pg->sys,
                                                     FINALIZE_GRACE_NS))
                    : -1;
        if (w == WAIT_DONE) {
            pthread_mutex_lock(&p->mu);
            p->api->comm_destroy(comm);
            p->comm = NULL;
            p->aborted = 1;
            pthread_mutex_unlock(&p->mu);
        } else {
            ddp_warn("nccl group \"%s\": finalize did not complete; "
                     "aborting the communicator",
                     pg->prefix);
            abort_comm(p);
        }
    }
    free_npg(p);
}

const ddp_pg_ops_t ddp__pg_nccl_ops = {
    .name = "nccl",
    .init = nccl_init,
    .barrier = nccl_barrier,
    .broadcast = nccl_broadcast,
    .allreduce = nccl_allreduce,
    .allgather = nccl_allgather,
    .split = nccl_split,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

#endif /* DDP_HAVE_NCCL_H */
