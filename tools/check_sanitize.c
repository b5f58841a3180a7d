/* tools/check_sanitize.c — `ddpsim check --sanitize`: the check runs again
 * in a child with the sanitizer runtimes preloaded, so a plugin built with
 * -fsanitize=address (and undefined) loads and its first report ends the
 * child; this process then reads which run was under way, and turns the
 * report into a finding whose replay command, run once, must end the same
 * way (docs/check.md). ddpsim itself is not instrumented: the plugin's
 * code is what is checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/sys.h"

#define SAN_EXIT 86 /* the children's exit status on a sanitizer report */

/* `cc -print-file-name=NAME`: the runtime's absolute path, or "". */
static void runtime_path(ddp_sys_t *sys, const char *name, const char *tmp, char *out, size_t n)
{
    char arg[64];
    snprintf(arg, sizeof arg, "-print-file-name=%s", name);
    char *const argv[] = {"cc", arg, NULL};
    ddp_spawn_t sp = {.argv = argv, .stdout_path = tmp, .die_with_parent = 1};
    ddp_pid_t pid;
    int st = -1;
    char *data = NULL;
    size_t len = 0;
    out[0] = '\0';
    if (ddp_sys_spawn(sys, &sp, &pid) != 0 ||
        ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S)) != 0 ||
        st != 0 || ddp_sys_read_file(sys, tmp, &data, &len) != 0)
        return;
    data[strcspn(data, "\n")] = '\0';
    if (data[0] == '/')
        snprintf(out, n, "%s", data);
    free(data);
}

/* The environment of a sanitized child: the runtimes preloaded, the
 * reports into DIR/TAG.PID, exit SAN_EXIT at the first. */
static ddp_env_t *san_env(ddp_sys_t *sys, const char *preload, const char *dir, const char *tag)
{
    ddp_env_t *env = ddp_env_clone(ddp_sys_env(sys));
    if (!env || ddp_env_set(env, "LD_PRELOAD", preload) ||
        ddp_env_setf(env, "ASAN_OPTIONS", "detect_leaks=0:halt_on_error=1:exitcode=%d:"
                                          "log_path=%s/%s", SAN_EXIT, dir, tag) ||
        ddp_env_setf(env, "UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1:exitcode=%d:"
                                           "log_path=%s/%s", SAN_EXIT, dir, tag)) {
        ddp_env_free(env);
        ddp_err_set(-12, "out of memory");
        return NULL;
    }
    return env;
}

/* Spawns argv with env and waits, bounded. Its exit status, or -1. */
static int run_child(ddp_sys_t *sys, char *const *argv, ddp_env_t *env, double limit_s,
                     ddp_pid_t *pid)
{
    ddp_spawn_t sp = {.argv = argv, .env = env, .die_with_parent = 1};
    int st = -1;
    if (ddp_sys_spawn(sys, &sp, pid) != 0)
        return -1;
    if (ddp_sys_wait(sys, *pid, &st, ddp_sys_deadline_in(sys, (int64_t)(limit_s * 1e9))) != 0) {
        ddp_sys_kill(sys, *pid, 9);
        ddp_sys_wait(sys, *pid, &st, ddp_sys_deadline_in(sys, 10 * DDP_NS_PER_S));
        return -1;
    }
    return st;
}

/* What the report says happened: its SUMMARY line ("AddressSanitizer:
 * heap-use-after-free FILE:LINE in FUNCTION"), else its first ERROR or
 * "runtime error:" line. */
static void report_head(ddp_sys_t *sys, const char *path, char *out, size_t n)
{
    char *data = NULL;
    size_t len = 0;
    snprintf(out, n, "a sanitizer ended the run (report: %s)", path);
    if (ddp_sys_read_file(sys, path, &data, &len) != 0)
        return;
    char what[400] = "";
    for (char *l = strtok(data, "\n"); l; l = strtok(NULL, "\n")) {
        const char *sum = strstr(l, "SUMMARY: ");
        if (sum)
            snprintf(what, sizeof what, "%s", sum + 9);
        else if (!what[0] && (strstr(l, "ERROR: ") || strstr(l, "runtime error:")))
            snprintf(what, sizeof what, "%s", strstr(l, "ERROR: ") ? strstr(l, "ERROR: ") + 7 : l);
    }
    if (what[0])
        snprintf(out, n, "%s (report: %s)", what, path);
    free(data);
}

typedef struct {
    const char *dir, *lib, *preload;
    char accel[32], path[1100], head[700], replay[2400];
    uint64_t seed;
} san_finding_t;

/* The run under way when the child ended: DIR/sanitizer-current.scn (its
 * accelerator, then the scenario) becomes DIR/check-sanitizer.scn. Not
 * parsed here: its plugin-library line would load the ASan library into
 * this process, where its runtime is not preloaded. */
static int finding_scenario(ddp_sys_t *sys, const char *current, san_finding_t *f)
{
    char *data = NULL;
    size_t len = 0;
    if (ddp_sys_read_file(sys, current, &data, &len) != 0)
        return -1;
    char *nl = strchr(data, '\n'), *seed = nl ? strstr(nl, "\nseed ") : NULL;
    int rc = -1;
    if (seed) {
        *nl = '\0';
        snprintf(f->accel, sizeof f->accel, "%s", data);
        f->seed = strtoull(seed + 6, NULL, 10);
        snprintf(f->path, sizeof f->path, "%s/check-sanitizer.scn", f->dir);
        FILE *o = fopen(f->path, "w");
        rc = o && fputs(nl + 1, o) >= 0 ? 0 : -1;
        if (o && fclose(o) != 0)
            rc = -1;
    }
    free(data);
    return rc;
}

/* Replays the finding under the runtimes: 1 when it ends the same way. */
static int replays(ddp_sys_t *sys, const san_finding_t *f)
{
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)f->seed);
    char *const argv[] = {(char *)ddp_tool_self, "replay", (char *)f->path, "--accelerator",
                          (char *)f->accel, "--seed", seed, "--plugin", (char *)f->lib,
                          NULL};
    ddp_env_t *env = san_env(sys, f->preload, f->dir, "replay-check");
    ddp_pid_t pid;
    int st = env ? run_child(sys, argv, env, 600, &pid) : -1;
    ddp_env_free(env);
    return st == SAN_EXIT;
}

static int report_finding(ddp_sys_t *sys, san_finding_t *f, const char *current, long pid)
{
    char rep[1200];
    snprintf(rep, sizeof rep, "%s/sanitizer.%ld", f->dir, pid);
    report_head(sys, rep, f->head, sizeof f->head);
    if (finding_scenario(sys, current, f) != 0) {
        printf("FINDING [sanitizer]: %s\n  (the run under way could not be read back from "
               "%s)\n", f->head, current);
        return 1;
    }
    snprintf(f->replay, sizeof f->replay,
             "LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0 %s replay %s --accelerator %s "
             "--seed %llu --plugin %s",
             f->preload, ddp_tool_self, f->path, f->accel, (unsigned long long)f->seed, f->lib);
    printf("FINDING [sanitizer] on %s: %s\n  not shrunk: the run as aimed\n  replay: %s\n"
           "  replay check: %s\n",
           f->accel, f->head, f->replay,
           replays(sys, f) ? "reproduces it (the same report ends the replay)"
                           : "DOES NOT reproduce it (a report that depends on more than "
                             "the run: please report it)");
    return 1;
}

int ddp_check_sanitized(ddp_sys_t *sys, int argc, char **argv, const char *dir, double budget_s,
                        const char *lib)
{
    san_finding_t f = {.dir = dir, .lib = lib};
    char tmp[1100], asan[512], ubsan[512], preload[1100], current[1100];
    if (ddp_sys_make_dirs(dir) != 0)
        return -1;
    snprintf(tmp, sizeof tmp, "%s/.cc-print-file-name", dir);
    runtime_path(sys, "libasan.so", tmp, asan, sizeof asan);
    runtime_path(sys, "libubsan.so", tmp, ubsan, sizeof ubsan);
    if (!asan[0])
        return ddp_err_set(DDP_ENOT_FOUND, "--sanitize: `cc -print-file-name=libasan.so` names "
                                           "no ASan runtime (apt-get install gcc)");
    snprintf(preload, sizeof preload, "%s%s%s", asan, ubsan[0] ? ":" : "", ubsan);
    f.preload = preload;
    ddp_env_t *env = san_env(sys, preload, dir, "sanitizer");
    if (!env)
        return -1;
    snprintf(current, sizeof current, "%s/sanitizer-current.scn", dir);
    ddp_env_set(env, "DDPSIM_CHECK_CURRENT", current);
    char **av = calloc((size_t)argc + 2, sizeof *av);
    int st = -1;
    ddp_pid_t pid = 0;
    if (av) {
        av[0] = (char *)ddp_tool_self;
        for (int i = 0; i < argc; i++)
            av[i + 1] = argv[i];
        st = run_child(sys, av, env, (budget_s > 0 ? budget_s : 300) + 3600, &pid);
    }
    free(av);
    ddp_env_free(env);
    return st == SAN_EXIT ? report_finding(sys, &f, current, (long)pid) : st < 0 ? 2 : st;
}
