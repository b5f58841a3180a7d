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
#include "opt.h"

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim train [--accelerator NAME] [--devices N] [--num-nodes N]\n"
            "                    [--timeout SEC] [--store-timeout SEC] [--backend NAME]\n"
            "                    [--plugin NAME|PATH.so] [--cluster NAME] [--gpus N] [--seed N]\n"
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
            "1800 s, tcp on CPU. Ranges: --devices (or --num-processes) 1..64,\n"
            "--num-nodes 1..100000, --gpus 0..64, --timeout and --store-timeout seconds\n"
            "> 0, --train seconds >= 0, --seed a non-negative integer.\n\n"
            "Each process prints \"rank R/W (local L, node N) ACCEL BACKEND: ok, connected\n"
            "in S s\" or \"... FAIL: error\".\n\n"
            "--plan FILE --process N: run process N of a launch plan written by\n"
            "`ddpsim run --real` (its entry, faults and result file come from the plan;\n"
            "the other options do not apply).\n\n"
            "Exit status: 0 this process (and its workers) connected, 1 it failed,\n"
            "2 bad options.\n");
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
    int n;
    const char *plan = NULL;
    int process = -1;
    const ddp_opt_t opts[] = {
        OPT_FN("accelerator", &cfg.accelerator, ddp_opt_accel, ddp_opt_accel_form(0)),
        OPT_INT("devices", &cfg.num_processes, 1, 64),
        OPT_INT("num-processes", &cfg.num_processes, 1, 64),
        OPT_INT("num-nodes", &cfg.num_nodes, 1, 100000),
        OPT_INT("gpus", &cfg.gpus, 0, 64),
        OPT_NS_POS("timeout", &cfg.timeout_ns, 1e7),
        OPT_NS_POS("store-timeout", &cfg.store_timeout_ns, 1e7),
        OPT_NS("train", &cfg.train_ns, 0, 1e7),
        OPT_U64("seed", &cfg.seed, 0),
        OPT_STR("backend", &cfg.backend, "a backend name (tcp, nccl)"),
        OPT_STR("cluster", &cfg.cluster, "a cluster environment name"),
        OPT_FN("plugin", &cfg.plugin, ddp_opt_plugin, ddp_opt_plugin_form()),
        OPT_STR("plan", &plan, "a plan file written by ddpsim run --real"),
        OPT_INT("process", &process, 0, 1000000),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("train", opts, train_usage), .max_operands = 0};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    if (!plan != (process < 0)) {
        fprintf(stderr, "ddpsim train: --plan FILE and --process N go together\n");
        return 2;
    }
    if (plan) { /* one process of `ddpsim run --real`: all it runs is in the plan */
        int rc = ddp_real_child(sys, plan, process);
        if (rc < 0)
            fprintf(stderr, "ddpsim train: %s\n", ddp_err_message());
        return rc < 0 ? 2 : rc;
    }
    ddp_run_result_t res;
    int rc = ddp_accel_run(sys, &cfg, &res);
    return rc || res.children_failed ? 1 : 0;
}

static void hold_port_usage(FILE *f)
{
    fprintf(f, "usage: ddpsim hold-port PORT [--seconds S]\n\nListens on 0.0.0.0:PORT "
               "(1..65535) and accepts nothing for S seconds (>= 0, default 3600,\nat most "
               "10000000): a port another process already holds, for real scenario\nruns "
               "(port_taken).\n\nExit status: 0 after S seconds, 1 the port cannot be "
               "listened on, 2 bad usage.\n");
}

/* `ddpsim hold-port PORT [--seconds S]`: listen on 0.0.0.0:PORT and accept
 * nothing for S seconds (default 3600): "another process holds the port",
 * as real scenario runs need it (port_taken). */
int ddp_cmd_hold_port(ddp_sys_t *sys, int argc, char **argv)
{
    double secs = 3600;
    int n;
    long long port;
    const ddp_opt_t opts[] = {OPT_SEC("seconds", &secs, 0, 1e7), OPT_HELP};
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("hold-port", opts, hold_port_usage),
                         .min_operands = 1, .max_operands = 1, .operands = "one PORT"};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    if (ddp_opt_int(argv[1], 1, 65535, &port) != 0)
        return ddp_opt_bad("hold-port", "PORT", argv[1], "an integer 1..65535");
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
