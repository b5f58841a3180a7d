/* tests/extlaunch_diff.c — see extlaunch_diff.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/cluster.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/plan.h"
#include "ddp/sys.h"
#include "extlaunch_diff.h"

#define MD_MAX 16
#define MD_NVARS 8

typedef struct md_cfg {
    int np, oversubscribe, cpus, ntasks_too, nodes_too;
    const char *map_by; /* mpirun --map-by; NULL: its default */
    char x[32];         /* the variable exported to every rank; "" none */
} md_cfg_t;

typedef struct md_rank {
    char v[MD_NVARS][64];
} md_rank_t;

typedef struct ext_kind {
    const char *name, *cluster;
    const char *run; /* the command before the options */
    ddp_launcher_t launcher;
    /* what each rank prints: the rank first; the first ncmp compared as
     * text, the others (a job's own ids) only read by the cluster env */
    const char *vars[MD_NVARS];
    int ncmp;
    void (*gen)(ddp_rng_t *rng, md_cfg_t *c);
    void (*opts)(const md_cfg_t *c, char *buf, size_t n);
    /* a refusal a plan cannot have: resources it does not model */
    int (*resources)(const md_cfg_t *c);
} ext_kind_t;

static int pick(ddp_rng_t *rng, int n)
{
    return (int)(ddp_rng_next(rng) % (uint64_t)n);
}

static void gen_x(ddp_rng_t *rng, md_cfg_t *c)
{
    if (pick(rng, 2))
        snprintf(c->x, sizeof c->x, "v%d", pick(rng, 1000));
    else
        c->x[0] = '\0';
}

static void mpi_gen(ddp_rng_t *rng, md_cfg_t *c)
{
    static const char *const maps[] = {NULL, "slot", "core", "node", "socket", "hwthread"};
    c->np = 1 + pick(rng, 8);
    c->oversubscribe = pick(rng, 4) != 0;
    c->map_by = maps[pick(rng, 6)];
    gen_x(rng, c);
}

static void mpi_opts(const md_cfg_t *c, char *buf, size_t n)
{
    snprintf(buf, n, "-np %d%s%s%s%s%s", c->np, c->map_by ? " --map-by " : "",
             c->map_by ? c->map_by : "", c->oversubscribe ? " --oversubscribe" : "",
             c->x[0] ? " -x DDPSIM_DIFF_X=" : "", c->x);
}

/* mpirun refuses more ranks than cores ("not enough slots") unless
 * --oversubscribe. */
static int mpi_resources(const md_cfg_t *c)
{
    return !c->oversubscribe && c->np > 1;
}

static void srun_gen(ddp_rng_t *rng, md_cfg_t *c)
{
    c->np = 1 + pick(rng, 8);
    c->ntasks_too = pick(rng, 2);
    c->nodes_too = pick(rng, 2);
    c->cpus = 1 + pick(rng, 2);
    if (c->np * c->cpus > 8) /* beyond the node's 8 CPUs srun queues, it does not refuse */
        c->cpus = 1;
    gen_x(rng, c);
}

/* ddpsim's srun launcher is srun --ntasks-per-node=N (one node here). */
static void srun_opts(const md_cfg_t *c, char *buf, size_t n)
{
    char ntasks[16] = "";
    if (c->ntasks_too)
        snprintf(ntasks, sizeof ntasks, " -n %d", c->np);
    snprintf(buf, n, "--ntasks-per-node=%d%s%s -c %d%s%s", c->np, ntasks,
             c->nodes_too ? " -N 1" : "", c->cpus,
             c->x[0] ? " --export=ALL,DDPSIM_DIFF_X=" : "", c->x);
}

/* tests/slurm/start.sh's node declares 8 CPUs (none asks for more). */
static int srun_resources(const md_cfg_t *c)
{
    return c->np * c->cpus > 8;
}

static const ext_kind_t g_kinds[EXT_NKINDS] = {
    {"mpirun", "mpi", "mpirun --allow-run-as-root", DDP_LAUNCH_MPI,
     {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
      "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK", "DDPSIM_DIFF_X",
      "PMIX_NAMESPACE", NULL},
     6, mpi_gen, mpi_opts, mpi_resources},
    {"srun", "slurm", "srun", DDP_LAUNCH_SLURM,
     {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES",
      "SLURM_NTASKS_PER_NODE", "DDPSIM_DIFF_X", "SLURM_JOB_ID"},
     7, srun_gen, srun_opts, srun_resources},
};

const char *ext_name(int kind)
{
    return g_kinds[kind].name;
}

static int probe(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    char yes[8] = "";
    if (!p)
        return 0;
    if (!fgets(yes, sizeof yes, p))
        yes[0] = '\0';
    pclose(p);
    return strncmp(yes, "yes", 3) == 0;
}

const char *ext_missing(int kind)
{
    if (kind == EXT_MPIRUN)
        return probe("command -v mpirun >/dev/null 2>&1 && echo yes")
                   ? NULL
                   : "no mpirun here (apt-get install openmpi-bin)";
    return probe("command -v srun >/dev/null 2>&1 && timeout 10 sinfo -h -o %T 2>/dev/null | "
                 "grep -q idle && echo yes")
               ? NULL
               : "no SLURM cluster answers here (start one: eval \"$(DDPSIM_SLURM_PORT=P "
                 "sh tests/slurm/start.sh)\"; stop it with tests/slurm/stop.sh)";
}

static void md_words(const ext_kind_t *k, const md_cfg_t *c, char *buf, size_t n)
{
    char o[160];
    k->opts(c, o, sizeof o);
    snprintf(buf, n, "%s %s", k->name, o);
}

/* The real launcher started on c: its output stream, NULL when popen
 * fails. Every rank prints "R" and its variables, one line. Launches at
 * once each have a setting of their own (slot): two mpiruns that share
 * /tmp/ompi.HOST.UID race to create it and one fails ("File exists"). */
static FILE *md_real_start(const ext_kind_t *k, const md_cfg_t *c, const char *slot)
{
    char o[160], echo[600] = "echo \"R", cmd[1400];
    k->opts(c, o, sizeof o);
    for (int v = 0; v < MD_NVARS && k->vars[v]; v++) {
        size_t at = strlen(echo);
        snprintf(echo + at, sizeof echo - at, " ${%s-unset}", k->vars[v]);
    }
    snprintf(cmd, sizeof cmd, "%s timeout 30 %s %s sh -c '%s\"' 2>/dev/null", slot, k->run, o,
             echo);
    return popen(cmd, "r");
}

/* A started launcher's ranks: each rank's variables into r by its rank;
 * the ranks seen, or -1 when it refused (exit status not 0). */
static int md_real_finish(const ext_kind_t *k, FILE *p, md_rank_t *r)
{
    if (!p)
        return -1;
    char line[1024];
    int seen = 0;
    while (fgets(line, sizeof line, p)) {
        md_rank_t q;
        memset(&q, 0, sizeof q);
        char *save = NULL, *t = strtok_r(line, " \n", &save);
        for (int v = 0; t && v < MD_NVARS && k->vars[v] && (t = strtok_r(NULL, " \n", &save)); v++)
            snprintf(q.v[v], sizeof q.v[v], "%s", t);
        int rank = atoi(q.v[0]);
        if (strcmp(line, "R") == 0 && rank >= 0 && rank < MD_MAX)
            r[rank] = q, seen++;
    }
    return pclose(p) == 0 ? seen : -1;
}

/* ddpsim's launcher on one node (named as this host): each rank's
 * variables into r. */
static int md_ddpsim(const ext_kind_t *k, const md_cfg_t *c, const char *host, md_rank_t *r)
{
    ddp_plan_t *p = ddp_plan_new();
    ddp_env_t *extra = ddp_env_new();
    if (!p || !extra || ddp_plan_add_node(p, host, "127.0.0.1") < 0) {
        ddp_env_free(extra);
        ddp_plan_free(p);
        return -1;
    }
    snprintf(p->entry.accelerator, sizeof p->entry.accelerator, "ddp");
    p->entry.num_nodes = 1;
    p->entry.num_processes = c->np;
    if (c->x[0])
        ddp_env_set(extra, "DDPSIM_DIFF_X", c->x);
    ddp_launch_t l = {.procs = c->np, .launcher = k->launcher, .tasks_per_node = c->np,
                      .master_addr = "", .no_port = 1, .extra_env = extra};
    int n = ddp_plan_launch(p, &l) == 0 ? 0 : -1;
    for (int i = 0; n >= 0 && i < p->nprocs; i++) {
        const ddp_plan_proc_t *q = &p->procs[i];
        if (q->kind != DDP_PLAN_TRAINER || q->rank < 0 || q->rank >= MD_MAX)
            continue;
        for (int v = 0; v < MD_NVARS && k->vars[v]; v++) {
            const char *val = ddp_env_get(q->env, k->vars[v]);
            snprintf(r[q->rank].v[v], sizeof r[q->rank].v[v], "%s", val ? val : "unset");
        }
        n++;
    }
    ddp_env_free(extra);
    ddp_plan_free(p);
    return n;
}

/* What ddpsim's cluster environment reads from a rank's variables:
 * "WORLD RANK LOCAL NODE ADDRESS", then whether it accepts them for one node
 * of np devices (validate), or its error, into out; the port into *port. */
static void md_reading(const ext_kind_t *k, const md_rank_t *r, int np, char *out, size_t n,
                       int *port)
{
    ddp_env_t *env = ddp_env_new();
    for (int v = 0; env && v < MD_NVARS && k->vars[v]; v++)
        if (strcmp(r->v[v], "unset") != 0)
            ddp_env_set(env, k->vars[v], r->v[v]);
    ddp_sys_t *sys = env ? ddp_sys_posix_new(env) : NULL;
    ddp_cluster_t *c = NULL;
    int w = -1, rk = -1, l = -1, nd = -1;
    uint16_t p = 0;
    char addr[64] = "";
    if (!sys || ddp_cluster_open(sys, k->cluster, &c) != 0 ||
        ddp_cluster_world_size(c, &w) != 0 || ddp_cluster_global_rank(c, &rk) != 0 ||
        ddp_cluster_local_rank(c, &l) != 0 || ddp_cluster_node_rank(c, &nd) != 0 ||
        ddp_cluster_main_address(c, addr, sizeof addr) != 0 ||
        ddp_cluster_main_port(c, &p) != 0 || ddp_cluster_validate(c, np, 1) != 0)
        snprintf(out, n, "error: %s", ddp_err_message());
    else
        snprintf(out, n, "%d %d %d %d %s", w, rk, l, nd, addr);
    *port = p;
    if (c)
        ddp_cluster_close(c);
    if (sys)
        ddp_sys_free(sys);
}

static void md_disagree(ext_diff_t *d, const ext_kind_t *k, const md_cfg_t *c,
                        const char *what)
{
    if (d->disagreed++ == 0) {
        char words[200];
        md_words(k, c, words, sizeof words);
        snprintf(d->first, sizeof d->first, "%s: %s", words, what);
    }
}

/* A rank of both: the variables, then ddpsim's readings of each. */
static int md_cmp_rank(const ext_kind_t *k, int np, const md_rank_t *real,
                       const md_rank_t *sim, char *why, size_t n, int *ports)
{
    for (int v = 0; v < k->ncmp; v++)
        if (strcmp(real->v[v], sim->v[v]) != 0) {
            snprintf(why, n, "%s: %s vs ddpsim's %s", k->vars[v], real->v[v], sim->v[v]);
            return -1;
        }
    char a[300], b[300];
    md_reading(k, real, np, a, sizeof a, &ports[0]);
    md_reading(k, sim, np, b, sizeof b, &ports[1]);
    if (strcmp(a, b) != 0) {
        snprintf(why, n, "ddpsim's %s cluster env reads \"%s\" from %s's, \"%s\" from its own",
                 k->cluster, a, k->name, b);
        return -1;
    }
    return 0;
}

/* Every rank of both, and one main port per job on each side. */
static void md_ranks(const ext_kind_t *k, const md_cfg_t *c, const md_rank_t *real,
                     const md_rank_t *sim, ext_diff_t *d)
{
    int first[2] = {-1, -1};
    char why[400];
    for (int r = 0; r < c->np; r++) {
        int ports[2];
        d->ranks++;
        if (md_cmp_rank(k, c->np, &real[r], &sim[r], why, sizeof why, ports) != 0) {
            md_disagree(d, k, c, why);
            return;
        }
        if ((first[0] >= 0 && ports[0] != first[0]) || (first[1] >= 0 && ports[1] != first[1])) {
            md_disagree(d, k, c, "the ranks of one job derive different main ports");
            return;
        }
        first[0] = ports[0], first[1] = ports[1];
    }
}

/* One configuration whose real launch gave nr ranks in real: ddpsim's
 * launcher on it, then every rank of both. */
static void md_one(const ext_kind_t *k, const md_cfg_t *c, const char *host, int nr,
                   const md_rank_t *real, ext_diff_t *d)
{
    static md_rank_t sim[MD_MAX];
    memset(sim, 0, sizeof sim);
    d->configs++;
    int ns = md_ddpsim(k, c, host, sim);
    if (nr < 0) {
        d->refused++;
        if (k->resources(c))
            d->explained++;
        else
            md_disagree(d, k, c, "the real launcher refused it, ddpsim's does not");
        return;
    }
    if (nr != c->np || ns != c->np) {
        char why[200];
        snprintf(why, sizeof why, "%d rank(s) from the real launcher, %d from ddpsim's, for %d",
                 nr, ns, c->np);
        md_disagree(d, k, c, why);
        return;
    }
    md_ranks(k, c, real, sim, d);
}

/* n configurations from rng: all n real launches started at once, then
 * each compared in order (the figures do not depend on n). */
static void md_batch(const ext_kind_t *k, ddp_rng_t *rng, int n, const char *host,
                     ext_diff_t *d)
{
    static md_cfg_t c[EXT_MAX_JOBS];
    static md_rank_t real[EXT_MAX_JOBS][MD_MAX];
    FILE *p[EXT_MAX_JOBS];
    memset(c, 0, sizeof c);
    memset(real, 0, sizeof real);
    for (int j = 0; j < n; j++) {
        char slot[128] = "";
        if (n > 1 && k->launcher == DDP_LAUNCH_MPI)
            snprintf(slot, sizeof slot,
                     "mkdir -p /tmp/ddpsim-extlaunch-%ld/%d && "
                     "OMPI_MCA_orte_tmpdir_base=/tmp/ddpsim-extlaunch-%ld/%d",
                     ddp_sys_pid(), j, ddp_sys_pid(), j);
        k->gen(rng, &c[j]);
        p[j] = md_real_start(k, &c[j], slot);
    }
    for (int j = 0; j < n; j++) {
        int nr = md_real_finish(k, p[j], real[j]);
        md_one(k, &c[j], host, nr, real[j], d);
    }
}

void ext_diff_run(int kind, uint64_t seed, long count, int jobs, ext_diff_t *d)
{
    memset(d, 0, sizeof *d);
    const ext_kind_t *k = &g_kinds[kind];
    char host[64] = "node0";
    ddp_sys_t *sys = ddp_sys_posix_new(ddp_env_new());
    if (sys)
        ddp_sys_hostname(sys, host, sizeof host);
    ddp_rng_t rng;
    ddp_rng_seed(&rng, seed);
    jobs = jobs < 1 ? 1 : jobs > EXT_MAX_JOBS ? EXT_MAX_JOBS : jobs;
    for (long i = 0; i < count; i += jobs)
        md_batch(k, &rng, count - i < jobs ? (int)(count - i) : jobs, host, d);
    char rm[96];
    snprintf(rm, sizeof rm, "rm -rf /tmp/ddpsim-extlaunch-%ld", ddp_sys_pid());
    if (jobs > 1 && system(rm) != 0)
        fprintf(stderr, "differential: could not remove /tmp/ddpsim-extlaunch-%ld\n",
                ddp_sys_pid());
    if (sys)
        ddp_sys_free(sys);
}
