/* harness/real_priv.h — what the real runner and the processes it starts
 * share (harness/real.c, harness/real_child.c). */
#ifndef DDP_HARNESS_REAL_PRIV_H
#define DDP_HARNESS_REAL_PRIV_H

#include "ddp/plan.h"
#include "ddp/sim.h"
#include "ddp/sys.h"

/* The bridge's own address in the root namespace: the delay proxy listens
 * there. Nodes are 10.213.x.y/16. */
#define DDP_REAL_BRIDGE_ADDR "10.213.255.254"

/* Runs a command (30 s bound); its exit status, or a negative code.
 * quiet_fail: a non-zero status is returned without an error. */
int ddp__real_run_argv(ddp_sys_t *sys, char *const *argv, int quiet_fail);
#define RUN(...) ddp__real_run_argv(sys, (char *const[]){__VA_ARGS__, NULL}, 0)
#define RUN_QUIET(...) ddp__real_run_argv(sys, (char *const[]){__VA_ARGS__, NULL}, 1)
/* As RUN_QUIET, and what the command prints is discarded too. */
#define RUN_SILENT(...) ddp__real_run_argv(sys, (char *const[]){__VA_ARGS__, NULL}, 2)

/* A run's network namespaces: a bridge and one namespace per node. */
typedef struct ddp_netns {
    int on, nodes;
    int hosts; /* /etc/netns/NAME/hosts written (ddp__real_netns_hosts) */
    char tag[16]; /* ddps<hex> */
} ddp_netns_t;
void ddp__real_ns_name(const ddp_netns_t *ns, int i, char *buf, size_t n);
/* Node i's address: 127.0.x.y on loopback, 10.213.x.y in namespaces. */
void ddp__real_node_ip(int netns, int i, char *buf, size_t n);
int ddp__real_netns_up(ddp_sys_t *sys, ddp_netns_t *ns, int nodes, int64_t latency_ns);
/* Removes what runs killed by SIGKILL left (their namespaces, /etc/netns
 * files and bridges, from their records); ddp__real_netns_up calls it
 * first. Returns how many runs' were swept. */
int ddp__real_netns_sweep(ddp_sys_t *sys);
/* How many namespaces could not be deleted (the first one's name in left). */
int ddp__real_netns_down(ddp_sys_t *sys, ddp_netns_t *ns, char *left, size_t left_len);
/* The plan's `iface` lines in the node namespaces: an eth0 address is
 * added to eth0 (the runner's 10.213 address stays), another name is an
 * interface of its own with that address (a bridge with no ports: this
 * kernel has no dummy links, and docker0 is a bridge). */
int ddp__real_netns_ifaces(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_plan_t *p);
/* Each node namespace's /etc/netns/NAME/hosts (which `ip netns exec`
 * mounts over /etc/hosts): every node's name and address, so that a
 * program resolving a node's host name (torch's agent gives its workers
 * socket.getfqdn() as MASTER_ADDR) reaches that node. Removed by
 * ddp__real_netns_down. */
int ddp__real_netns_hosts(ddp_netns_t *ns, const ddp_plan_t *p);
/* 0 when tc netem works in node 0's namespace (added to its lo and taken
 * off again), else DDP_EUNSUPPORTED. */
int ddp__real_netem_probe(ddp_sys_t *sys, const ddp_netns_t *ns);
/* A link fault on (on_off) or off in the namespaces: delay = netem on every
 * node's eth0, bandwidth = tbf on the eth0 of its node (every node's
 * without node=), partition = the veths of its side down. Nonzero (error
 * set) when the tbf could not be put on. */
int ddp__real_link_cmd(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_fault_t *f,
                       int on_off);
/* Adds (on) or deletes the nft rules of fault `fault` in the namespaces it
 * applies to (one table "f<index>" each). */
int ddp__real_nft(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_plan_t *p, int fault,
                  int on);

/* The delay proxy: a thread of the runner listening on `listen`, forwarding
 * each connection to `target` and holding every chunk for the delay of the
 * moment (the plan's latency plus its active delay faults for the
 * client's node). *port: where it listens. */
typedef struct ddp_real_proxy ddp_real_proxy_t;
int ddp__real_proxy_start(ddp_sys_t *sys, const ddp_plan_t *p, int64_t t0,
                          const ddp_addr_t *listen, const ddp_addr_t *target,
                          ddp_real_proxy_t **out, uint16_t *port);
/* The runner opens (on) or closes fault `fault`'s window for the proxy. */
void ddp__real_proxy_set(ddp_real_proxy_t *x, int fault, int on);
/* Stops and frees it; adds each delay fault's hits (the chunks it delayed)
 * to hits[i] where hits[i] >= 0 (hits may be NULL). */
void ddp__real_proxy_stop(ddp_real_proxy_t *x, long long *hits, int n);
/* In node's namespace: connections to master:master_port go to the proxy. */
int ddp__real_dnat(ddp_sys_t *sys, const ddp_netns_t *ns, int node, const char *master,
                   uint16_t master_port, uint16_t proxy_port);

/* A silent node crash (fault index fault): every packet node's namespace
 * sends or receives is dropped from now on (table "c<fault>", going with
 * the namespace). Nonzero (error set) when nft could not. */
int ddp__real_silence(ddp_sys_t *sys, const ddp_netns_t *ns, int node, int fault);

/* The packets fault `fault`'s nft rules acted on, summed over the
 * namespaces (each rule has a counter); read before the rules go. scratch:
 * a file path for nft's output (removed). */
/* The packets link fault f's qdiscs acted on, summed over the namespaces:
 * netem (delay) counts every packet it sent, tbf (bandwidth) the packets
 * that waited behind the limit. Read before the qdiscs go. */
long long ddp__real_link_hits(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_fault_t *f,
                              const char *scratch);
long long ddp__real_nft_hits(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_plan_t *p,
                             int fault, const char *scratch);

/* E records: an event one process of a real run saw (or the runner: a
 * spawn, an exit) that some fault's window waits for, appended to the
 * plan's results file with its time from the run's start; every process
 * and the runner read them back, so a window opens on any process's event
 * as in the simulator. ddp__real_events_read feeds the records past *off
 * (moved on) to each faultset at base + their time; returns how many
 * windows opened or closed.
 *
 * A window the runner realises (nft rules, signals, qdiscs, the proxy)
 * takes it a few spawned commands to put in force, and the process that
 * saw the event would be past the phase by then. So such an event carries
 * an ack number (nonzero): the process waits (ddp__real_ack_wait) until
 * the runner has applied the windows and appended "A <ack>"; acks of
 * ddp__real_events_read collects the numbers for the runner (NULL: a
 * process, which does not ack). */
void ddp__real_event_write(const char *results, const ddp_fault_event_t *ev, int64_t t,
                           unsigned long long ack);
typedef struct {
    unsigned long long v[64]; /* the ack numbers to write */
    int n;
    /* The runner's time (from the run's start) as it reads: an event whose
     * process waits for the ack counts at this time when it was written
     * earlier. The process, and at a hosted store every client with it,
     * went no further meanwhile; a window of the event's own time would
     * open and close unseen by a runner that read it late (a pause on
     * set:*rank_3*, end=5s, read 6 s late at load 30: "0 processes
     * stopped"). */
    int64_t now;
} ddp__real_acks_t;
int ddp__real_events_read(const char *results, long *off, ddp_faultset_t *const *fss, int nfs,
                          int64_t base, ddp__real_acks_t *acks);
/* Calls tap for every E record of the results file, from its start (the
 * events a run with plan->discover recorded: `ddpsim check --exec`). */
void ddp__real_events_tap(const char *results,
                          void (*tap)(void *arg, const ddp_fault_event_t *ev, int node,
                                      int64_t t),
                          void *arg);
/* Appends the runner's "A <ack>" record. */
void ddp__real_ack_write(const char *results, unsigned long long ack);
/* Waits until results holds "A <ack>" or the deadline; 0 when it does. */
int ddp__real_ack_wait(ddp_sys_t *sys, const char *results, unsigned long long ack,
                       int64_t deadline);

/* The one executor (a DDP_EXEC_* bit) that realises f in a real run
 * (exec: a foreign program's), chosen from mask, its kind's executors
 * column of DDP_FAULT_KINDS; 0 when none can (harness/real_kinds.c). */
unsigned ddp__real_executor(const ddp_fault_t *f, unsigned mask, int exec);
/* The signal that realises f when its executor is DDP_EXEC_SIGNAL: 9
 * (SIGKILL) for a crash, 19 (SIGSTOP, SIGCONT after) for a pause, 0 for a
 * kind no signal realises. */
int ddp__real_signal(const ddp_fault_t *f);
/* NULL when ddp__real_executor finds an executor; else why not, naming the
 * kind, its line and the table's executors for it, in buf. */
const char *ddp__real_no_executor(const ddp_fault_t *f, unsigned mask, int exec, int line,
                                  char *buf, size_t n);

/* 1 if the fault is realised inside ddpsim's own processes (libfiu at the
 * sys seam's points), 0 if by the runner (signals, links, port holders):
 * its executor is DDP_EXEC_INPROC. */
int ddp__real_in_process(const ddp_fault_t *f);

/* 1 if a netns run realises the fault with nft rules in the nodes'
 * namespaces whatever runs there: its kind lists DDP_EXEC_NFT and not
 * DDP_EXEC_INPROC (blackhole: drop; partition: drop between the node
 * sets). Refuse and reset are nft rules only for foreign programs, which
 * have no libfiu points. */
int ddp__real_nft_fault(const ddp_fault_t *f);

/* A foreign program's outcome: its code (0 for exit status 0; else by the
 * rules of harness/real_exec.c over its stderr, DDP_EINTERNAL when none
 * matches) and the message naming the line that says why. */
int ddp__real_classify(int status, const char *stderr_text, char *message, size_t n);

/* The program word of a shell command line (after any VAR=value words):
 * its start, and its length in *len (0: none). */
const char *ddp__real_program_word(const char *cmd, size_t *len);

/* A command line as the words of one simple command, so that the runner
 * execs the program itself, with no shell between it and its parent-death
 * signal: each word of cmd (split at blanks) copied into buf (n bytes) and
 * pointed to by words[0..], then NULL; the word count. 0 when sh is needed
 * (a quote, $, `, \, a glob, redirection, separator, comment, ~, a
 * VAR=value word first) or the words do not fit (max - 1 pointers, n
 * bytes). */
int ddp__real_exec_words(const char *cmd, char *buf, size_t n, char **words, int max);

/* torch's own elastic agent as a node's process (harness/real_agent.c). */
/* The agent's command line for exec cmd: `PY SCRIPT ARGS` becomes `PY -m
 * torch.distributed.run SCRIPT ARGS`, a torchrun command line stays; else
 * DDP_ECONFIG naming the forms. */
int ddp__real_agent_cmd(const char *cmd, char *out, size_t n);

#define DDP_REAL_MAX_WORKERS 512
/* A worker an agent started, as the runner saw it in the agent's session. */
typedef struct ddp_real_worker {
    long pid;
    int agent;              /* index of its agent in the runner's processes */
    int node, rank, local, attempt; /* attempt: its agent's start of it, from 0 */
    int fresh;              /* seen by the last poll for the first time */
    int gone, killed;       /* no longer in the session; killed by a fault */
    int64_t first_ns, end_ns;
    char err[300];          /* its stderr (a file of torch's --log_dir) */
} ddp_real_worker_t;
typedef struct ddp_real_workers {
    ddp_real_worker_t w[DDP_REAL_MAX_WORKERS];
    int n;
} ddp_real_workers_t;
/* Looks at agent agent's session (its pid agent_pid) at now: new workers
 * are added with fresh set (the number returned), vanished ones get gone
 * and end_ns. A negative code when /proc cannot be read. */
int ddp__real_workers_poll(ddp_real_workers_t *ws, long agent_pid, int agent, int node,
                           int64_t now);
/* The workers' outcomes appended to *outs (n so far): the new count, or a
 * negative code. agent_status[i] / agent_err[i]: agent i's exit status and
 * stderr text (NULL when none). */
int ddp__real_worker_outcomes(const ddp_plan_t *plan, const ddp_real_workers_t *ws,
                              const int *agent_status, const char *const *agent_err,
                              ddp_sim_outcome_t **outs, int n);
/* 1 and "ChildFailedError: worker group failed: rank R (local_rank: L),
 * exitcode E (pid: P)" in out when an agent's stderr text holds torch's
 * failure table, else 0. */
int ddp__real_agent_failure(const char *text, char *out, size_t n);
/* The MASTER_PORT job's processes get (0: the run's job, 1: a second
 * job): 29500 when unset (torch's default and ours), -1 when it is set to
 * no fixed port: 0 (an ephemeral port, a world of 1) or a value out of
 * 1..65535 (which the ranks refuse). The pre-run port check, the store a
 * run hosts and the delay proxy look at it. */
long ddp__real_job_port(const ddp_plan_t *plan, int job);
/* Up to 64 KiB of a file, NUL-terminated; free() it. */
char *ddp__real_slurp(const char *path);

/* The run loop's sleep after one that slept prev: 5 ms where the last
 * round saw something happen (changed: a record, a start, an exit, a
 * fault switched), else twice prev up to 20 ms (a quiet run wakes 50
 * times a second, not 200), and never past due_in (the next start; one
 * overdue, held by a pause, waits for the pause's end: a change). */
int64_t ddp__real_loop_sleep(int64_t prev, int changed, int64_t due_in);

/* The warm start (harness/real_warm.c): one fork server per ddpsim
 * process (a zygote) imports the heavy Python modules once and forks each
 * rank, of any node and any run, into its script. command: 1 when words (n
 * of them, an --exec's own words) are a Python or scripts/torch-python
 * running a *.py script. get: the zygote for program (words[0]) importing
 * modules ("torch,numpy") with env (its PYTHONPATH decides what it finds),
 * started and ready (2 min at most) where there is none for them: 0 and
 * *out (this process's until ddp_real_warm_release), or a negative code
 * with the error set (the caller starts its ranks cold). spawn: one rank
 * (argv: the --exec's words) in network namespace netns (its name; NULL or
 * "": the runner's), with its own environment and output files: the pid of
 * a child of the caller's process. */
typedef struct ddp_real_warm ddp_real_warm_t;
int ddp__real_warm_command(char *const *words, int n);
typedef struct ddp_real_warm_where {
    const char *ddpsim;  /* the ddpsim binary (scripts/ is found beside its build) */
    const char *errpath; /* its stdout and stderr */
} ddp_real_warm_where_t;
int ddp__real_warm_get(ddp_sys_t *sys, const ddp_real_warm_where_t *at, const char *program,
                       const char *modules, const struct ddp_env *env, ddp_real_warm_t **out);
int ddp__real_warm_spawn(ddp_real_warm_t *w, const char *netns, char *const *argv,
                         const struct ddp_env *env, const char *out, const char *err,
                         ddp_pid_t *pid);

#endif
