/* core/cluster.c — the cluster environment registry, the instance, the
 * contract-checking wrappers and `describe`. The environments themselves live
 * in core/cluster_envs.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_priv.h"
#include "ddp/err.h"
#include "ddp/log.h"

/* Detection priority, Lightning 2.x: the launchers that leave the most
 * specific traces first; lightning always detects, so kubeflow, placed after
 * it, is reached only by name (its variables are also what a plain manual
 * launch sets, so detecting it would misfire). */
static const ddp_cluster_ops_t *const registry[] = {
    &ddp__cluster_torchelastic, &ddp__cluster_slurm,     &ddp__cluster_lsf,
    &ddp__cluster_mpi,          &ddp__cluster_lightning, &ddp__cluster_kubeflow,
};
#define NREGISTRY (sizeof registry / sizeof registry[0])

size_t ddp_cluster_count(void) { return NREGISTRY; }

const ddp_cluster_ops_t *ddp_cluster_at(size_t i)
{
    return i < NREGISTRY ? registry[i] : NULL;
}

const ddp_cluster_ops_t *ddp_cluster_find(const char *name)
{
    for (size_t i = 0; name && i < NREGISTRY; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

int ddp_cluster_open(ddp_sys_t *sys, const char *name, ddp_cluster_t **out)
{
    if (!sys || !out)
        return ddp_err_set(-EINVAL, "ddp_cluster_open: NULL sys or out");
    *out = NULL;
    const ddp_cluster_ops_t *ops = NULL;
    const ddp_env_t *env = ddp_sys_env(sys);
    if (!name || !*name || strcmp(name, "auto") == 0) {
        for (size_t i = 0; i < NREGISTRY && !ops; i++)
            if (registry[i]->detect(env))
                ops = registry[i];
    } else if (!(ops = ddp_cluster_find(name))) {
        char names[128] = "";
        for (size_t i = 0; i < NREGISTRY; i++) {
            strncat(names, ", ", sizeof names - strlen(names) - 1);
            strncat(names, registry[i]->name, sizeof names - strlen(names) - 1);
        }
        return ddp_err_set(DDP_ENOT_FOUND,
                           "unknown cluster environment \"%.64s\"; expected "
                           "one of auto%s",
                           name, names);
    }
    ddp_cluster_t *c = calloc(1, sizeof *c);
    if (!c)
        return ddp_err_set(-ENOMEM, "out of memory");
    c->ops = ops;
    c->sys = sys;
    c->env = env;
    *out = c;
    ddp_debug("cluster environment: %s", ops->name);
    return 0;
}

void ddp_cluster_close(ddp_cluster_t *c)
{
    if (!c)
        return;
    free(c->impl);
    free(c);
}

int ddp_cluster_main_address(ddp_cluster_t *c, char *buf, size_t n)
{
    if (!c || !buf || n == 0)
        return ddp_err_set(-EINVAL, "ddp_cluster_main_address: NULL argument");
    return c->ops->main_address(c, buf, n);
}

int ddp_cluster_main_port(ddp_cluster_t *c, uint16_t *port)
{
    if (!c || !port)
        return ddp_err_set(-EINVAL, "ddp_cluster_main_port: NULL argument");
    return c->ops->main_port(c, port);
}

/* The integer getters share one shape: check arguments, call the op. */
#define DDP__CLUSTER_INT_GETTER(member)                                        \
    int ddp_cluster_##member(ddp_cluster_t *c, int *out)                       \
    {                                                                          \
        if (!c || !out)                                                        \
            return ddp_err_set(-EINVAL,                                        \
                               "ddp_cluster_" #member ": NULL argument");      \
        return c->ops->member(c, out);                                         \
    }
DDP__CLUSTER_INT_GETTER(world_size)
DDP__CLUSTER_INT_GETTER(global_rank)
DDP__CLUSTER_INT_GETTER(local_rank)
DDP__CLUSTER_INT_GETTER(node_rank)
#undef DDP__CLUSTER_INT_GETTER

int ddp_cluster_creates_processes_externally(ddp_cluster_t *c)
{
    return c ? c->ops->creates_processes_externally(c) : 0;
}

int ddp_cluster_manages_tasks(ddp_cluster_t *c, int devices, int num_nodes)
{
    if (!c || !c->ops->manages_tasks || !c->ops->creates_processes_externally(c))
        return 0;
    ddp_errsave_t *saved = ddp_err_save();
    int yes = c->ops->manages_tasks(c, devices, num_nodes) == 1;
    ddp_err_restore(saved);
    return yes;
}

int ddp_cluster_validate(ddp_cluster_t *c, int devices, int num_nodes)
{
    if (!c)
        return ddp_err_set(-EINVAL, "ddp_cluster_validate: NULL cluster");
    if (devices < 0 || num_nodes < 0) {
        ddp_err_set(DDP_ECONFIG,
                    "devices=%d, num_nodes=%d: expected counts >= 1 "
                    "(0 = not requested)",
                    devices, num_nodes);
        return ddp_err_hint("pass devices and num_nodes as counts >= 1, or 0 when not "
                            "requested");
    }
    return c->ops->validate(c, devices, num_nodes);
}

/* Only Lightning's environment honours these (its launcher, not the
 * environment, knows the totals); the others take their values from the
 * launcher's variables, so a set is ignored there, as in Lightning. */
void ddp_cluster_set_world_size(ddp_cluster_t *c, int n)
{
    if (!c)
        return;
    if (c->ops != &ddp__cluster_lightning)
        ddp_debug("%s: set_world_size(%d) ignored; the launcher sets it",
                  c->ops->name, n);
    c->world_size_set = 1;
    c->world_size_val = n;
}

void ddp_cluster_set_global_rank(ddp_cluster_t *c, int r)
{
    if (!c)
        return;
    if (c->ops != &ddp__cluster_lightning)
        ddp_debug("%s: set_global_rank(%d) ignored; the launcher sets it",
                  c->ops->name, r);
    c->global_rank_set = 1;
    c->global_rank_val = r;
}

static void emit(void (*fn)(void *, const char *), void *arg,
                 const char *name, int rc, const char *value)
{
    char line[1200];
    if (rc < 0)
        snprintf(line, sizeof line, "%s: error: %s", name, ddp_err_message());
    else
        snprintf(line, sizeof line, "%s: %s", name, value);
    fn(arg, line);
}

void ddp_cluster_describe(ddp_cluster_t *c,
                          void (*fn)(void *arg, const char *line), void *arg)
{
    if (!c || !fn)
        return;
    char v[256];
    emit(fn, arg, "cluster", 0, c->ops->name);
    emit(fn, arg, "detected", 0, c->ops->detect(c->env) ? "yes" : "no");

    int rc = ddp_cluster_main_address(c, v, sizeof v);
    emit(fn, arg, "main_address", rc, v);

    uint16_t port = 0;
    rc = ddp_cluster_main_port(c, &port);
    snprintf(v, sizeof v, "%u", (unsigned)port);
    emit(fn, arg, "main_port", rc, v);

    static const struct {
        const char *name;
        int (*get)(ddp_cluster_t *, int *);
    } ints[] = {
        {"world_size", ddp_cluster_world_size},
        {"global_rank", ddp_cluster_global_rank},
        {"local_rank", ddp_cluster_local_rank},
        {"node_rank", ddp_cluster_node_rank},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int x = 0;
        rc = ints[i].get(c, &x);
        snprintf(v, sizeof v, "%d", x);
        emit(fn, arg, ints[i].name, rc, v);
    }
    emit(fn, arg, "creates_processes_externally", 0,
         ddp_cluster_creates_processes_externally(c) ? "yes" : "no");
    rc = ddp_cluster_validate(c, 0, 0);
    emit(fn, arg, "validate", rc, "ok");
}

/* ---- master-address sanity ---- */

#define MAX_ADDRS 16

/* "10.0.0.1, 127.0.0.1" */
static void format_addrs(const ddp_addr_t *a, int n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && off + 1 < len; i++) {
        char h[DDP_ADDR_STRLEN];
        int k = snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
                         ddp_addr_format_host(&a[i], h, sizeof h));
        off += k > 0 ? (size_t)k : 0;
    }
}

/* 1 when a is one of this host's: loopback and the wildcard always are. */
static int own_addr(const ddp_addr_t *a, const ddp_addr_t *mine, int n)
{
    if (ddp_addr_is_loopback(a) || ddp_addr_is_any(a))
        return 1;
    for (int i = 0; i < n; i++) {
        ddp_addr_t x = mine[i];
        x.port = a->port;
        if (ddp_addr_equal(&x, a))
            return 1;
    }
    return 0;
}

/* The checks' verdict when they pass and what their calls failed with is
 * not the caller's to see (the connect names an unresolvable address). */
#define MASTER_NOT_OURS 1

/* A world of several nodes whose master address only reaches the host it
 * is used on (0, or DDP_ECONFIG). The resolved addresses are worded only
 * for the error: every rank runs the checks. */
static int check_spans_nodes(ddp_cluster_t *c, const char *addr, const ddp_addr_t *res,
                             int nres, const char *from, int num_nodes)
{
    int local = 1;
    for (int i = 0; i < nres && local; i++)
        local = ddp_sys_node_local(c->sys, &res[i]) == 1;
    /* A name that only this host resolves to loopback (Debian's 127.0.1.1
     * for its own name) is fine on rank 0's node, whose store listens on
     * every address; a loopback literal is wrong everywhere. */
    ddp_addr_t lit;
    int node = -1;
    if (local && ddp_addr_try_parse(addr, 0, &lit) != 0 && strcmp(addr, "localhost") != 0) {
        ddp_errsave_t *keep = ddp_err_save();
        if (ddp_cluster_node_rank(c, &node) != 0)
            node = -1;
        ddp_err_restore(keep);
        local = node != 0;
    }
    if (!local)
        return 0;
    char as[256];
    format_addrs(res, nres, as, sizeof as);
    ddp_err_set(DDP_ECONFIG,
                "%s \"%s\" resolves to %s, an address that only reaches "
                "the host it is used on, but the world spans %d nodes: "
                "the ranks of the other nodes would look for rank 0's "
                "store on their own host",
                from, addr, as, num_nodes);
    return ddp_err_hint("export MASTER_ADDR=<host name or address of "
                        "rank 0's node> on every node (torchrun "
                        "--master-addr=HOST, or --rdzv-endpoint=HOST:PORT); "
                        "if every node really is this one host (a test), "
                        "say so with DDPSIM_HOSTS=node0=127.0.0.1,"
                        "node1=127.0.0.1,...");
}

/* Rank 0: the master address must be one of this host's (0,
 * MASTER_NOT_OURS when the sys cannot tell, or DDP_ECONFIG). */
static int check_rank0_host(ddp_cluster_t *c, const char *addr, const ddp_addr_t *res,
                            int nres, const char *from)
{
    ddp_addr_t mine[MAX_ADDRS];
    int nmine = ddp_sys_local_addrs(c->sys, mine, MAX_ADDRS);
    if (nmine < 0) /* a sys that cannot tell: nothing to compare */
        return MASTER_NOT_OURS;
    for (int i = 0; i < nres; i++)
        if (own_addr(&res[i], mine, nmine))
            return 0;
    char host[256] = "this host", ms[256], as[256];
    if (ddp_sys_hostname(c->sys, host, sizeof host) != 0)
        snprintf(host, sizeof host, "this host");
    format_addrs(mine, nmine, ms, sizeof ms);
    format_addrs(res, nres, as, sizeof as);
    ddp_err_set(DDP_ECONFIG,
                "%s \"%s\" resolves to %s, not an address of %s (%s), where "
                "rank 0 runs and serves the rendezvous store: every rank would "
                "wait for a store nobody serves at %s",
                from, addr, as, host, ms, addr);
    return ddp_err_hint("set MASTER_ADDR to rank 0's host (%s), or start rank "
                        "0 on %s (NODE_RANK=0 on that node only: #5651)",
                        host, addr);
}

static int master_checks(ddp_cluster_t *c, const char *addr, int global_rank, int num_nodes)
{
    ddp_addr_t res[MAX_ADDRS];
    int nres = ddp_sys_resolve(c->sys, addr, 0, res, MAX_ADDRS);
    if (nres <= 0) /* the connect names it, after its retries */
        return MASTER_NOT_OURS;
    const char *from = ddp_env_has(c->env, "MASTER_ADDR")
                           ? "MASTER_ADDR"
                           : "the main address (MASTER_ADDR is not set; the "
                             "launcher's default)";
    int rc = num_nodes > 1 ? check_spans_nodes(c, addr, res, nres, from, num_nodes) : 0;
    if (rc != 0 || global_rank != 0)
        return rc;
    return check_rank0_host(c, addr, res, nres, from);
}

int ddp_cluster_check_master(ddp_cluster_t *c, const char *addr,
                             int global_rank, int num_nodes)
{
    if (!c || !addr)
        return ddp_err_set(-EINVAL, "ddp_cluster_check_master: NULL argument");
    if (global_rank != 0 && num_nodes <= 1)
        return 0;
    ddp_errsave_t *saved = ddp_err_save();
    int rc = master_checks(c, addr, global_rank, num_nodes);
    if (rc == MASTER_NOT_OURS) {
        ddp_err_restore(saved);
        return 0;
    }
    ddp_err_forget(saved);
    return rc;
}
