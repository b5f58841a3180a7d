/* harness/plan.c — launch plans (ddp/plan.h): building one from a launch
 * description, executing it in the simulator, and its file form for real
 * runs. */
#include "ddp/plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ddp/accel.h"
#include "ddp/cluster.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "elastic_priv.h"
#include "fault_line.h"
#include "scenario_priv.h"

#define LSF_RANKFILE "/sim/lsf/rankfile"
#define DEFAULT_PORT 29500

/* ---------------------------------------------------------------- data */

ddp_plan_t *ddp_plan_new(void)
{
    ddp_plan_t *p = calloc(1, sizeof *p);
    if (p)
        p->t0 = 0;
    return p;
}

void ddp_plan_free(ddp_plan_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nprocs; i++)
        ddp_env_free(p->procs[i].env);
    for (int i = 0; i < p->nfaults; i++) {
        free((char *)p->faults[i].ranks);
        free((char *)p->faults[i].phase);
    }
    for (int i = 0; i < p->nfiles; i++) {
        free(p->files[i].path);
        free(p->files[i].content);
    }
    free(p->nodes);
    free(p->procs);
    free(p->faults);
    free(p->fault_line);
    free(p->files);
    free(p->net);
    free(p);
}

/* Grows *arr (of *n elements of size sz) by one zeroed element. */
static void *grow(void *arr, int n, size_t sz)
{
    char *a = realloc(arr, sz * (size_t)(n + 1));
    if (a)
        memset(a + sz * (size_t)n, 0, sz);
    return a;
}

int ddp_plan_add_node(ddp_plan_t *p, const char *host, const char *addr)
{
    ddp_plan_node_t *nn = grow(p->nodes, p->nnodes, sizeof *nn);
    if (!nn)
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    p->nodes = nn;
    snprintf(nn[p->nnodes].host, sizeof nn->host, "%s", host);
    snprintf(nn[p->nnodes].addr, sizeof nn->addr, "%s", addr ? addr : "");
    return p->nnodes++;
}

int ddp_plan_add_proc(ddp_plan_t *p, const char *name, int node, int rank,
                      int64_t start_ns, ddp_plan_kind_t kind, const ddp_env_t *env)
{
    if (node < 0 || node >= p->nnodes)
        return ddp_err_set(DDP_ECONFIG, "plan: process %s on node %d, but the plan "
                                        "has %d node(s)", name, node, p->nnodes);
    ddp_plan_proc_t *np = grow(p->procs, p->nprocs, sizeof *np);
    if (!np)
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    p->procs = np;
    ddp_plan_proc_t *x = &np[p->nprocs];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->node = node;
    x->rank = rank;
    x->start_ns = start_ns;
    x->kind = kind;
    x->env = env ? ddp_env_clone(env) : ddp_env_new();
    if (!x->env)
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    return p->nprocs++;
}

int ddp_plan_add_fault(ddp_plan_t *p, const ddp_fault_t *f, int line)
{
    ddp_fault_t *nf = grow(p->faults, p->nfaults, sizeof *nf);
    if (!nf)
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    p->faults = nf;
    int *nl = grow(p->fault_line, p->nfaults, sizeof *nl);
    if (!nl)
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    p->fault_line = nl;
    ddp_fault_t *x = &nf[p->nfaults];
    *x = *f;
    x->ranks = f->ranks ? strdup(f->ranks) : NULL;
    x->phase = f->phase ? strdup(f->phase) : NULL;
    if ((f->ranks && !x->ranks) || (f->phase && !x->phase)) {
        free((char *)x->ranks);
        free((char *)x->phase);
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    }
    nl[p->nfaults] = line;
    return p->nfaults++;
}

int ddp_plan_add_file(ddp_plan_t *p, const char *path, const char *content)
{
    ddp_plan_file_t *nf = grow(p->files, p->nfiles, sizeof *nf);
    if (!nf)
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    p->files = nf;
    nf[p->nfiles].path = strdup(path);
    nf[p->nfiles].content = strdup(content);
    if (!nf[p->nfiles].path || !nf[p->nfiles].content) {
        free(nf[p->nfiles].path);
        free(nf[p->nfiles].content);
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    }
    return p->nfiles++;
}

const char *ddp_net_kind_name(int kind)
{
    static const char *const names[] = {"iface", "resolve", "somaxconn"};
    return kind >= 0 && kind <= DDP_NET_SOMAXCONN ? names[kind] : "?";
}

int ddp_plan_add_net(ddp_plan_t *p, int kind, int node, const char *name,
                     const char *value)
{
    ddp_plan_net_t *nn = grow(p->net, p->nnet, sizeof *nn);
    if (!nn)
        return ddp_err_set(-ENOMEM, "plan: out of memory");
    p->net = nn;
    nn[p->nnet].kind = kind;
    nn[p->nnet].node = node;
    snprintf(nn[p->nnet].name, sizeof nn[p->nnet].name, "%s", name);
    snprintf(nn[p->nnet].value, sizeof nn[p->nnet].value, "%s", value);
    return p->nnet++;
}

char *ddp_plan_hosts_table(const ddp_plan_t *p, int node)
{
    char *t = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&t, &len);
    if (!m)
        return NULL;
    int k = 0;
    for (int i = 0; i < p->nnet; i++)
        if (p->net[i].kind == DDP_NET_RESOLVE && (p->net[i].node < 0 || p->net[i].node == node))
            fprintf(m, "%s%s=%s", k++ ? "," : "", p->net[i].name, p->net[i].value);
    for (int i = 0; i < p->nnodes; i++) {
        /* a node with an explicit eth0 answers its eth0 addresses, as the
         * simulator's host table does */
        int eth0 = 0;
        for (int j = 0; j < p->nnet; j++) {
            const ddp_plan_net_t *e = &p->net[j];
            if (e->kind == DDP_NET_IFACE && !strcmp(e->name, "eth0") &&
                (e->node < 0 || e->node == i)) {
                fprintf(m, "%s%s=%.*s", k++ ? "," : "", p->nodes[i].host,
                        (int)strcspn(e->value, "/"), e->value);
                eth0 = 1;
            }
        }
        if (!eth0)
            fprintf(m, "%s%s=%s", k++ ? "," : "", p->nodes[i].host, p->nodes[i].addr);
    }
    if (fclose(m) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

static const char *const kind_names[DDP_PLAN_KIND_COUNT] = {"trainer", "port-holder",
                                                            "exec", "store", "agent"};

const char *ddp_plan_kind_name(ddp_plan_kind_t k)
{
    return k >= 0 && k < DDP_PLAN_KIND_COUNT ? kind_names[k] : "?";
}

/* ---------------------------------------------------------- launchers */

static const char *const launcher_names[DDP_LAUNCH_COUNT] = {
    "auto", "per-node", "slurm", "torchrun", "mpi", "lsf", "kubeflow", "torchrun-elastic"};

const char *ddp_launcher_name(ddp_launcher_t l)
{
    return l >= 0 && l < DDP_LAUNCH_COUNT ? launcher_names[l] : "?";
}

int ddp_launcher_parse(const char *name, ddp_launcher_t *out)
{
    for (int i = 0; i < DDP_LAUNCH_COUNT; i++)
        if (!strcasecmp(name, launcher_names[i])) {
            *out = (ddp_launcher_t)i;
            return 0;
        }
    return ddp_err_set(DDP_ECONFIG, "unknown launcher \"%s\"; expected one of "
                                    "auto, per-node, slurm, torchrun, mpi, lsf, kubeflow, "
                                    "torchrun-elastic",
                       name);
}

ddp_launcher_t ddp_launcher_for(const char *accel, ddp_launcher_t asked)
{
    if (asked != DDP_LAUNCH_AUTO)
        return asked;
    if (accel && !strcmp(accel, "ddp_hpc"))
        return DDP_LAUNCH_SLURM;
    if (accel && !strcmp(accel, "ddp_cpu_hpc"))
        return DDP_LAUNCH_TORCHRUN;
    return DDP_LAUNCH_PER_NODE;
}

/* The variables a launcher gives task k of node n, as tables: each entry
 * a name and which value it gets. */
typedef enum { V_RANK, V_LOCAL, V_NODE, V_WORLD, V_PER_NODE, V_NODES, V_NODELIST, V_TEXT } vkind_t;
typedef struct lvar {
    const char *key;
    vkind_t v;
    const char *text; /* V_TEXT */
} lvar_t;

static const lvar_t per_node_vars[] = {{"NODE_RANK", V_NODE, NULL}, {NULL, 0, NULL}};
static const lvar_t slurm_vars[] = {
    {"SLURM_NTASKS", V_WORLD, NULL},      {"SLURM_NTASKS_PER_NODE", V_PER_NODE, NULL},
    {"SLURM_NNODES", V_NODES, NULL},      {"SLURM_PROCID", V_RANK, NULL},
    {"SLURM_LOCALID", V_LOCAL, NULL},     {"SLURM_NODEID", V_NODE, NULL},
    {"SLURM_NODELIST", V_NODELIST, NULL}, {"SLURM_JOB_ID", V_TEXT, "4242"},
    {"SLURM_JOB_NAME", V_TEXT, "train"},  {NULL, 0, NULL}};
static const lvar_t torchrun_vars[] = {
    {"RANK", V_RANK, NULL},   {"LOCAL_RANK", V_LOCAL, NULL}, {"GROUP_RANK", V_NODE, NULL},
    {"LOCAL_WORLD_SIZE", V_PER_NODE, NULL}, {"WORLD_SIZE", V_WORLD, NULL}, {NULL, 0, NULL}};
static const lvar_t mpi_vars[] = {
    {"OMPI_COMM_WORLD_SIZE", V_WORLD, NULL},
    {"OMPI_COMM_WORLD_RANK", V_RANK, NULL},
    {"OMPI_COMM_WORLD_LOCAL_RANK", V_LOCAL, NULL},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", V_PER_NODE, NULL},
    {"OMPI_COMM_WORLD_NODE_RANK", V_LOCAL, NULL},
    {"PMIX_NAMESPACE", V_TEXT, "prterun-sim-4242@1"},
    {NULL, 0, NULL}};
static const lvar_t lsf_vars[] = {
    {"LSB_JOBID", V_TEXT, "4242"},          {"LSB_DJOB_RANKFILE", V_TEXT, LSF_RANKFILE},
    {"JSM_NAMESPACE_SIZE", V_WORLD, NULL},  {"JSM_NAMESPACE_RANK", V_RANK, NULL},
    {"JSM_NAMESPACE_LOCAL_RANK", V_LOCAL, NULL},
    {"JSM_NAMESPACE_LOCAL_SIZE", V_PER_NODE, NULL}, {NULL, 0, NULL}};
/* The training operator's PyTorchJob: every pod (a node here) one process
 * with RANK and WORLD_SIZE; MASTER_ADDR is the master pod's service name. */
static const lvar_t kubeflow_vars[] = {
    {"RANK", V_RANK, NULL}, {"WORLD_SIZE", V_WORLD, NULL},
    {"KUBERNETES_PORT", V_TEXT, "tcp://10.96.0.1:443"}, {NULL, 0, NULL}};
/* What a foreign program's process gets besides its launcher's variables:
 * what Lightning's accelerator gives the processes it starts (NODE_RANK,
 * LOCAL_RANK, WORLD_SIZE), what torch's env:// rendezvous reads (RANK,
 * WORLD_SIZE) and torchrun's group variables (GROUP_RANK,
 * LOCAL_WORLD_SIZE). A launcher's own value of any of them stays. */
static const lvar_t rank_vars[] = {
    {"RANK", V_RANK, NULL},      {"LOCAL_RANK", V_LOCAL, NULL}, {"WORLD_SIZE", V_WORLD, NULL},
    {"NODE_RANK", V_NODE, NULL}, {"GROUP_RANK", V_NODE, NULL},
    {"LOCAL_WORLD_SIZE", V_PER_NODE, NULL}, {NULL, 0, NULL}};

typedef struct where {
    int n, k, nodes, per_node;
    const char *nodelist;
} where_t;

/* Sets the table's variables for task w (keep: leave a set one alone). */
static void set_vars(ddp_env_t *env, const lvar_t *t, const where_t *w, int keep)
{
    for (; t->key; t++) {
        if (keep && ddp_env_has(env, t->key))
            continue;
        int v = 0;
        switch (t->v) {
        case V_RANK: v = w->n * w->per_node + w->k; break;
        case V_LOCAL: v = w->k; break;
        case V_NODE: v = w->n; break;
        case V_WORLD: v = w->nodes * w->per_node; break;
        case V_PER_NODE: v = w->per_node; break;
        case V_NODES: v = w->nodes; break;
        case V_NODELIST: ddp_env_set(env, t->key, w->nodelist); continue;
        case V_TEXT: ddp_env_set(env, t->key, t->text); continue;
        }
        ddp_env_setf(env, t->key, "%d", v);
    }
}

static const lvar_t *launcher_vars(ddp_launcher_t kind)
{
    switch (kind) {
    case DDP_LAUNCH_SLURM: return slurm_vars;
    case DDP_LAUNCH_TORCHRUN: return torchrun_vars;
    case DDP_LAUNCH_MPI: return mpi_vars;
    case DDP_LAUNCH_LSF: return lsf_vars;
    case DDP_LAUNCH_KUBEFLOW: return kubeflow_vars;
    default: return per_node_vars;
    }
}

/* The LSF rank file: the launch node first (it runs no rank), then one
 * line per rank slot. */
static int add_rankfile(ddp_plan_t *p, int per_node)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return ddp_err_set(-ENOMEM, "out of memory");
    fputs("launch\n", m);
    for (int i = 0; i < p->nnodes * per_node; i++)
        fprintf(m, "%s\n", p->nodes[i / per_node].host);
    fclose(m);
    int rc = text ? ddp_plan_add_file(p, LSF_RANKFILE, text) : -ENOMEM;
    free(text);
    return rc < 0 ? rc : 0;
}

static int copy_var(void *arg, const char *key, const char *value)
{
    return ddp_env_set(arg, key, value);
}

int ddp_plan_launch(ddp_plan_t *p, const ddp_launch_t *l)
{
    const char *accel = p->entry.accelerator;
    if (!accel[0] || !ddp_accel_find(accel))
        return DDP_ENOT_FOUND;
    if (p->nnodes < 1 || l->procs < 1 || l->tasks_per_node < 0 || l->launcher < 0 ||
        l->launcher >= DDP_LAUNCH_COUNT)
        return ddp_err_set(DDP_ECONFIG, "launch: need >= 1 node and >= 1 process per "
                                        "node (got %d node(s), %d per node)",
                           p->nnodes, l->procs);
    if (!p->entry.num_nodes)
        p->entry.num_nodes = p->nnodes;
    if (!p->entry.num_processes)
        p->entry.num_processes = l->procs;
    uint16_t port = l->port ? l->port : DEFAULT_PORT;
    int rc;
    if (l->squat_port && !l->job) {
        if ((rc = ddp_plan_add_proc(p, "squatter", 0, -1, 0, DDP_PLAN_PORT_HOLDER, NULL)) < 0)
            return rc;
        p->procs[rc].port = l->squat_port;
    }
    ddp_launcher_t kind = ddp_launcher_for(accel, l->launcher);
    int exec = p->entry.exec[0] != '\0';
    int elastic = kind == DDP_LAUNCH_ELASTIC;
    /* A foreign program launches nothing itself: every rank is a process
     * of the plan, also where the user would start one script per node. */
    int per_node = (kind == DDP_LAUNCH_PER_NODE && !exec) || kind == DDP_LAUNCH_KUBEFLOW ||
                           elastic
                       ? 1
                   : l->tasks_per_node                                                 ? l->tasks_per_node
                                                                                       : l->procs;
    const char **hosts = malloc(sizeof *hosts * (size_t)p->nnodes);
    char *nodelist = NULL;
    if (!hosts)
        return ddp_err_set(-ENOMEM, "out of memory");
    for (int n = 0; n < p->nnodes; n++)
        hosts[n] = p->nodes[n].host;
    rc = ddp_hostlist_compress(hosts, (size_t)p->nnodes, &nodelist);
    free(hosts);
    if (rc)
        return rc;
    if (kind == DDP_LAUNCH_LSF && !l->job && (rc = add_rankfile(p, per_node))) {
        free(nodelist);
        return rc;
    }
    const char *master = l->master_addr ? l->master_addr : p->nodes[0].host;
    for (int n = 0; rc >= 0 && n < p->nnodes; n++) {
        for (int k = 0; rc >= 0 && k < per_node; k++) {
            ddp_env_t *env = ddp_env_new();
            if (!env) {
                rc = ddp_err_set(-ENOMEM, "out of memory");
                break;
            }
            int rank = n * per_node + k;
            if (*master)
                ddp_env_set(env, "MASTER_ADDR", master);
            if (!l->no_port)
                ddp_env_setf(env, "MASTER_PORT", "%u", (unsigned)port);
            where_t w = {n, k, p->nnodes, per_node, nodelist};
            set_vars(env, launcher_vars(kind), &w, 0);
            if (exec && !elastic) /* an agent's workers get theirs from it */
                set_vars(env, rank_vars, &w, 1);
            if (elastic) { /* torchrun's options, as its PET_* variables */
                ddp_env_setf(env, "PET_NNODES", "%d", p->nnodes);
                ddp_env_setf(env, "PET_NPROC_PER_NODE", "%d", l->procs);
                ddp_env_set(env, "PET_RDZV_BACKEND", "c10d");
                if (*master)
                    ddp_env_setf(env, "PET_RDZV_ENDPOINT", "%s:%u", master, (unsigned)port);
                ddp_env_set(env, "PET_RDZV_ID", "ddpsim");
                ddp_env_set(env, "PET_MAX_RESTARTS", "0");
                ddp_env_setf(env, "DDPSIM_AGENT", "%d", n);
            }
            if (l->extra_env)
                ddp_env_foreach(l->extra_env, copy_var, env);
            if (l->edit_env)
                l->edit_env(env, n, l->edit_arg);
            char name[32];
            int per_node_script = kind == DDP_LAUNCH_PER_NODE && !exec;
            snprintf(name, sizeof name,
                     elastic           ? "%sagent%d"
                     : per_node_script ? "%snode%d"
                                       : "%srank%d",
                     l->job ? "j2." : "", per_node_script || elastic ? n : rank);
            rc = ddp_plan_add_proc(p, name, n, per_node_script || elastic ? -1 : rank,
                                   (n == 0 ? l->master_start_ns : 0) + l->job_start_ns +
                                       DDP_NS_PER_MS,
                                   elastic ? DDP_PLAN_AGENT
                                   : exec  ? DDP_PLAN_EXEC
                                           : DDP_PLAN_TRAINER,
                                   env);
            if (rc >= 0)
                p->procs[rc].job = l->job;
            ddp_env_free(env);
        }
    }
    free(nodelist);
    return rc < 0 ? rc : 0;
}

/* --------------------------------------------------------------- entry */

int ddp_plan_trainer_cfg(const ddp_plan_t *p, ddp_trainer_cfg_t *cfg)
{
    const ddp_plan_entry_t *e = &p->entry;
    memset(cfg, 0, sizeof *cfg);
    cfg->accelerator = e->accelerator[0] ? e->accelerator : NULL;
    cfg->num_nodes = e->num_nodes;
    cfg->num_processes = e->num_processes;
    cfg->gpus = e->gpus;
    cfg->backend = e->backend[0] ? e->backend : NULL;
    cfg->cluster = e->cluster[0] ? e->cluster : NULL;
    cfg->timeout_ns = e->timeout_ns;
    cfg->store_timeout_ns = e->store_timeout_ns;
    cfg->train_ns = e->train_ns;
    cfg->seed = e->seed;
    cfg->store_protocol = (ddp_store_proto_t)e->store_protocol;
    /* A real process loads its plugin's library itself (once: the same
     * path again is the plugin already loaded, no OS call). */
    const ddp_plugin_t *lib = NULL;
    int rc = e->plugin_lib[0] ? ddp_plugin_load(NULL, e->plugin_lib, &lib) : 0;
    if (rc)
        return rc;
    if (lib && strcmp(lib->name, e->plugin))
        return ddp_err_set(DDP_ECONFIG, "the plan's plugin \"%s\" is not the one its library "
                                        "%s holds (\"%s\")", e->plugin, e->plugin_lib,
                           lib->name);
    if (e->plugin[0] && !(cfg->plugin = ddp_plugin_find(e->plugin)))
        return DDP_ENOT_FOUND; /* the registry's error lists the plugins */
    return 0;
}

int ddp_plan_entry_of(const ddp_trainer_cfg_t *cfg, ddp_plan_entry_t *e)
{
    memset(e, 0, sizeof *e);
    if (cfg->plugin && ddp_plugin_find(cfg->plugin->name) != cfg->plugin)
        return ddp_err_set(DDP_ECONFIG, "plugin \"%s\" is not registered: a plan names "
                                        "its plugin, so register it first "
                                        "(ddp_plugin_register)",
                           cfg->plugin->name ? cfg->plugin->name : "");
    snprintf(e->accelerator, sizeof e->accelerator, "%s",
             cfg->accelerator ? cfg->accelerator : "");
    e->num_nodes = cfg->num_nodes;
    e->num_processes = cfg->num_processes;
    e->gpus = cfg->gpus;
    snprintf(e->backend, sizeof e->backend, "%s", cfg->backend ? cfg->backend : "");
    snprintf(e->cluster, sizeof e->cluster, "%s", cfg->cluster ? cfg->cluster : "");
    snprintf(e->plugin, sizeof e->plugin, "%s", cfg->plugin ? cfg->plugin->name : "");
    const char *lib = cfg->plugin ? ddp_plugin_library(cfg->plugin) : NULL;
    snprintf(e->plugin_lib, sizeof e->plugin_lib, "%s", lib ? lib : "");
    e->timeout_ns = cfg->timeout_ns;
    e->store_timeout_ns = cfg->store_timeout_ns;
    e->train_ns = cfg->train_ns;
    e->seed = cfg->seed;
    e->store_protocol = (int)cfg->store_protocol;
    return 0;
}

/* ------------------------------------------------------ the simulator */

/* Every process an accelerator starts (workers included: they share the
 * cfg) reports its own result: the root cause it failed with, not
 * whatever its teardown left in the error context. */
static void report_to_sim(ddp_sys_t *sys, const ddp_run_result_t *res, void *arg)
{
    (void)arg;
    if (res->rc)
        ddp_sim_report(sys, res->rc, res->message);
}

static int trainer_main(ddp_sys_t *sys, void *arg)
{
    /* On the heap: a simulated rank's stack pages are its own, and this
     * result is nearly a kilobyte that nobody reads here. */
    ddp_run_result_t *res = malloc(sizeof *res);
    if (!res)
        return ddp_err_set(-ENOMEM, "out of memory");
    int rc = ddp_accel_run(sys, arg, res);
    free(res);
    return rc;
}

/* An elastic agent: its workers run the Trainer. */
static int agent_main(ddp_sys_t *sys, void *arg)
{
    ddp_elastic_worker_t w = {.fn = trainer_main, .arg = arg};
    int restarts = 0;
    return ddp__elastic_agent(sys, &w, &restarts);
}

static int port_holder_main(ddp_sys_t *sys, void *arg)
{
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", (uint16_t)(intptr_t)arg, &any);
    int fd = ddp_sys_listen(sys, &any, 16);
    if (fd < 0)
        return 1;
    /* Holds the port for the run's lifetime, accepting nothing. */
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 4 * 3600 * DDP_NS_PER_S));
    ddp_sys_close(sys, fd);
    return 0;
}

int ddp_plan_add_tasks(const ddp_plan_t *p, ddp_sim_t *sim, int *first_task)
{
    if (ddp_sim_node_count(sim) < p->nnodes)
        return ddp_err_set(DDP_ECONFIG, "plan: %d node(s), the simulation has %d",
                           p->nnodes, ddp_sim_node_count(sim));
    ddp_trainer_cfg_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return ddp_err_set(-ENOMEM, "out of memory");
    ddp_sim_own(sim, cfg);
    int rc = ddp_plan_trainer_cfg(p, cfg);
    if (rc)
        return rc;
    /* The cfg's strings point into the plan's entry: a copy lives with the
     * simulation. */
    ddp_plan_entry_t *e = malloc(sizeof *e);
    if (!e)
        return ddp_err_set(-ENOMEM, "out of memory");
    ddp_sim_own(sim, e);
    *e = p->entry;
    cfg->accelerator = e->accelerator[0] ? e->accelerator : NULL;
    cfg->backend = e->backend[0] ? e->backend : NULL;
    cfg->cluster = e->cluster[0] ? e->cluster : NULL;
    cfg->on_result = report_to_sim;
    for (int i = 0; i < p->nfiles; i++)
        if ((rc = ddp_sim_add_file(sim, p->files[i].path, p->files[i].content)) < 0)
            return rc;
    if (first_task)
        *first_task = ddp_sim_task_count(sim);
    for (int i = 0; i < p->nprocs; i++) {
        const ddp_plan_proc_t *x = &p->procs[i];
        ddp_sim_task_opts_t o = {.node = x->node, .name = x->name, .rank = x->rank,
                                 .env = x->env, .start_ns = x->start_ns, .job = x->job,
                                 .agent = x->kind == DDP_PLAN_AGENT};
        /* A foreign program (exec) is modelled by ddpsim's own Trainer
         * with the same environment: its prediction of the real job. */
        if (x->kind == DDP_PLAN_STORE)
            return ddp_err_set(DDP_EUNSUPPORTED, "plan: process %s hosts a foreign job's "
                                                 "store, which only real runs do", x->name);
        if (x->kind == DDP_PLAN_PORT_HOLDER)
            rc = ddp_sim_add_task(sim, &o, port_holder_main, (void *)(intptr_t)x->port);
        else if (x->kind == DDP_PLAN_AGENT)
            rc = ddp_sim_add_task(sim, &o, agent_main, cfg);
        else
            rc = ddp_sim_add_task(sim, &o, trainer_main, cfg);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ddp_plan_simulate(const ddp_plan_t *p, const ddp_sim_opts_t *so, ddp_sim_t **out,
                      int *first_task)
{
    *out = NULL;
    ddp_sim_opts_t o = so ? *so : (ddp_sim_opts_t){0};
    if (!o.seed)
        o.seed = p->seed;
    if (!o.latency_ns)
        o.latency_ns = p->latency_ns;
    if (!o.world)
        o.world = p->expected_world;
    if (!o.gpus)
        o.gpus = p->entry.gpus;
    ddp_sim_t *sim = ddp_sim_new(&o);
    if (!sim)
        return ddp_err_set(-ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; rc == 0 && i < p->nnodes; i++)
        rc = ddp_sim_add_node(sim, p->nodes[i].host, p->nodes[i].addr, 0) < 0
                 ? ddp_err_ctx()->code : 0;
    for (int i = 0; rc == 0 && i < p->nnet; i++)
        rc = p->net[i].kind == DDP_NET_RESOLVE
                 ? ddp_sim_add_hostent(sim, p->net[i].node, p->net[i].name, p->net[i].value)
             : p->net[i].kind == DDP_NET_IFACE
                 ? ddp_sim_add_iface(sim, p->net[i].node, p->net[i].name, p->net[i].value)
                 : ddp_sim_set_somaxconn(sim, p->net[i].node, atoi(p->net[i].value));
    for (int i = 0; rc == 0 && i < p->nfaults; i++)
        rc = ddp_sim_add_fault(sim, &p->faults[i]) < 0 ? DDP_ECONFIG : 0;
    if (rc == 0)
        rc = ddp_plan_add_tasks(p, sim, first_task);
    if (rc) {
        ddp_sim_free(sim);
        return rc ? rc : DDP_ECONFIG;
    }
    *out = sim;
    return 0;
}

/* ----------------------------------------------------------- the file */

static void put_str(FILE *o, const char *s)
{
    fputc('"', o);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", o);
        else if (c == '\t')
            fputs("\\t", o);
        else if (c < 0x20 || c == 0x7f)
            fprintf(o, "\\x%02x", c);
        else
            fputc(c, o);
    }
    fputc('"', o);
}

/* A line "KW "A"" or "KW "A" "B"". */
static void put_line(FILE *o, const char *kw, const char *a, const char *b)
{
    fprintf(o, "%s ", kw);
    put_str(o, a);
    if (b) {
        fputc(' ', o);
        put_str(o, b);
    }
    fputc('\n', o);
}

static int put_env(void *arg, const char *key, const char *value)
{
    put_line(arg, "env", key, value);
    return 0;
}

int ddp_plan_write(const ddp_plan_t *p, FILE *o)
{
    const ddp_plan_entry_t *e = &p->entry;
    fputs("ddpsim-plan 1\n", o);
    put_line(o, "name", p->name, NULL);
    fprintf(o, "run seed=%" PRIu64 " latency=%" PRId64 " world=%d limit=%" PRId64
               " t0=%" PRId64 "\n",
            p->seed, p->latency_ns, p->expected_world, p->limit_ns, p->t0);
    put_line(o, "results", p->results, NULL);
    if (p->store_memory)
        fprintf(o, "store_memory bytes=%zu\n", p->store_memory);
    if (p->discover)
        fprintf(o, "discover on\n");
    fprintf(o, "entry accelerator=%s nodes=%d processes=%d gpus=%d timeout=%" PRId64
               " store_timeout=%" PRId64 " train=%" PRId64 " seed=%" PRIu64
               " protocol=%d\n",
            e->accelerator[0] ? e->accelerator : "-", e->num_nodes, e->num_processes,
            e->gpus, e->timeout_ns, e->store_timeout_ns, e->train_ns, e->seed,
            e->store_protocol);
    put_line(o, "backend", e->backend, NULL);
    put_line(o, "cluster", e->cluster, NULL);
    if (e->plugin_lib[0]) /* first: loading it registers the plugin named next */
        put_line(o, "plugin-library", e->plugin_lib, NULL);
    put_line(o, "plugin", e->plugin, NULL);
    put_line(o, "exec", e->exec, NULL);
    for (int i = 0; i < p->nnodes; i++)
        put_line(o, "node", p->nodes[i].host, p->nodes[i].addr);
    for (int i = 0; i < p->nfiles; i++)
        put_line(o, "file", p->files[i].path, p->files[i].content);
    for (int i = 0; i < p->nnet; i++) {
        fprintf(o, "%s node=%d ", ddp_net_kind_name(p->net[i].kind), p->net[i].node);
        put_str(o, p->net[i].name);
        fputc(' ', o);
        put_str(o, p->net[i].value);
        fputc('\n', o);
    }
    /* A fault in the scenario's own syntax (one writer, one reader), after
     * what only a plan has: its scenario line and a task it may aim at. */
    for (int i = 0; i < p->nfaults; i++) {
        fprintf(o, "fault line=%d task=%d ", p->fault_line[i], p->faults[i].task);
        ddp__scenario_put_fault(o, &p->faults[i]);
        fputc('\n', o);
    }
    for (int i = 0; i < p->nprocs; i++) {
        const ddp_plan_proc_t *x = &p->procs[i];
        fprintf(o, "proc %s node=%d rank=%d start=%" PRId64 " port=%u job=%d name=",
                ddp_plan_kind_name(x->kind), x->node, x->rank, x->start_ns,
                (unsigned)x->port, x->job);
        put_str(o, x->name);
        fputc('\n', o);
        ddp_env_foreach(x->env, put_env, o);
    }
    fputs("end\n", o);
    return ferror(o) ? ddp_err_set(-EIO, "plan: write failed") : 0;
}

/* A reader of one line: words, key=value words and quoted strings. */
typedef struct rd {
    const char *file;
    int line;
    const char *start; /* the line */
    char *c;           /* the rest of the line */
} rd_t;

static int rd_err(rd_t *r, const char *want)
{
    char got[40];
    snprintf(got, sizeof got, "%.30s", *r->c ? r->c : "end of line");
    got[strcspn(got, "\n")] = '\0';
    return ddp_err_set(DDP_ECONFIG, "%s:%d: expected %s, got \"%s\" (the plan file "
                                    "is written by ddpsim run --real: was it edited "
                                    "or cut short?)",
                       r->file, r->line, want, got);
}

static void skip_ws(rd_t *r)
{
    while (*r->c == ' ')
        r->c++;
}

/* A quoted string into a malloc'd *out. */
static int rd_str(rd_t *r, char **out)
{
    skip_ws(r);
    if (*r->c != '"')
        return rd_err(r, "a quoted string");
    char *src = ++r->c, *dst = src, *start = src;
    while (*src && *src != '"') {
        if (*src != '\\') {
            *dst++ = *src++;
            continue;
        }
        src++;
        if (*src == 'n')
            *dst++ = '\n', src++;
        else if (*src == 't')
            *dst++ = '\t', src++;
        else if (*src == 'x' && src[1] && src[2]) {
            char hex[3] = {src[1], src[2], 0};
            *dst++ = (char)strtol(hex, NULL, 16);
            src += 3;
        } else if (*src)
            *dst++ = *src++;
    }
    if (*src != '"') {
        r->c = src;
        return rd_err(r, "a closing quote");
    }
    *dst = '\0';
    r->c = src + 1;
    *out = strdup(start);
    return *out ? 0 : ddp_err_set(-ENOMEM, "out of memory");
}

static int rd_strbuf(rd_t *r, char *buf, size_t n)
{
    char *s = NULL;
    int rc = rd_str(r, &s);
    if (rc == 0 && strlen(s) >= n)
        rc = rd_err(r, "a shorter string");
    if (rc == 0)
        memcpy(buf, s, strlen(s) + 1);
    free(s);
    return rc;
}

/* key= */
static int rd_key(rd_t *r, const char *key)
{
    skip_ws(r);
    size_t kl = strlen(key);
    if (strncmp(r->c, key, kl) || r->c[kl] != '=') {
        char want[48];
        snprintf(want, sizeof want, "%s=", key);
        return rd_err(r, want);
    }
    r->c += kl + 1;
    return 0;
}

/* key=<integer> */
static int rd_int(rd_t *r, const char *key, int64_t *out)
{
    int rc = rd_key(r, key);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    long long v = strtoll(r->c, &end, 10);
    if (end == r->c || errno || (*end && *end != ' ' && *end != '\n'))
        return rd_err(r, "an integer");
    r->c = end;
    *out = v;
    return 0;
}

/* key=<unsigned integer> */
static int rd_u64(rd_t *r, const char *key, uint64_t *out)
{
    int rc = rd_key(r, key);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(r->c, &end, 10);
    if (end == r->c || errno || (*end && *end != ' ' && *end != '\n'))
        return rd_err(r, "an unsigned integer");
    r->c = end;
    *out = v;
    return 0;
}

static int rd_i(rd_t *r, const char *key, int *out)
{
    int64_t v = 0;
    int rc = rd_int(r, key, &v);
    if (rc == 0 && (v < INT32_MIN || v > INT32_MAX))
        return rd_err(r, "a smaller integer");
    *out = (int)v;
    return rc;
}

/* A bare word up to a space or '='. */
static int rd_word(rd_t *r, char *buf, size_t n)
{
    skip_ws(r);
    size_t k = strcspn(r->c, " =\n");
    if (!k || k >= n)
        return rd_err(r, "a word");
    memcpy(buf, r->c, k);
    buf[k] = '\0';
    r->c += k;
    return 0;
}

/* A fault line of the scenario's syntax after what only a plan has: its
 * scenario line and a task it may aim at. Read by the fault line's own
 * parser, checked against the cluster the plan's processes make; an
 * error names the plan file, line and column. */
static int rd_fault(rd_t *r, ddp_plan_t *p)
{
    int line = 0, task = -1, rc;
    if ((rc = rd_i(r, "line", &line)) || (rc = rd_i(r, "task", &task)))
        return rc;
    skip_ws(r);
    char err[400] = "", why[48];
    int nodes = p->nnodes > 0 ? p->nnodes : 1;
    int world = p->expected_world > p->nprocs ? p->expected_world : p->nprocs;
    int per = world > nodes ? (world - 1) / nodes + 1 : 1; /* every rank a fault may name */
    snprintf(why, sizeof why, "the plan's %d node%s x %d rank%s per node", nodes,
             nodes == 1 ? "" : "s", per, per == 1 ? "" : "s");
    ddp__fault_cluster_t c = {.nodes = nodes, .world = (long)nodes * per, .world_why = why,
                              .plugin = p->entry.plugin};
    ddp__ln_t l = {.file = r->file, .line = r->line, .err = err, .errlen = sizeof err};
    ddp_fault_t f;
    if (ddp__fault_line_read(&l, r->c, (int)(r->c - r->start) + 1, &c, &f))
        return ddp_err_set(DDP_ECONFIG, "%s (the plan file is written by ddpsim run --real: "
                                        "was it edited or cut short?)", err);
    r->c += strlen(r->c);
    f.task = task;
    rc = ddp_plan_add_fault(p, &f, line) < 0 ? ddp_err_ctx()->code : 0;
    free((char *)f.ranks);
    return rc;
}

static int rd_proc(rd_t *r, ddp_plan_t *p)
{
    char kind[24], *name = NULL;
    int node = 0, rank = 0, job = 0, rc, k = 0;
    int64_t start = 0, port = 0;
    if ((rc = rd_word(r, kind, sizeof kind)))
        return rc;
    while (k < DDP_PLAN_KIND_COUNT && strcmp(kind_names[k], kind))
        k++;
    if (k == DDP_PLAN_KIND_COUNT)
        return rd_err(r, "a process kind (trainer, port-holder, exec)");
    if ((rc = rd_i(r, "node", &node)) || (rc = rd_i(r, "rank", &rank)) ||
        (rc = rd_int(r, "start", &start)) || (rc = rd_int(r, "port", &port)) ||
        (rc = rd_i(r, "job", &job)) || (rc = rd_key(r, "name")) || (rc = rd_str(r, &name)))
        return rc;
    if (job < 0 || job > 1) {
        free(name);
        return rd_err(r, "job=0 or job=1");
    }
    rc = ddp_plan_add_proc(p, name, node, rank, start, (ddp_plan_kind_t)k, NULL);
    free(name);
    if (rc < 0)
        return rc;
    p->procs[rc].port = (uint16_t)port;
    p->procs[rc].job = job;
    return 0;
}

static int rd_entry(rd_t *r, ddp_plan_entry_t *e)
{
    int rc = rd_key(r, "accelerator");
    if (rc == 0)
        rc = rd_word(r, e->accelerator, sizeof e->accelerator);
    if (rc == 0 && !strcmp(e->accelerator, "-"))
        e->accelerator[0] = '\0';
    if (rc || (rc = rd_i(r, "nodes", &e->num_nodes)) ||
        (rc = rd_i(r, "processes", &e->num_processes)) || (rc = rd_i(r, "gpus", &e->gpus)) ||
        (rc = rd_int(r, "timeout", &e->timeout_ns)) ||
        (rc = rd_int(r, "store_timeout", &e->store_timeout_ns)) ||
        (rc = rd_int(r, "train", &e->train_ns)) || (rc = rd_u64(r, "seed", &e->seed)))
        return rc;
    return rd_i(r, "protocol", &e->store_protocol);
}

/* run seed=N latency=NS world=N limit=NS t0=NS */
static int rd_run(rd_t *r, ddp_plan_t *p)
{
    int rc;
    if ((rc = rd_u64(r, "seed", &p->seed)) || (rc = rd_int(r, "latency", &p->latency_ns)) ||
        (rc = rd_i(r, "world", &p->expected_world)) ||
        (p->expected_world < 0 && (rc = rd_err(r, "a world size of 0 or more"))) ||
        (rc = rd_int(r, "limit", &p->limit_ns)))
        return rc;
    return rd_int(r, "t0", &p->t0);
}

/* plugin "NAME" (checked here: later lines, faults, read it) or
 * plugin-library "PATH" (loaded now: fault lines may name its phases). */
static int rd_plugin(rd_t *r, ddp_plan_entry_t *e, int library)
{
    int rc;
    if (library) {
        const ddp_plugin_t *pl;
        return (rc = rd_strbuf(r, e->plugin_lib, sizeof e->plugin_lib)) ? rc
               : ddp_plugin_load(NULL, e->plugin_lib, &pl);
    }
    if ((rc = rd_strbuf(r, e->plugin, sizeof e->plugin)) != 0)
        return rc;
    return e->plugin[0] && !ddp_plugin_find(e->plugin)
               ? ddp_err_set(DDP_ECONFIG, "%s:%d: expected a registered plugin's name "
                                          "(ddpsim list plugins), or a plugin-library "
                                          "line, got \"%.60s\"",
                             r->file, r->line, e->plugin)
               : 0;
}

/* iface / resolve / somaxconn node=N "NAME" "VALUE" (w: the word's
 * first letter) */
static int rd_net(rd_t *r, ddp_plan_t *p, char w)
{
    int node, rc;
    char name[64], value[64];
    if ((rc = rd_i(r, "node", &node)) || (rc = rd_strbuf(r, name, sizeof name)) ||
        (rc = rd_strbuf(r, value, sizeof value)))
        return rc;
    int kind = w == 'i' ? DDP_NET_IFACE : w == 'r' ? DDP_NET_RESOLVE : DDP_NET_SOMAXCONN;
    return ddp_plan_add_net(p, kind, node, name, value) < 0 ? ddp_err_ctx()->code : 0;
}

/* env "KEY" "VALUE": a variable of the last proc line's process */
static int rd_env(rd_t *r, ddp_plan_t *p)
{
    if (!p->nprocs)
        return rd_err(r, "a proc line before env");
    char *k = NULL, *v = NULL;
    int rc;
    if ((rc = rd_str(r, &k)) == 0 && (rc = rd_str(r, &v)) == 0)
        rc = ddp_env_set(p->procs[p->nprocs - 1].env, k, v);
    free(k);
    free(v);
    return rc;
}

static int rd_statement(rd_t *r, ddp_plan_t *p, int *ended)
{
    char word[24];
    int rc = rd_word(r, word, sizeof word);
    if (rc)
        return rc;
    ddp_plan_entry_t *e = &p->entry;
    if (!strcmp(word, "name"))
        return rd_strbuf(r, p->name, sizeof p->name);
    if (!strcmp(word, "run"))
        return rd_run(r, p);
    if (!strcmp(word, "store_memory")) {
        uint64_t v = 0;
        if ((rc = rd_u64(r, "bytes", &v)) != 0)
            return rc;
        if (v < ((uint64_t)1 << 20) || v > SIZE_MAX)
            return rd_err(r, "a memory budget of 1 MiB or more");
        p->store_memory = (size_t)v;
        return 0;
    }
    if (!strcmp(word, "discover")) {
        p->discover = 1;
        return rd_word(r, word, sizeof word) == 0 && !strcmp(word, "on")
                   ? 0
                   : rd_err(r, "`discover on`");
    }
    if (!strcmp(word, "results"))
        return rd_strbuf(r, p->results, sizeof p->results);
    if (!strcmp(word, "entry"))
        return rd_entry(r, e);
    if (!strcmp(word, "backend"))
        return rd_strbuf(r, e->backend, sizeof e->backend);
    if (!strcmp(word, "cluster"))
        return rd_strbuf(r, e->cluster, sizeof e->cluster);
    if (!strcmp(word, "plugin") || !strcmp(word, "plugin-library"))
        return rd_plugin(r, e, word[6] == '-');
    if (!strcmp(word, "exec"))
        return rd_strbuf(r, e->exec, sizeof e->exec);
    if (!strcmp(word, "node")) {
        char host[64], addr[48];
        if ((rc = rd_strbuf(r, host, sizeof host)) || (rc = rd_strbuf(r, addr, sizeof addr)))
            return rc;
        return ddp_plan_add_node(p, host, addr) < 0 ? ddp_err_ctx()->code : 0;
    }
    if (!strcmp(word, "iface") || !strcmp(word, "resolve") || !strcmp(word, "somaxconn"))
        return rd_net(r, p, word[0]);
    if (!strcmp(word, "file")) {
        char *path = NULL, *content = NULL;
        if ((rc = rd_str(r, &path)) == 0 && (rc = rd_str(r, &content)) == 0)
            rc = ddp_plan_add_file(p, path, content) < 0 ? ddp_err_ctx()->code : 0;
        free(path);
        free(content);
        return rc;
    }
    if (!strcmp(word, "fault"))
        return rd_fault(r, p);
    if (!strcmp(word, "proc"))
        return rd_proc(r, p);
    if (!strcmp(word, "env"))
        return rd_env(r, p);
    if (!strcmp(word, "end")) {
        *ended = 1;
        return 0;
    }
    return rd_err(r, "a plan statement (name, run, results, entry, backend, cluster, "
                     "plugin, plugin-library, exec, node, file, fault, proc, env, end)");
}

int ddp_plan_read(ddp_sys_t *sys, const char *path, ddp_plan_t **out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = ddp_sys_read_file(sys, path, &text, &len);
    if (rc)
        return rc;
    ddp_plan_t *p = ddp_plan_new();
    if (!p) {
        free(text);
        return ddp_err_set(-ENOMEM, "out of memory");
    }
    rd_t r = {.file = path};
    int ended = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); rc == 0 && line && !ended;
         line = strtok_r(NULL, "\n", &save)) {
        r.line++;
        r.c = line;
        r.start = line;
        if (r.line == 1) {
            if (strcmp(line, "ddpsim-plan 1"))
                rc = rd_err(&r, "\"ddpsim-plan 1\" (a plan file of this version)");
            continue;
        }
        rc = rd_statement(&r, p, &ended);
        skip_ws(&r);
        if (rc == 0 && *r.c)
            rc = rd_err(&r, "end of line");
    }
    if (rc == 0 && !ended) {
        r.c = "";
        rc = rd_err(&r, "a last line \"end\"");
    }
    free(text);
    if (rc) {
        ddp_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}
