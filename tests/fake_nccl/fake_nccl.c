/* tests/fake_nccl/fake_nccl.c — a FAKE libnccl.so.2 (see fake.h): the NCCL
 * calls backends/nccl.c makes, for ranks that are threads of one process.
 * One lock guards everything; no call ever waits. */
#include <limits.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/nccl_api.h"
#include "fake.h"

#define COMM_MAGIC 0xfa4ec011u

typedef enum { OP_ALLREDUCE, OP_BROADCAST, OP_ALLGATHER, OP_SPLIT } opkind_t;

typedef struct op {
    struct op *next;
    long seq;
    opkind_t kind;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t redop;
    int root;
    int arrived;
    int broken; /* a member left before it completed: it never will */
    int in[FAKE_MAX_RANKS];
    const void *send[FAKE_MAX_RANKS];
    void *recv[FAKE_MAX_RANKS];
    struct CUstream_st *stream[FAKE_MAX_RANKS];
    int color[FAKE_MAX_RANKS], key[FAKE_MAX_RANKS];
    struct ncclComm *child[FAKE_MAX_RANKS];
} op_t;

typedef struct clique {
    struct clique *next;
    ncclUniqueId id;
    int has_id; /* made by init (not by a split) */
    int number;
    int nranks, joined, live;
    struct ncclComm *member[FAKE_MAX_RANKS];
    op_t *ops;
} clique_t;

struct ncclComm {
    unsigned magic;
    clique_t *cl;
    int rank;
    long next_seq;
    int queued;
    ncclResult_t error;
    int finalize;      /* 1: asked, 2: done */
    int split_pending; /* a split of this (parent) communicator runs */
    int child_pending; /* this communicator is a split's, not formed yet */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_nccl_state_t g = {.version = 22809, .fail_init_rank = -1, .error_rank = -1,
                              .error_code = ncclRemoteError, .hang_rank = -1};
static clique_t *g_cliques;
static uint64_t g_ids;
/* initial-exec, as t_device in fake_cudart.c: no dynamic TLS block for
 * LeakSanitizer to misread (google/sanitizers#1322). */
static _Thread_local __attribute__((tls_model("initial-exec"))) char t_last[256];

fake_nccl_state_t *fake_nccl_state(void) { return &g; }

static ncclResult_t fail(ncclResult_t r, const char *why)
{
    snprintf(t_last, sizeof t_last, "fake libnccl: %s", why);
    return r;
}

static int valid(const struct ncclComm *c) { return c && c->magic == COMM_MAGIC; }

ncclResult_t ncclGetVersion(int *version)
{
    pthread_mutex_lock(&g_mu);
    *version = g.version;
    pthread_mutex_unlock(&g_mu);
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error (fake libnccl)";
    case ncclSystemError: return "unhandled system error (fake libnccl)";
    case ncclInvalidArgument: return "invalid argument (fake libnccl)";
    case ncclInvalidUsage: return "invalid usage (fake libnccl)";
    case ncclRemoteError: return "remote process exited or there was a network error "
                                 "(fake libnccl)";
    case ncclInProgress: return "NCCL operation in progress (fake libnccl)";
    default: return "unknown result (fake libnccl)";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return t_last;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    pthread_mutex_lock(&g_mu);
    g.unique_ids++;
    uint64_t n = ++g_ids;
    pthread_mutex_unlock(&g_mu);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, "FAKENCCL", 8);
    memcpy(id->internal + 8, &n, sizeof n);
    for (size_t i = 16; i < sizeof id->internal; i++)
        id->internal[i] = (char)(n * 31 + i);
    return ncclSuccess;
}

static clique_t *new_clique(int nranks)
{
    clique_t *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->nranks = nranks;
    cl->number = g.cliques++;
    g.live_cliques++;
    cl->next = g_cliques;
    g_cliques = cl;
    return cl;
}

static void free_clique(clique_t *cl)
{
    for (clique_t **p = &g_cliques; *p; p = &(*p)->next)
        if (*p == cl) {
            *p = cl->next;
            break;
        }
    while (cl->ops) {
        op_t *o = cl->ops;
        cl->ops = o->next;
        free(o);
    }
    g.live_cliques--;
    free(cl);
}

static struct ncclComm *new_comm(clique_t *cl, int rank)
{
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->magic = COMM_MAGIC;
    c->cl = cl;
    c->rank = rank;
    g.live_comms++;
    return c;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    pthread_mutex_lock(&g_mu);
    ncclResult_t r = ncclSuccess;
    int blocking = !config || config->blocking != 0;
    g.inits++;
    g.inits_blocking += blocking;
    clique_t *cl = NULL;
    for (clique_t *c = g_cliques; c && !cl; c = c->next)
        if (c->has_id && !memcmp(&c->id, &id, sizeof id))
            cl = c;
    if (g.ninit < FAKE_MAX_INITS)
        g.init[g.ninit++] = (fake_init_rec_t){.clique = cl ? cl->number : g.cliques,
                                               .rank = rank, .nranks = nranks,
                                               .device = fake_cudart_current_device(),
                                               .blocking = blocking};
    if (nranks < 1 || nranks > FAKE_MAX_RANKS || rank < 0 || rank >= nranks)
        r = fail(ncclInvalidArgument, "rank or nranks out of range");
    else if (rank == g.fail_init_rank)
        r = fail(ncclSystemError, "init failure injected by the test");
    else if (cl && cl->nranks != nranks)
        r = fail(ncclInvalidUsage, "nranks differs from the other ranks' of this id");
    else if (cl && cl->member[rank])
        r = fail(ncclInvalidUsage, "this rank already joined this id");
    else if (blocking && (cl ? cl->joined : 0) + 1 < nranks)
        r = fail(ncclInvalidUsage, "a blocking init whose peers have not all joined "
                                   "would hang this thread (set config.blocking = 0)");
    if (r == ncclSuccess && !cl) {
        if (!(cl = new_clique(nranks)))
            r = fail(ncclSystemError, "out of memory");
        else {
            cl->id = id;
            cl->has_id = 1;
        }
    }
    struct ncclComm *c = r == ncclSuccess ? new_comm(cl, rank) : NULL;
    if (r == ncclSuccess && !c)
        r = fail(ncclSystemError, "out of memory");
    if (c) {
        cl->member[rank] = c;
        cl->joined++;
        cl->live++;
        *comm = c;
    } else {
        g.init_failures++;
        *comm = NULL;
    }
    pthread_mutex_unlock(&g_mu);
    return r == ncclSuccess && !blocking ? ncclInProgress : r;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
    pthread_mutex_lock(&g_mu);
    g.polls++;
    ncclResult_t r = ncclSuccess;
    if (!valid(comm)) {
        r = fail(ncclInvalidArgument, "not a communicator (freed, or never made)");
    } else {
        if (comm->cl && comm->cl->has_id && comm->rank == g.error_rank &&
            comm->queued >= g.error_after && !comm->error) {
            comm->error = (ncclResult_t)g.error_code;
            fail(comm->error, "communicator error injected by the test");
        }
        if (comm->error)
            *state = comm->error;
        else if (comm->child_pending || comm->split_pending ||
                 comm->cl->joined < comm->cl->nranks)
            *state = ncclInProgress;
        else if (comm->finalize == 1) {
            comm->finalize = 2; /* done at the next poll */
            *state = ncclInProgress;
        } else
            *state = ncclSuccess;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

static size_t dt_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

static int by_key(const op_t *o, int a, int b)
{
    return o->key[a] != o->key[b] ? o->key[a] - o->key[b] : a - b;
}

/* Every rank queued it: run it, free the streams, drop the op. */
static void complete(clique_t *cl, op_t *o)
{
    int n = cl->nranks;
    size_t es = dt_size(o->dt), bytes = o->count * es;
    if (o->kind == OP_SPLIT) {
        int done[FAKE_MAX_RANKS] = {0};
        for (int r = 0; r < n; r++) {
            if (done[r] || o->color[r] == NCCL_SPLIT_NOCOLOR)
                continue;
            int idx[FAKE_MAX_RANKS], m = 0;
            for (int s = 0; s < n; s++)
                if (!done[s] && o->color[s] == o->color[r]) {
                    int k = m++;
                    while (k > 0 && by_key(o, idx[k - 1], s) > 0) {
                        idx[k] = idx[k - 1];
                        k--;
                    }
                    idx[k] = s;
                    done[s] = 1;
                }
            clique_t *sub = new_clique(m);
            for (int i = 0; i < m; i++) {
                struct ncclComm *c = o->child[idx[i]];
                if (!sub || !c)
                    continue;
                c->cl = sub;
                c->rank = i;
                c->child_pending = 0;
                sub->member[i] = c;
                sub->joined++;
                sub->live++;
            }
        }
        for (int r = 0; r < n; r++)
            if (cl->member[r])
                cl->member[r]->split_pending = 0;
    } else {
        uint8_t *tmp = malloc(o->kind == OP_ALLGATHER ? bytes * (size_t)n : bytes ? bytes : 1);
        if (tmp) {
            if (o->kind == OP_ALLREDUCE) {
                memcpy(tmp, o->send[0], bytes);
                for (int r = 1; r < n; r++)
                    ddp_nccl_reduce(tmp, o->send[r], o->count, o->dt, o->redop);
            } else if (o->kind == OP_BROADCAST) {
                memcpy(tmp, o->send[o->root], bytes);
            } else {
                for (int r = 0; r < n; r++)
                    memcpy(tmp + (size_t)r * bytes, o->send[r], bytes);
            }
            for (int r = 0; r < n; r++)
                memcpy(o->recv[r], tmp, o->kind == OP_ALLGATHER ? bytes * (size_t)n : bytes);
            free(tmp);
        }
        g.collectives++;
    }
    for (int r = 0; r < n; r++)
        if (o->stream[r])
            __atomic_store_n(&o->stream[r]->busy, 0, __ATOMIC_SEQ_CST);
    for (op_t **p = &cl->ops; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            break;
        }
    free(o);
}

/* Queues this rank's part of the next collective (or split). */
static ncclResult_t enqueue(ncclComm_t comm, opkind_t kind, const void *send, void *recv,
                            size_t count, ncclDataType_t dt, ncclRedOp_t redop, int root,
                            cudaStream_t stream, int color, int key, struct ncclComm *child)
{
    if (!valid(comm))
        return fail(ncclInvalidArgument, "not a communicator");
    if (comm->child_pending || !comm->cl || comm->cl->joined < comm->cl->nranks)
        return fail(ncclInvalidUsage, "the communicator is not ready");
    if (kind != OP_SPLIT && (!stream || stream->magic != FAKE_STREAM_MAGIC))
        return fail(ncclInvalidArgument, "not a stream of the fake libcudart");
    if (kind != OP_SPLIT && !dt_size(dt))
        return fail(ncclInvalidArgument, "a data type the fake does not reduce");
    clique_t *cl = comm->cl;
    comm->queued++;
    if (stream)
        __atomic_store_n(&stream->busy, 1, __ATOMIC_SEQ_CST);
    if (kind != OP_SPLIT && cl->has_id && comm->rank == g.hang_rank)
        return ncclSuccess; /* a rank stuck before its kernel: never arrives */
    long seq = comm->next_seq++;
    op_t *o = cl->ops;
    while (o && o->seq != seq)
        o = o->next;
    if (!o) {
        if (!(o = calloc(1, sizeof *o)))
            return fail(ncclSystemError, "out of memory");
        o->seq = seq;
        o->kind = kind;
        o->count = count;
        o->dt = dt;
        o->redop = redop;
        o->root = root;
        o->next = cl->ops;
        cl->ops = o;
    } else if (o->kind != kind || o->count != count || o->dt != dt ||
               (kind == OP_ALLREDUCE && o->redop != redop) ||
               (kind == OP_BROADCAST && o->root != root)) {
        comm->error = fail(ncclInvalidUsage, "ranks called different collectives");
        return ncclSuccess; /* reported through ncclCommGetAsyncError */
    }
    int r = comm->rank;
    o->in[r] = 1;
    o->send[r] = send;
    o->recv[r] = recv;
    o->stream[r] = stream;
    o->color[r] = color;
    o->key[r] = key;
    o->child[r] = child;
    if (++o->arrived == cl->nranks && !o->broken)
        complete(cl, o);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    pthread_mutex_lock(&g_mu);
    ncclResult_t r = enqueue(comm, OP_ALLREDUCE, send, recv, count, dt, op, 0, stream, 0, 0,
                             NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt,
                           int root, ncclComm_t comm, cudaStream_t stream)
{
    pthread_mutex_lock(&g_mu);
    ncclResult_t r = valid(comm) && (root < 0 || !comm->cl || root >= comm->cl->nranks)
                         ? fail(ncclInvalidArgument, "root out of range")
                         : enqueue(comm, OP_BROADCAST, send, recv, count, dt, ncclSum, root,
                                   stream, 0, 0, NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dt,
                           ncclComm_t comm, cudaStream_t stream)
{
    pthread_mutex_lock(&g_mu);
    ncclResult_t r = enqueue(comm, OP_ALLGATHER, send, recv, count, dt, ncclSum, 0, stream, 0,
                             0, NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    pthread_mutex_lock(&g_mu);
    g.splits++;
    ncclResult_t r = ncclSuccess;
    struct ncclComm *child = NULL;
    *newcomm = NULL;
    if (!valid(comm))
        r = fail(ncclInvalidArgument, "not a communicator");
    else if (!config || config->blocking != 0)
        r = fail(ncclInvalidUsage, "a blocking split would hang this thread until every "
                                   "rank splits (set config.blocking = 0)");
    else if (color != NCCL_SPLIT_NOCOLOR && !(child = new_comm(NULL, -1)))
        r = fail(ncclSystemError, "out of memory");
    if (r == ncclSuccess) {
        if (child)
            child->child_pending = 1;
        comm->split_pending = 1;
        r = enqueue(comm, OP_SPLIT, NULL, NULL, 0, ncclInt8, ncclSum, 0, NULL, color, key,
                    child);
        if (r != ncclSuccess) {
            comm->split_pending = 0;
            if (child) {
                child->magic = 0;
                free(child);
                g.live_comms--;
                child = NULL;
            }
        }
        *newcomm = child;
    }
    pthread_mutex_unlock(&g_mu);
    return r == ncclSuccess ? ncclInProgress : r;
}

/* The communicator leaves its clique: its part of any unfinished operation
 * is gone, so that operation never completes for the others. */
static void leave(struct ncclComm *c)
{
    clique_t *cl = c->cl;
    if (cl) {
        for (op_t *o = cl->ops; o; o = o->next) {
            if (!o->in[c->rank])
                continue;
            o->broken = 1;
            o->stream[c->rank] = NULL;
            o->recv[c->rank] = NULL;
            o->send[c->rank] = NULL;
            o->child[c->rank] = NULL;
        }
        if (cl->member[c->rank] == c) {
            cl->member[c->rank] = NULL;
            if (--cl->live == 0)
                free_clique(cl);
        }
    } else {
        /* a split's child never formed: out of its parent's pending split */
        for (clique_t *p = g_cliques; p; p = p->next)
            for (op_t *o = p->ops; o; o = o->next)
                for (int r = 0; r < FAKE_MAX_RANKS; r++)
                    if (o->child[r] == c)
                        o->child[r] = NULL;
    }
    g.live_comms--;
    c->magic = 0;
    free(c);
}

typedef enum { END_ABORT, END_FINALIZE, END_DESTROY } end_t;

static ncclResult_t end_comm(ncclComm_t comm, end_t how)
{
    static const char *const what[] = {"abort", "finalize", "destroy"};
    pthread_mutex_lock(&g_mu);
    ncclResult_t r = how == END_FINALIZE ? ncclInProgress : ncclSuccess;
    if (!valid(comm)) {
        char why[64];
        snprintf(why, sizeof why, "%s of a freed communicator", what[how]);
        r = fail(ncclInvalidArgument, why);
    } else if (how == END_FINALIZE) {
        g.finalizes++;
        comm->finalize = 1;
    } else {
        g.aborts += how == END_ABORT;
        g.destroys += how == END_DESTROY;
        g.destroyed_unfinalized += how == END_DESTROY && comm->finalize != 2;
        leave(comm);
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return end_comm(comm, END_ABORT); }
ncclResult_t ncclCommFinalize(ncclComm_t comm) { return end_comm(comm, END_FINALIZE); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return end_comm(comm, END_DESTROY); }

/* The size of a formed communicator, or this rank's place in it. */
static ncclResult_t comm_int(const ncclComm_t comm, int *out, int rank)
{
    pthread_mutex_lock(&g_mu);
    ncclResult_t r = ncclSuccess;
    if (!valid(comm) || !comm->cl)
        r = fail(ncclInvalidUsage, "a communicator not formed (yet)");
    else
        *out = rank ? comm->rank : comm->cl->nranks;
    pthread_mutex_unlock(&g_mu);
    return r;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    return comm_int(comm, count, 0);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    return comm_int(comm, rank, 1);
}
