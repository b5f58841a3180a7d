/* tools/tool.c — what the subcommands share with the ddpsim command
 * (cmds.h), apart from main: the test binary links every tools/ object but
 * ddpsim.o, and runs subcommands in-process. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmds.h"
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
