/* tests/util.c — helpers shared by the suites. */
#include "test.h"

#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/store.h"
#include "ddp/sys.h"

struct ddp_sys *ddp_test_sys(void) { return ddp_sys_posix_new(ddp_env_new()); }

long long ddp_test_deadline_ms(struct ddp_sys *sys, long long ms)
{
    return ddp_sys_deadline_in(sys, ms * DDP_NS_PER_MS);
}

/* The level a quiet suite replaced (suites run one at a time). */
static ddp_log_level_t g_saved_level;
static int g_quieted;

int ddp_test_suite_sys_init(struct ddp_sys **sys, int quiet)
{
    if (quiet) {
        g_saved_level = ddp_log_level();
        g_quieted = 1;
        ddp_log_set_level(DDP_LOG_ERROR);
    }
    *sys = ddp_test_sys();
    return *sys ? 0 : -1;
}

/* Servers started by ddp_test_server_start and not ended yet: a test that
 * a FATAL assert ended left its server's thread running on the suite's
 * sys, which the suite's cleanup then freed under it (a heap-use-after-free
 * that aborted a whole ASan `make test` at load). The cleanup ends them. */
static ddp_store_server_t *g_running[16];

static void running_track(ddp_store_server_t *srv, int on)
{
    for (size_t i = 0; i < sizeof g_running / sizeof g_running[0]; i++)
        if (on ? !g_running[i] : g_running[i] == srv) {
            g_running[i] = on ? srv : NULL;
            return;
        }
}

static void running_end_all(void)
{
    for (size_t i = 0; i < sizeof g_running / sizeof g_running[0]; i++)
        if (g_running[i]) {
            fprintf(stderr, "  (a store server left running by a failed test: ended)\n");
            ddp_test_server_end(g_running[i]);
        }
}

int ddp_test_suite_sys_cleanup(struct ddp_sys **sys)
{
    running_end_all();
    ddp_sys_free(*sys);
    *sys = NULL;
    if (g_quieted) {
        ddp_log_set_level(g_saved_level);
        g_quieted = 0;
    }
    return 0;
}

ddp_store_server_t *ddp_test_server_start(ddp_sys_t *sys,
                                          const ddp_store_server_opts_t *o)
{
    ddp_store_server_t *srv = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_new(sys, o, &srv), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_start_thread(srv), 0);
    running_track(srv, 1);
    return srv;
}

ddp_store_server_t *ddp_test_server_start_loopback(ddp_sys_t *sys,
                                                   unsigned short port)
{
    ddp_store_server_opts_t o = {.host = "127.0.0.1", .port = port};
    return ddp_test_server_start(sys, &o);
}

void ddp_test_server_end(ddp_store_server_t *srv)
{
    running_track(srv, 0);
    ddp_store_server_join_thread(srv);
    ddp_store_server_free(srv);
}

const char *ddp_test_ddpsim_bin(char *buf, size_t n)
{
    struct ddp_sys *sys = ddp_sys_posix_new(NULL);
    const char *v = sys ? ddp_env_get(ddp_sys_env(sys), "DDPSIM") : NULL;
    if (v)
        snprintf(buf, n, "%s", v);
    ddp_sys_free(sys);
    return v ? buf : NULL;
}

const char *ddp_test_need_ddpsim(char *buf, size_t n)
{
    if (ddp_test_ddpsim_bin(buf, n))
        return buf;
    ddp_test_skip(DDP_TEST_NO_DDPSIM);
    return NULL;
}

int ddp_test_have_ddpsim(void)
{
    char bin[400];
    return ddp_test_need_ddpsim(bin, sizeof bin) != NULL;
}

int ddp_test_shell_read(const char *cmd, char *out, size_t n)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t len = fread(out, 1, n - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int ddp_test_ddpsim(const char *args, int with_stderr, char *out, size_t n)
{
    char bin[400], cmd[2048];
    out[0] = '\0';
    if (!ddp_test_ddpsim_bin(bin, sizeof bin))
        return -1;
    snprintf(cmd, sizeof cmd, "%s %s %s", bin, args,
             with_stderr ? "2>&1" : "2>/dev/null");
    return ddp_test_shell_read(cmd, out, n);
}

/* How much slower than a plain build this one runs processes: ASan about
 * 3x, TSan about 5x (measured on the loaded 2-core host of issue 34, where
 * fixed limits failed with no sanitizer report). */
static double build_slowdown(void)
{
#if defined(__SANITIZE_THREAD__)
    return 5;
#elif defined(__SANITIZE_ADDRESS__)
    return 3;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return 5;
#elif __has_feature(address_sanitizer)
    return 3;
#else
    return 1;
#endif
#else
    return 1;
#endif
}

int ddp_test_wall_s_for(int base_s, const char *knob, double load_per_cpu)
{
    double k = 1;
    if (knob && *knob) {
        char *end;
        double v = strtod(knob, &end);
        if (!*end && v > 0 && v <= 1000)
            k = v;
    }
    double busy = load_per_cpu > 1 ? load_per_cpu : 1; /* 15 at load 30 on 2 CPUs */
    double s = base_s * build_slowdown() * k * (busy < 20 ? busy : 20);
    return s < 1 ? 1 : s > 86400 ? 86400 : (int)(s + 0.999);
}

/* The 1-minute load average per online CPU (0 where unknown). */
static double load_per_cpu(void)
{
    double avg[1];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return getloadavg(avg, 1) == 1 && cpus > 0 ? avg[0] / (double)cpus : 0;
}

int ddp_test_wall_s(int base_s)
{
    struct ddp_sys *sys = ddp_sys_posix_new(NULL);
    const char *v = sys ? ddp_env_get(ddp_sys_env(sys), "DDP_TEST_WALL_SCALE") : NULL;
    int s = ddp_test_wall_s_for(base_s, v, load_per_cpu());
    ddp_sys_free(sys);
    return s;
}

long long ddp_test_bound(struct ddp_sys *sys, int base_s)
{
    return ddp_test_deadline_ms(sys, ddp_test_wall_s(base_s) * 1000LL);
}

int ddp_test_ddpsim_io_within(int limit_s, const char *env, const char *args,
                              int want_stderr, char *out, size_t n)
{
    char bin[400], cmd[2400];
    out[0] = '\0';
    if (!ddp_test_ddpsim_bin(bin, sizeof bin))
        return -1;
    limit_s = ddp_test_wall_s(limit_s);
    snprintf(cmd, sizeof cmd, "timeout -k 5 %d env %s %s %s %s", limit_s,
             env ? env : "", bin, args, want_stderr ? "2>&1 >/dev/null" : "2>/dev/null");
    return ddp_test_shell_read(cmd, out, n);
}

int ddp_test_ddpsim_io(const char *env, const char *args, int want_stderr, char *out,
                       size_t n)
{
    return ddp_test_ddpsim_io_within(DDP_TEST_DDPSIM_LIMIT_S, env, args, want_stderr, out, n);
}

void ddp_test_leak_store_connection(ddp_ctx_t *ctx, ddp_cluster_t *env)
{
    char addr[64];
    uint16_t port = 0;
    ddp_cluster_main_address(env, addr, sizeof addr);
    ddp_cluster_main_port(env, &port);
    (void)ddp_sys_connect_host(ctx->sys, addr, port, ctx->deadline); /* never closed */
}

ddp_scenario_t *ddp_test_scenario(const char *text)
{
    char err[1024];
    ddp_scenario_t *s = NULL;
    if (ddp_scenario_parse(text, "inline.scn", NULL, &s, err, sizeof err) != 0)
        printf("\n  parse: %s\n", err);
    return s;
}

int ddp_test_cmd_inproc(int (*cmd)(struct ddp_sys *, int, char **), const char *args,
                        char *out, size_t n)
{
    out[0] = '\0';
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[1]);
        char copy[2048], *argv[64];
        int argc = 0;
        snprintf(copy, sizeof copy, "%s", args);
        for (char *w = strtok(copy, " "); w && argc < 63; w = strtok(NULL, " "))
            argv[argc++] = w;
        argv[argc] = NULL;
        ddp_sys_t *sys = ddp_sys_posix_new(NULL);
        int rc = sys ? cmd(sys, argc, argv) : 1;
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    close(fds[1]);
    size_t len = 0;
    for (ssize_t r; (r = read(fds[0], out + len, n - 1 - len)) != 0;) {
        if (r < 0)
            break;
        len += (size_t)r;
        if (len + 1 >= n) { /* full: drain the rest */
            char sink[4096];
            while (read(fds[0], sink, sizeof sink) > 0) {
            }
            break;
        }
    }
    out[len] = '\0';
    close(fds[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

int ddp_test_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

/* This program again with args (quoted by the caller) and env added. */
static int run_self_args(const char *env, const char *args, char *out, size_t n)
{
    char self[512], cmd[1400];
    out[0] = '\0';
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "timeout -k 5 %d env %s '%s' %s 2>&1",
             ddp_test_wall_s(DDP_TEST_DDPSIM_LIMIT_S), env ? env : "", self, args);
    return ddp_test_shell_read(cmd, out, n);
}

int ddp_test_run_self(const char *env, const char *selection, char *out, size_t n)
{
    char args[600];
    snprintf(args, sizeof args, "'%s'", selection);
    return run_self_args(env, args, out, n);
}

int ddp_test_run_self_junit(const char *env, const char *junit, const char *selection,
                            char *out, size_t n)
{
    char args[900];
    snprintf(args, sizeof args, "--junit '%s' '%s'", junit, selection);
    return run_self_args(env, args, out, n);
}

int ddp_test_connect_published(struct ddp_sys *sys, struct ddp_store *st, const char *key,
                               long long deadline)
{
    ddp_buf_t b = {0};
    int rc = ddp_store_get(st, key, &b, deadline);
    if (rc)
        return rc;
    char text[64] = "";
    memcpy(text, b.data, b.len < sizeof text - 1 ? b.len : sizeof text - 1);
    ddp_buf_free(&b);
    char *colon = strrchr(text, ':');
    if (!colon)
        return DDP_EPROTOCOL;
    *colon = '\0';
    return ddp_sys_connect_host(sys, text, (uint16_t)atoi(colon + 1), deadline);
}

const char *ddp_test_read_file(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t k = f ? fread(buf, 1, n - 1, f) : 0;
    buf[k] = '\0';
    if (f)
        fclose(f);
    return buf;
}

int ddp_test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bad = fputs(text, f) < 0;
    return fclose(f) || bad ? -1 : 0;
}

const char *ddp_test_tmpdir(char *dir, size_t n, const char *tag)
{
    snprintf(dir, n, "/tmp/ddpsim-%s-XXXXXX", tag);
    return mkdtemp(dir);
}

const char *ddp_test_in(char *buf, size_t n, const char *dir, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

int ddp_test_mkdev(const char *path)
{
    /* /dev/full's numbers: a write there fails, a rename over it would
     * replace it. Made in the test's own folder, never in /dev. */
    if (mknod(path, S_IFCHR | 0600, makedev(1, 7)) == 0)
        return 1;
    return mkfifo(path, 0600) == 0 ? 0 : -1;
}

const char *ddp_test_plugin_lib(char *buf, size_t n, const char *name)
{
    ddp_sys_t *sys = ddp_sys_posix_new(NULL);
    const char *dir = sys ? ddp_env_get(ddp_sys_env(sys), "DDP_TEST_PLUGIN_DIR") : NULL;
    char self[1024] = "";
    if (!dir) { /* outside make test: the build folder of this program */
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        self[len > 0 ? len : 0] = '\0';
        snprintf(buf, n, "%s/test_plugins/%s", dirname(self), name);
    } else {
        snprintf(buf, n, "%s/%s", dir, name);
    }
    ddp_sys_free(sys);
    return buf;
}

void ddp_test_diff_verdict(const char *family, long tried, long accepted, long disagreed,
                           const char *first)
{
    if (disagreed)
        printf("\n  %s: %ld of %ld disagree; first: %s\n", family, disagreed, tried, first);
    CU_ASSERT_EQUAL(disagreed, 0);
    CU_ASSERT_TRUE(accepted > 20 && accepted < tried - 20); /* both sides exercised */
}
