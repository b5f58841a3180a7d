/* tools/cmd_train.c — `ddpsim train`: the "training script". This process
 * (started by srun, mpirun, jsrun, torchrun, `ddpsim launch`, the real
 * scenario runner, or by hand on each node) runs the Trainer's accelerator
 * with the real POSIX sys: rank math, launching its workers where the
 * accelerator does, the shared plugin's connection, configure_ddp,
 * teardown. Each process prints one line. Under `ddpsim run --real` it runs
 * one process of the run's launch plan (--plan FILE --process N). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/accel.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/real.h"
#include "ddp/sys.h"

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim train [--accelerator NAME] [--devices N] [--num-nodes N]\n"
            "                    [--timeout SEC] [--store-timeout SEC] [--backend NAME]\n"
            "                    [--plugin NAME] [--cluster NAME] [--gpus N] [--seed N]\n"
            "                    [--train SEC]\n"
            "       ddpsim train --plan FILE --process N\n\n"
            "Runs what Trainer(accelerator=NAME, num_processes=N, num_nodes=M).fit() does\n"
            "to connect, in this process, for real: the cluster environment is detected\n"
            "from this process's environment (SLURM_*, RANK/LOCAL_RANK/..., OMPI_*, LSB_*,\n"
            "MASTER_ADDR/MASTER_PORT, NODE_RANK), the accelerator is selected as Lightning\n"
            "does (ddp/ddp_cpu become ddp_hpc/ddp_cpu_hpc under SLURM or torchrun), workers\n"
            "are launched where the accelerator launches them, and every rank connects\n"
            "through the shared DDP plugin (store on rank 0, backend, barrier,\n"
            "configure_ddp). --train SEC: each rank then \"trains\" SEC seconds before\n"
            "teardown, with the store up (default 0). Defaults: ddp, 1 device, 1 node,\n"
            "1800 s, tcp on CPU.\n\n"
            "Each process prints \"rank R/W (local L, node N) ACCEL BACKEND: ok, connected\n"
            "in S s\" or \"... FAIL: error\".\n\n"
            "--plan FILE --process N: run process N of a launch plan written by\n"
            "`ddpsim run --real` (its entry, faults and result file come from the plan;\n"
            "the other options do not apply).\n\n"
            "Exit status: 0 this process (and its workers) connected, 1 it failed,\n"
            "2 bad options.\n");
}

static int bad(const char *opt, const char *val, const char *form)
{
    fprintf(stderr, "ddpsim train: bad %s \"%s\"; expected %s\n", opt, val ? val : "",
            form);
    return 2;
}

static void print_result(ddp_sys_t *sys, const ddp_run_result_t *r, void *arg)
{
    (void)arg, (void)sys;
    if (r->global_rank < 0 && r->rc == 0)
        printf("launcher (%s): %d worker(s) ok\n", r->accelerator ? r->accelerator : "?",
               r->children);
    else if (r->rc == 0)
        printf("rank %d/%d (local %d, node %d) %s %s: ok, connected in %.3f s, "
               "checksum %016llx\n",
               r->global_rank, r->world_size, r->local_rank, r->node_rank,
               r->accelerator ? r->accelerator : "?", r->backend,
               (double)(r->connect_ns - r->start_ns) / 1e9,
               (unsigned long long)r->checksum);
    else if (r->global_rank < 0)
        printf("process (%s, before its rank was known): FAIL: %s\n",
               r->accelerator ? r->accelerator : "no accelerator", r->message);
    else
        printf("rank %d/%d (local %d, node %d) %s %s: FAIL: %s\n", r->global_rank,
               r->world_size, r->local_rank, r->node_rank,
               r->accelerator ? r->accelerator : "?", r->backend, r->message);
    fflush(stdout);
}

int ddp_cmd_train(ddp_sys_t *sys, int argc, char **argv)
{
    ddp_trainer_cfg_t cfg = {.accelerator = "ddp", .on_result = print_result};
    const char *plan = NULL;
    long process = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return 0;
        }
        if (!v)
            return bad("option (missing value)", a, "--OPTION VALUE (see --help)");
        i++;
        char *end;
        double d = strtod(v, &end);
        int num = *v && !*end;
        if (!strcmp(a, "--accelerator")) {
            if (!ddp_accel_find(v))
                return bad(a, v, "ddp, ddp_spawn, ddp_cpu, ddp2, ddp_hpc or ddp_cpu_hpc");
            cfg.accelerator = v;
        } else if (!strcmp(a, "--devices") || !strcmp(a, "--num-processes")) {
            if (!num || d < 1 || d > 64 || d != (int)d)
                return bad(a, v, "an integer 1..64");
            cfg.num_processes = (int)d;
        } else if (!strcmp(a, "--num-nodes")) {
            if (!num || d < 1 || d > 100000 || d != (int)d)
                return bad(a, v, "an integer >= 1");
            cfg.num_nodes = (int)d;
        } else if (!strcmp(a, "--gpus")) {
            if (!num || d < 0 || d > 64 || d != (int)d)
                return bad(a, v, "an integer 0..64");
            cfg.gpus = (int)d;
        } else if (!strcmp(a, "--timeout") || !strcmp(a, "--store-timeout")) {
            if (!num || d <= 0)
                return bad(a, v, "seconds > 0");
            *(!strcmp(a, "--timeout") ? &cfg.timeout_ns : &cfg.store_timeout_ns) =
                (int64_t)(d * 1e9);
        } else if (!strcmp(a, "--train")) {
            if (!num || d < 0)
                return bad(a, v, "seconds >= 0");
            cfg.train_ns = (int64_t)(d * 1e9);
        } else if (!strcmp(a, "--seed")) {
            if (!num || d < 0)
                return bad(a, v, "an integer >= 0");
            cfg.seed = strtoull(v, NULL, 10);
        } else if (!strcmp(a, "--backend")) {
            cfg.backend = v;
        } else if (!strcmp(a, "--cluster")) {
            cfg.cluster = v;
        } else if (!strcmp(a, "--plan")) {
            plan = v;
        } else if (!strcmp(a, "--process")) {
            if (!num || d < 0 || d > 1e6 || d != (long)d)
                return bad(a, v, "a process index >= 0 of the plan");
            process = (long)d;
        } else if (!strcmp(a, "--plugin")) {
            if (!(cfg.plugin = ddp_plugin_find(v)))
                return bad(a, v, "default, subgroups or rpc");
        } else {
            return bad("option", a, "one of the options of --help");
        }
    }
    if (!plan != (process < 0))
        return bad("options", plan ? "--plan" : "--process", "--plan FILE and --process N "
                                                           "together");
    if (plan) { /* one process of `ddpsim run --real`: all it runs is in the plan */
        int rc = ddp_real_child(sys, plan, (int)process);
        if (rc < 0)
            fprintf(stderr, "ddpsim train: %s\n", ddp_err_message());
        return rc < 0 ? 2 : rc;
    }
    ddp_run_result_t res;
    int rc = ddp_accel_run(sys, &cfg, &res);
    return rc || res.children_failed ? 1 : 0;
}

/* `ddpsim hold-port PORT [--seconds S]`: listen on 0.0.0.0:PORT and accept
 * nothing for S seconds (default 3600): "another process holds the port",
 * as real scenario runs need it (port_taken). */
int ddp_cmd_hold_port(ddp_sys_t *sys, int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: ddpsim hold-port PORT [--seconds S]\n\nListens on 0.0.0.0:PORT "
               "and accepts nothing for S seconds (default 3600):\na port another "
               "process already holds, for real scenario runs (port_taken).\n");
        return 0;
    }
    char *end;
    long port = argc >= 2 ? strtol(argv[1], &end, 10) : 0;
    if (argc < 2 || *end || port < 1 || port > 65535)
        return bad("port", argc >= 2 ? argv[1] : "", "an integer 1..65535");
    double secs = 3600;
    if (argc == 4 && !strcmp(argv[2], "--seconds"))
        secs = strtod(argv[3], NULL);
    else if (argc != 2)
        return bad("arguments", argv[2], "PORT [--seconds S]");
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", (uint16_t)port, &any);
    int fd = ddp_sys_listen(sys, &any, 16);
    if (fd < 0) {
        fprintf(stderr, "ddpsim hold-port: %s\n", ddp_err_message());
        return 1;
    }
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, (int64_t)(secs * 1e9)));
    ddp_sys_close(sys, fd);
    return 0;
}
