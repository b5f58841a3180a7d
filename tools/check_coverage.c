/* tools/check_coverage.c — `ddpsim check --coverage`: the coverage of the
 * user's plugin per accelerator, and the parity gate over it, by the
 * machinery of `make coverage PLUGIN=` (coverage/run.sh, docs/coverage.md
 * § 8), run from the ddpsim source tree this command was built in. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/sys.h"

/* The source tree of this ddpsim: the first folder above the command's
 * real path that holds coverage/run.sh. 0, or -1. */
static int source_root(char *root, size_t n)
{
    char path[PATH_MAX];
    if (!realpath(ddp_tool_self, path))
        return -1;
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(path, '/');
        if (!slash || slash == path)
            return -1;
        *slash = '\0';
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/coverage/run.sh", path);
        if (access(probe, R_OK) == 0) {
            snprintf(root, n, "%s", path);
            return 0;
        }
    }
    return -1;
}

/* The last lines of the log: the parity tool's summary and verdict. */
static void print_tail(ddp_sys_t *sys, const char *log, int lines)
{
    char *data = NULL;
    size_t len = 0;
    if (ddp_sys_read_file(sys, log, &data, &len) != 0)
        return;
    const char *p = data + len;
    for (int k = 0; p > data && k <= lines; p--)
        k += p[-1] == '\n';
    fputs(p, stdout);
    free(data);
}

int ddp_check_coverage(ddp_sys_t *sys, const char *lib, const char *dir)
{
    char root[PATH_MAX], plugin[PATH_MAX + 16], log[PATH_MAX];
    if (source_root(root, sizeof root) != 0)
        return ddp_err_set(DDP_ENOT_FOUND, "--coverage runs `make coverage PLUGIN=` of the "
                                           "ddpsim source tree, and %s is not in one (no "
                                           "coverage/run.sh above it)",
                           ddp_tool_self);
    if (ddp_sys_make_dirs(dir) != 0)
        return -1;
    snprintf(plugin, sizeof plugin, "PLUGIN=%s", lib);
    snprintf(log, sizeof log, "%s/coverage.log", dir);
    char *const argv[] = {"make", "-C", root, "coverage", plugin, NULL};
    ddp_spawn_t sp = {.argv = argv, .stdout_path = log, .stderr_path = log,
                      .die_with_parent = 1};
    ddp_pid_t pid;
    int st = -1;
    printf("check: coverage of %s per accelerator: make -C %s coverage %s (log: %s)\n", lib,
           root, plugin, log);
    fflush(stdout);
    if (ddp_sys_spawn(sys, &sp, &pid) != 0)
        return -1;
    if (ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, 3600 * DDP_NS_PER_S)) != 0) {
        ddp_sys_kill(sys, pid, 9);
        ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, 10 * DDP_NS_PER_S));
        return ddp_err_set(DDP_ETIMEOUT, "--coverage: make coverage ran past an hour");
    }
    print_tail(sys, log, 30);
    printf("check: coverage: %s (report: %s/build/coverage/parity.txt, HTML: "
           "%s/coverage/html/index.html)\n",
           st == 0 ? "parity holds" : st == 1 ? "PARITY VIOLATION" : "the pipeline failed",
           root, root);
    return st;
}
