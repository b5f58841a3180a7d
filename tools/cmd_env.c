/* tools/cmd_env.c — `ddpsim env`: which cluster environment this process is
 * in and everything ddpsim derives from it, so a wrong SLURM_NODELIST or a
 * missing --ntasks-per-node shows before a job hangs at rendezvous. */
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "ddp/cluster.h"
#include "ddp/err.h"
#include "ddp/sys.h"
#include "opt.h"

static void env_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim env [--cluster NAME] [--devices N] [--num-nodes N]\n\n"
            "Prints the cluster environment detected from this process's "
            "environment (or\nthe one chosen with --cluster) and every value "
            "it derives, one \"name: value\"\nor \"name: error: ...\" per "
            "line. --devices / --num-nodes also check the\nenvironment "
            "against the devices per node and nodes you would request.\n\n"
            "NAME: auto (default)");
    for (size_t i = 0; i < ddp_cluster_count(); i++)
        fprintf(f, ", %s", ddp_cluster_at(i)->name);
    fprintf(f, "\n\nExit status: 0 every value derived, 1 some failed, "
               "2 usage.\n");
}

typedef struct {
    int errors;
} env_out_t;

static void print_line(void *arg, const char *line)
{
    env_out_t *o = arg;
    /* describe's format: "name: error: ..." marks a value that failed. */
    const char *colon = strchr(line, ':');
    if (colon && !strncmp(colon, ": error: ", 9))
        o->errors++;
    printf("%s\n", line);
}

int ddp_cmd_env(struct ddp_sys *sys, int argc, char **argv)
{
    const char *name = NULL;
    int devices = 0, num_nodes = 0, n;
    const ddp_opt_t opts[] = {
        OPT_STR("cluster", &name, "a cluster environment name or auto"),
        OPT_INT("devices", &devices, 1, 1000000),
        OPT_INT("num-nodes", &num_nodes, 1, 1000000),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("env", opts, env_usage), .max_operands = 0};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    ddp_cluster_t *c;
    if (ddp_cluster_open(sys, name, &c) < 0) {
        fprintf(stderr, "ddpsim env: %s\n", ddp_err_message());
        return 2;
    }
    env_out_t o = {0};
    printf("selection: %s\n", name && *name && strcmp(name, "auto")
                                  ? "chosen with --cluster"
                                  : "detected");
    ddp_cluster_describe(c, print_line, &o);
    if (devices || num_nodes) {
        char label[96];
        snprintf(label, sizeof label, "validate(devices=%d, num_nodes=%d)",
                 devices, num_nodes);
        if (ddp_cluster_validate(c, devices, num_nodes) < 0) {
            printf("%s: error: %s\n", label, ddp_err_message());
            o.errors++;
        } else {
            printf("%s: ok\n", label);
        }
    }
    ddp_cluster_close(c);
    return o.errors ? 1 : 0;
}
