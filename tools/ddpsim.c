/* tools/ddpsim.c — the ddpsim command: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/log.h"
#include "ddp/sys.h"

#define DDPSIM_VERSION "0.1.0"

typedef struct {
    const char *name;
    int (*fn)(struct ddp_sys *sys, int argc, char **argv);
    const char *summary;
} command_t;

static const command_t commands[] = {
    {"run", ddp_cmd_run,
     "run scenario files x accelerators in the simulator; outcome table, JUnit"},
    {"replay", ddp_cmd_replay,
     "replay one scenario exactly (same seed): per-rank outcomes, trace hash"},
    {"explore", ddp_cmd_explore,
     "random fault schedules; invariant violations, replay commands, shrinking"},
    {"check", ddp_cmd_check,
     "test your plugin: baselines, faults aimed at what it does, oracles, findings"},
    {"merge", ddp_cmd_merge,
     "combine the result files of run/explore --shard K/N into the whole sweep's"},
    {"report", ddp_cmd_report,
     "HTML pages of run --artifacts folders: first error, replay, rank timeline"},
    {"launch", ddp_cmd_launch, "torchrun-style launcher: run PROG N times with RANK, LOCAL_RANK, ..."},
    {"train", ddp_cmd_train,
     "run the Trainer's connection in this process, for real (srun/mpirun/...)"},
    {"hold-port", ddp_cmd_hold_port,
     "listen on a port and accept nothing (real scenario runs: port_taken)"},
    {"list", ddp_cmd_list,
     "list accelerators, backends, plugins, environments, faults, launchers, phases, points"},
    {"demo", ddp_cmd_demo,
     "rendezvous N local ranks through a real store (the default demo)"},
    {"sim", ddp_cmd_sim,
     "run an accelerator on a simulated cluster with faults; per-rank outcomes"},
    {"store", ddp_cmd_store,
     "run a TCPStore-protocol server, or talk to one (get/set/add/wait ...)"},
    {"hostlist", ddp_cmd_hostlist,
     "expand (or --compress) a SLURM hostlist expression"},
    {"env", ddp_cmd_env,
     "show the detected cluster environment and every value it derives"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: ddpsim [--version] [--help] COMMAND [ARGS]\n\n"
               "ddpsim: the DDP connection stack of PyTorch Lightning in C, "
               "and a harness\nthat tests it.\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'ddpsim COMMAND --help' describes a command; docs/ddpsim.1.md "
               "is the manual.\nEnvironment: DDP_LOG=off|error|warn|info|debug|trace "
               "(default warn).\n");
}

int main(int argc, char **argv)
{
    ddp_tool_self = argv[0];
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    int top = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
              !strcmp(argv[1], "help") || !strcmp(argv[1], "--version");
    if (top && argc > 2) { /* "--version extra" was taken, silently */
        char extra[256];
        snprintf(extra, sizeof extra, "%s", argv[2]);
        ddp_utf8_escape(extra, sizeof extra);
        fprintf(stderr, "ddpsim: %s takes no arguments (got \"%s\")\n", argv[1],
                extra);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ddpsim %s\n", DDPSIM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        ddp_sys_t *sys = ddp_sys_posix_new(NULL);
        if (!sys) {
            fprintf(stderr, "ddpsim: out of memory\n");
            return 1;
        }
        if (ddp_log_init_from_env(ddp_sys_env(sys)) != 0) {
            fprintf(stderr, "ddpsim: %s\n", ddp_err_message());
            ddp_sys_free(sys);
            return 2;
        }
        int rc = commands[i].fn(sys, argc - 1, argv + 1);
        ddp_sys_free(sys);
        return rc;
    }
    fprintf(stderr, "ddpsim: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
