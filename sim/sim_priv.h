/* sim/sim_priv.h — internals shared by the simulator's files: the scheduler
 * (sim.c), the virtual network and sim sys (sim_net.c), faults (sim_fault.c)
 * and the trace (sim_trace.c). Not installed. */
#ifndef DDP_SIM_PRIV_H
#define DDP_SIM_PRIV_H

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/log.h"
#include "ddp/sim.h"
#include "ddp/sys.h"

#define VT0 DDP_NS_PER_S /* virtual time starts at 1 s: deadline 0 is past */
#define SIM_SEG_CLASSES 11 /* segment pool size classes: 64 B ... 64 KiB (sim_net.c) */

/* Which sanitizer this file is built under (GCC and clang spell it
 * differently): contexts tell ASan and TSan about each switch, and pooled
 * segments are poisoned under ASan. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define SIM_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(SIM_ASAN)
#define SIM_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(SIM_TSAN)
#define SIM_TSAN 1
#endif

/* Tasks parked on an object (socket, child exit). Spurious wake-ups are
 * allowed: every waiter rechecks its condition. */
typedef struct waitq {
    int *ids; /* task ids */
    int n, cap;
} waitq_t;

/* A node's interfaces: NULL ifs means the default two, lo (127.0.0.1/8,
 * ::1/128) and eth0 (its address), kept implicit so that 100k nodes cost
 * nothing; a scenario's `iface` lines make the list explicit. */
typedef struct sim_node {
    char host[64];
    ddp_addr_t addr;
    int64_t skew;
    int crashed;
    ddp_ifaddr_t *ifs;
    int nifs;
    int eth0_set; /* an explicit eth0 replaced the default one */
    int somaxconn; /* its listen backlog cap (0: the simulation's) */
} sim_node_t;

/* A name a node's own resolver answers before the cluster's host table
 * (its /etc/hosts): node -1 is every node; answers in the order added. */
typedef struct sim_hostent {
    int node;
    char name[64];
    ddp_addr_t addr;
} sim_hostent_t;

/* The node's interfaces (explicit or the default two): the count. */
int ddp__sim_node_ifs(const ddp_sim_t *sim, int node, ddp_ifaddr_t *out, int max);
/* Where a connect from node `from` to address a lands: the node, -2 for
 * `from` itself (loopback, or one of its own addresses: a docker bridge's
 * 172.17.0.1 is on every node), -1 nowhere (no node has it, or none that
 * shares a network with `from`: the SYN goes unanswered). */
int ddp__sim_route(const ddp_sim_t *sim, int from, const ddp_addr_t *a);

/* A task's stack in contexts mode (sim_ctx.c), with a guard page below
 * base. */
typedef struct sim_stack {
    char *base;     /* lowest usable address (NULL: none) */
    size_t size;
    unsigned vg_id; /* valgrind's stack id */
    char *aux;      /* the slot's aux block (ddp__stacks_get), or NULL */
    int fresh;      /* never used: stack and aux still the mapping's zeros */
} sim_stack_t;

/* A slab: one mapping of n stack slots (guard + stack, `slot` bytes
 * each), then their aux blocks (`aux` bytes each). */
typedef struct sim_slab {
    char *map;
    size_t len, slot, aux;
    int n, cut; /* slots, and how many are not fresh: cut (guard in place)
                 * by this simulation or an earlier one (sim_ctx.c) */
} sim_slab_t;

/* Where the stacks come from: slabs, cut into slots; stacks given back. */
typedef struct sim_stacks {
    sim_slab_t *slabs;
    int nslabs, slabs_cap;
    char *next;  /* the current slab's next slot */
    char *next_aux; /* ... and its aux block */
    int left;    /* slots left in it (its shape: slabs[nslabs - 1]) */
    sim_stack_t *all, *free;
    int nall, all_cap, nfree, free_cap;
} sim_stacks_t;

/* A user-space context: a task's, or the thread's own (stack.map NULL) that
 * called ddp_sim_run. */
typedef struct sim_ctx {
    void *sp;    /* saved stack pointer (hand-written switch) */
    void *uc;    /* ucontext_t (fallback switch) */
    sim_stack_t stack;
    void *fake;  /* ASan: fake stack kept while switched away */
    const void *asan_bottom; /* ASan: the thread's own stack, once known */
    size_t asan_size;
    int known;
    void *fiber; /* TSan */
} sim_ctx_t;

/* What a parked task waits on, kept as its parts and worded only when a
 * report asks (ddp__sim_wait_words): a task parks many times, and a report
 * is rare. */
typedef enum sim_wait_kind {
    SIM_WAIT_TEXT,    /* text: a string that outlives the run ("sleep") */
    SIM_WAIT_ACCEPT,  /* num: the port */
    SIM_WAIT_CONNECT, /* addr */
    SIM_WAIT_SEND,    /* addr: the peer (its receive window is full) */
    SIM_WAIT_RECV,    /* addr: the peer */
    SIM_WAIT_POLL,    /* num: the sockets */
    SIM_WAIT_CHILD,   /* text: the child task's name */
    SIM_WAIT_EPOLL,   /* num: the set */
} sim_wait_kind_t;

typedef struct sim_wait {
    sim_wait_kind_t kind;
    int num;
    const char *text;
    ddp_addr_t addr;
} sim_wait_t;

/* The words of w ("recv from 10.0.0.1:29500") into buf; returns buf. */
const char *ddp__sim_wait_words(const sim_wait_t *w, char *buf, size_t n);

struct ddp_sim_task {
    /* What a hand-off touches comes first, in a few cache lines: at
     * thousands of tasks none of them is still cached when its turn comes
     * again, and every line is a miss. */
    int id;
    int runnable_idx; /* index in sim->runnable, -1 if not there */
    ddp_sim_t *sim;
    int parked;
    int killed;      /* cancelled or crashed: every sim call fails */
    int stall;       /* a stall fault (its index + 1) matched at a phase
                        change: the task parks at its next sim call, not
                        inside libfiu's callback (libfiu counts recursion
                        per thread, and the contexts share one thread) */
    int64_t timer_gen; /* counts parks: a timer of an older park is stale */
    uint64_t timer_seq; /* its timer's sequence number (UINT64_MAX: none) */
    int64_t timer_of;  /* the park (timer_gen) that timer belongs to */
    int64_t parked_since;
    int64_t paused_until;
    char phase[48];  /* the phase it is in (a leave: event names it) */
    int late_done;   /* late faults were asked about its start */
    sim_ctx_t ctx;    /* contexts mode */
    ddp_ident_state_t *ident; /* contexts mode: rank, phase, error context */
    ddp_sys_t sys; /* this task's view of the world; impl = task */
    int proc;        /* the process: own id, or the creator's for a thread */
    int nthreads;    /* threads this process started */
    int started, finished; /* finished: its function returned (or it never started) */
    int *fds;        /* sockets this task owns (closed at exit) */
    int nfds, fds_cap;
    long kill_calls; /* sim calls made after being killed */
    ddp_sim_outcome_t out; /* name, node, state first; the message after */
    /* The rest: starts, exits, threads mode, reports. */
    ddp_sim_main_fn fn;
    void *arg;
    pthread_t th;     /* threads mode */
    int joined;
    sem_t sem;        /* the baton when efd < 0 */
    int efd;          /* the baton: an eventfd, written when it is our turn */
    int abandoned;    /* contexts mode: left for good without returning */
    int parent;      /* spawning task, -1 none */
    int exit_status;
    int reported_code; /* ddp_sim_report: the code of the outcome (0: none) */
    waitq_t exitq;   /* tasks waiting for this one to exit */
    int64_t start_ns; /* virtual start asked for (ddp_sim_task_start) */
    sim_wait_t wait;  /* what it waits on while parked */
    char name[48];
    int cuda_device;    /* simulated NCCL: cudaSetDevice of this task */
    char *nccl_err;     /* simulated NCCL: the process's ncclGetLastError,
                           allocated at its first error (NULL: none yet) */
};

typedef struct sim_event {
    int64_t t;
    uint64_t seq;
    int type;
    int a, b;   /* task id / socket fd ... */
    int64_t x;  /* generation, error code ... */
    void *data; /* payload (owned by the event) */
    size_t len;
} sim_event_t;

enum {
    EV_START = 1, /* (timers are not events: they have a heap of their own) */
    EV_SYN,    /* a = client fd, x = attempt */
    EV_SYNACK, /* a = client fd, b = server fd or -1, x = error */
    EV_DATA,   /* a = dest fd, data/len */
    EV_FIN,    /* a = dest fd */
    EV_RST,    /* a = dest fd */
    EV_CRASH,  /* a = task (-1), b = node (-1) */
};

/* A parked task's deadline: virtual time, and a sequence number drawn from
 * the events' counter (ties with events break the same way). */
typedef struct sim_timer {
    int64_t t;
    uint64_t seq;
    int id; /* the task */
} sim_timer_t;

typedef struct sim_file {
    char *path, *content;
} sim_file_t;

struct sock;

/* A segment a partition holds until an event ends it (sim_net.c). */
typedef struct sim_held {
    int fd, type;
    void *data;
    size_t len;
} sim_held_t;

struct ddp_sim {
    ddp_sim_opts_t o;
    ddp_rng_t rng;
    int64_t vt;
    uint64_t seq;
    sim_node_t *nodes;
    int nnodes, nodes_cap;
    int *by_host, *by_ip; /* the node index (sim.c): node + 1, 0 empty */
    size_t index_cap;
    struct {
        char *name;
        int node;
    } *aliases;
    int naliases;
    sim_hostent_t *hostents;
    int nhostents;
    int custom_ifs; /* some node's interfaces are explicit */
    sim_file_t *files;
    int nfiles;
    ddp_sim_task_t **tasks;
    int ntasks, tasks_cap;
    int *runnable;
    int nrunnable;
    sim_timer_t *timers; /* heap by (t, seq); dead entries dropped lazily (sim.c) */
    int ntimers, timers_cap;
    sim_event_t *heap;
    size_t nheap, heap_cap;
    struct sock **socks; /* fd -> socket; fds are never reused in a run */
    int nsocks, socks_cap;
    int *ltab; /* listeners by (node, port): chained hash of fds (sim_net.c) */
    size_t ltab_cap, nlisteners;
    sem_t main_sem;
    int contexts;   /* tasks are user-space contexts, not threads */
    sim_ctx_t main_ctx;            /* contexts: the thread's own */
    ddp_sim_task_t *cur;           /* contexts: running task, NULL: main_ctx */
    ddp_sim_task_t *zombie;        /* contexts: left for good, not reaped yet */
    ddp_sim_task_t *outer_task;    /* contexts: the sim task (if any) that called ddp_sim_run */
    ddp_ident_state_t *outer_ident; /* contexts: the caller's identity state */
    sim_stacks_t stacks;           /* contexts: the tasks' stacks */
    int cancelling;
    int unfinished; /* tasks not yet exited, crashed or cancelled */
    int time_limited;
    ddp_sim_result_t halted;  /* LIVELOCK / WALL_LIMIT: stopped by ddp__sim_tick */
    int64_t tick_vt;          /* virtual time at the last tick that saw it move */
    uint64_t tick_calls;      /* sim calls since */
    int64_t wall_start;       /* ddp_sys_now(o.wall_clock) at ddp_sim_run
                                 (o.wall_stall: when wall_vt was first seen) */
    int64_t wall_vt;          /* o.wall_stall: the instant wall_start is of */
    uint64_t handoffs, events;
    uint64_t rx_held, rx_peak; /* bytes in receive queues: now, at most */
    /* Freed segments kept for the next send of their size (sim_net.c):
     * a LIFO per power-of-two size class, 64 B ... 64 KiB. */
    void *seg_pool[SIM_SEG_CLASSES];
    int seg_pooled[SIM_SEG_CLASSES];
    ddp_fault_t *faults;
    int nfaults;
    ddp_faultset_t fs;     /* the faults' windows, draws and hits (at the run) */
    unsigned char *crash_queued; /* per fault: its timed crash is queued */
    sim_held_t *held;      /* segments held by event-ended partitions */
    int nheld, held_cap;
    int nbandwidth;        /* bandwidth faults: 0 = no uplink is ever limited */
    int64_t *uplink_free;  /* per node: when its uplink is free again (only
                              with bandwidth faults; allocated at the run) */
    /* trace */
    char *trace;
    size_t trace_len, trace_cap;
    uint64_t trace_hash, trace_lines;
    char trace_line[256]; /* the line being formatted (sim_trace.c) */
    char *deadlock;
    void **owned;
    int nowned;
    struct sim_epoll *epoll; /* readiness sets (sim_epoll.c), lazily */
    void **nccl_roots;       /* simulated NCCL's bootstrap roots (sim_nccl.c) */
    int nnccl_roots;
};

/* scheduler (sim.c) */
ddp_sim_task_t *ddp__sim_current(void);
/* The simulated NCCL library (sim_nccl.c); NULL where nccl.h was not found. */
const struct ddp_nccl_api *ddp__sim_nccl_api(void);
void ddp__sim_push_event(ddp_sim_t *sim, sim_event_t ev);
/* Parks the task until woken (or until deadline, in its node's clock).
 * Returns 0 when woken or timed out (caller rechecks), DDP_ECANCELED when the
 * task is killed. */
/* A killed task waiting for a killed sibling thread of its process to
 * finish unwinding: parks on q whatever its own state. w: what a task
 * waits on, for the reports (copied; a text it names must outlive the run). */
void ddp__sim_park_unwinding(ddp_sim_task_t *t, waitq_t *q, const sim_wait_t *w);
int ddp__sim_park(ddp_sim_task_t *t, int64_t deadline, waitq_t **qs, int nq,
                  const sim_wait_t *w);
void ddp__sim_wake(ddp_sim_t *sim, int task_id);
void ddp__waitq_add(waitq_t *q, int id);
void ddp__waitq_wake_all(ddp_sim_t *sim, waitq_t *q);
void ddp__waitq_free(waitq_t *q);
int64_t ddp__sim_task_now(ddp_sim_task_t *t);
/* The node with this host name / IPv4 address, -1: none. */
int ddp__sim_node_by_host(const ddp_sim_t *sim, const char *host);
int ddp__sim_node_by_ipv4(const ddp_sim_t *sim, const uint8_t ip[4]);
void ddp__sim_kill_task(ddp_sim_t *sim, ddp_sim_task_t *t, int crashed);
/* 1 if a killed task may not go on (counts its calls). */
int ddp__sim_check_killed(ddp_sim_task_t *t);
int ddp__sim_spawn_child(ddp_sim_task_t *parent, const ddp_spawn_t *w,
                         ddp_pid_t *pid);
int ddp__sim_thread(ddp_sim_task_t *parent, ddp_thread_fn fn, void *arg,
                    const char *name, ddp_thread_t *out);

/* contexts (sim_ctx.c) */
/* A stack of at least size bytes (one given back, or a new slot): 0 or
 * -errno. put gives one back; free unmaps them all. */
int ddp__stacks_get(sim_stacks_t *p, size_t size, size_t aux, sim_stack_t *out);
int ddp__stacks_put(sim_stacks_t *p, const sim_stack_t *s);
void ddp__stacks_free(sim_stacks_t *p);
/* The address space a stack of `size` with `aux` bytes beside it takes:
 * the slot ddp__stacks_get cuts (size and guard page rounded to pages). */
size_t ddp__stacks_slot_bytes(size_t size, size_t aux);
/* A task's stack size in this simulation (opts.stack_size, at least the
 * minimum). */
size_t ddp__sim_stack_size(const ddp_sim_t *sim);
/* The stack margin check (tests): while on (process-wide), a context's
 * stack is handed out holding zeros and scanned, when given back or freed,
 * for the deepest byte its tasks wrote. ddp__stacks_deepest: the deepest
 * since the last ddp__stacks_measure(1), in bytes below the stack's top.
 * Off, it costs nothing; on, a memset and a scan of every stack. */
void ddp__stacks_measure(int on);
size_t ddp__stacks_deepest(void);
/* Out of memory (sim_oom.c): prints what failed (`what`, `bytes`), whether
 * the address space or memory ran out and, for the address space, the
 * `ulimit -v` the run needs; then aborts. The simulation is the running
 * task's, else the one this thread last named with ddp__sim_oom_scope. */
_Noreturn void ddp__sim_oom(const char *what, size_t bytes);
void ddp__sim_oom_scope(const ddp_sim_t *sim);
/* That advice alone, into buf: its length. */
size_t ddp__sim_oom_advice(const ddp_sim_t *sim, size_t bytes, char *buf, size_t n);
void ddp__ctx_main(sim_ctx_t *c); /* the calling thread's */
/* A context on c->stack (all of it) that starts in entry. */
void ddp__ctx_start(sim_ctx_t *c, void (*entry)(void));
/* Leaves from (saved unless keep is 0: it is never resumed) for to. */
void ddp__ctx_switch(sim_ctx_t *from, sim_ctx_t *to, int keep);
void ddp__ctx_entered(void); /* first thing a new context's entry calls */
void ddp__ctx_retire(sim_ctx_t *c); /* a context left for good */
void ddp__ctx_free(sim_ctx_t *c);
const char *ddp__ctx_kind(void); /* "x86-64 switch" or "ucontext" */

/* network (sim_net.c) */
extern const ddp_sys_ops_t ddp__sim_sys_ops;
void ddp__sim_net_event(ddp_sim_t *sim, sim_event_t *ev);
void ddp__sim_seg_free(ddp_sim_t *sim, void *seg); /* an EV_DATA event's data */
void ddp__sim_close_task_socks(ddp_sim_t *sim, int task, int graceful);
void ddp__sim_net_free(ddp_sim_t *sim);

/* The state of an open socket of t's process as poll reports it (want:
 * DDP_POLLIN / OUT; ERR and HUP always), and whether fd is one. */
short ddp__sim_sock_ready(ddp_sim_task_t *t, int fd, short want);
int ddp__sim_sock_open(ddp_sim_task_t *t, int fd);

/* readiness sets (sim_epoll.c): the sys ops, and the hook every change of
 * a socket's state calls (a wake-up of its waiters). */
int ddp__sim_epoll_create(ddp_sys_t *sys);
int ddp__sim_epoll_ctl(ddp_sys_t *sys, int ep, int op, int fd, short events,
                       uint64_t data);
int ddp__sim_epoll_wait(ddp_sys_t *sys, int ep, ddp_epoll_event_t *out,
                        int max, int64_t deadline);
int ddp__sim_epoll_close(ddp_sys_t *sys, int ep);
void ddp__sim_epoll_notify(ddp_sim_t *sim, int fd);
void ddp__sim_epoll_free(ddp_sim_t *sim);

/* faults (sim_fault.c) */
/* Link state between two nodes at the current time: 0 up, 1 dropped;
 * *extra = added latency. */
int ddp__sim_link(ddp_sim_t *sim, int from, int to, int64_t *extra,
                  int64_t *heal_at);
/* A segment of len bytes that node `from` puts on its uplink at time `at`:
 * when its last bit has left, serialised behind what the uplink still
 * carries at the lowest rate of the bandwidth faults active on it; `at`
 * when none is (call only with sim->nbandwidth > 0). */
int64_t ddp__sim_uplink(ddp_sim_t *sim, int from, int64_t at, size_t len);
/* Per-call decision for a connect / resolve: 0 none, else the errno to fail
 * with (ETIMEDOUT = black hole: hang to the deadline). */
int ddp__sim_blackholed(ddp_sim_t *sim, int task, int dst_node, uint16_t port);
int ddp__sim_call_fault(ddp_sim_task_t *t, ddp_fault_id_t point, int dst_node,
                        uint16_t port);
void ddp__sim_faults_arm(ddp_sim_t *sim);
/* A timed (or event-opened) crash fault's window opened: its targets die. */
void ddp__sim_crash(ddp_sim_t *sim, int fault);
/* A process's spawn or exit event (DDP_TRIG_SPAWN, DDP_TRIG_EXIT). */
void ddp__sim_proc_event(ddp_sim_t *sim, ddp_sim_task_t *t, ddp_trigger_kind_t kind);
/* How late a late fault holds a process about to start (0: not). */
int64_t ddp__sim_late(ddp_sim_t *sim, const ddp_sim_task_t *t);
/* Segments a partition held until an event closes it: sent again now
 * where their link is open (sim_net.c). */
void ddp__sim_net_release_held(ddp_sim_t *sim);
/* A paused task sleeps out its pause here; DDP_ECANCELED if killed meanwhile. */
int ddp__sim_pause_point(ddp_sim_task_t *t);
void ddp__sim_faults_disarm(ddp_sim_t *sim);
int64_t ddp__sim_reset_after(ddp_sim_t *sim, int src, int dst, uint16_t port);

/* trace (sim_trace.c) */
void ddp__sim_trace(ddp_sim_t *sim, int task, const char *kind,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void ddp__sim_log_sink(void *arg, ddp_log_level_t level, const char *line);

/* The interface NCCL's bootstrap uses among all (the host's order), by
 * NCCL_SOCKET_IFNAME spec (NULL or "": unset) and NCCL_SOCKET_FAMILY fam
 * (NULL: unset): its index, or -1 when none qualifies
 * (sim/sim_nccl_iface.c). */
int ddp__nccl_boot_iface(const ddp_ifaddr_t *all, int n, const char *spec, const char *fam);

#endif
