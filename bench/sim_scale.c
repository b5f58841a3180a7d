/* bench/sim_scale.c — the simulator at scale: N ranks (8 per node) do the
 * real store rendezvous (connect, wait-for-workers, store barrier) against
 * one store server. Prints wall time, peak RSS, virtual time, scheduler
 * hand-offs and hand-offs per second, and the CPU time of the run (user +
 * system, all threads). Tasks are user-space contexts (the default), or
 * one pthread each with --threads. Figures only; no assertions.
 *   sim_scale [--threads] [N ...]     default: 64 256 1024 4096 16384 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ddp/launch.h"
#include "ddp/sim.h"

#include "bench_cpu.h"

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run_one(int n, ddp_sim_tasks_t tasks)
{
    ddp_sim_opts_t o = {.seed = 1, .tasks = tasks};
    ddp_sim_t *sim = ddp_sim_new(&o);
    int nodes = n >= 8 ? n / 8 : 1;
    for (int i = 0; i < nodes; i++) {
        char host[16], addr[20];
        snprintf(host, sizeof host, "node%d", i);
        snprintf(addr, sizeof addr, "10.%d.%d.%d", i / 65536, i / 256 % 256, i % 256 + 0);
        if (i % 256 == 0)
            snprintf(addr, sizeof addr, "10.%d.%d.254", 100 + i / 65536, i / 256 % 256);
        ddp_sim_add_node(sim, host, addr, 0);
    }
    ddp_sim_rendezvous_t rv = {.ranks = n, .timeout_ns = 1800LL * 1000000000LL};
    ddp_sim_rendezvous_build(sim, &rv);
    double s0, s1;
    long f0, f1;
    bench_sys(&s0, &f0);
    double t0 = wall(), c0 = bench_cpu();
    ddp_sim_result_t res = ddp_sim_run(sim);
    double dt = wall() - t0, dc = bench_cpu() - c0;
    bench_sys(&s1, &f1);
    int ok = 0;
    for (int r = 0; r < n; r++) {
        const ddp_sim_outcome_t *out = ddp_sim_outcome(sim, rv.first_rank_task + r);
        ok += out->rc == 0 && out->state == DDP_SIM_TASK_EXITED;
    }
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%7d ranks %5d nodes  wall %7.3f s  cpu %7.3f s  peak RSS %7.1f MiB  "
           "virtual %8.3f s  hand-offs %9llu  %9.0f hand-offs/s  %6.1f us/rank  ok %d/%d%s  "
           "sys %.3f s  page faults %ld\n",
           n, nodes, dt, dc, (double)ru.ru_maxrss / 1024.0, (double)st.virtual_ns / 1e9,
           (unsigned long long)st.handoffs, (double)st.handoffs / dt, dt * 1e6 / n,
           ok, n, res == DDP_SIM_DONE ? "" : " (not done)", s1 - s0, f1 - f0);
    fflush(stdout);
    ddp_sim_free(sim);
    return ok == n ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const int def[] = {64, 256, 1024, 4096, 16384};
    int rc = 0, first = 1;
    ddp_sim_tasks_t tasks = DDP_SIM_TASKS_DEFAULT;
    if (argc > 1 && !strcmp(argv[1], "--threads")) {
        tasks = DDP_SIM_TASKS_THREADS;
        first = 2;
    }
    printf("sim_scale: store rendezvous + barrier, 8 ranks per node, seed 1, tasks as %s\n",
           tasks == DDP_SIM_TASKS_THREADS ? "threads" : "contexts");
    if (argc > first)
        for (int i = first; i < argc; i++)
            rc |= run_one(atoi(argv[i]), tasks);
    else
        for (size_t i = 0; i < sizeof def / sizeof def[0]; i++)
            rc |= run_one(def[i], tasks);
    return rc;
}
