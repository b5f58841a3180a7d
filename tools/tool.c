/* tools/tool.c — what the subcommands share with the ddpsim command
 * (cmds.h), apart from main: the test binary links every tools/ object but
 * ddpsim.o, and runs subcommands in-process. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp/err.h"

#include "cmds.h"
#include "ddp/host.h"
#include "ddp/sim.h"
#include "ddp/sys.h"

const char *ddp_tool_self = "ddpsim";

void ddp_tool_catch_signals(void (*fn)(int), int hup)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn ? fn : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct sigaction old;
    /* under nohup SIGHUP stays ignored */
    if (hup && sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
        sigaction(SIGHUP, &sa, NULL);
}


static int fill_chrome(FILE *f, void *tr) { return ddp_sim_export_chrome(tr, f); }

int ddp_tool_write_chrome(const char *tr, const char *path)
{
    return ddp_out_write(path, "the Chrome trace", fill_chrome, (void *)tr);
}

/* ---- folders written whole or not at all ---- */

int ddp_tool_dir_begin(const char *final, char *tmp, size_t n)
{
    const char *slash = strrchr(final, '/');
    int dl = slash ? (int)(slash - final) : 0;
    if ((size_t)snprintf(tmp, n, "%.*s%s.%s.XXXXXX", dl, final, slash ? "/" : "",
                         slash ? slash + 1 : final) >= n)
        return ddp_err_set(-ENAMETOOLONG, "the folder name \"%s\" is too long (over %zu "
                           "characters with its temporary twin); expected a shorter path",
                           final, n - 9);
    if (!mkdtemp(tmp))
        return ddp_err_set(-errno, "cannot create a folder beside \"%s\": %s; expected a "
                           "folder ddpsim may write in", final, strerror(errno));
    mode_t mask = umask(0);
    umask(mask);
    chmod(tmp, 0777 & ~mask); /* as mkdir would have made it, not mkdtemp's 0700 */
    return 0;
}

int ddp_tool_dir_commit(const char *tmp, const char *final)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) == 0)
        return 0;
    int e = errno;
    ddp_tool_dir_discard(tmp);
    return ddp_err_set(-e, "cannot rename the finished folder to \"%s\": %s; expected "
                       "nothing there (it is never replaced)", final, strerror(e));
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0; /* go on: remove what can be removed */
}

void ddp_tool_dir_discard(const char *tmp)
{
    nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
