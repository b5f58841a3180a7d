/* bench/mpi_init.c — OpenMPI's counterpart of `plugin_init real N`: every
 * process does MPI_Init, MPI_Barrier, an MPI_Allreduce of one int (the sum
 * of 1 over the world, checked against the world size) and MPI_Finalize.
 * bench/plugin_init.sh builds it with mpicc (-DDDP_BENCH_MPI) and times
 *   mpirun --allow-run-as-root --oversubscribe -np N ./mpi_init
 * next to `plugin_init real N`. Figures only.
 *
 * The Makefile compiles every bench/ .c file with the project's flags and no MPI
 * headers or libraries, so the MPI body is compiled only when mpi.h is
 * there AND the build asked for it (a system whose default include path
 * has mpi.h would otherwise fail to link without -lmpi); else this is a
 * stub that says so. */
#include <stdio.h>

#if defined(DDP_BENCH_MPI) && defined(__has_include)
#if __has_include(<mpi.h>)
#define DDP_HAVE_MPI 1
#endif
#endif

#ifdef DDP_HAVE_MPI
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank = 0, world = 0, one = 1, sum = 0;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS)
        rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS && sum != world) {
        fprintf(stderr, "mpi_init: rank %d: allreduce gave %d, world is %d\n",
                rank, sum, world);
        rc = MPI_ERR_OTHER;
    }
    if (rank == 0 && rc == MPI_SUCCESS)
        printf("mpi_init: %d ranks: init + barrier + allreduce ok\n", world);
    MPI_Finalize();
    return rc == MPI_SUCCESS ? 0 : 1;
}
#else
int main(void)
{
    puts("mpi.h not found: skipped");
    return 0;
}
#endif
