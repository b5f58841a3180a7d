/* bench/ctxbaton.c — the context-switch floor the simulator is measured
 * against: N user-space contexts, each on its own stack from the
 * simulator's stack slabs (16 KiB, its default, and a guard page), pass a
 * baton through one scheduler context with the simulator's own switch (sim_ctx.c), H
 * hand-offs per context, the next context picked by a seeded PRNG among
 * those not finished, as the scheduler picks among runnable tasks. Each
 * context touches 4 KiB of its stack at start, as a task's first frames
 * do. What it leaves out is what the simulator adds: the network, the
 * store, the plugin, the clock. Prints the CPU time (user + system) and
 * wall time of the run and ns per hand-off. Figures only.
 *   ctxbaton [N H]    (e.g. H = a simulation's hand-offs / N; default
 *                      4096 6, sim_scale's hand-offs per rank) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../sim/sim_priv.h"
#include "bench_cpu.h"

typedef struct baton {
    sim_ctx_t ctx;
    int left; /* hand-offs still to make */
} baton_t;

static sim_ctx_t sched;
static baton_t *cur;

static void body(void)
{
    ddp__ctx_entered();
    volatile char frame[4096];
    memset((char *)frame, 1, sizeof frame);
    while (cur->left > 0) {
        cur->left--;
        ddp__ctx_switch(&cur->ctx, &sched, 1);
    }
    ddp__ctx_switch(&cur->ctx, &sched, 0); /* done: never resumed */
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if ((argc != 1 && argc != 3) || (argc == 3 && (atoi(argv[1]) < 1 || atoi(argv[2]) < 0))) {
        fprintf(stderr, "usage: ctxbaton [N H] (N >= 1 contexts, H >= 0 hand-offs each)\n");
        return 2;
    }
    int n = argc == 3 ? atoi(argv[1]) : 4096, h = argc == 3 ? atoi(argv[2]) : 6;
    double t0 = wall(), c0 = bench_cpu();
    baton_t *b = calloc((size_t)n, sizeof *b);
    int *live = malloc(sizeof *live * (size_t)n);
    sim_stacks_t stacks;
    memset(&stacks, 0, sizeof stacks);
    if (!b || !live)
        return 1;
    ddp__ctx_main(&sched);
    for (int i = 0; i < n; i++) {
        if (ddp__stacks_get(&stacks, 16 << 10, 0, &b[i].ctx.stack) != 0) {
            fprintf(stderr, "ctxbaton: out of stack memory at %d contexts\n", i);
            return 1;
        }
        b[i].left = h;
        live[i] = i;
    }
    uint64_t rng = 0x9E3779B97F4A7C15ull, switches = 0;
    int nlive = n;
    char *started = calloc((size_t)n, 1);
    while (nlive > 0) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int k = (int)(rng % (uint64_t)nlive), i = live[k];
        cur = &b[i];
        int last = cur->left == 0;
        if (!started[i]) {
            started[i] = 1;
            ddp__ctx_start(&cur->ctx, body);
        }
        ddp__ctx_switch(&sched, &cur->ctx, 1);
        switches++;
        if (last) {
            ddp__ctx_retire(&cur->ctx);
            live[k] = live[--nlive];
        }
    }
    double dt = wall() - t0, dc = bench_cpu() - c0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("ctxbaton %d contexts x %d hand-offs (%s): cpu %.3f s, wall %.3f s, %.0f ns "
           "per hand-off (cpu), peak RSS %.1f MiB\n",
           n, h, ddp__ctx_kind(), dc, dt, dc * 1e9 / (double)switches,
           (double)ru.ru_maxrss / 1024.0);
    ddp__stacks_free(&stacks);
    free(started);
    free(live);
    free(b);
    return 0;
}
