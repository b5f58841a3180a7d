/* bench/plugin_init.c — wall time of the full default init (store + tcp
 * backend + store barrier + configure_ddp) through the shared plugin:
 *  - simulated: ddp_hpc under SLURM on N/8 nodes x 8 ranks (N = 512, 4096);
 *  - real: N processes on loopback (torchrun contract, ddp_cpu_hpc), N = 8, 32;
 *  - spawn: the real line's floor: N processes started and reaped the same
 *    way (ddp_sys_spawn, ddp_sys_wait) that return at once, without the init.
 * A real or spawn line also gives the CPU time and the minor page faults of
 * its processes (the launcher and its children): on two CPUs a 64-process
 * run is bound by that CPU, and on some virtual machines most of it is
 * process creation and first touches, not the init (docs/benchmarks.md).
 * A sim line also gives the process's peak RSS so far (getrusage: run one
 * N per process for that N's peak) and the most bytes the simulated
 * sockets held unread at once, and the CPU time the run took (user +
 * system, all threads: on a loaded machine it is steadier than the wall
 * time). `sim` runs the tasks as user-space contexts (the default),
 * `sim-threads` as one pthread each (DDP_SIM_TASKS_THREADS). Figures only.
 * bench/plugin_init.sh adds OpenMPI's mpirun for comparison,
 * bench/smpi_init.sh SimGrid's SMPI and bench/plugin_init_scale.sh the
 * growth from 1,024 to 16,384 ranks.
 *   plugin_init [sim N ...] [sim-threads N ...] [real N ...] [spawn N ...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ddp/accel.h"
#include "ddp/env.h"
#include "ddp/launch.h"
#include "ddp/sim.h"
#include "ddp/sys.h"

#include "bench_cpu.h"

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bench_sim(int n, ddp_sim_tasks_t tasks)
{
    int nodes = n / 8 > 0 ? n / 8 : 1;
    ddp_sim_opts_t o = {.seed = 1, .tasks = tasks};
    ddp_sim_t *sim = ddp_sim_new(&o);
    for (int i = 0; i < nodes; i++) {
        char host[16], addr[20];
        snprintf(host, sizeof host, "node%d", i);
        snprintf(addr, sizeof addr, "10.%d.%d.1", i / 250, i % 250);
        ddp_sim_add_node(sim, host, addr, 0);
    }
    ddp_sim_launch_t l = {.accelerator = "ddp_hpc", .nodes = nodes, .procs = n / nodes};
    ddp_sim_launch_build(sim, &l);
    double s0, s1;
    long f0, f1;
    bench_sys(&s0, &f0);
    double t0 = wall(), c0 = bench_cpu();
    ddp_sim_run(sim);
    double dt = wall() - t0, dc = bench_cpu() - c0;
    bench_sys(&s1, &f1);
    int ok = 0;
    for (int i = 0; i < ddp_sim_task_count(sim); i++) {
        const ddp_sim_outcome_t *out = ddp_sim_outcome(sim, i);
        ok += out->rank >= 0 && !out->thread && out->rc == 0 && out->connect_ns >= 0;
    }
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%-5s %5d ranks: wall %7.3f s, cpu %.3f s, virtual %.3f s, hand-offs %llu, "
           "ok %d/%d, peak RSS %.1f MiB, unread at most %.1f KiB, sys %.3f s, page faults %ld\n",
           tasks == DDP_SIM_TASKS_THREADS ? "simt" : "sim", n, dt, dc,
           (double)st.virtual_ns / 1e9, (unsigned long long)st.handoffs, ok, n,
           (double)ru.ru_maxrss / 1024.0, (double)st.rx_peak_bytes / 1024.0, s1 - s0, f1 - f0);
    fflush(stdout);
    ddp_sim_free(sim);
}

static int real_rank(ddp_sys_t *sys, void *arg)
{
    ddp_run_result_t res;
    int rc = ddp_accel_run(sys, arg, &res);
    if (rc)
        fprintf(stderr, "%s\n", res.message);
    return rc ? 1 : 0;
}

static int spawn_only(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    (void)arg;
    return 0;
}

/* CPU seconds and minor page faults of this process and its reaped
 * children together. */
static void self_and_children(double *cpu, long *faults)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    *cpu = bench_tv_s(a.ru_utime) + bench_tv_s(a.ru_stime) + bench_tv_s(b.ru_utime) +
           bench_tv_s(b.ru_stime);
    *faults = a.ru_minflt + b.ru_minflt;
}

static void bench_real(int n, int init)
{
    ddp_sys_t *sys = ddp_sys_posix_new(ddp_env_new());
    uint16_t port = 0;
    ddp_sys_free_port(sys, &port);
    static ddp_trainer_cfg_t cfg;
    cfg = (ddp_trainer_cfg_t){.accelerator = "ddp_cpu", .num_processes = n};
    double c0, c1;
    long f0, f1;
    self_and_children(&c0, &f0);
    double t0 = wall();
    ddp_pid_t *pids = calloc((size_t)n, sizeof *pids);
    for (int r = 0; r < n; r++) {
        ddp_env_t *env = ddp_env_new();
        ddp_env_setf(env, "RANK", "%d", r);
        ddp_env_setf(env, "LOCAL_RANK", "%d", r);
        ddp_env_set(env, "GROUP_RANK", "0");
        ddp_env_setf(env, "LOCAL_WORLD_SIZE", "%d", n);
        ddp_env_setf(env, "WORLD_SIZE", "%d", n);
        ddp_env_set(env, "MASTER_ADDR", "127.0.0.1");
        ddp_env_setf(env, "MASTER_PORT", "%u", (unsigned)port);
        ddp_spawn_t sp = {.env = env, .entry = init ? real_rank : spawn_only, .arg = &cfg};
        ddp_sys_spawn(sys, &sp, &pids[r]);
        ddp_env_free(env);
    }
    int ok = 0;
    for (int r = 0; r < n; r++) {
        int st = -1;
        ddp_sys_wait(sys, pids[r], &st, ddp_sys_deadline_in(sys, 120 * DDP_NS_PER_S));
        ok += st == 0;
    }
    double dt = wall() - t0;
    self_and_children(&c1, &f1);
    printf("%-5s %5d processes on loopback: wall %7.3f s (spawn to all exited), ok %d/%d, "
           "cpu %.3f s, page faults %ld\n",
           init ? "real" : "spawn", n, dt, ok, n, c1 - c0, f1 - f0);
    fflush(stdout);
    free(pids);
    ddp_sys_free(sys);
}

int main(int argc, char **argv)
{
    if (argc == 1) {
        bench_sim(512, DDP_SIM_TASKS_DEFAULT);
        bench_sim(4096, DDP_SIM_TASKS_DEFAULT);
        bench_real(8, 1);
        bench_real(32, 1);
        return 0;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "sim"))
            bench_sim(atoi(argv[i + 1]), DDP_SIM_TASKS_DEFAULT);
        else if (!strcmp(argv[i], "sim-threads"))
            bench_sim(atoi(argv[i + 1]), DDP_SIM_TASKS_THREADS);
        else if (!strcmp(argv[i], "spawn"))
            bench_real(atoi(argv[i + 1]), 0);
        else
            bench_real(atoi(argv[i + 1]), 1);
    }
    return 0;
}
