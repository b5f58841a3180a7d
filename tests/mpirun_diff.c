/* tests/mpirun_diff.c — see mpirun_diff.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/cluster.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plan.h"
#include "ddp/sys.h"
#include "mpirun_diff.h"

#define MD_MAX 16
#define MD_NVARS 7
#define MD_NCMP 6 /* compared as text: all but PMIX_NAMESPACE (a job's own) */
/* What each rank prints: the OMPI contract, the -x variable, the job id
 * ddpsim's main port is derived from. */
static const char *const g_vars[MD_NVARS] = {
    "OMPI_COMM_WORLD_RANK",       "OMPI_COMM_WORLD_SIZE",      "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK", "DDPSIM_DIFF_X",
    "PMIX_NAMESPACE"};

typedef struct md_cfg {
    int np, oversubscribe;
    const char *map_by; /* NULL: mpirun's default */
    char x[32];         /* -x DDPSIM_DIFF_X=x; "" none */
} md_cfg_t;

typedef struct md_rank {
    char v[MD_NVARS][32];
} md_rank_t;

int mpirun_here(void)
{
    FILE *p = popen("command -v mpirun >/dev/null 2>&1 && echo yes", "r");
    char yes[8] = "";
    if (!p)
        return 0;
    if (!fgets(yes, sizeof yes, p))
        yes[0] = '\0';
    pclose(p);
    return strncmp(yes, "yes", 3) == 0;
}

static void md_gen(ddp_rng_t *rng, md_cfg_t *c)
{
    static const char *const maps[] = {NULL, "slot", "core", "node", "socket", "hwthread"};
    c->np = 1 + (int)(ddp_rng_next(rng) % 8);
    c->oversubscribe = ddp_rng_next(rng) % 4 != 0;
    c->map_by = maps[ddp_rng_next(rng) % 6];
    if (ddp_rng_next(rng) % 2)
        snprintf(c->x, sizeof c->x, "v%u", (unsigned)(ddp_rng_next(rng) % 1000));
    else
        c->x[0] = '\0';
}

static void md_words(const md_cfg_t *c, char *buf, size_t n)
{
    snprintf(buf, n, "-np %d%s%s%s%s%s", c->np, c->map_by ? " --map-by " : "",
             c->map_by ? c->map_by : "", c->oversubscribe ? " --oversubscribe" : "",
             c->x[0] ? " -x DDPSIM_DIFF_X=" : "", c->x);
}

/* Real mpirun: each rank's variables into r by its rank; the ranks seen,
 * or -1 when mpirun refused (exit status not 0). */
static int md_real(const md_cfg_t *c, md_rank_t *r)
{
    char words[160], cmd[1024];
    md_words(c, words, sizeof words);
    snprintf(cmd, sizeof cmd,
             "timeout 30 mpirun --allow-run-as-root %s sh -c 'echo \"R $OMPI_COMM_WORLD_RANK "
             "$OMPI_COMM_WORLD_SIZE $OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE "
             "$OMPI_COMM_WORLD_NODE_RANK ${DDPSIM_DIFF_X-unset} ${PMIX_NAMESPACE-unset}\"' "
             "2>/dev/null",
             words);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof line, p)) {
        md_rank_t k;
        if (sscanf(line, "R %31s %31s %31s %31s %31s %31s %31s", k.v[0], k.v[1], k.v[2],
                   k.v[3], k.v[4], k.v[5], k.v[6]) != MD_NVARS)
            continue;
        int rank = atoi(k.v[0]);
        if (rank >= 0 && rank < MD_MAX)
            r[rank] = k, seen++;
    }
    return pclose(p) == 0 ? seen : -1;
}

/* ddpsim's mpirun launcher on one node: each rank's variables into r. */
static int md_ddpsim(const md_cfg_t *c, md_rank_t *r)
{
    ddp_plan_t *p = ddp_plan_new();
    ddp_env_t *extra = ddp_env_new();
    if (!p || !extra || ddp_plan_add_node(p, "node0", "127.0.0.1") < 0)
        return -1;
    snprintf(p->entry.accelerator, sizeof p->entry.accelerator, "ddp");
    p->entry.num_nodes = 1;
    p->entry.num_processes = c->np;
    if (c->x[0])
        ddp_env_set(extra, "DDPSIM_DIFF_X", c->x);
    ddp_launch_t l = {.procs = c->np, .launcher = DDP_LAUNCH_MPI, .master_addr = "",
                      .no_port = 1, .extra_env = extra};
    int n = ddp_plan_launch(p, &l) == 0 ? 0 : -1;
    for (int i = 0; n >= 0 && i < p->nprocs; i++) {
        const ddp_plan_proc_t *q = &p->procs[i];
        if (q->kind != DDP_PLAN_TRAINER || q->rank < 0 || q->rank >= MD_MAX)
            continue;
        for (int v = 0; v < MD_NVARS; v++) {
            const char *val = ddp_env_get(q->env, g_vars[v]);
            snprintf(r[q->rank].v[v], sizeof r[q->rank].v[v], "%s", val ? val : "unset");
        }
        n++;
    }
    ddp_env_free(extra);
    ddp_plan_free(p);
    return n;
}

/* What ddpsim's mpi cluster environment reads from a rank's variables:
 * "WORLD RANK LOCAL NODE ADDRESS" (or its error) into out, the port into
 * *port. */
static void md_reading(const md_rank_t *r, char *out, size_t n, int *port)
{
    ddp_env_t *env = ddp_env_new();
    for (int v = 0; env && v < MD_NVARS; v++)
        if (strcmp(r->v[v], "unset") != 0)
            ddp_env_set(env, g_vars[v], r->v[v]);
    ddp_sys_t *sys = env ? ddp_sys_posix_new(env) : NULL;
    ddp_cluster_t *c = NULL;
    int w = -1, k = -1, l = -1, nd = -1;
    uint16_t p = 0;
    char addr[64] = "";
    if (!sys || ddp_cluster_open(sys, "mpi", &c) != 0 || ddp_cluster_world_size(c, &w) != 0 ||
        ddp_cluster_global_rank(c, &k) != 0 || ddp_cluster_local_rank(c, &l) != 0 ||
        ddp_cluster_node_rank(c, &nd) != 0 ||
        ddp_cluster_main_address(c, addr, sizeof addr) != 0 || ddp_cluster_main_port(c, &p) != 0)
        snprintf(out, n, "error: %s", ddp_err_message());
    else
        snprintf(out, n, "%d %d %d %d %s", w, k, l, nd, addr);
    *port = p;
    if (c)
        ddp_cluster_close(c);
    if (sys)
        ddp_sys_free(sys);
}

static void md_disagree(mpirun_diff_t *d, const md_cfg_t *c, const char *what)
{
    if (d->disagreed++ == 0) {
        char words[160];
        md_words(c, words, sizeof words);
        snprintf(d->first, sizeof d->first, "mpirun %s: %s", words, what);
    }
}

/* Rank k of both: the variables, then ddpsim's readings of each. */
static int md_cmp_rank(const md_rank_t *real, const md_rank_t *sim, char *why, size_t n,
                       int *rport, int *sport)
{
    for (int v = 0; v < MD_NCMP; v++)
        if (strcmp(real->v[v], sim->v[v]) != 0) {
            snprintf(why, n, "%s: %s vs ddpsim's %s", g_vars[v], real->v[v], sim->v[v]);
            return -1;
        }
    char a[200], b[200];
    md_reading(real, a, sizeof a, rport);
    md_reading(sim, b, sizeof b, sport);
    if (strcmp(a, b) != 0) {
        snprintf(why, n, "ddpsim's mpi cluster reads \"%s\" from mpirun's, \"%s\" from its own",
                 a, b);
        return -1;
    }
    return 0;
}

static void md_one(const md_cfg_t *c, mpirun_diff_t *d)
{
    md_rank_t real[MD_MAX], sim[MD_MAX];
    memset(real, 0, sizeof real);
    memset(sim, 0, sizeof sim);
    d->configs++;
    int nr = md_real(c, real), ns = md_ddpsim(c, sim);
    char why[400];
    if (nr < 0) { /* mpirun refused: only for slots (more ranks than cores) */
        d->refused++;
        if (!c->oversubscribe && c->np > 1)
            d->explained++;
        else
            md_disagree(d, c, "mpirun refused it, ddpsim's launcher does not");
        return;
    }
    if (nr != c->np || ns != c->np) {
        snprintf(why, sizeof why, "%d rank(s) from mpirun, %d from ddpsim, -np %d", nr, ns,
                 c->np);
        md_disagree(d, c, why);
        return;
    }
    int rport0 = -1, sport0 = -1;
    for (int k = 0; k < c->np; k++) {
        int rp, sp;
        d->ranks++;
        if (md_cmp_rank(&real[k], &sim[k], why, sizeof why, &rp, &sp) != 0) {
            md_disagree(d, c, why);
            return;
        }
        if ((rport0 >= 0 && rp != rport0) || (sport0 >= 0 && sp != sport0)) {
            md_disagree(d, c, "the ranks derive different main ports");
            return;
        }
        rport0 = rp, sport0 = sp;
    }
}

void mpirun_diff_run(uint64_t seed, long count, mpirun_diff_t *d)
{
    memset(d, 0, sizeof *d);
    ddp_rng_t rng;
    ddp_rng_seed(&rng, seed);
    for (long i = 0; i < count; i++) {
        md_cfg_t c;
        md_gen(&rng, &c);
        md_one(&c, d);
    }
}
