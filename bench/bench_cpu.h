/* bench/bench_cpu.h — the process's CPU time so far (user + system, all
 * threads), for the simulator benchmarks: on a loaded machine it is
 * steadier than the wall time. */
#ifndef DDP_BENCH_CPU_H
#define DDP_BENCH_CPU_H

#include <sys/resource.h>

static inline double bench_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The system share of that time and the minor page faults so far: on a
 * virtual machine the first touch of fresh memory is paid here (the guest
 * zeroes the page and the host backs it), and it grows with the memory a
 * simulation touches, not with its instructions. */
static inline void bench_sys(double *sys_s, long *faults)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    *faults = ru.ru_minflt;
}

#endif
