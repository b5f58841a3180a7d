/* tools/cmd_hostlist.c — `ddpsim hostlist`: expand or compress a SLURM
 * hostlist, so a user can check what ddpsim makes of SLURM_NODELIST without
 * a cluster (and compare it with `scontrol show hostnames`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/cluster.h"
#include "ddp/err.h"
#include "opt.h"

static void hostlist_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim hostlist EXPR...\n"
            "       ddpsim hostlist --compress HOSTS...\n\n"
            "Expands SLURM hostlist expressions (as `scontrol show hostnames`) "
            "and prints one\nhost per line; several EXPRs are expanded in "
            "turn. With --compress, prints the\nshortest expression for the "
            "hosts, in their order (as `scontrol show hostlist`);\nHOSTS may "
            "be separate arguments, comma lists or expressions.\n\n"
            "  ddpsim hostlist 'node[001-003,007],gpu[1-2]-ib'\n"
            "  ddpsim hostlist --compress node1,node2,node3 node5\n\n"
            "Exit status: 0 ok, 2 invalid expression or usage.\n");
}

/* Appends the expansion of expr to *all. */
static int expand_into(const char *expr, char ***all, size_t *n)
{
    char **hosts;
    size_t nh;
    int rc = ddp_hostlist_expand(expr, 0, &hosts, &nh);
    if (rc < 0)
        return rc;
    char **grown = realloc(*all, (*n + nh + 1) * sizeof *grown);
    if (!grown) {
        ddp_hostlist_free(hosts, nh);
        return ddp_err_set(-ENOMEM, "out of memory");
    }
    memcpy(grown + *n, hosts, nh * sizeof *hosts);
    free(hosts); /* the strings now belong to *all */
    *all = grown;
    *n += nh;
    return 0;
}

int ddp_cmd_hostlist(struct ddp_sys *sys, int argc, char **argv)
{
    (void)sys;
    int compress = 0, nexpr = 0;
    const ddp_opt_t opts[] = {OPT_FLAG("compress", 'c', &compress, 1), OPT_HELP};
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("hostlist", opts, hostlist_usage), .in_order = 1,
                         .min_operands = 1, .max_operands = -1,
                         .operands = "at least one EXPR (or --compress HOSTS...)"};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &nexpr);
    int first = 1;
    argc = 1 + nexpr;
    char **all = NULL;
    size_t n = 0;
    int rc = 0;
    for (int i = first; i < argc && rc == 0; i++)
        rc = expand_into(argv[i], &all, &n);
    if (rc == 0 && compress) {
        char *out;
        rc = ddp_hostlist_compress((const char *const *)all, n, &out);
        if (rc == 0) {
            printf("%s\n", out);
            free(out);
        }
    } else if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", all[i]);
    }
    ddp_hostlist_free(all, n);
    if (rc < 0) {
        fprintf(stderr, "ddpsim hostlist: %s\n", ddp_err_message());
        return 2;
    }
    return 0;
}
