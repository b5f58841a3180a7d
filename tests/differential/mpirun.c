/* tests/differential/mpirun.c [COUNT [SEED]] — make differential's mpirun
 * family: COUNT generated configurations (default 300, seed 41) through real
 * OpenMPI mpirun on this node against ddpsim's mpirun launcher and its mpi
 * cluster environment (tests/mpirun_diff.c). One line; exit 1 on an
 * unexplained disagreement; without mpirun "skipped: ...", exit 0. */
#include <stdio.h>
#include <stdlib.h>

#include "../mpirun_diff.h"

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 300;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 41;
    if (count < 1) {
        fprintf(stderr, "differential: COUNT \"%s\" is not a positive number of "
                        "configurations (usage: mpirun [COUNT [SEED]])\n", argv[1]);
        return 2;
    }
    if (!mpirun_here()) {
        printf("mpirun       skipped: no mpirun here (apt-get install openmpi-bin)\n");
        return 0;
    }
    mpirun_diff_t d;
    mpirun_diff_run(seed, count, &d);
    printf("mpirun       %ld configurations, %ld refused by mpirun (%ld for slots, without "
           "--oversubscribe), %ld ranks compared, %ld disagreements%s%s\n",
           d.configs, d.refused, d.explained, d.ranks, d.disagreed,
           d.disagreed ? "; first: " : "", d.disagreed ? d.first : "");
    return d.disagreed ? 1 : 0;
}
