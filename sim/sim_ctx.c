/* sim/sim_ctx.c — user-space contexts: the simulator's tasks as coroutines
 * on the thread that calls ddp_sim_run (docs/simulator.md § 1).
 *
 * A context is a stack of its own (cut from an mmap'd slab, with a guard
 * page below it, so an overflow faults instead of overwriting a neighbour)
 * and a saved stack pointer. On x86-64 the switch is the dozen instructions
 * below: push the callee-saved registers, MXCSR and the x87 control word
 * on the old stack, store the stack pointer, load the new one, pop the
 * same. No system call. Elsewhere, when CET shadow stacks are compiled in
 * (a hand-made return to another stack would trip them), or with
 * -DDDP_SIM_UCONTEXT, it is ucontext's swapcontext, which also saves and
 * restores the signal mask with one rt_sigprocmask system call per switch
 * (measured on the benchmark machine: 180 ns a switch, against 12 ns for
 * the hand-written one; docs/benchmarks.md § 5.1).
 *
 * The sanitizers are told of every switch: ASan through
 * __sanitizer_start/finish_switch_fiber (a context that leaves for good
 * passes NULL, so its fake stack is released), TSan through its fiber API
 * (switches synchronise, as the baton did). Valgrind is told where each
 * stack is (VALGRIND_STACK_REGISTER), so it does not take a switch for a
 * stack overflow. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_priv.h"

#ifdef SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef SIM_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define CTX_VALGRIND 1
#endif
#endif

#if defined(__x86_64__) && !defined(DDP_SIM_UCONTEXT) &&                      \
    !(defined(__CET__) && (__CET__ & 2))
#define CTX_X86_64 1
#else
#include <ucontext.h>
#endif

#ifdef CTX_X86_64
/* ddp__ctx_jump(&from->sp, to->sp): saves the caller's callee-saved state on
 * its stack, leaves its stack pointer in *save and resumes the context whose
 * stack pointer is `to` (saved by an earlier jump, or laid out by
 * ddp__ctx_start to "return" into ddp__ctx_boot). */
void ddp__ctx_jump(void **save, void *to);
void ddp__ctx_boot(void);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl ddp__ctx_jump\n"
        ".hidden ddp__ctx_jump\n"
        ".type ddp__ctx_jump,@function\n"
        "ddp__ctx_jump:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size ddp__ctx_jump, .-ddp__ctx_jump\n"
        /* The first "return" of a new context lands here with the entry
         * function in r13; it never returns (the ud2 says so). */
        ".p2align 4\n"
        ".globl ddp__ctx_boot\n"
        ".hidden ddp__ctx_boot\n"
        ".type ddp__ctx_boot,@function\n"
        "ddp__ctx_boot:\n"
        "  .cfi_startproc\n"
        "  .cfi_undefined rip\n"
        "  xorl %ebp, %ebp\n"
        "  callq *%r13\n"
        "  ud2\n"
        "  .cfi_endproc\n"
        ".size ddp__ctx_boot, .-ddp__ctx_boot\n"
        ".popsection\n");
#endif

/* The context being left, so that the one arriving can learn its stack
 * (ASan needs the bounds of the thread's own stack to switch back to it). */
static _Thread_local sim_ctx_t *leaving;

/* Stacks are cut from slabs, one mapping of up to STACKS_PER_SLAB slots
 * each: one mmap per slab, and per stack one mprotect for its guard page
 * (a task's own guard, so 2 VMAs a stack, as with threads). Behind the
 * slots, the same mapping holds each slot's aux block, densely (the
 * scheduler's per-task identity state: on the stack's own top it pushed
 * the deepest frames of a simulated rank onto a second page). A stack
 * given back, with its aux block, is handed out again before a new slot is
 * cut.
 *
 * Slabs outlive the simulation that mapped them: ddp__stacks_free hands
 * up to CACHE_SLABS of them to a process-wide cache, guards in place, and
 * the next simulation takes a cached slab before it maps a new one. A
 * sweep (`ddpsim explore`, `run` over many scenarios, a shard) runs
 * thousands of simulations in one process; each used to map its stacks
 * afresh, and every first touch of a stack or aux page was a page fault:
 * 37 per run of 16 ranks, 2,100 per run of 1,024 (docs/benchmarks.md
 * § 15). A cached slab keeps resident what its tasks touched (a stack page
 * or two and a ~100-byte aux block each); 64 slabs hold 4,096 tasks' stacks. */
#define STACKS_PER_SLAB 64
#define SLAB_MAX_BYTES (64u << 20)
#define CACHE_SLABS 64

static struct {
    pthread_mutex_t mu; /* process-wide: any thread may run a simulation */
    sim_slab_t s[CACHE_SLABS];
    int n;
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *xgrow(void *p, int *cap, size_t elem)
{
    int nc = *cap ? *cap * 2 : 16;
    void *q = realloc(p, elem * (size_t)nc);
    if (!q)
        return NULL;
    *cap = nc;
    return q;
}

/* A guard page: where the kernel has them (Linux 6.13), a guard region
 * (MADV_GUARD_INSTALL: page tables only, no VMA split, so neither a second
 * VMA per stack nor vm.max_map_count bounds the task count); else
 * PROT_NONE, which splits the slab's VMA. */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
static int guard(char *at, size_t page)
{
    static atomic_int no_guard_regions; /* simulations may run in several threads */
    if (!atomic_load_explicit(&no_guard_regions, memory_order_relaxed)) {
        if (madvise(at, page, MADV_GUARD_INSTALL) == 0)
            return 0;
        atomic_store_explicit(&no_guard_regions, 1, memory_order_relaxed);
    }
    return mprotect(at, page, PROT_NONE);
}

/* A cached slab of this shape, out of the cache (0), or -1: none. */
static int cache_take(size_t slot, size_t aux, sim_slab_t *out)
{
    int found = -1;
    pthread_mutex_lock(&cache.mu);
    for (int i = cache.n - 1; i >= 0 && found < 0; i--) {
        if (cache.s[i].slot == slot && cache.s[i].aux == aux) {
            *out = cache.s[i];
            cache.s[i] = cache.s[--cache.n];
            found = 0;
        }
    }
    pthread_mutex_unlock(&cache.mu);
    return found;
}

/* Keeps the slab for a later simulation (1), or 0: the cache is full. */
static int cache_put(const sim_slab_t *c)
{
    int kept = 0;
    pthread_mutex_lock(&cache.mu);
    if (cache.n < CACHE_SLABS) {
        cache.s[cache.n++] = *c;
        kept = 1;
    }
    pthread_mutex_unlock(&cache.mu);
    return kept;
}

/* The current slab is left behind (for the next one, or at the end): its
 * slots used so far, or by an earlier simulation, are not fresh now. */
static void slab_done(sim_stacks_t *p)
{
    if (p->nslabs > 0) {
        int used = p->slabs[p->nslabs - 1].n - p->left;
        if (used > p->slabs[p->nslabs - 1].cut)
            p->slabs[p->nslabs - 1].cut = used;
    }
}

/* The next slab: a cached one of the same shape (its first `cut` slots
 * already guarded, its bytes a finished simulation's), else a new mapping. */
static int next_slab(sim_stacks_t *p, size_t slot, size_t aux)
{
    int n = (int)(SLAB_MAX_BYTES / (slot + aux));
    n = n < 1 ? 1 : n > STACKS_PER_SLAB ? STACKS_PER_SLAB : n;
    if (p->nslabs == p->slabs_cap) {
        void *g = xgrow(p->slabs, &p->slabs_cap, sizeof *p->slabs);
        if (!g)
            return -ENOMEM;
        p->slabs = g;
    }
    slab_done(p);
    sim_slab_t c;
    if (cache_take(slot, aux, &c) != 0) {
        c = (sim_slab_t){.len = (slot + aux) * (size_t)n, .slot = slot, .aux = aux, .n = n};
        c.map = mmap(NULL, c.len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (c.map == MAP_FAILED)
            return -errno;
    }
    p->slabs[p->nslabs++] = c;
    p->next = c.map;
    p->next_aux = c.map + slot * (size_t)c.n;
    p->left = c.n;
    return 0;
}

/* The stack margin check (ddp__stacks_measure, sim_priv.h). */
static atomic_int measuring;
static atomic_size_t deepest;

void ddp__stacks_measure(int on)
{
    if (on)
        atomic_store(&deepest, 0);
    atomic_store(&measuring, on);
}

size_t ddp__stacks_deepest(void) { return atomic_load(&deepest); }

/* The deepest byte written on s (handed out zeroed while measuring). */
static void measure(const sim_stack_t *s)
{
    size_t off = 0;
    while (off < s->size && s->base[off] == 0)
        off++;
    size_t d = s->size - off, was = atomic_load(&deepest);
    while (d > was && !atomic_compare_exchange_weak(&deepest, &was, d))
        ;
}

size_t ddp__stacks_slot_bytes(size_t size, size_t aux)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size + page - 1) / page * page + page + ((aux + 63) & ~(size_t)63);
}

int ddp__stacks_get(sim_stacks_t *p, size_t size, size_t aux, sim_stack_t *out)
{
    if (p->nfree) {
        *out = p->free[--p->nfree];
        out->fresh = 0;
        if (atomic_load_explicit(&measuring, memory_order_relaxed))
            memset(out->base, 0, out->size);
        return 0;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size = (size + page - 1) / page * page;
    aux = (aux + 63) & ~(size_t)63;
    /* left > 0: there is a current slab */
    const sim_slab_t *cur = p->left ? &p->slabs[p->nslabs - 1] : NULL;
    if (!cur || cur->slot != size + page || cur->aux != aux) {
        int rc = next_slab(p, size + page, aux);
        if (rc)
            return rc;
    }
    if (p->nall == p->all_cap) {
        void *g = xgrow(p->all, &p->all_cap, sizeof *p->all);
        if (!g)
            return -ENOMEM;
        p->all = g;
    }
    /* The slots an earlier simulation cut come first: guarded, not zeros.
     * (The current slab's cut is raised only when it is left behind.) */
    cur = &p->slabs[p->nslabs - 1];
    int primed = cur->n - p->left < cur->cut;
    if (!primed && guard(p->next, page) != 0)
        return -errno;
    out->base = p->next + page;
    out->size = size;
    out->aux = aux ? p->next_aux : NULL;
    out->fresh = !primed; /* else a finished simulation's bytes */
    if (primed && atomic_load_explicit(&measuring, memory_order_relaxed))
        memset(out->base, 0, out->size);
#ifdef CTX_VALGRIND
    out->vg_id = VALGRIND_STACK_REGISTER(out->base, out->base + out->size);
#endif
    p->all[p->nall++] = *out;
    p->next += cur->slot;
    p->next_aux += cur->aux;
    p->left--;
    return 0;
}

int ddp__stacks_put(sim_stacks_t *p, const sim_stack_t *s)
{
    if (atomic_load_explicit(&measuring, memory_order_relaxed))
        measure(s);
    if (p->nfree == p->free_cap) {
        void *g = xgrow(p->free, &p->free_cap, sizeof *p->free);
        if (!g)
            return -ENOMEM; /* the stack is just not reused */
        p->free = g;
    }
    p->free[p->nfree++] = *s;
    return 0;
}

void ddp__stacks_free(sim_stacks_t *p)
{
#ifdef CTX_VALGRIND
    for (int i = 0; i < p->nall; i++)
        VALGRIND_STACK_DEREGISTER(p->all[i].vg_id);
#endif
    for (int i = 0; i < p->nall && atomic_load(&measuring); i++)
        measure(&p->all[i]); /* the last task of each */
    slab_done(p);
    for (int i = 0; i < p->nslabs; i++) {
#ifdef SIM_ASAN
        /* Frames a task left without returning keep their scopes poisoned
         * in the shadow, which munmap does not clear: the next mapping at
         * these addresses (a thread's stack and TLS), or the next
         * simulation's tasks on a cached slab, would inherit them. */
        ASAN_UNPOISON_MEMORY_REGION(p->slabs[i].map, p->slabs[i].len);
#endif
        if (!cache_put(&p->slabs[i]))
            munmap(p->slabs[i].map, p->slabs[i].len);
    }
    free(p->slabs);
    free(p->all);
    free(p->free);
    memset(p, 0, sizeof *p);
}

void ddp__ctx_main(sim_ctx_t *c)
{
    memset(c, 0, sizeof *c);
#ifdef SIM_TSAN
    c->fiber = __tsan_get_current_fiber();
#endif
#ifndef CTX_X86_64
    c->uc = calloc(1, sizeof(ucontext_t));
    if (!c->uc)
        abort();
#endif
}

void ddp__ctx_start(sim_ctx_t *c, void (*entry)(void))
{
#ifdef SIM_ASAN
    /* A reused stack still carries the poisoned redzones of the frames its
     * last task left without returning. */
    ASAN_UNPOISON_MEMORY_REGION(c->stack.base, c->stack.size);
#endif
#ifdef SIM_TSAN
    c->fiber = __tsan_create_fiber(0);
#endif
#ifdef CTX_X86_64
    /* The frame ddp__ctx_jump pops: MXCSR + x87 control word, r15, r14,
     * r13 (the entry), r12, rbx, rbp, then the return address. After the
     * ret, rsp is 16-byte aligned, as a call into ddp__ctx_boot would
     * leave it minus the return address that its own call then pushes. */
    uintptr_t top =
        ((uintptr_t)(c->stack.base + c->stack.size) & ~(uintptr_t)15) - 16;
    uint64_t *sp = (uint64_t *)top - 8;
    uint32_t csr;
    uint16_t cw;
    __asm__ volatile("stmxcsr %0" : "=m"(csr));
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    memset(sp, 0, 8 * sizeof *sp);
    sp[0] = (uint64_t)csr | (uint64_t)cw << 32;
    sp[3] = (uint64_t)(uintptr_t)entry; /* r13 */
    sp[7] = (uint64_t)(uintptr_t)ddp__ctx_boot;
    c->sp = sp;
#else
    if (!c->uc && !(c->uc = calloc(1, sizeof(ucontext_t))))
        abort();
    ucontext_t *uc = c->uc;
    getcontext(uc);
    uc->uc_stack.ss_sp = c->stack.base;
    uc->uc_stack.ss_size = c->stack.size;
    uc->uc_link = NULL;
    makecontext(uc, entry, 0);
#endif
}

static void landed(void *fake)
{
#ifdef SIM_ASAN
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(fake, &bottom, &size);
    if (leaving && !leaving->known) {
        leaving->asan_bottom = bottom;
        leaving->asan_size = size;
        leaving->known = 1;
    }
#else
    (void)fake;
#endif
}

void ddp__ctx_entered(void) { landed(NULL); }

void ddp__ctx_switch(sim_ctx_t *from, sim_ctx_t *to, int keep)
{
#ifdef SIM_ASAN
    const void *bottom = to->stack.base ? (const void *)to->stack.base : to->asan_bottom;
    size_t size = to->stack.base ? to->stack.size : to->asan_size;
    __sanitizer_start_switch_fiber(keep ? &from->fake : NULL, bottom, size);
#endif
#ifdef SIM_TSAN
    __tsan_switch_to_fiber(to->fiber, 0);
#endif
    (void)keep;
    leaving = from;
#ifdef CTX_X86_64
    ddp__ctx_jump(&from->sp, to->sp);
#else
    swapcontext(from->uc, to->uc);
#endif
    landed(from->fake);
}

void ddp__ctx_retire(sim_ctx_t *c)
{
#ifdef SIM_TSAN
    if (c->fiber && c->stack.base) /* the thread's own fiber stays */
        __tsan_destroy_fiber(c->fiber);
    c->fiber = NULL;
#endif
    (void)c;
}

void ddp__ctx_free(sim_ctx_t *c)
{
    ddp__ctx_retire(c);
#ifndef CTX_X86_64
    free(c->uc);
    c->uc = NULL;
#endif
}

const char *ddp__ctx_kind(void)
{
#ifdef CTX_X86_64
    return "x86-64 switch";
#else
    return "ucontext";
#endif
}
