/* core/cluster_envs.c — the six cluster environments.
 *
 * Each environment is a table of small functions that read the rank's
 * environment map (c->env, never getenv) and say where the main process is and
 * which rank this is. The contracts are Lightning 2.x's (see
 * shared/reference/lightning-connection-setup.md and
 * docs/cluster-environments.md); where Lightning silently guessed, we report an
 * error instead, because a wrong guess here means ranks that hang at
 * rendezvous instead of failing with a sentence.
 *
 * All parsing goes through the few helpers at the top, so every environment
 * produces the same shape of error: the variable, its value and the form
 * expected.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_priv.h"
#include "ddp/err.h"
#include "ddp/log.h"

/* Lightning's fixed fallback port (torchelastic, SLURM without a job id). */
#define DEFAULT_PORT 12910
#define LOCALHOST "127.0.0.1"

static const char JSRUN_TAIL[] = ". Make sure you run your executable with "
                                 "jsrun";
static const char KUBEFLOW_TAIL[] = " (the Kubeflow PyTorchJob operator sets "
                                    "it in every pod)";

/* ---- shared helpers ---- */

/* "an integer 0..3", or "an integer >= 0" when the top is open. */
static void int_form(char *buf, size_t n, long min, long max)
{
    if (max >= INT_MAX - 1 || max == LONG_MAX)
        snprintf(buf, n, "an integer >= %ld", min);
    else
        snprintf(buf, n, "an integer %ld..%ld", min, max);
}

/* Reads key as an integer in [min, max]. what names the value ("rank"),
 * note and tail are appended to the sentence (note: where max came from).
 * A missing variable is DDP_ECONFIG too: for a cluster environment it is as
 * fatal as a bad one. */
static int env_long(const ddp_cluster_t *c, const char *key, long min,
                    long max, const char *what, const char *note,
                    const char *tail, long *out)
{
    long v;
    if (ddp_env_get_long(c->env, key, min, max, &v) == 0) {
        *out = v;
        return 0;
    }
    char form[64];
    int_form(form, sizeof form, min, max);
    const char *val = ddp_env_get(c->env, key);
    if (!val) {
        ddp_err_set(DDP_ECONFIG, "%s is not set; expected the %s as %s%s%s", key, what, form,
                    note ? note : "", tail ? tail : "");
        return ddp_err_hint("start the job with the launcher that sets %s, or export %s as "
                            "%s%s on every rank",
                            key, key, form, note ? note : "");
    }
    ddp_err_set(DDP_ECONFIG, "%s=\"%.120s\" is not a valid %s; expected %s%s%s", key, val,
                what, form, note ? note : "", tail ? tail : "");
    return ddp_err_hint("set %s to %s%s; a value left over from another job, a shell "
                        "profile or an image is a common cause",
                        key, form, note ? note : "");
}

/* A count (world size, tasks per node): an integer >= 1. */
static int env_count(const ddp_cluster_t *c, const char *key, const char *what,
                     const char *tail, int *out)
{
    long v;
    int rc = env_long(c, key, 1, INT_MAX, what, NULL, tail, &v);
    if (rc == 0)
        *out = (int)v;
    return rc;
}

/* A rank below the first of count1/count2 that holds a valid count, e.g.
 * SLURM_LOCALID below SLURM_NTASKS_PER_NODE, else below SLURM_NTASKS. When no
 * count is readable the rank is only checked to be >= 0: the count's own
 * getter reports what is wrong with it, and each line of `ddpsim env` then
 * names its own variable. */
static int env_rank(const ddp_cluster_t *c, const char *key,
                    const char *count1, const char *count2, const char *what,
                    const char *tail, int *out)
{
    const char *counts[2] = {count1, count2};
    const char *bound = NULL;
    long max = INT_MAX - 1, v;
    for (int i = 0; i < 2 && !bound; i++) {
        long n;
        if (counts[i] &&
            ddp_env_get_long(c->env, counts[i], 1, INT_MAX, &n) == 0) {
            max = n - 1;
            bound = counts[i];
        }
    }
    if (ddp_env_get_long(c->env, key, 0, max, &v) == 0) { /* the common case */
        *out = (int)v;
        return 0;
    }
    char note[96] = ""; /* only an error names the count that bounds it */
    if (bound)
        snprintf(note, sizeof note, " (%s=%ld)", bound, max + 1);
    return env_long(c, key, 0, max, what, note, tail, &v);
}

/* Like env_rank, but an unset variable yields *out = 0. */
static int env_opt_rank(const ddp_cluster_t *c, const char *key,
                        const char *count1, const char *count2,
                        const char *what, int *found, int *out)
{
    *found = ddp_env_has(c->env, key);
    if (!*found)
        return 0;
    return env_rank(c, key, count1, count2, what, NULL, out);
}

/* A port variable: unset -> *found = 0 (unless required), else 0..65535.
 * 0 asks rank 0's store for an ephemeral port, as torch's TCPStore binds
 * one: only a world of 1 can use it (the plugin refuses it for more). */
static int env_port(const ddp_cluster_t *c, const char *key, int required,
                    const char *tail, int *found, uint16_t *port)
{
    *found = ddp_env_has(c->env, key);
    if (!*found && !required)
        return 0;
    long v;
    int rc = env_long(c, key, 0, 65535, "port", NULL, tail, &v);
    if (rc == 0)
        *port = (uint16_t)v;
    return rc;
}

static int copy_out(const char *src, const char *value, char *buf, size_t n)
{
    size_t len = strlen(value);
    if (!buf || len >= n)
        return ddp_err_set(DDP_ELIMIT,
                           "%s \"%.120s\" does not fit the %zu-byte address "
                           "buffer",
                           src, value, n);
    memcpy(buf, value, len + 1);
    return 0;
}

/* An address variable such as MASTER_ADDR. Unset: def (logging a warning
 * when warn is set, as torchelastic does), or an error when def is NULL. */
static int env_addr(const ddp_cluster_t *c, const char *key, const char *def,
                    int warn, const char *tail, char *buf, size_t n)
{
    const char *v = ddp_env_get(c->env, key);
    if (!v) {
        if (!def) {
            ddp_err_set(DDP_ECONFIG,
                        "%s is not set; expected the host name or IP "
                        "address of the main (rank 0) node%s",
                        key, tail ? tail : "");
            return ddp_err_hint("export %s=<host name or IP address of rank 0's node> "
                                "on every rank",
                                key);
        }
        if (warn)
            ddp_warn("%s is not set; using %s for the main address", key,
                     def);
        return copy_out("default address", def, buf, n);
    }
    if (!*v) {
        ddp_err_set(DDP_ECONFIG,
                    "%s is set but empty; expected the host name or IP "
                    "address of the main (rank 0) node%s",
                    key, tail ? tail : "");
        return ddp_err_hint("set %s to the host name or IP address of rank 0's node, or "
                            "unset it for the default",
                            key);
    }
    return copy_out(key, v, buf, n);
}

static int env_all_set(const ddp_env_t *env, const char *const *keys)
{
    for (; *keys; keys++)
        if (!ddp_env_has(env, *keys))
            return 0;
    return 1;
}

/* MASTER_PORT when set, else *found = 0: every environment but kubeflow
 * lets the user override its port this way. */
static int master_port(const ddp_cluster_t *c, int *found, uint16_t *port)
{
    return env_port(c, "MASTER_PORT", 0, NULL, found, port);
}

static int always_external(ddp_cluster_t *c)
{
    (void)c;
    return 1;
}

static int no_validation(ddp_cluster_t *c, int devices, int num_nodes)
{
    (void)c;
    (void)devices;
    (void)num_nodes;
    return 0;
}

/* ---- lightning: manual launch, and the default ---- */

static int lightning_detect(const ddp_env_t *env)
{
    (void)env;
    return 1; /* the fallback: whatever the environment holds */
}

static int lightning_main_address(ddp_cluster_t *c, char *buf, size_t n)
{
    return env_addr(c, "MASTER_ADDR", LOCALHOST, 0, NULL, buf, n);
}

static int lightning_main_port(ddp_cluster_t *c, uint16_t *port)
{
    /* Cached because every local rank must agree on one port: picking a
     * fresh free port on each call would hand out different ones. */
    if (c->port_cached) {
        *port = c->port_val;
        return 0;
    }
    int found;
    uint16_t p = 0;
    int rc = master_port(c, &found, &p);
    if (rc < 0)
        return rc;
    if (!found) {
        rc = ddp_sys_free_port(c->sys, &p);
        if (rc < 0) {
            if (ddp_err_ctx()->code != rc)
                ddp_err_set(rc, "binding port 0 failed");
            return ddp_err_wrap("MASTER_PORT is not set and no free port "
                                "could be picked");
        }
        c->port_picked = 1;
    }
    c->port_cached = 1;
    c->port_val = p;
    *port = p;
    return 0;
}

/* Without MASTER_PORT each node picks a free port of its own (Lightning
 * #2578, pytorch #53395): the other nodes' ranks would look for rank 0's
 * store on ports nobody serves and time out naming nothing. */
int ddp_cluster_check_port(const ddp_cluster_t *c, int num_nodes)
{
    if (!c)
        return ddp_err_set(-EINVAL, "ddp_cluster_check_port: NULL cluster");
    if (num_nodes <= 1 || !c->port_picked)
        return 0;
    ddp_err_set(DDP_ECONFIG,
                "MASTER_PORT is not set, so this node picked a free port of its "
                "own (%u), but the world spans %d nodes: each node picks a "
                "different one, and the ranks of the other nodes would look "
                "for rank 0's store on a port nobody serves",
                (unsigned)c->port_val, num_nodes);
    return ddp_err_hint("export MASTER_PORT=<one free port> on every node, the "
                        "same everywhere (torch's default is 29500)");
}

static int lightning_world_size(ddp_cluster_t *c, int *out)
{
    *out = c->world_size_set ? c->world_size_val : 1;
    return 0;
}

static int lightning_global_rank(ddp_cluster_t *c, int *out)
{
    *out = c->global_rank_set ? c->global_rank_val : 0;
    return 0;
}

static int lightning_local_rank(ddp_cluster_t *c, int *out)
{
    int found;
    int rc = env_opt_rank(c, "LOCAL_RANK", "LOCAL_WORLD_SIZE", NULL,
                          "local rank", &found, out);
    if (rc == 0 && !found)
        *out = 0;
    return rc;
}

static int lightning_node_rank(ddp_cluster_t *c, int *out)
{
    /* NODE_RANK wins over GROUP_RANK, as in Lightning 2.x. */
    static const char *const keys[] = {"NODE_RANK", "GROUP_RANK"};
    for (size_t i = 0; i < 2; i++) {
        int found;
        int rc = env_opt_rank(c, keys[i], NULL, NULL, "node rank", &found,
                              out);
        if (rc < 0 || found)
            return rc;
    }
    *out = 0;
    return 0;
}

static int lightning_external(ddp_cluster_t *c)
{
    return ddp_env_has(c->env, "LOCAL_RANK");
}

/* The variables by which a launcher says how big the world is. A worker
 * that ddp relaunches gets WORLD_SIZE with its LOCAL_RANK; a LOCAL_RANK
 * with none of them was not set by a launcher (a container image that
 * bakes LOCAL_RANK=0 in): the process then believes it is a relaunched
 * worker and launches none, and its rank 0 waits for ranks that never
 * start. */
static const char *const world_vars[] = {
    "WORLD_SIZE",         "LOCAL_WORLD_SIZE",   "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE", "JSM_NAMESPACE_SIZE", NULL};

static int lightning_validate(ddp_cluster_t *c, int devices, int num_nodes)
{
    (void)devices, (void)num_nodes;
    const char *lr = ddp_env_get(c->env, "LOCAL_RANK");
    if (!lr)
        return 0;
    for (size_t i = 0; world_vars[i]; i++)
        if (ddp_env_has(c->env, world_vars[i]))
            return 0;
    ddp_err_set(DDP_ECONFIG,
                "LOCAL_RANK=\"%.40s\" is set but no launcher's world size "
                "is (WORLD_SIZE, LOCAL_WORLD_SIZE, SLURM_NTASKS, "
                "OMPI_COMM_WORLD_SIZE, JSM_NAMESPACE_SIZE): this process "
                "takes itself for a worker that was already launched and "
                "starts no others",
                lr);
    return ddp_err_hint("unset LOCAL_RANK (an image or shell profile may "
                        "export it), or start the job with a launcher "
                        "(torchrun, srun) that sets the world size too");
}

const ddp_cluster_ops_t ddp__cluster_lightning = {
    .name = "lightning",
    .detect = lightning_detect,
    .main_address = lightning_main_address,
    .main_port = lightning_main_port,
    .world_size = lightning_world_size,
    .global_rank = lightning_global_rank,
    .local_rank = lightning_local_rank,
    .node_rank = lightning_node_rank,
    .creates_processes_externally = lightning_external,
    .validate = lightning_validate,
};

/* ---- slurm ---- */

static int slurm_interactive(const ddp_env_t *env)
{
    const char *name = ddp_env_get(env, "SLURM_JOB_NAME");
    return name && (!strcmp(name, "bash") || !strcmp(name, "interactive"));
}

static int slurm_detect(const ddp_env_t *env)
{
    return ddp_env_has(env, "SLURM_NTASKS") && !slurm_interactive(env);
}

static int slurm_main_address(ddp_cluster_t *c, char *buf, size_t n)
{
    /* MASTER_ADDR first (Lightning 2.1+): concurrent job steps on a shared
     * allocation must be able to point at different roots (#17550). */
    if (ddp_env_has(c->env, "MASTER_ADDR"))
        return env_addr(c, "MASTER_ADDR", NULL, 0, NULL, buf, n);
    const char *key = "SLURM_NODELIST";
    const char *list = ddp_env_get(c->env, key);
    if (!list) {
        key = "SLURM_JOB_NODELIST";
        list = ddp_env_get(c->env, key);
    }
    if (!list) {
        ddp_err_set(DDP_ECONFIG,
                    "neither MASTER_ADDR nor SLURM_NODELIST (or "
                    "SLURM_JOB_NODELIST) is set; expected a SLURM "
                    "hostlist such as node[1-4] whose first host is the "
                    "main node");
        return ddp_err_hint("start the job with srun or sbatch (they set SLURM_NODELIST), "
                            "or export MASTER_ADDR=<host of rank 0>");
    }
    char **hosts;
    size_t nh;
    int rc = ddp_hostlist_expand(list, 0, &hosts, &nh);
    if (rc < 0) {
        ddp_err_wrap("%s", key);
        return ddp_err_hint("set %s to a SLURM hostlist such as node[1-4,7] (`scontrol "
                            "show hostnames` expands one), or export MASTER_ADDR=<host of "
                            "rank 0>",
                            key);
    }
    rc = copy_out(key, hosts[0], buf, n);
    ddp_hostlist_free(hosts, nh);
    return rc;
}

static int slurm_main_port(ddp_cluster_t *c, uint16_t *port)
{
    int found;
    int rc = master_port(c, &found, port);
    if (rc < 0 || found)
        return rc;
    /* In interactive mode the job id belongs to the salloc shell, not to a
     * job Lightning should derive anything from (Lightning 2.x). */
    if (slurm_interactive(c->env) || !ddp_env_has(c->env, "SLURM_JOB_ID")) {
        *port = DEFAULT_PORT;
        return 0;
    }
    long id;
    rc = env_long(c, "SLURM_JOB_ID", 0, LONG_MAX, "job id", NULL, NULL, &id);
    if (rc < 0)
        return rc;
    /* The last four digits: two jobs sharing a node get different ports. */
    *port = (uint16_t)(15000 + id % 10000);
    return 0;
}

static int slurm_world_size(ddp_cluster_t *c, int *out)
{
    return env_count(c, "SLURM_NTASKS", "number of tasks (srun --ntasks)",
                     NULL, out);
}

static int slurm_global_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "SLURM_PROCID", "SLURM_NTASKS", NULL, "rank", NULL,
                    out);
}

static int slurm_local_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
                    "SLURM_NTASKS", "local rank", NULL, out);
}

static int slurm_node_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "SLURM_NODEID", "SLURM_NNODES", "SLURM_NTASKS",
                    "node rank", NULL, out);
}

/* SLURM_NTASKS is the world size, but the local ranks are counted against
 * SLURM_NTASKS_PER_NODE: when the two disagree (#SBATCH --ntasks=1 with
 * --ntasks-per-node=2, Lightning #20391) the job runs a world of
 * SLURM_NTASKS for a Trainer that expects the product, silently. Checked
 * only when all three are set: without them there is nothing to compare. */
static int slurm_check_world(ddp_cluster_t *c, int ntasks)
{
    int per_node = 0, nnodes = 0, rc;
    if (!ntasks || !ddp_env_has(c->env, "SLURM_NTASKS_PER_NODE") ||
        !ddp_env_has(c->env, "SLURM_NNODES"))
        return 0;
    if ((rc = env_count(c, "SLURM_NTASKS_PER_NODE", "number of tasks per node",
                        NULL, &per_node)) < 0 ||
        (rc = env_count(c, "SLURM_NNODES", "number of nodes", NULL, &nnodes)) < 0)
        return rc;
    long want = (long)per_node * nnodes;
    if (want == ntasks)
        return 0;
    ddp_err_set(DDP_ECONFIG,
                "SLURM_NTASKS=%d does not equal SLURM_NTASKS_PER_NODE=%d x "
                "SLURM_NNODES=%d = %ld: srun started %d task(s), but each "
                "node expects %d, so the world would be %d rank(s) instead "
                "of %ld (Lightning #20391)",
                ntasks, per_node, nnodes, want, ntasks, per_node, ntasks, want);
    return ddp_err_hint("drop --ntasks (or #SBATCH --ntasks) and give only "
                        "--nodes=%d --ntasks-per-node=%d, or set "
                        "--ntasks=%ld",
                        nnodes, per_node, want);
}

static int slurm_validate(ddp_cluster_t *c, int devices, int num_nodes)
{
    int ntasks = 0, per_node = 0, nnodes = 0, rc;
    /* srun --ntasks=N alone lets SLURM place tasks anywhere, and Lightning's
     * rank math then gives duplicated ranks and a hang (#4389). */
    if (ddp_env_has(c->env, "SLURM_NTASKS")) {
        if ((rc = slurm_world_size(c, &ntasks)) < 0)
            return rc;
        if (ntasks > 1 && !ddp_env_has(c->env, "SLURM_NTASKS_PER_NODE")) {
            ddp_err_set(DDP_ECONFIG,
                        "SLURM_NTASKS=%d is set but SLURM_NTASKS_PER_NODE is "
                        "not: the job was started with --ntasks=%d, which "
                        "does not say how many tasks run on each node",
                        ntasks, ntasks);
            return ddp_err_hint("use --ntasks-per-node=%d (with --nodes) "
                                "instead of --ntasks=%d",
                                ntasks, ntasks);
        }
    }
    if (slurm_interactive(c->env))
        return 0;
    if ((rc = slurm_check_world(c, ntasks)) < 0)
        return rc;
    if (devices > 0 && ddp_env_has(c->env, "SLURM_NTASKS_PER_NODE")) {
        if ((rc = env_count(c, "SLURM_NTASKS_PER_NODE",
                            "number of tasks per node", NULL, &per_node)) < 0)
            return rc;
        if (per_node != devices) {
            ddp_err_set(DDP_ECONFIG,
                        "devices=%d was requested but SLURM runs %d tasks per "
                        "node (SLURM_NTASKS_PER_NODE=%d, --ntasks-per-node=%d)",
                        devices, per_node, per_node, per_node);
            return ddp_err_hint("set devices=%d, or --ntasks-per-node=%d",
                                per_node, devices);
        }
    }
    if (num_nodes > 0 && ddp_env_has(c->env, "SLURM_NNODES")) {
        if ((rc = env_count(c, "SLURM_NNODES", "number of nodes", NULL,
                            &nnodes)) < 0)
            return rc;
        if (nnodes != num_nodes) {
            ddp_err_set(DDP_ECONFIG,
                        "num_nodes=%d was requested but the SLURM job has %d "
                        "nodes (SLURM_NNODES=%d, --nodes=%d)",
                        num_nodes, nnodes, nnodes, nnodes);
            return ddp_err_hint("set num_nodes=%d, or --nodes=%d", nnodes,
                                num_nodes);
        }
    }
    return 0;
}

/* Lightning's _is_slurm_managing_tasks: srun started exactly devices *
 * nodes tasks, and the job is not an interactive shell (whose tasks are not
 * the Trainer's). */
static int slurm_manages_tasks(ddp_cluster_t *c, int devices, int num_nodes)
{
    int n = 0;
    if (slurm_interactive(c->env) || slurm_world_size(c, &n) != 0)
        return 0;
    return n == (devices > 0 ? devices : 1) * (num_nodes > 0 ? num_nodes : 1);
}

/* torchrun, jsrun and mpirun start every rank's process themselves. */
static int launcher_manages_tasks(ddp_cluster_t *c, int devices, int num_nodes)
{
    (void)c, (void)devices, (void)num_nodes;
    return 1;
}

const ddp_cluster_ops_t ddp__cluster_slurm = {
    .name = "slurm",
    .detect = slurm_detect,
    .main_address = slurm_main_address,
    .main_port = slurm_main_port,
    .world_size = slurm_world_size,
    .global_rank = slurm_global_rank,
    .local_rank = slurm_local_rank,
    .node_rank = slurm_node_rank,
    .creates_processes_externally = always_external,
    .validate = slurm_validate,
    .manages_tasks = slurm_manages_tasks,
};

/* ---- torchelastic (torchrun) ---- */

static int torchelastic_detect(const ddp_env_t *env)
{
    /* The 1.3-1.5 rule: it needs no torch import to decide. */
    static const char *const keys[] = {"RANK", "GROUP_RANK", "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE", NULL};
    return env_all_set(env, keys);
}

static int torchelastic_main_address(ddp_cluster_t *c, char *buf, size_t n)
{
    return env_addr(c, "MASTER_ADDR", LOCALHOST, 1, NULL, buf, n);
}

static int torchelastic_main_port(ddp_cluster_t *c, uint16_t *port)
{
    int found;
    int rc = master_port(c, &found, port);
    if (rc < 0 || found)
        return rc;
    ddp_warn("MASTER_PORT is not set; using %d for the main port",
             DEFAULT_PORT);
    *port = DEFAULT_PORT;
    return 0;
}

static int torchelastic_world_size(ddp_cluster_t *c, int *out)
{
    return env_count(c, "WORLD_SIZE", "world size", NULL, out);
}

static int torchelastic_global_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "RANK", "WORLD_SIZE", NULL, "rank", NULL, out);
}

static int torchelastic_local_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
                    "local rank", NULL, out);
}

static int torchelastic_node_rank(ddp_cluster_t *c, int *out)
{
    int found;
    int rc = env_opt_rank(c, "GROUP_RANK", "GROUP_WORLD_SIZE", "WORLD_SIZE",
                          "node rank", &found, out);
    if (rc == 0 && !found)
        *out = 0;
    return rc;
}

static int torchelastic_validate(ddp_cluster_t *c, int devices, int num_nodes)
{
    /* Only when both were requested: a missing one is unknown, not 1. */
    if (devices <= 0 || num_nodes <= 0)
        return 0;
    int world = 0;
    int rc = torchelastic_world_size(c, &world);
    if (rc < 0)
        return rc;
    if ((long)devices * num_nodes != world) {
        ddp_err_set(DDP_ECONFIG,
                    "devices=%d and num_nodes=%d were requested, but their "
                    "product %ld does not match the world size "
                    "WORLD_SIZE=%d set by torchrun",
                    devices, num_nodes, (long)devices * num_nodes, world);
        return ddp_err_hint("run torchrun with --nproc-per-node=%d --nnodes=%d, "
                            "or request devices*num_nodes = %d",
                            devices, num_nodes, world);
    }
    return 0;
}

const ddp_cluster_ops_t ddp__cluster_torchelastic = {
    .name = "torchelastic",
    .detect = torchelastic_detect,
    .main_address = torchelastic_main_address,
    .main_port = torchelastic_main_port,
    .world_size = torchelastic_world_size,
    .global_rank = torchelastic_global_rank,
    .local_rank = torchelastic_local_rank,
    .node_rank = torchelastic_node_rank,
    .creates_processes_externally = always_external,
    .validate = torchelastic_validate,
    .manages_tasks = launcher_manages_tasks,
};

/* ---- lsf (jsrun) ---- */

typedef struct lsf_hosts {
    char *data;     /* the file, cut into host names in place */
    char **uniq;    /* distinct hosts, in order of first appearance */
    size_t n;
} lsf_hosts_t;

static void lsf_hosts_free(lsf_hosts_t *h)
{
    free(h->uniq);
    free(h->data);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

/* The compute hosts of LSB_DJOB_RANKFILE: one line per rank slot, the first
 * line being the launch node, which runs no rank. */
static int lsf_read_hosts(ddp_cluster_t *c, lsf_hosts_t *h)
{
    memset(h, 0, sizeof *h);
    const char *key = "LSB_DJOB_RANKFILE";
    const char *path = ddp_env_get(c->env, key);
    if (!path || !*path) {
        ddp_err_set(DDP_ECONFIG, "%s is %s; expected the path of the LSF rank file%s", key,
                    path ? "empty" : "not set", JSRUN_TAIL);
        return ddp_err_hint("start the ranks with jsrun inside an LSF job (bsub), which "
                            "sets %s",
                            key);
    }
    size_t len;
    int rc = ddp_sys_read_file(c->sys, path, &h->data, &len);
    if (rc < 0) {
        if (ddp_err_ctx()->code != rc)
            ddp_err_set(rc, "cannot read \"%s\": %s", path, ddp_strerror(rc));
        return ddp_err_wrap("%s=\"%.120s\"", key, path);
    }
    size_t cap = 0;
    char *line = h->data;
    for (size_t idx = 0; line; idx++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char *host = trim(line);
        line = nl ? nl + 1 : NULL;
        if (idx == 0 || !*host)
            continue;
        size_t k = 0;
        while (k < h->n && strcmp(h->uniq[k], host) != 0)
            k++;
        if (k < h->n)
            continue;
        if (h->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            char **nu = realloc(h->uniq, ncap * sizeof *nu);
            if (!nu) {
                lsf_hosts_free(h);
                return ddp_err_set(-ENOMEM, "out of memory");
            }
            h->uniq = nu;
            cap = ncap;
        }
        h->uniq[h->n++] = host;
    }
    if (h->n == 0) {
        lsf_hosts_free(h);
        ddp_err_set(DDP_ECONFIG,
                    "%s=\"%.120s\" lists no compute hosts (the first "
                    "line, the launch node, is skipped); expected one "
                    "host name per line%s",
                    key, path, JSRUN_TAIL);
        return ddp_err_hint("point %s at LSF's rank file (jsrun sets it), whose lines "
                            "after the first name the compute hosts",
                            key);
    }
    return 0;
}

static int lsf_detect(const ddp_env_t *env)
{
    static const char *const keys[] = {"LSB_JOBID", "LSB_DJOB_RANKFILE",
                                       "JSM_NAMESPACE_LOCAL_RANK",
                                       "JSM_NAMESPACE_SIZE", NULL};
    return env_all_set(env, keys);
}

static int lsf_main_address(ddp_cluster_t *c, char *buf, size_t n)
{
    lsf_hosts_t h;
    int rc = lsf_read_hosts(c, &h);
    if (rc < 0)
        return rc;
    rc = copy_out("LSB_DJOB_RANKFILE host", h.uniq[0], buf, n);
    lsf_hosts_free(&h);
    return rc;
}

static int lsf_node_rank(ddp_cluster_t *c, int *out)
{
    char self[256];
    int rc = ddp_sys_hostname(c->sys, self, sizeof self);
    if (rc < 0)
        return rc;
    lsf_hosts_t h;
    if ((rc = lsf_read_hosts(c, &h)) < 0)
        return rc;
    size_t k = 0;
    while (k < h.n && strcmp(h.uniq[k], self) != 0)
        k++;
    if (k < h.n)
        *out = (int)k;
    else
        rc = ddp_err_set(DDP_ECONFIG,
                         "this host \"%s\" is not among the compute hosts of "
                         "LSB_DJOB_RANKFILE=\"%.120s\" (%zu hosts, first "
                         "\"%s\"); expected this rank to run on one of "
                         "them%s",
                         self, ddp_env_get(c->env, "LSB_DJOB_RANKFILE"), h.n,
                         h.uniq[0], JSRUN_TAIL);
    if (rc < 0 && k == h.n)
        ddp_err_hint("start this rank with jsrun on one of the rank file's hosts, or "
                     "check that the host name (`hostname`) matches the file's");
    lsf_hosts_free(&h);
    return rc;
}

static int lsf_main_port(ddp_cluster_t *c, uint16_t *port)
{
    int found;
    int rc = master_port(c, &found, port);
    if (rc < 0 || found)
        return rc;
    long id;
    rc = env_long(c, "LSB_JOBID", 0, LONG_MAX, "job id", NULL, JSRUN_TAIL,
                  &id);
    if (rc < 0)
        return rc;
    *port = (uint16_t)(id % 1000 + 10000);
    return 0;
}

static int lsf_world_size(ddp_cluster_t *c, int *out)
{
    return env_count(c, "JSM_NAMESPACE_SIZE", "world size", JSRUN_TAIL, out);
}

static int lsf_global_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE", NULL,
                    "rank", JSRUN_TAIL, out);
}

static int lsf_local_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_LOCAL_SIZE",
                    "JSM_NAMESPACE_SIZE", "local rank", JSRUN_TAIL, out);
}

const ddp_cluster_ops_t ddp__cluster_lsf = {
    .name = "lsf",
    .detect = lsf_detect,
    .main_address = lsf_main_address,
    .main_port = lsf_main_port,
    .world_size = lsf_world_size,
    .global_rank = lsf_global_rank,
    .local_rank = lsf_local_rank,
    .node_rank = lsf_node_rank,
    .creates_processes_externally = always_external,
    .validate = no_validation,
    .manages_tasks = launcher_manages_tasks,
};

/* ---- mpi (OpenMPI's mpirun) ----
 *
 * Lightning asks mpi4py, which lets rank 0 broadcast its host name and a free
 * port. Without a side channel every rank has to reach the same answer from
 * its own environment alone, so:
 * - node rank = rank / OMPI_COMM_WORLD_LOCAL_SIZE, valid for mpirun's default
 *   block placement; OMPI_COMM_WORLD_NODE_RANK is not used because OpenMPI
 *   defines it as a node-local rank, not the index of the node;
 * - main address = MASTER_ADDR, else 127.0.0.1 when all ranks share a node;
 *   on several nodes no rank can know rank 0's host, so it is an error;
 * - main port = MASTER_PORT, else a hash of the job's identity (identical in
 *   every rank of one job, different between jobs) into 10000..19999.
 */

static int mpi_detect(const ddp_env_t *env)
{
    static const char *const keys[] = {"OMPI_COMM_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_RANK", NULL};
    return env_all_set(env, keys);
}

static int mpi_world_size(ddp_cluster_t *c, int *out)
{
    return env_count(c, "OMPI_COMM_WORLD_SIZE", "world size", NULL, out);
}

static int mpi_local_size(ddp_cluster_t *c, int *out)
{
    return env_count(c, "OMPI_COMM_WORLD_LOCAL_SIZE",
                     "number of ranks on this node", NULL, out);
}

static int mpi_global_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL,
                    "rank", NULL, out);
}

static int mpi_local_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "OMPI_COMM_WORLD_LOCAL_RANK",
                    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE",
                    "local rank", NULL, out);
}

static int mpi_node_rank(ddp_cluster_t *c, int *out)
{
    int world = 0, local_size = 1, rank = 0, local_rank = 0, rc;
    if ((rc = mpi_world_size(c, &world)) < 0 ||
        (rc = mpi_local_size(c, &local_size)) < 0 ||
        (rc = mpi_global_rank(c, &rank)) < 0 ||
        (rc = mpi_local_rank(c, &local_rank)) < 0)
        return rc;
    /* Block placement puts ranks k*L .. k*L+L-1 on node k, so the local rank
     * is rank mod L; anything else (--map-by node, uneven nodes) would make
     * rank / L a wrong node index, so say so instead of guessing. */
    if (world % local_size != 0 || rank % local_size != local_rank) {
        ddp_err_set(DDP_ECONFIG,
                    "cannot derive the node rank: OMPI_COMM_WORLD_RANK=%d, "
                    "OMPI_COMM_WORLD_LOCAL_RANK=%d, "
                    "OMPI_COMM_WORLD_LOCAL_SIZE=%d, OMPI_COMM_WORLD_SIZE=%d "
                    "are not a block placement of equal-sized nodes",
                    rank, local_rank, local_size, world);
        return ddp_err_hint("start with the same number of ranks on every "
                            "node, placed in blocks (mpirun --map-by slot, "
                            "or -npernode N)");
    }
    *out = rank / local_size;
    return 0;
}

static int mpi_main_address(ddp_cluster_t *c, char *buf, size_t n)
{
    if (ddp_env_has(c->env, "MASTER_ADDR"))
        return env_addr(c, "MASTER_ADDR", NULL, 0, NULL, buf, n);
    int world = 0, local_size = 1, rc;
    if ((rc = mpi_world_size(c, &world)) < 0 ||
        (rc = mpi_local_size(c, &local_size)) < 0)
        return rc;
    if (local_size < world) {
        ddp_err_set(DDP_ECONFIG,
                    "MASTER_ADDR is not set and the %d ranks span several "
                    "nodes (OMPI_COMM_WORLD_LOCAL_SIZE=%d); expected "
                    "MASTER_ADDR to name rank 0's host",
                    world, local_size);
        return ddp_err_hint("mpirun -x MASTER_ADDR=<host of rank 0> ...");
    }
    return copy_out("default address", LOCALHOST, buf, n);
}

/* FNV-1a: small, stable across platforms and runs. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static int mpi_main_port(ddp_cluster_t *c, uint16_t *port)
{
    int found;
    int rc = master_port(c, &found, port);
    if (rc < 0 || found)
        return rc;
    /* One value per job, the same in every rank: PMIx's namespace (OpenMPI
     * 4+), ORTE's job id, or mpirun's contact URI (OpenMPI <= 4). */
    static const char *const ids[] = {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                                      "OMPI_MCA_orte_hnp_uri"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const char *v = ddp_env_get(c->env, ids[i]);
        if (v && *v) {
            *port = (uint16_t)(10000 + fnv1a(v) % 10000);
            return 0;
        }
    }
    ddp_warn("MASTER_PORT is not set and no job id (PMIX_NAMESPACE, "
             "OMPI_MCA_ess_base_jobid, OMPI_MCA_orte_hnp_uri) is set; using %d "
             "for the main port",
             DEFAULT_PORT);
    *port = DEFAULT_PORT;
    return 0;
}

/* mpirun decides how many ranks run on each node; the Trainer expects one
 * per device. One rank per node for 4 devices per node (a hostfile without
 * slots=, or -npernode 1; Lightning #8998) runs a world of 2 instead of 8
 * and no rank notices, so compare the local size with the devices. */
static int mpi_validate(ddp_cluster_t *c, int devices, int num_nodes)
{
    (void)num_nodes; /* the node count follows from SIZE / LOCAL_SIZE */
    int local_size = 0, world = 0, rc;
    if (devices <= 0 || !ddp_env_has(c->env, "OMPI_COMM_WORLD_LOCAL_SIZE"))
        return 0;
    if ((rc = mpi_local_size(c, &local_size)) < 0 ||
        (rc = mpi_world_size(c, &world)) < 0)
        return rc;
    if (local_size == devices)
        return 0;
    ddp_err_set(DDP_ECONFIG,
                "OMPI_COMM_WORLD_LOCAL_SIZE=%d: mpirun started %d rank(s) on "
                "this node but devices=%d was requested, so the world would "
                "be OMPI_COMM_WORLD_SIZE=%d rank(s) instead of %ld "
                "(Lightning #8998)",
                local_size, local_size, devices, world,
                (long)devices * (world / local_size));
    return ddp_err_hint("start %d ranks per node (mpirun -npernode %d, or "
                        "slots=%d per host in the hostfile), or set "
                        "devices=%d",
                        devices, devices, devices, local_size);
}

const ddp_cluster_ops_t ddp__cluster_mpi = {
    .name = "mpi",
    .detect = mpi_detect,
    .main_address = mpi_main_address,
    .main_port = mpi_main_port,
    .world_size = mpi_world_size,
    .global_rank = mpi_global_rank,
    .local_rank = mpi_local_rank,
    .node_rank = mpi_node_rank,
    .creates_processes_externally = always_external,
    .validate = mpi_validate,
    .manages_tasks = launcher_manages_tasks,
};

/* ---- kubeflow (PyTorchJob): one process per pod ---- */

static int kubeflow_detect(const ddp_env_t *env)
{
    static const char *const keys[] = {"MASTER_ADDR", "MASTER_PORT",
                                       "WORLD_SIZE", "RANK", NULL};
    return env_all_set(env, keys);
}

static int kubeflow_main_address(ddp_cluster_t *c, char *buf, size_t n)
{
    return env_addr(c, "MASTER_ADDR", NULL, 0, KUBEFLOW_TAIL, buf, n);
}

static int kubeflow_main_port(ddp_cluster_t *c, uint16_t *port)
{
    int found;
    return env_port(c, "MASTER_PORT", 1, KUBEFLOW_TAIL, &found, port);
}

static int kubeflow_world_size(ddp_cluster_t *c, int *out)
{
    return env_count(c, "WORLD_SIZE", "world size", KUBEFLOW_TAIL, out);
}

static int kubeflow_global_rank(ddp_cluster_t *c, int *out)
{
    return env_rank(c, "RANK", "WORLD_SIZE", NULL, "rank", KUBEFLOW_TAIL,
                    out);
}

static int kubeflow_local_rank(ddp_cluster_t *c, int *out)
{
    (void)c;
    *out = 0;
    return 0;
}

const ddp_cluster_ops_t ddp__cluster_kubeflow = {
    .name = "kubeflow",
    .detect = kubeflow_detect,
    .main_address = kubeflow_main_address,
    .main_port = kubeflow_main_port,
    .world_size = kubeflow_world_size,
    .global_rank = kubeflow_global_rank,
    .local_rank = kubeflow_local_rank,
    .node_rank = kubeflow_global_rank, /* a pod is a node */
    .creates_processes_externally = always_external,
    .validate = no_validation,
};
