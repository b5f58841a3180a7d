/* ddp/pg.h — process groups and their backends.
 *
 * A process group is `world` ranks that can run collectives. A backend
 * (registered by name: "tcp", "nccl") implements the ops table below. Groups
 * bootstrap through a store (ddp/store.h) under a key prefix, so several
 * groups (and subgroups) share one store without colliding.
 *
 * Every call takes an absolute deadline on the rank's sys clock and fails
 * with DDP_ETIMEOUT (error naming the peer rank, its address, the phase and
 * the time waited) rather than hang; both sides of every connection wait with
 * deadlines (gloo#520).
 */
#ifndef DDP_PG_H
#define DDP_PG_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ddp/store.h"
#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ddp_dtype {
    DDP_INT32 = 0,
    DDP_INT64,
    DDP_FLOAT,
    DDP_DOUBLE,
    DDP_DTYPE_COUNT
} ddp_dtype_t;

typedef enum ddp_redop { DDP_SUM = 0, DDP_MAX, DDP_MIN, DDP_REDOP_COUNT } ddp_redop_t;

DDP_API size_t ddp_dtype_size(ddp_dtype_t t);
DDP_API const char *ddp_dtype_name(ddp_dtype_t t);
DDP_API const char *ddp_redop_name(ddp_redop_t op);
/* acc[i] = acc[i] op in[i] for n elements. */
DDP_API void ddp_reduce_into(void *acc, const void *in, size_t n, ddp_dtype_t t,
                     ddp_redop_t op);

#define DDP_PG_NO_COLOR (-1) /* split: this rank joins no subgroup */

typedef struct ddp_pg ddp_pg_t;

typedef struct ddp_pg_init {
    ddp_sys_t *sys;
    ddp_store_t *store;  /* not owned; the group keys its bootstrap under
                            `prefix` */
    const char *prefix;  /* e.g. "default_pg"; copied */
    int rank, world;
    int64_t deadline;    /* absolute */
    int device;          /* nccl: the CUDA device (LOCAL_RANK); else -1 */
} ddp_pg_init_t;

typedef struct ddp_pg_ops {
    const char *name;
    /* Bootstraps the group; on failure *out stays NULL. */
    int (*init)(const ddp_pg_init_t *in, ddp_pg_t **out);
    int (*barrier)(ddp_pg_t *pg, int64_t deadline);
    int (*broadcast)(ddp_pg_t *pg, void *buf, size_t bytes, int root,
                     int64_t deadline);
    int (*allreduce)(ddp_pg_t *pg, void *buf, size_t count, ddp_dtype_t t,
                     ddp_redop_t op, int64_t deadline);
    /* out holds world * bytes: rank r's block at r * bytes. */
    int (*allgather)(ddp_pg_t *pg, const void *in, size_t bytes, void *out,
                     int64_t deadline);
    /* Every member calls it; members with the same color form a subgroup,
     * ordered by (key, rank). DDP_PG_NO_COLOR -> *out = NULL. */
    int (*split)(ddp_pg_t *pg, int color, int key, const char *name,
                 ddp_pg_t **out, int64_t deadline);
    /* Tears down connections at once; later calls fail fast. */
    void (*abort)(ddp_pg_t *pg);
    void (*destroy)(ddp_pg_t *pg);
} ddp_pg_ops_t;

/* Common header of every group (backends embed it first). */
struct ddp_pg {
    const ddp_pg_ops_t *ops;
    ddp_sys_t *sys;
    ddp_store_t *store;
    char prefix[128];
    int rank, world;
};

/* Registry. */
DDP_API size_t ddp_pg_backend_count(void);
DDP_API const ddp_pg_ops_t *ddp_pg_backend_at(size_t i);
/* NULL when unknown (error names the valid backends). */
DDP_API const ddp_pg_ops_t *ddp_pg_backend_find(const char *name);

/* Wrappers carrying the contracts above. */
DDP_API int ddp_pg_new(const char *backend, const ddp_pg_init_t *in, ddp_pg_t **out);
DDP_API int ddp_pg_barrier(ddp_pg_t *pg, int64_t deadline);
DDP_API int ddp_pg_broadcast(ddp_pg_t *pg, void *buf, size_t bytes, int root,
                     int64_t deadline);
DDP_API int ddp_pg_allreduce(ddp_pg_t *pg, void *buf, size_t count, ddp_dtype_t t,
                     ddp_redop_t op, int64_t deadline);
DDP_API int ddp_pg_allgather(ddp_pg_t *pg, const void *in, size_t bytes, void *out,
                     int64_t deadline);
DDP_API int ddp_pg_split(ddp_pg_t *pg, int color, int key, const char *name,
                 ddp_pg_t **out, int64_t deadline);
DDP_API void ddp_pg_abort(ddp_pg_t *pg);
DDP_API void ddp_pg_destroy(ddp_pg_t *pg);
static inline int ddp_pg_rank(const ddp_pg_t *pg) { return pg->rank; }
static inline int ddp_pg_world(const ddp_pg_t *pg) { return pg->world; }

#ifdef __cplusplus
}
#endif
#endif
