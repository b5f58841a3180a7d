/* tests/launch_diff.c — see launch_diff.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness/worker_env.h"
#include "../tools/cmds.h"
#include "ddp/env.h"
#include "ddp/sys.h"
#include "launch_diff.h"

#define LD_MAX_ARGS 64
#define LD_MAX_WORKERS 128

typedef struct cfg {
    char backend[16];
    long grank, gworld, restart;
    char *argv[LD_MAX_ARGS + 4]; /* "launch", the arguments, "--", "prog", NULL */
    int argc;
    ddp_env_t *env;                /* the launcher's */
    char rejected[400];            /* torch's words, "" when it accepted */
    ddp_env_t *w[LD_MAX_WORKERS];  /* torch's workers */
    int nw;
    char line[8192];               /* the C line, owning argv's text */
} cfg_t;

static const char *const g_why[LAUNCH_NWHY] = {
    "static: TORCHELASTIC_USE_AGENT_STORE", "over 64 workers a node", "--master_port 0",
    "Python int() forms"};

const char *launch_why_name(int why)
{
    return why >= 0 && why < LAUNCH_NWHY ? g_why[why] : "?";
}

/* The recording sys: spawn keeps the worker's environment, the worker
 * exits 0 at once. */
static struct {
    ddp_env_t *env[LD_MAX_WORKERS];
    int n;
} g_rec;
static ddp_sys_ops_t g_rec_ops;

static int rec_spawn(ddp_sys_t *sys, const ddp_spawn_t *what, ddp_pid_t *pid)
{
    (void)sys;
    if (g_rec.n >= LD_MAX_WORKERS || !(g_rec.env[g_rec.n] = ddp_env_clone(what->env)))
        return -ENOMEM;
    *pid = ++g_rec.n;
    return 0;
}

static int rec_wait(ddp_sys_t *sys, ddp_pid_t pid, int *status, int64_t deadline)
{
    (void)sys, (void)pid, (void)deadline;
    *status = 0;
    return 0;
}

static int rec_kill(ddp_sys_t *sys, ddp_pid_t pid, int sig)
{
    (void)sys, (void)pid, (void)sig;
    return 0;
}

static void rec_clear(void)
{
    for (int i = 0; i < g_rec.n; i++)
        ddp_env_free(g_rec.env[i]);
    g_rec.n = 0;
}

ddp_sys_t *launch_diff_recording_sys(ddp_env_t *env)
{
    ddp_sys_t *sys = ddp_sys_posix_new(env);
    if (!sys)
        return NULL;
    g_rec_ops = *sys->ops;
    g_rec_ops.spawn = rec_spawn;
    g_rec_ops.wait = rec_wait;
    g_rec_ops.kill = rec_kill;
    sys->ops = &g_rec_ops;
    return sys;
}

ddp_env_t *const *launch_diff_recorded(int *n)
{
    *n = g_rec.n;
    return g_rec.env;
}

void launch_diff_clear(void)
{
    rec_clear();
}

/* `ddpsim launch ARGS -- prog` under env, in-process, its stderr muted:
 * its exit status; the workers' environments in g_rec. */
static int run_launch(cfg_t *c)
{
    ddp_sys_t *sys = launch_diff_recording_sys(ddp_env_clone(c->env));
    if (!sys)
        return -ENOMEM;
    char *argv[LD_MAX_ARGS + 4];
    memcpy(argv, c->argv, sizeof argv);
    argv[c->argc] = "--";
    argv[c->argc + 1] = "prog";
    argv[c->argc + 2] = NULL;
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (null >= 0)
        dup2(null, 2);
    int rc = ddp_cmd_launch(sys, c->argc + 2, argv);
    fflush(stderr);
    if (saved >= 0)
        dup2(saved, 2), close(saved);
    if (null >= 0)
        close(null);
    ddp_sys_free(sys);
    return rc;
}

static const char *get(const ddp_env_t *e, const char *k)
{
    const char *v = ddp_env_get(e, k);
    return v ? v : "";
}

/* The elastic agent's workers for torch's round (c10d): the place each
 * torch worker had, through ddpsim's worker environment. */
static int run_elastic(const cfg_t *c)
{
    for (int l = 0; l < c->nw; l++) {
        const ddp_env_t *t = c->w[l];
        ddp_worker_place_t p = {
            .local_rank = l, .nproc = c->nw, .group_rank = c->grank, .group_world = c->gworld,
            .master_addr = get(t, "MASTER_ADDR"), .master_port = atol(get(t, "MASTER_PORT")),
            .restarts = c->restart, .max_restarts = atol(get(t, "TORCHELASTIC_MAX_RESTARTS")),
            .run_id = get(t, "TORCHELASTIC_RUN_ID")};
        ddp_env_t *e = ddp_env_clone(c->env);
        if (!e || ddp_worker_env(e, &p) != 0 || g_rec.n >= LD_MAX_WORKERS) {
            ddp_env_free(e);
            return -ENOMEM;
        }
        g_rec.env[g_rec.n++] = e;
    }
    return 0;
}

static int is_contract(const char *k)
{
    static const char *const names[] = {
        "RANK",        "LOCAL_RANK",  "WORLD_SIZE",      "LOCAL_WORLD_SIZE",
        "GROUP_RANK",  "GROUP_WORLD_SIZE", "ROLE_RANK",  "ROLE_WORLD_SIZE",
        "ROLE_NAME",   "MASTER_ADDR", "MASTER_PORT",     "NCCL_ASYNC_ERROR_HANDLING",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(k, names[i]) == 0)
            return 1;
    return strncmp(k, "TORCHELASTIC_", 13) == 0;
}

typedef struct {
    const ddp_env_t *other;
    const cfg_t *c;
    char *why;
    size_t n;
    int explained;
} cmp_t;

/* One contract variable of one side against the other's. */
static int cmp_one(void *arg, const char *k, const char *v)
{
    cmp_t *m = arg;
    if (!is_contract(k))
        return 0;
    const char *o = ddp_env_get(m->other, k);
    if (o && strcmp(o, v) == 0)
        return 0;
    if (strcmp(k, "TORCHELASTIC_USE_AGENT_STORE") == 0 &&
        strcmp(m->c->backend, "static") == 0) {
        m->explained = 1;
        return 0;
    }
    snprintf(m->why, m->n, "%s: %s vs %s", k, v, o ? o : "(unset)");
    return 1;
}

/* Worker l: 0 same, 1 explained, -1 not (why). */
static int cmp_worker(const cfg_t *c, int l, char *why, size_t n)
{
    cmp_t a = {g_rec.env[l], c, why, n, 0}, b = {c->w[l], c, why, n, 0};
    /* torch's value first in the words */
    if (ddp_env_foreach(c->w[l], cmp_one, &a) != 0)
        return -1;
    if (ddp_env_foreach(g_rec.env[l], cmp_one, &b) != 0) {
        char t[400];
        snprintf(t, sizeof t, "%s", why); /* ddpsim's value came first: say so */
        snprintf(why, n, "ddpsim's %s", t);
        return -1;
    }
    return a.explained || b.explained;
}

/* Whether a numeric option's text (argument or PET_ variable) is one only
 * Python's int() reads: with white space or a "_" digit separator. */
static int py_int_form(const cfg_t *c)
{
    static const char *const opts[] = {"--nproc_per_node", "--nnodes", "--node_rank",
                                       "--master_port"};
    static const char *const vars[] = {"PET_NPROC_PER_NODE", "PET_NNODES", "PET_NODE_RANK",
                                       "PET_MASTER_PORT"};
    for (size_t k = 0; k < 4; k++) {
        const char *v = ddp_env_get(c->env, vars[k]);
        if (v && strpbrk(v, " _"))
            return 1;
        size_t n = strlen(opts[k]);
        for (int i = 1; i < c->argc; i++) {
            const char *a = c->argv[i];
            if (strncmp(a, opts[k], n) != 0 || (a[n] != '=' && a[n] != '\0'))
                continue;
            const char *val = a[n] == '=' ? a + n + 1 : i + 1 < c->argc ? c->argv[i + 1] : "";
            if (strpbrk(val, " _"))
                return 1;
        }
    }
    return 0;
}

/* Why ddpsim refuses what torch accepted, when docs/fidelity.md says. */
static int refusal_why(const cfg_t *c)
{
    if (atol(get(c->w[0], "LOCAL_WORLD_SIZE")) > 64)
        return LAUNCH_WHY_NPROC_MAX;
    if (strcmp(get(c->w[0], "MASTER_PORT"), "0") == 0)
        return LAUNCH_WHY_PORT_0;
    return py_int_form(c) ? LAUNCH_WHY_PY_INT : -1;
}

typedef struct {
    char *buf;
    size_t n, at;
} words_t;

static int word_var(void *arg, const char *k, const char *v)
{
    words_t *w = arg;
    if (w->at < w->n)
        w->at += (size_t)snprintf(w->buf + w->at, w->n - w->at, "%s='%s' ", k, v);
    return 0;
}

/* The configuration in words: [backend] VAR='V'... 'ARG'... */
static void cfg_words(const cfg_t *c, char *buf, size_t n)
{
    words_t w = {buf, n, (size_t)snprintf(buf, n, "[%s] ", c->backend)};
    ddp_env_foreach(c->env, word_var, &w);
    for (int i = 1; i < c->argc && w.at < n; i++)
        w.at += (size_t)snprintf(buf + w.at, n - w.at, "'%s'%s", c->argv[i],
                                 i + 1 < c->argc ? " " : "");
}

static void disagree(const cfg_t *c, launch_diff_t *d, const char *fmt, const char *a)
{
    if (d->disagreed++ == 0) {
        char words[300], what[300];
        cfg_words(c, words, sizeof words);
        snprintf(what, sizeof what, fmt, a);
        snprintf(d->first, sizeof d->first, "%s: %s", words, what);
    }
}

/* Both accepted: the workers, one by one. */
static void judge_workers(const cfg_t *c, launch_diff_t *d)
{
    char why[400];
    if (g_rec.n != c->nw) {
        snprintf(why, sizeof why, "%d worker(s) vs ddpsim's %d", c->nw, g_rec.n);
        disagree(c, d, "%s", why);
        return;
    }
    int explained = 0;
    for (int l = 0; l < c->nw; l++) {
        d->workers++;
        int r = cmp_worker(c, l, why, sizeof why);
        if (r < 0) {
            char at[440];
            snprintf(at, sizeof at, "local worker %d: %s", l, why);
            disagree(c, d, "%s", at);
            return;
        }
        explained |= r;
    }
    if (explained)
        d->explained++, d->why[LAUNCH_WHY_AGENT_STORE]++;
}

static void judge(cfg_t *c, launch_diff_t *d)
{
    d->configs++;
    d->torch_rejected += c->rejected[0] != 0;
    rec_clear();
    int is_static = strcmp(c->backend, "static") == 0;
    if (!is_static && c->rejected[0])
        return; /* the elastic agent's own options are a scenario's (not compared) */
    int rc = is_static ? run_launch(c) : run_elastic(c);
    if (c->rejected[0] && rc == 0)
        disagree(c, d, "torch refuses it (%s), ddpsim launch does not", c->rejected);
    else if (!c->rejected[0] && rc != 0) {
        int why = c->nw > 0 ? refusal_why(c) : -1;
        if (why < 0)
            disagree(c, d, "torch accepts it, %s refuses it",
                     is_static ? "ddpsim launch" : "the elastic agent's worker environment");
        else
            d->explained++, d->why[why]++;
    } else if (!c->rejected[0])
        judge_workers(c, d);
    rec_clear();
}

static void cfg_free(cfg_t *c)
{
    ddp_env_free(c->env);
    for (int i = 0; i < c->nw; i++)
        ddp_env_free(c->w[i]);
    memset(c, 0, sizeof *c);
}

/* "K=V" fields (tab-separated, possibly empty) into a new environment. */
static ddp_env_t *read_vars(char *rest)
{
    ddp_env_t *e = ddp_env_new();
    char *f;
    while (e && rest && (f = strsep(&rest, "\t")) != NULL) {
        char *eq = strchr(f, '=');
        if (eq) {
            *eq = '\0';
            ddp_env_set(e, f, eq + 1);
        }
    }
    return e;
}

/* The C line: backend, group rank, group world, restart, arguments. */
static int read_cfg(cfg_t *c, const char *line)
{
    snprintf(c->line, sizeof c->line, "%s", line);
    char *rest = c->line + 2, *f[4];
    for (int i = 0; i < 4; i++)
        if (!(f[i] = strsep(&rest, "\t")))
            return -1;
    snprintf(c->backend, sizeof c->backend, "%s", f[0]);
    c->grank = atol(f[1]), c->gworld = atol(f[2]), c->restart = atol(f[3]);
    c->argv[c->argc++] = "launch";
    c->env = ddp_env_new();
    while (rest && c->argc < LD_MAX_ARGS)
        c->argv[c->argc++] = strsep(&rest, "\t");
    return 0;
}

/* One line of a block into c (a C line judges the block before it). */
static int read_line(cfg_t *c, char *line, launch_diff_t *d)
{
    line[strcspn(line, "\n")] = '\0';
    char kind = line[0], *rest = line[1] == '\t' ? line + 2 : NULL;
    if (kind != 'C' && c->argc == 0)
        return -1;
    if (kind == 'C') {
        if (c->argc)
            judge(c, d);
        cfg_free(c);
        return read_cfg(c, line);
    }
    if (kind == 'E') {
        ddp_env_free(c->env);
        return (c->env = read_vars(rest)) ? 0 : -1;
    }
    if (kind == 'X') {
        snprintf(c->rejected, sizeof c->rejected, "%s", rest ? rest : "?");
        return 0;
    }
    if (kind == 'W' && c->nw < LD_MAX_WORKERS)
        return (c->w[c->nw++] = read_vars(rest)) ? 0 : -1;
    return -1;
}

int launch_diff_read(FILE *f, launch_diff_t *d)
{
    memset(d, 0, sizeof *d);
    static cfg_t c; /* large: not on the stack */
    char *line = NULL;
    size_t cap = 0;
    long no = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        no++;
        if (read_line(&c, line, d) != 0) {
            snprintf(d->first, sizeof d->first, "line %ld is not the oracle's: \"%.80s\"",
                     no, line);
            rc = -1;
        }
    }
    if (rc == 0 && c.argc)
        judge(&c, d);
    cfg_free(&c);
    free(line);
    return rc;
}
