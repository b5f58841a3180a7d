/* backends/registry.c — the process-group backend registry and the ddp_pg_*
 * wrappers. The wrappers check every argument once, here, so backends can
 * trust what they receive and a misuse gets the same error whatever the
 * backend. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backends_priv.h"
#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/log.h"
#include "ddp/pg.h"

/* Registration order is the order `ddpsim` lists them in. */
static const ddp_pg_ops_t *const backends[] = {
    &ddp__pg_tcp_ops,
    &ddp__pg_nccl_ops,
};
#define NBACKENDS (sizeof backends / sizeof backends[0])

size_t ddp_pg_backend_count(void) { return NBACKENDS; }

const ddp_pg_ops_t *ddp_pg_backend_at(size_t i)
{
    return i < NBACKENDS ? backends[i] : NULL;
}

const ddp_pg_ops_t *ddp_pg_backend_find(const char *name)
{
    char valid[128] = "";
    size_t off = 0;
    for (size_t i = 0; i < NBACKENDS; i++) {
        if (name && !strcmp(backends[i]->name, name))
            return backends[i];
        off += (size_t)snprintf(valid + off, off < sizeof valid ? sizeof valid - off : 0,
                                "%s%s", i ? ", " : "", backends[i]->name);
        if (off >= sizeof valid)
            off = sizeof valid - 1;
    }
    ddp_err_set(DDP_ECONFIG, "unknown process-group backend \"%s\"",
                name ? name : "(null)");
    ddp_err_hint("use one of: %s", valid);
    return NULL;
}

int ddp__pg_init_check(const char *backend, const ddp_pg_init_t *in)
{
    if (!in || !in->sys || !in->store || !in->prefix)
        return ddp_err_set(-EINVAL, "%s process group: init needs a sys, a "
                                    "store and a key prefix",
                           backend);
    if (strlen(in->prefix) >= sizeof(((ddp_pg_t *)0)->prefix))
        return ddp_err_set(DDP_ECONFIG,
                           "%s process group: key prefix \"%.40s...\" is %zu "
                           "bytes, at most %zu allowed",
                           backend, in->prefix, strlen(in->prefix),
                           sizeof(((ddp_pg_t *)0)->prefix) - 1);
    if (in->world < 1 || in->rank < 0 || in->rank >= in->world)
        return ddp_err_set(DDP_ECONFIG,
                           "%s process group \"%s\": rank %d is not in a world "
                           "of %d (need 0 <= rank < world)",
                           backend, in->prefix, in->rank, in->world);
    return 0;
}

void ddp__pg_header_init(ddp_pg_t *pg, const ddp_pg_ops_t *ops,
                         const ddp_pg_init_t *in)
{
    pg->ops = ops;
    pg->sys = in->sys;
    pg->store = in->store;
    ddp_fmt(pg->prefix, sizeof pg->prefix, "%s", in->prefix);
    pg->rank = in->rank;
    pg->world = in->world;
}

int ddp_pg_new(const char *backend, const ddp_pg_init_t *in, ddp_pg_t **out)
{
    if (!out)
        return ddp_err_set(-EINVAL, "ddp_pg_new: no place for the group");
    *out = NULL;
    const ddp_pg_ops_t *ops = ddp_pg_backend_find(backend);
    if (!ops)
        return ddp_err_ctx()->code;
    int rc = ddp__pg_init_check(ops->name, in);
    if (rc)
        return rc;
    rc = ops->init(in, out);
    if (rc == 0 && !*out)
        rc = ddp_err_set(DDP_EINTERNAL, "%s backend init returned no group",
                         ops->name);
    if (rc != 0 && *out) { /* the contract says *out stays NULL */
        ops->destroy(*out);
        *out = NULL;
    }
    if (rc == 0)
        ddp_debug("%s group \"%s\": rank %d of %d ready", ops->name, in->prefix,
                  in->rank, in->world);
    return rc;
}

/* The argument checks every collective shares. */
static int check_pg(const ddp_pg_t *pg, const char *what)
{
    if (!pg)
        return ddp_err_set(-EINVAL, "%s on a NULL process group", what);
    return 0;
}

static int check_buf(const ddp_pg_t *pg, const char *what, const void *buf,
                     size_t bytes)
{
    if (bytes > 0 && !buf)
        return ddp_err_set(-EINVAL, "%s group \"%s\": %s of %zu bytes from a "
                                    "NULL buffer",
                           pg->ops->name, pg->prefix, what, bytes);
    return 0;
}

int ddp_pg_barrier(ddp_pg_t *pg, int64_t deadline)
{
    int rc = check_pg(pg, "barrier");
    return rc ? rc : pg->ops->barrier(pg, deadline);
}

int ddp_pg_broadcast(ddp_pg_t *pg, void *buf, size_t bytes, int root,
                     int64_t deadline)
{
    int rc = check_pg(pg, "broadcast");
    if (!rc)
        rc = check_buf(pg, "broadcast", buf, bytes);
    if (rc)
        return rc;
    if (root < 0 || root >= pg->world)
        return ddp_err_set(DDP_ECONFIG, "%s group \"%s\": broadcast root %d is "
                                        "not a rank of a world of %d",
                           pg->ops->name, pg->prefix, root, pg->world);
    return pg->ops->broadcast(pg, buf, bytes, root, deadline);
}

int ddp_pg_allreduce(ddp_pg_t *pg, void *buf, size_t count, ddp_dtype_t t,
                     ddp_redop_t op, int64_t deadline)
{
    int rc = check_pg(pg, "allreduce");
    if (rc)
        return rc;
    if ((unsigned)t >= DDP_DTYPE_COUNT || (unsigned)op >= DDP_REDOP_COUNT)
        return ddp_err_set(DDP_ECONFIG, "%s group \"%s\": allreduce with "
                                        "unknown dtype %d or op %d",
                           pg->ops->name, pg->prefix, (int)t, (int)op);
    if (count > SIZE_MAX / ddp_dtype_size(t))
        return ddp_err_set(DDP_ELIMIT, "allreduce of %zu elements overflows",
                           count);
    rc = check_buf(pg, "allreduce", buf, count * ddp_dtype_size(t));
    return rc ? rc : pg->ops->allreduce(pg, buf, count, t, op, deadline);
}

int ddp_pg_allgather(ddp_pg_t *pg, const void *in, size_t bytes, void *out,
                     int64_t deadline)
{
    int rc = check_pg(pg, "allgather");
    if (!rc)
        rc = check_buf(pg, "allgather", in, bytes);
    if (!rc)
        rc = check_buf(pg, "allgather", out, bytes);
    if (rc)
        return rc;
    if (bytes > SIZE_MAX / (size_t)pg->world)
        return ddp_err_set(DDP_ELIMIT, "allgather of %zu bytes x %d ranks "
                                       "overflows",
                           bytes, pg->world);
    return pg->ops->allgather(pg, in, bytes, out, deadline);
}

int ddp_pg_split(ddp_pg_t *pg, int color, int key, const char *name,
                 ddp_pg_t **out, int64_t deadline)
{
    if (!out)
        return ddp_err_set(-EINVAL, "split: no place for the subgroup");
    *out = NULL;
    int rc = check_pg(pg, "split");
    if (rc)
        return rc;
    if (color < 0 && color != DDP_PG_NO_COLOR)
        return ddp_err_set(DDP_ECONFIG, "%s group \"%s\": split color %d is "
                                        "negative (use DDP_PG_NO_COLOR to stay "
                                        "out)",
                           pg->ops->name, pg->prefix, color);
    return pg->ops->split(pg, color, key, name ? name : "", out, deadline);
}

void ddp_pg_abort(ddp_pg_t *pg)
{
    if (pg)
        pg->ops->abort(pg);
}

void ddp_pg_destroy(ddp_pg_t *pg)
{
    if (pg)
        pg->ops->destroy(pg);
}
