/* tools/cmd_env.c — `ddpsim env`: which cluster environment this process is
 * in and everything ddpsim derives from it, so a wrong SLURM_NODELIST or a
 * missing --ntasks-per-node shows before a job hangs at rendezvous. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/cluster.h"
#include "ddp/err.h"
#include "ddp/sys.h"

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

static int parse_count(const char *opt, const char *text, int *out)
{
    char *end;
    long v = text ? strtol(text, &end, 10) : -1;
    if (!text || !*text || *end || v < 1 || v > 1000000) {
        fprintf(stderr, "ddpsim env: %s needs an integer >= 1, got \"%s\"\n",
                opt, text ? text : "");
        return -1;
    }
    *out = (int)v;
    return 0;
}

int ddp_cmd_env(struct ddp_sys *sys, int argc, char **argv)
{
    const char *name = NULL;
    int devices = 0, num_nodes = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            env_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--cluster") && val) {
            name = val;
            i++;
        } else if (!strncmp(a, "--cluster=", 10)) {
            name = a + 10;
        } else if (!strcmp(a, "--devices")) {
            if (parse_count(a, val, &devices) < 0)
                return 2;
            i++;
        } else if (!strcmp(a, "--num-nodes")) {
            if (parse_count(a, val, &num_nodes) < 0)
                return 2;
            i++;
        } else {
            fprintf(stderr, "ddpsim env: unexpected argument \"%s\"\n\n", a);
            env_usage(stderr);
            return 2;
        }
    }
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
