/* bench/bench_cpu.h — the process's CPU time so far (user + system, all
 * threads), for the benchmarks: on a loaded machine it is
 * steadier than the wall time. */
#ifndef DDP_BENCH_CPU_H
#define DDP_BENCH_CPU_H

#include <sys/resource.h>

static inline double bench_tv_s(struct timeval t)
{
    return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

/* CPU seconds (user + system) of RUSAGE_SELF, or of the calling thread
 * with RUSAGE_THREAD. */
static inline double bench_ru_cpu(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return bench_tv_s(ru.ru_utime) + bench_tv_s(ru.ru_stime);
}

static inline double bench_cpu(void) { return bench_ru_cpu(RUSAGE_SELF); }

/* The system share of that time and the minor page faults so far: on a
 * virtual machine the first touch of fresh memory is paid here (the guest
 * zeroes the page and the host backs it), and it grows with the memory a
 * simulation touches, not with its instructions. */
static inline void bench_sys(double *sys_s, long *faults)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *sys_s = bench_tv_s(ru.ru_stime);
    *faults = ru.ru_minflt;
}

#endif
