/* sim/sim_oom.c — when the simulator cannot get memory, say what ran out.
 *
 * At scale the first thing to run out is usually the address space, not
 * memory: each task reserves a stack slot (its stack, a guard page and its
 * identity state) of which it touches a page or two, so a run reserves
 * several times what it keeps resident, and `ulimit -v` counts the
 * reservation. The report names which of the two ran out and, for the
 * address space, the `ulimit -v` the run needs: what is mapped now plus a
 * slot for each task still to come, with a quarter more for the heap that
 * grows with the tasks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ddp/host.h"
#include "sim_priv.h"

/* The simulation this thread builds or schedules (a task's own is found
 * through ddp__sim_current). */
static _Thread_local const ddp_sim_t *tls_sim;

void ddp__sim_oom_scope(const ddp_sim_t *sim)
{
    tls_sim = sim;
}

/* KiB of address space the process maps now (-1: unknown). */
static long long kib_mapped(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = -1;
    if (f) {
        if (fscanf(f, "%lld", &pages) != 1)
            pages = -1;
        fclose(f);
    }
    return pages < 0 ? -1 : pages * (long long)(sysconf(_SC_PAGESIZE) / 1024);
}

/* The tasks the run will have at once, as far as it is known: those added
 * so far, or the job's world and a launcher per node when larger. */
static long long tasks_expected(const ddp_sim_t *sim)
{
    long long w = (long long)sim->o.world + sim->nnodes;
    return sim->ntasks > w ? sim->ntasks : w;
}

size_t ddp__sim_oom_advice(const ddp_sim_t *sim, size_t bytes, char *buf, size_t n)
{
    long long limit = ddp_sys_host_as_limit_kib();
    long long vm = kib_mapped(), want = (long long)(bytes / 1024);
    /* within 64 MiB of the limit: a heap or slab mapping would not fit */
    int as = limit >= 0 && (vm < 0 || vm + want + 65536 >= limit);
    size_t slot = sim ? ddp__stacks_slot_bytes(ddp__sim_stack_size(sim), ddp_ident_state_size())
                      : 0;
    long long tasks = sim ? tasks_expected(sim) : 0, cut = sim ? sim->stacks.nall : 0;
    long long more = tasks > cut ? tasks - cut : 0;
    long long need = (vm > 0 ? vm : 0) + more * (long long)(slot / 1024);
    need += need / 4;
    need = (need + 1048575) / 1048576 * 1048576; /* whole GiB */
    int w;
    if (as)
        w = snprintf(buf, n, "the address space ran out, not memory: ulimit -v is %lld KiB "
                             "and %lld KiB are mapped. Each task reserves a %zu KiB stack "
                             "slot (its stack, a guard page, its state) and touches a page "
                             "or two of it; %lld task(s), %lld slot(s) cut so far, need about "
                             "%lld KiB: run under `ulimit -v %lld` (%lld GiB) or unlimited",
                     limit, vm, slot / 1024, tasks, cut, need, need, need / 1048576);
    else
        w = snprintf(buf, n, "memory ran out (ulimit -v is %s, %lld KiB mapped): the host's "
                             "memory and swap, or its vm.max_map_count, are spent; %lld "
                             "task(s) reserve %zu KiB each: run fewer ranks or on a larger "
                             "host",
                     limit < 0 ? "unlimited" : "not reached", vm, tasks, slot / 1024);
    return w > 0 ? (size_t)w : 0;
}

void ddp__sim_oom(const char *what, size_t bytes)
{
    ddp_sim_task_t *t = ddp__sim_current();
    const ddp_sim_t *sim = t ? t->sim : tls_sim;
    char advice[768], when[64] = "";
    ddp__sim_oom_advice(sim, bytes, advice, sizeof advice);
    if (sim)
        snprintf(when, sizeof when, " at virtual %.3f s", (double)(sim->vt - VT0) / 1e9);
    fprintf(stderr, "ddpsim sim: out of memory: %s (%zu bytes) failed%s: %s\n", what, bytes,
            when, advice);
    abort();
}
