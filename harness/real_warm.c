/* harness/real_warm.c — the warm start of a real run's Python ranks
 * (docs/real-runs.md, "Warm start"): one fork server per ddpsim process (a
 * zygote, scripts/ddpsim-forkserver.py) imports the heavy modules once and
 * forks each rank of every node of every run into the user's script,
 * instead of a fresh interpreter per rank paying torch's import (seconds
 * of CPU) again. Under --netns a rank joins its node's namespace (setns)
 * after the fork.
 *
 * The runner is a child subreaper while the zygote is up: a rank it forked
 * (and left) becomes the runner's child, so the runner waits for it,
 * signals its group and the guard kills it like any other rank. The
 * protocol (a loopback TCP connection through the sys seam) is in the
 * script's header. The zygote ends at ddp_real_warm_release or with the
 * process (EOF on its connection; its parent-death signal). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/real.h"
#include "real_priv.h"

#define WARM_READY_NS (120 * DDP_NS_PER_S) /* the modules' import */
#define WARM_REPLY_NS (10 * DDP_NS_PER_S)

struct ddp_real_warm {
    ddp_sys_t *sys;
    long owner; /* the process it serves (a forked worker starts its own) */
    int dead;   /* it stopped answering: the next run starts another */
    char key[1600]; /* what it was started for: warm_key */
    int lfd;  /* where it connects, until it has */
    int fd;   /* the connection to the server */
    ddp_pid_t pid;
    int subreaper; /* holds one user of ddp_sys_child_subreaper */
    int64_t until; /* when it must have said ready */
    char what[1200]; /* "PROGRAM SCRIPT", for errors */
    char errpath[320]; /* its output: removed at its end, kept if it never started */
};

/* The program word is a Python (python3, python3.11, a path to one) or
 * scripts/torch-python, and the next word a script (*.py). */
int ddp__real_warm_command(char *const *words, int n)
{
    if (n < 2)
        return 0;
    const char *slash = strrchr(words[0], '/');
    const char *prog = slash ? slash + 1 : words[0];
    size_t l = strlen(words[1]);
    return (!strncmp(prog, "python3", 7) || !strcmp(prog, "torch-python")) &&
           words[1][0] != '-' && l > 3 && !strcmp(words[1] + l - 3, ".py");
}

/* The fork server script: $DDPSIM_FORKSERVER, else scripts/ beside the
 * ddpsim binary's build folder (build/VARIANT/ddpsim), else ./scripts. */
static int server_script(ddp_sys_t *sys, const char *ddpsim, char *buf, size_t n)
{
    const char *set = ddp_env_get(ddp_sys_env(sys), "DDPSIM_FORKSERVER");
    if (set && *set) {
        snprintf(buf, n, "%s", set);
        return access(buf, R_OK) == 0 ? 0 : -ENOENT;
    }
    const char *slash = ddpsim ? strrchr(ddpsim, '/') : NULL;
    if (slash) {
        snprintf(buf, n, "%.*s/../../scripts/ddpsim-forkserver.py", (int)(slash - ddpsim),
                 ddpsim);
        if (access(buf, R_OK) == 0)
            return 0;
    }
    snprintf(buf, n, "scripts/ddpsim-forkserver.py");
    return access(buf, R_OK) == 0 ? 0 : -ENOENT;
}

/* One line (without its '\n') from fd by the deadline: 0, or a negative
 * code. */
static int read_line(ddp_sys_t *sys, int fd, char *buf, size_t n, int64_t deadline)
{
    size_t got = 0;
    while (got + 1 < n) {
        ssize_t r = ddp_sys_recv(sys, fd, buf + got, 1, deadline);
        if (r <= 0)
            return r == 0 ? -ECONNRESET : (int)r;
        if (buf[got] == '\n')
            break;
        got++;
    }
    buf[got] = '\0';
    return 0;
}

static int send_all(ddp_sys_t *sys, int fd, const char *p, size_t n, int64_t deadline)
{
    while (n > 0) {
        ssize_t w = ddp_sys_send(sys, fd, p, n, deadline);
        if (w <= 0)
            return w == 0 ? -EPIPE : (int)w;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* The server's connection (accepted by w->until), unless it exits first:
 * the socket, or a negative code with the error set. */
static int server_accept(ddp_real_warm_t *w)
{
    for (;;) {
        int64_t step = ddp_sys_deadline_in(w->sys, 100 * DDP_NS_PER_MS);
        int fd = ddp_sys_accept(w->sys, w->lfd, NULL, step < w->until ? step : w->until);
        int st = 0;
        if (fd >= 0 || (fd != DDP_ETIMEOUT && fd != -EAGAIN))
            return fd;
        if (ddp_sys_now(w->sys) >= w->until)
            return ddp_err_set(DDP_ETIMEOUT, "the fork server (%s) did not connect within "
                               "%d s", w->what, (int)(WARM_READY_NS / DDP_NS_PER_S));
        if (ddp_sys_wait(w->sys, w->pid, &st, 0) == 0) {
            w->pid = -1; /* reaped */
            return ddp_err_set(DDP_EPEER_LOST, "the fork server (%s) exited with status %d "
                               "before it said ready", w->what, st);
        }
    }
}

/* Waits until the server has imported its modules and said ready (2 min
 * at most): 0, or a negative code with the error set. */
static int warm_ready(ddp_real_warm_t *w)
{
    char line[200] = "";
    int rc = 0;
    w->fd = server_accept(w);
    ddp_sys_close(w->sys, w->lfd);
    w->lfd = -1;
    if (w->fd >= 0 && (rc = read_line(w->sys, w->fd, line, sizeof line, w->until)) == 0 &&
        !strcmp(line, "ready"))
        return 0;
    if (w->fd >= 0)
        rc = ddp_err_set(rc ? rc : -EPROTO, "the fork server (%s) did not say ready "
                         "within %d s (it said \"%s\")", w->what,
                         (int)(WARM_READY_NS / DDP_NS_PER_S), line);
    ddp_err_hint("its output is in %s; --cold starts the ranks without it", w->errpath);
    w->errpath[0] = '\0'; /* kept: the error names it */
    return w->fd >= 0 ? rc : w->fd;
}

/* Spawns the server: argv is setsid PROGRAM SCRIPT HOST PORT RUNNER
 * MODULES. */
static int server_spawn(ddp_real_warm_t *w, char **argv, const ddp_env_t *env)
{
    ddp_spawn_t sp = {.argv = argv, .env = env, .name = "forkserver",
                      .stdout_path = w->errpath, .stderr_path = w->errpath,
                      .die_with_parent = 1};
    snprintf(w->what, sizeof w->what, "%s %s", argv[1], argv[2]);
    w->until = ddp_sys_deadline_in(w->sys, WARM_READY_NS);
    return ddp_sys_spawn(w->sys, &sp, &w->pid);
}

static void warm_stop(ddp_real_warm_t *w);

/* Starts a server for program importing modules with env: 0 and *out (it
 * imports meanwhile), or a negative code with the error set. */
static int warm_start(ddp_sys_t *sys, const ddp_real_warm_where_t *at, const char *program,
                      const char *modules, const ddp_env_t *env, ddp_real_warm_t **out)
{
    char script[1024], port[16], runner[24];
    if (server_script(sys, at->ddpsim, script, sizeof script))
        return ddp_err_set(-ENOENT, "no fork server script at %s (set DDPSIM_FORKSERVER "
                           "to scripts/ddpsim-forkserver.py, or run with --cold)", script);
    ddp_real_warm_t *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    *w = (ddp_real_warm_t){.sys = sys, .fd = -1, .pid = -1, .owner = ddp_sys_pid()};
    snprintf(w->errpath, sizeof w->errpath, "%s", at->errpath);
    ddp_addr_t a, got;
    ddp_addr_parse("127.0.0.1", 0, &a);
    int rc = w->lfd = ddp_sys_listen(sys, &a, 1);
    if (rc >= 0 && (rc = ddp_sys_local_addr(sys, w->lfd, &got)) == 0 &&
        (rc = ddp_sys_child_subreaper(1)) == 0) {
        w->subreaper = 1;
        snprintf(port, sizeof port, "%u", (unsigned)got.port);
        snprintf(runner, sizeof runner, "%ld", ddp_sys_pid());
        char *argv[] = {"setsid", (char *)program, script, "127.0.0.1", port, runner,
                        (char *)modules, NULL};
        rc = server_spawn(w, argv, env);
    }
    if (rc < 0) {
        warm_stop(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* The request's bytes: spawn, netns, out, err, argc, argv..., NAME=VALUE...,
 * "". */
typedef struct req {
    char *p;
    size_t len, cap;
} req_t;

static int field(req_t *r, const char *s)
{
    size_t l = strlen(s) + 1;
    if (r->len + l + 1 > r->cap) {
        size_t cap = (r->len + l + 1) * 2;
        char *np = realloc(r->p, cap);
        if (!np)
            return -ENOMEM;
        r->p = np, r->cap = cap;
    }
    memcpy(r->p + r->len, s, l);
    r->len += l;
    return 0;
}

static int env_field(void *arg, const char *key, const char *value)
{
    req_t *r = arg;
    size_t l = strlen(key) + strlen(value) + 2;
    char *kv = malloc(l);
    if (!kv)
        return -ENOMEM;
    snprintf(kv, l, "%s=%s", key, value);
    int rc = field(r, kv);
    free(kv);
    return rc;
}

static int request(req_t *r, const char *netns, char *const *argv, const ddp_env_t *env,
                   const char *out, const char *err)
{
    int argc = 0, rc;
    while (argv[argc])
        argc++;
    char n[16];
    snprintf(n, sizeof n, "%d", argc);
    if ((rc = field(r, "spawn")) || (rc = field(r, netns)) || (rc = field(r, out)) ||
        (rc = field(r, err)) || (rc = field(r, n)))
        return rc;
    for (int i = 0; i < argc; i++)
        if ((rc = field(r, argv[i])))
            return rc;
    if ((rc = ddp_env_foreach(env, env_field, r)))
        return rc;
    r->p[r->len++] = '\0'; /* the empty field: the end */
    return 0;
}

int ddp__real_warm_spawn(ddp_real_warm_t *w, const char *ns, char *const *argv,
                         const ddp_env_t *env, const char *out, const char *err, ddp_pid_t *pid)
{
    req_t r = {0};
    char netns[300] = "-";
    if (ns && *ns)
        snprintf(netns, sizeof netns, "/var/run/netns/%s", ns);
    int rc = request(&r, netns, argv, env, out, err);
    int64_t until = ddp_sys_deadline_in(w->sys, WARM_REPLY_NS);
    char line[300] = "";
    if (!rc)
        rc = send_all(w->sys, w->fd, r.p, r.len, until);
    free(r.p);
    if (!rc)
        rc = read_line(w->sys, w->fd, line, sizeof line, until);
    if (rc) {
        char why[200];
        snprintf(why, sizeof why, "%s", ddp_err_message());
        w->dead = 1;
        return ddp_err_set(rc, "the fork server (pid %ld) did not answer a spawn of %s: %s",
                           (long)w->pid, argv[1], why);
    }
    long v = 0;
    if (strncmp(line, "ok ", 3) || ddp_env_parse_long(line + 3, &v) || v <= 1)
        return ddp_err_set(-EPROTO, "the fork server could not start %s: %s", argv[1],
                           line);
    *pid = (ddp_pid_t)v;
    return 0;
}

static void warm_stop(ddp_real_warm_t *w)
{
    if (!w)
        return;
    if (w->lfd >= 0)
        ddp_sys_close(w->sys, w->lfd);
    if (w->fd >= 0)
        ddp_sys_close(w->sys, w->fd); /* its EOF: the server exits */
    if (w->pid > 0) {
        int st;
        if (ddp_sys_wait(w->sys, w->pid, &st, ddp_sys_deadline_in(w->sys, 5 * DDP_NS_PER_S))) {
            ddp_sys_kill(w->sys, w->pid, 9);
            ddp_sys_wait(w->sys, w->pid, &st, ddp_sys_deadline_in(w->sys, 5 * DDP_NS_PER_S));
        }
    }
    if (w->subreaper)
        ddp_sys_child_subreaper(0);
    if (w->errpath[0])
        remove(w->errpath);
    free(w);
}

/* The one zygote of this process (NULL: none). */
static ddp_real_warm_t *g_zygote;

/* What a zygote is started for, and reused while it stays the same: the
 * program, the modules, and what decides which Python and which modules
 * it finds (the rest of env is each rank's own). */
static void warm_key(const char *program, const char *modules, const ddp_env_t *env,
                     char *buf, size_t n)
{
    const char *pp = ddp_env_get(env, "PYTHONPATH"), *tp = ddp_env_get(env,
                                                                       "DDPSIM_TORCH_PYTHON");
    snprintf(buf, n, "%s\n%s\n%s\n%s", program, modules, pp ? pp : "", tp ? tp : "");
}

int ddp__real_warm_get(ddp_sys_t *sys, const ddp_real_warm_where_t *at, const char *program,
                       const char *modules, const ddp_env_t *env, ddp_real_warm_t **out)
{
    char key[sizeof g_zygote->key];
    warm_key(program, modules, env, key, sizeof key);
    if (g_zygote && g_zygote->owner != ddp_sys_pid())
        g_zygote = NULL; /* the parent's, before a fork: not ours to use or stop */
    if (g_zygote && (g_zygote->dead || strcmp(g_zygote->key, key)))
        ddp_real_warm_release();
    if (!g_zygote) {
        ddp_real_warm_t *w = NULL;
        int rc = warm_start(sys, at, program, modules, env, &w);
        if (rc == 0 && (rc = warm_ready(w)) != 0)
            warm_stop(w);
        if (rc)
            return rc;
        snprintf(w->key, sizeof w->key, "%s", key);
        g_zygote = w;
    }
    g_zygote->sys = sys;
    *out = g_zygote;
    return 0;
}

void ddp_real_warm_release(void)
{
    if (g_zygote && g_zygote->owner == ddp_sys_pid())
        warm_stop(g_zygote);
    g_zygote = NULL;
}
