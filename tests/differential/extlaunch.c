/* tests/differential/extlaunch.c KIND [COUNT [SEED [JOBS]]] — make differential's
 * external-launcher families, KIND mpirun or srun: COUNT generated
 * configurations (default 300, seed 41) through the real launcher on this
 * node against ddpsim's launcher and its cluster environment
 * (tests/extlaunch_diff.c), JOBS (default 1) real launches at a time:
 * the figures do not depend on JOBS. One line; exit 1 on an unexplained
 * disagreement; without the launcher "skipped: ...", exit 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../extlaunch_diff.h"

int main(int argc, char **argv)
{
    int kind = -1;
    for (int k = 0; argc > 1 && k < EXT_NKINDS; k++)
        if (strcmp(argv[1], ext_name(k)) == 0)
            kind = k;
    long count = argc > 2 ? atol(argv[2]) : 300;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 41;
    int jobs = argc > 4 ? atoi(argv[4]) : 1;
    if (kind < 0 || count < 1 || jobs < 1 || jobs > EXT_MAX_JOBS) {
        fprintf(stderr, "differential: usage: extlaunch mpirun|srun [COUNT [SEED [JOBS]]] (got "
                        "\"%s\" \"%s\" jobs \"%s\": KIND names a launcher, COUNT is > 0, JOBS "
                        "1 to %d)\n",
                argc > 1 ? argv[1] : "", argc > 2 ? argv[2] : "", argc > 4 ? argv[4] : "1",
                EXT_MAX_JOBS);
        return 2;
    }
    const char *missing = ext_missing(kind);
    if (missing) {
        printf("%-12s skipped: %s\n", ext_name(kind), missing);
        return 0;
    }
    ext_diff_t d;
    ext_diff_run(kind, seed, count, jobs, &d);
    printf("%-12s %ld configurations, %ld refused by %s (%ld for resources a plan does not "
           "model), %ld ranks compared, %ld disagreements%s%s\n",
           ext_name(kind), d.configs, d.refused, ext_name(kind), d.explained, d.ranks,
           d.disagreed, d.disagreed ? "; first: " : "", d.disagreed ? d.first : "");
    return d.disagreed ? 1 : 0;
}
