/* harness/scenario_run.c — one scenario, one accelerator, one fresh simulation:
 * build the cluster and the launch, run, then judge the expectations and
 * the invariants of DESIGN §5 (docs/scenario-format.md, "Verdict"). */
#include "ddp/scenario.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/accel.h"
#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/plugin.h"
#include "ddp/plan.h"
#include "scenario_priv.h"

/* Slack past the group timeout before a task counts as overdue: teardown
 * (10 s server join), the missing-rank probe (2 s), the root-cause probe
 * (5 s) and a launcher's wait for its workers. */
#define DEADLINE_SLACK_NS (90 * DDP_NS_PER_S)

static void apply_env(ddp_env_t *env, int node, void *arg)
{
    const ddp_scenario_t *s = ((ddp_scn_edit_t *)arg)->s;
    for (int i = 0; i < s->nenv; i++) {
        const ddp_scn_env_t *e = &s->env[i];
        if (e->node >= 0 && e->node != node)
            continue;
        if (e->value)
            ddp_env_set(env, e->key, e->value);
        else
            ddp_env_unset(env, e->key);
    }
}

/* The fault model's rank sets (ddp/faults.h): one parser for fault and
 * expect lines alike; NULL or "" is every rank. */
int ddp__scenario_rank_in(const char *list, int r)
{
    ddp_rankset_t rs;
    return ddp_rankset_parse(list, &rs) == 0 && ddp_rankset_has(&rs, r);
}

static int is_ok(const ddp_sim_outcome_t *o)
{
    return o->rc == 0 && o->state == DDP_SIM_TASK_EXITED && o->connect_ns >= 0;
}

typedef struct judge {
    const ddp_scenario_t *s;
    const ddp_sim_outcome_t *outs; /* one per task */
    const char *deadlock_report;
    int n;                       /* tasks */
    int expected_world;
    int job; /* whose outcomes outs holds (0, or 1: the second job's) */
    int *last_try; /* per rank, its latest attempt (NULL: nothing restarted) */
    char *why;
    size_t whylen;
} judge_t;

static int say(judge_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say(judge_t *j, const char *fmt, ...)
{
    if (!j->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->why, j->whylen, fmt, ap);
        va_end(ap);
    }
    return 0;
}

/* The processes an expectation can speak of: ranks; if no process got a
 * rank (a configuration error before rank math), every process. */
static int is_process(const ddp_sim_outcome_t *o)
{
    return !o->thread && strcmp(o->name, "squatter") != 0;
}

/* A rank: a process that entered init_ddp_connection (a pure launcher,
 * like ddp_spawn's parent, never does). */
static int is_rank(const ddp_sim_outcome_t *o)
{
    return is_process(o) && o->world > 0 && o->rank >= 0;
}

static int counts(const ddp_sim_outcome_t *o, int any_rank)
{
    return any_rank ? is_rank(o) : is_process(o);
}

static int named_elsewhere(const ddp_scenario_t *s, int self, int rank)
{
    for (int i = 0; i < s->nexpect; i++)
        if (i != self && s->expect[i].ranks[0] && strcmp(s->expect[i].ranks, "others") &&
            ddp__scenario_rank_in(s->expect[i].ranks, rank))
            return 1;
    return 0;
}

/* A worker an elastic agent replaced by a later attempt of its rank: what
 * the job did is its last attempt. */
static int superseded(const judge_t *j, const ddp_sim_outcome_t *o)
{
    return j->last_try && o->rank >= 0 && o->rank <= j->n && o->attempt < j->last_try[o->rank];
}

static int covers(const judge_t *j, int idx, const ddp_sim_outcome_t *o, int any_rank)
{
    const ddp_scn_expect_t *e = &j->s->expect[idx];
    if (!strcmp(e->ranks, "agents"))
        return o->agent && !o->thread;
    if (superseded(j, o))
        return 0;
    /* A process crashed before it entered the plugin keeps its launcher's
     * rank (srun, torchrun, mpirun tasks): `expect crashed` may name it. */
    if (e->kind == DDP_EXPECT_CRASHED && e->ranks[0] && is_process(o) &&
        o->state == DDP_SIM_TASK_CRASHED && o->rank >= 0)
        return ddp__scenario_rank_in(e->ranks, o->rank);
    if (!counts(o, any_rank))
        return 0;
    if (!e->ranks[0])
        return e->kind == DDP_EXPECT_FAIL ? o->state != DDP_SIM_TASK_CRASHED : 1;
    if (!strcmp(e->ranks, "others"))
        return !named_elsewhere(j->s, idx, o->rank) && o->state != DDP_SIM_TASK_CRASHED;
    return ddp__scenario_rank_in(e->ranks, o->rank);
}

/* 1 if class is one of list's "a|b|c" (an expect line's error=). */
static int class_in(const char *list, const char *class)
{
    size_t n = strlen(class);
    for (const char *c = list;;) {
        size_t cl = strcspn(c, "|");
        if (cl == n && !strncasecmp(c, class, n))
            return 1;
        if (!c[cl])
            return 0;
        c += cl + 1;
    }
}

/* Classes no expectation accepts unless it names them. */
static int must_be_named(int code)
{
    return code == DDP_EHUNG || code == DDP_ENO_JOIN;
}

static const char *who(const ddp_sim_outcome_t *o, char *buf, size_t n)
{
    if (o->rank >= 0)
        snprintf(buf, n, "rank %d", o->rank);
    else
        snprintf(buf, n, "process %s", o->name);
    return buf;
}

/* Does process o meet expectation e? 1 yes; else 0 with the reason. */
static int meets(const ddp_scn_expect_t *e, const ddp_sim_outcome_t *o, char *why,
                 size_t n)
{
    char w[48];
    why[0] = '\0';
    /* A process that outlived every deadline and was killed, or a foreign
     * program that exited 0 without ever joining its store, is a finding
     * of its own: only an expect line naming it (error=hung,
     * error=no_join) accepts it. */
    if (must_be_named(o->code) &&
        !(e->kind == DDP_EXPECT_FAIL && e->error[0] &&
          class_in(e->error, ddp_scn_error_class(o->code)))) {
        const char *cl = ddp_scn_error_class(o->code);
        snprintf(why, n, "%s %s (%s); an expect line accepts that only with error=%s",
                 who(o, w, sizeof w), o->code == DDP_EHUNG ? "hung" : "never joined the store",
                 o->message, cl);
        return 0;
    }
    switch (e->kind) {
    case DDP_EXPECT_OK:
        if (o->agent && o->rc == 0 && o->state == DDP_SIM_TASK_EXITED)
            break; /* an agent connects nothing itself: ok is its clean end */
        if (!is_ok(o)) {
            snprintf(why, n, "expected %s to connect, but it %s: %s", who(o, w, sizeof w),
                     o->state == DDP_SIM_TASK_CRASHED ? "crashed" : "failed",
                     o->message[0] ? o->message : ddp_err_name(o->code));
            return 0;
        }
        break;
    case DDP_EXPECT_CRASHED:
        if (o->state != DDP_SIM_TASK_CRASHED) {
            snprintf(why, n, "expected %s to be crashed by a fault, but it %s",
                     who(o, w, sizeof w), is_ok(o) ? "connected" : "failed");
            return 0;
        }
        break;
    case DDP_EXPECT_FAIL:
        if (is_ok(o) || o->rc == 0) {
            snprintf(why, n, "expected %s to fail, but it %s", who(o, w, sizeof w),
                     is_ok(o) ? "connected" : "exited 0 without connecting");
            return 0;
        }
        if (e->error[0] && !class_in(e->error, ddp_scn_error_class(o->code))) {
            snprintf(why, n, "expected %s to fail with error=%s, got %s: %s",
                     who(o, w, sizeof w), e->error, ddp_scn_error_class(o->code),
                     o->message);
            return 0;
        }
        /* mentions= name ddpsim's own words: a foreign program has its own */
        for (int m = 0; m < e->nmentions && !o->foreign; m++)
            if (!strcasestr(o->message, e->mentions[m])) {
                snprintf(why, n, "expected %s's error to mention \"%s\", got: %s",
                         who(o, w, sizeof w), e->mentions[m], o->message);
                return 0;
            }
        for (int m = 0; m < e->nexcludes && !o->foreign; m++)
            if (strcasestr(o->message, e->excludes[m])) {
                snprintf(why, n, "expected %s's error not to contain \"%s\", got: %s",
                         who(o, w, sizeof w), e->excludes[m], o->message);
                return 0;
            }
        break;
    case DDP_EXPECT_INVARIANTS:
        break;
    }
    /* from=join: counted from the rank's first store contact (from the
     * start where it never made one), so a program's start-up (a torch
     * import) does not count against the bound; always so for a foreign
     * program, whose start-up is not the job's */
    if (e->restarts && !o->agent && o->attempt != e->restarts - 1) {
        snprintf(why, n, "expected %s to end in its worker group's restart %d, it ended in "
                         "restart %d (0: the first start)", who(o, w, sizeof w), e->restarts - 1,
                 o->attempt);
        return 0;
    }
    int64_t from = (e->from_join || o->foreign) && o->join_ns > 0 ? o->join_ns : 0;
    if (e->within_ns && o->end_ns - from > e->within_ns) {
        if (from)
            snprintf(why, n, "expected %s to end within %.3f s of its first store contact "
                     "(at %.3f s), it ended at %.3f s", who(o, w, sizeof w),
                     (double)e->within_ns / 1e9, (double)from / 1e9, (double)o->end_ns / 1e9);
        else
            snprintf(why, n, "expected %s to end within %.3f s, it ended at %.3f s",
                     who(o, w, sizeof w), (double)e->within_ns / 1e9,
                     (double)o->end_ns / 1e9);
        return 0;
    }
    return 1;
}

static int check_expect(judge_t *j, int idx, int any_rank)
{
    const ddp_scn_expect_t *e = &j->s->expect[idx];
    int matched = 0, okc = 0, met = 0;
    char why[700], first_why[700] = "";
    for (int t = 0; t < j->n; t++) {
        const ddp_sim_outcome_t *o = &j->outs[t];
        if (!covers(j, idx, o, any_rank))
            continue;
        if (e->kind == DDP_EXPECT_INVARIANTS) { /* nothing to meet but not hanging */
            if (must_be_named(o->code) && !meets(e, o, why, sizeof why))
                return say(j, "line %d: %s", e->line, why);
            continue;
        }
        matched++;
        okc += is_ok(o);
        if (meets(e, o, why, sizeof why)) {
            met++;
        } else if (!e->some) {
            return say(j, "line %d: %s", e->line, why);
        } else if (!first_why[0]) {
            snprintf(first_why, sizeof first_why, "%s", why);
        }
    }
    if (e->some && matched && !met)
        return say(j, "line %d: expected some process to match (match=some), none did; "
                      "first: %s", e->line, first_why);
    if (e->kind == DDP_EXPECT_INVARIANTS)
        return 1;
    ddp_rankset_t rs;
    if (e->ranks[0] && strcmp(e->ranks, "others") && ddp_rankset_parse(e->ranks, &rs) == 0) {
        /* Every named rank must exist. */
        for (int k = 0; k < rs.n; k++)
            for (long r = rs.r[k].lo; r <= rs.r[k].hi; r++) {
                int found = 0;
                for (int t = 0; t < j->n && !found; t++) {
                    const ddp_sim_outcome_t *o = &j->outs[t];
                    found = (is_rank(o) || o->state == DDP_SIM_TASK_CRASHED) &&
                            o->rank == r && !o->thread;
                }
                if (!found)
                    return say(j, "line %d: expected rank %ld, but no process had that rank",
                               e->line, r);
            }
    }
    if (!matched && e->ranks[0] == '\0')
        return say(j, "line %d: expected some process to judge, found none", e->line);
    if (e->kind == DDP_EXPECT_OK && !e->ranks[0] && okc != j->expected_world)
        return say(j, "line %d: expected all %d ranks to connect, %d did", e->line,
                   j->expected_world, okc);
    return 1;
}

/* DESIGN §5: no deadlock, every task done by its deadline, agreement on
 * ranks 0..N-1 and world size, no leaked sockets or tasks, errors name a
 * cause. */
static int check_invariants(judge_t *j, ddp_sim_result_t res)
{
    const ddp_scenario_t *s = j->s;
    char w[48];
    if (res == DDP_SIM_DEADLOCK) {
        const char *rep = j->deadlock_report ? j->deadlock_report : "";
        const char *nl = strchr(rep, '\n');
        return say(j, "invariant: deadlock: every task waits with nothing pending "
                      "(a wait without a deadline?): %.*s",
                   nl ? (int)(nl - rep) : (int)strlen(rep), rep);
    }
    if (res == DDP_SIM_TIME_LIMIT)
        return say(j, "invariant: the run hit the simulator's time limit with tasks "
                      "still waiting (a wait without a deadline?)");
    if (res == DDP_SIM_LIVELOCK || res == DDP_SIM_WALL_LIMIT) {
        /* "livelock ...: N task(s) running\n  task A (node n): what\n..." */
        char tasks[400] = "";
        size_t off = 0;
        const char *rep = j->deadlock_report ? j->deadlock_report : "";
        const char *nl = strchr(rep, '\n');
        for (const char *l = nl ? nl + 1 : ""; *l && off + 40 < sizeof tasks;) {
            const char *e = strchr(l, '\n'), *name = strstr(l, "task ");
            size_t len = e ? (size_t)(e - l) : strlen(l);
            if (name && name < l + len) {
                const char *sp = strchr(name + 5, ' ');
                off += (size_t)snprintf(tasks + off, sizeof tasks - off, "%s%.*s",
                                        off ? ", " : "", (int)(sp ? sp - name - 5 : 0),
                                        name + 5);
            }
            l = e ? e + 1 : l + len;
        }
        return say(j, "harness failure: the run was stopped (%.*s): tasks %s",
                   nl ? (int)(nl - rep) : (int)strlen(rep), rep, tasks[0] ? tasks : "?");
    }
    int64_t bound = s->master_late_ns + s->timeout_ns + s->train_ns + DEADLINE_SLACK_NS +
                    (j->job ? s->job2_start_ns : 0);
    int world = -1, nok = 0;
    char *seen = calloc((size_t)j->n + 1, 1);
    for (int t = 0; t < j->n; t++) {
        const ddp_sim_outcome_t *o = &j->outs[t];
        if (!strcmp(o->name, "squatter"))
            continue;
        if (o->state == DDP_SIM_TASK_CANCELED || o->state == DDP_SIM_TASK_RUNNING ||
            o->state == DDP_SIM_TASK_NEW) {
            free(seen);
            return say(j, "invariant: task %s never finished", o->name);
        }
        /* a process held at birth (late, paused) counts from its start */
        /* an elastic agent's waits have deadlines of their own (join
         * timeout); a restarted worker's count from its restart */
        if (o->end_ns > bound + o->held_ns && o->state != DDP_SIM_TASK_CRASHED && !o->agent &&
            !o->attempt) {
            free(seen);
            return say(j, "invariant: %s ended at %.3f s, past its deadline (%.3f s = "
                          "start + timeout + %.0f s slack)",
                       who(o, w, sizeof w), (double)o->end_ns / 1e9,
                       (double)(bound + o->held_ns) / 1e9, (double)DEADLINE_SLACK_NS / 1e9);
        }
        if (o->leaked_socks) {
            free(seen);
            return say(j, "invariant: %s exited with %d socket(s) still open (leaked)",
                       who(o, w, sizeof w), o->leaked_socks);
        }
        if (o->thread)
            continue;
        if (o->rc != 0 && o->state == DDP_SIM_TASK_EXITED && strlen(o->message) < 24) {
            free(seen);
            /* code: the error itself (rc may be an exit status, 1) */
            return say(j, "invariant: %s failed without naming a cause (\"%s\", %s)",
                       who(o, w, sizeof w), o->message, ddp_err_name(o->code ? o->code : o->rc));
        }
        if (!is_ok(o))
            continue;
        nok++;
        if (world < 0)
            world = o->world;
        if (o->world != world || o->world <= 0) {
            free(seen);
            return say(j, "invariant: connected ranks disagree on the world size (%d vs %d)",
                       world, o->world);
        }
        if (o->rank < 0 || o->rank >= world || o->rank > j->n) {
            free(seen);
            return say(j, "invariant: a connected process has rank %d outside 0..%d",
                       o->rank, world - 1);
        }
        if (seen[o->rank]++) {
            free(seen);
            return say(j, "invariant: two connected processes both have rank %d", o->rank);
        }
    }
    free(seen);
    (void)nok;
    return 1;
}

static int proc_count(const ddp_scenario_t *s, const char *accel)
{
    return !strcmp(accel, "ddp2") ? 1 : s->devices;
}

int ddp_scenario_plan(const ddp_scenario_t *s, const char *accel, uint64_t seed,
                      ddp_plan_t **out)
{
    *out = NULL;
    if (!ddp_accel_find(accel))
        return DDP_ENOT_FOUND;
    if (s->plugin[0] && !ddp_plugin_find(s->plugin))
        return DDP_ENOT_FOUND;
    ddp_plan_t *p = ddp_plan_new();
    if (!p)
        return ddp_err_set(-12, "out of memory");
    snprintf(p->name, sizeof p->name, "%s", s->name);
    p->seed = seed ? seed : s->seed;
    p->latency_ns = s->latency_ns;
    int rc = 0;
    for (int i = 0; rc == 0 && i < s->nodes; i++) {
        char host[32], addr[20];
        snprintf(host, sizeof host, "node%d", i);
        snprintf(addr, sizeof addr, "10.%d.%d.1", i / 250, i % 250);
        rc = ddp_plan_add_node(p, i < s->nhosts ? s->hosts[i] : host, addr);
        rc = rc < 0 ? rc : 0;
    }
    for (int i = 0; rc == 0 && i < s->nfaults; i++)
        rc = ddp_plan_add_fault(p, &s->faults[i], s->fault_line[i]) < 0 ? -12 : 0;
    int procs = proc_count(s, accel);
    ddp_plan_entry_t *e = &p->entry;
    snprintf(e->accelerator, sizeof e->accelerator, "%s", accel);
    e->num_nodes = s->num_nodes ? s->num_nodes : s->nodes;
    e->num_processes = procs;
    e->gpus = s->gpus;
    snprintf(e->backend, sizeof e->backend, "%s", s->backend);
    snprintf(e->cluster, sizeof e->cluster, "%s", s->cluster);
    snprintf(e->plugin, sizeof e->plugin, "%s", s->plugin);
    snprintf(e->plugin_lib, sizeof e->plugin_lib, "%s", s->plugin_lib);
    snprintf(e->exec, sizeof e->exec, "%s", s->exec);
    e->timeout_ns = s->timeout_ns;
    e->store_timeout_ns = s->store_timeout_ns;
    e->train_ns = s->train_ns;
    e->seed = p->seed;
    p->expected_world = e->num_nodes * procs;
    p->store_memory = s->store_memory;
    p->limit_ns = s->master_late_ns + s->timeout_ns + s->train_ns + DEADLINE_SLACK_NS +
                  (s->second_job ? s->job2_start_ns : 0);
    ddp_scn_edit_t edit = {.s = s};
    ddp_launch_t l = {
        .procs = procs, .launcher = s->launcher, .tasks_per_node = s->tasks_per_node,
        .port = s->port, .no_port = s->no_port,
        .master_addr = !s->master_addr[0] ? NULL : strcmp(s->master_addr, "-") ? s->master_addr : "",
        .master_start_ns = s->master_late_ns, .squat_port = s->port_taken,
        .edit_env = apply_env, .edit_arg = &edit};
    for (int i = 0; rc == 0 && i < s->nnet; i++)
        rc = ddp_plan_add_net(p, s->net[i].kind, s->net[i].node, s->net[i].name,
                              s->net[i].value) < 0
                 ? ddp_err_ctx()->code
                 : 0;
    if (rc == 0)
        rc = ddp_plan_launch(p, &l);
    if (rc == 0 && s->second_job) { /* the same job again, judged apart */
        ddp_launch_t l2 = l;
        l2.job = 1;
        l2.job_start_ns = s->job2_start_ns;
        l2.port = s->job2_port ? s->job2_port : s->port;
        rc = ddp_plan_launch(p, &l2);
    }
    if (rc) {
        ddp_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* A process the harness cancelled when it stopped the run (a wall-clock
 * limit, a livelock): what it says after that is the stop's echo (a peer
 * lost, a cancelled wait), not a failure of the job. */
static int stopped_by_harness(const ddp_sim_outcome_t *x, ddp_sim_result_t res)
{
    return (res == DDP_SIM_WALL_LIMIT || res == DDP_SIM_LIVELOCK) &&
           x->state == DDP_SIM_TASK_CANCELED;
}

/* A failure the summary names (the first error's filter). */
static int names_failure(const ddp_sim_outcome_t *x, ddp_sim_result_t res)
{
    return is_process(x) && !is_ok(x) && x->state != DDP_SIM_TASK_CRASHED && x->message[0] &&
           !stopped_by_harness(x, res);
}

/* A launcher (ddp_spawn's, ddp_cpu's, a real run's per-node script): no
 * rank, it spawned the ranks; an elastic agent's errors are its own. */
static int is_launcher(const ddp_sim_outcome_t *x)
{
    return !is_rank(x) && x->spawned > 0 && !x->agent;
}

/* The outcome's place in the root-cause order (root_cause.c) and the code
 * the summary gives it; -1 when it names no failure. A rank a fault killed
 * comes first, a launcher's aggregate last. */
static int cause_of(const ddp_scenario_t *s, const ddp_sim_outcome_t *x, ddp_sim_result_t res,
                    int *code)
{
    *code = x->code;
    if (is_process(x) && ddp__scn_killing_fault(s, x) >= 0) {
        *code = DDP_EKILLED;
        return ddp__scn_cause_tier(DDP_EKILLED);
    }
    if (!names_failure(x, res))
        return -1;
    return is_launcher(x) ? DDP_SCN_LAUNCHER_TIER : ddp__scn_cause_tier(x->code);
}

/* The first error when outcome x is the most causal one so far. */
static void take_first_error(const ddp_scenario_t *s, const ddp_sim_outcome_t *x, int code,
                             ddp_scn_result_t *r)
{
    int fault = code == DDP_EKILLED ? ddp__scn_killing_fault(s, x) : -1;
    r->first_rank = x->rank;
    r->first_code = code;
    if (fault >= 0)
        ddp__scn_killed_message(s, fault, x, r->first_error, sizeof r->first_error);
    else
        snprintf(r->first_error, sizeof r->first_error, "%s", x->message);
}

/* A stopped run's one first error: the harness's line (the deadlock
 * report's first), what stopped it and what to change. */
static void stop_as_first_error(ddp_scn_result_t *r, ddp_sim_result_t res, const char *rep)
{
    const char *nl = rep ? strchr(rep, '\n') : NULL;
    int len = rep ? (nl ? (int)(nl - rep) : (int)strlen(rep)) : 0;
    snprintf(r->first_error, sizeof r->first_error,
             "the harness stopped the run (%.*s); the %d rank(s) still running were "
             "cancelled, so their errors are not the job's; %s",
             len, rep ? rep : "", r->stopped,
             res == DDP_SIM_WALL_LIMIT
                 ? "give it more real time (--wall-limit SEC) or fewer ranks"
                 : "some task calls the simulator in a loop while virtual time stands "
                   "still (a poll or retry without a deadline or sleep?)");
    r->first_code = DDP_ECANCELED;
    r->first_rank = -1;
}

/* "addrinuse 1, hung 3": each distinct class of the failures, most causal
 * first (root_cause.c), so a run with two kinds of failure shows both.
 * Linear in the outcomes (a handful of distinct codes): 32,768 failing
 * ranks compared pairwise took 15 of a run's 20 s. */
static void failure_classes(const ddp_scenario_t *s, const ddp_sim_outcome_t *outs, int n,
                            ddp_sim_result_t res, char *buf, size_t len)
{
    enum { MAX_CODES = 64 };
    int code[MAX_CODES], tiers[MAX_CODES], count[MAX_CODES], ncodes = 0, stopped = 0;
    for (int t = 0; t < n; t++) {
        stopped += is_process(&outs[t]) && stopped_by_harness(&outs[t], res);
        int xc, xt = cause_of(s, &outs[t], res, &xc);
        if (xt < 0)
            continue;
        int c = 0;
        while (c < ncodes && (code[c] != xc || tiers[c] != xt))
            c++;
        if (c == ncodes) {
            if (ncodes == MAX_CODES)
                continue; /* more distinct codes than the summary has room for */
            tiers[ncodes] = xt;
            code[ncodes] = xc;
            count[ncodes++] = 0;
        }
        count[c]++;
    }
    size_t off = 0;
    buf[0] = '\0';
    if (stopped) /* the stop first: the rest happened before it */
        off = (size_t)snprintf(buf, len, "stopped %d", stopped);
    for (int tier = 0; tier <= DDP_SCN_LAUNCHER_TIER; tier++)
        for (int c = 0; c < ncodes && off + 1 < len; c++) {
            if (tiers[c] != tier)
                continue;
            int w = snprintf(buf + off, len - off, "%s%s %d", off ? ", " : "",
                             ddp_scn_error_class(code[c]), count[c]);
            off = w > 0 && (size_t)w < len - off ? off + (size_t)w : len - 1;
        }
}

/* printf's "%.6f" of ns / 1e9 s, without printf: a row per process.
 * Away from an exact half microsecond the double's rounding is the
 * integer's (its error is under 1e-12 s below 10^6 s); there, and for
 * what is negative or that large, printf decides. */
static void secs6(char *buf, size_t n, int64_t ns)
{
    if (ns < 0 || ns >= 1000000 * DDP_NS_PER_S || ns % 1000 == 500) {
        snprintf(buf, n, "%.6f", (double)ns / 1e9);
        return;
    }
    int64_t us = ns / 1000 + (ns % 1000 > 500), f = us % 1000000;
    char frac[8];
    for (int i = 5; i >= 0; i--, f /= 10)
        frac[i] = (char)('0' + f % 10);
    frac[6] = '\0';
    ddp_fmt(buf, n, "%lld.%s", (long long)(us / 1000000), frac);
}

/* printf's "%-Ns": s, then spaces up to width w. */
static const char *pad(char *buf, size_t n, const char *s, size_t w)
{
    size_t l = strlen(s);
    ddp_fmt(buf, n, "%s", s);
    for (; l < w && l + 1 < n; l++)
        buf[l] = ' ';
    buf[l < n ? l : n - 1] = '\0';
    return buf;
}

/* One process's line of the per-process report at roff; the offset
 * after it (inside the report's len bytes). Every row is formatted, so
 * without printf (its %.6f and widths were 4 % of a large run's
 * instructions): the bytes of "  %-12s %-9s node %-4d %-8s connected
 * %-12s ended %.6f s  %s%s\n". */
static size_t report_row(const ddp_sim_outcome_t *x, int stopped, char *report, size_t len,
                         size_t roff)
{
    char cn[32] = "-";
    if (x->connect_ns >= 0) {
        secs6(cn, sizeof cn - 2, x->connect_ns);
        strcat(cn, " s");
    }
    /* A launcher (ddp_spawn's, ddp_cpu's) is no rank and never connects:
     * its status is its exit, its workers' verdicts are their own rows. */
    int launcher = is_launcher(x) || (!is_rank(x) && x->agent);
    char who[24], node[16], end[32], f[5][64];
    ddp_fmt(who, sizeof who, launcher ? "%slauncher" : "%srank %d", x->job ? "job 2 " : "",
            x->rank);
    const char *st = x->state == DDP_SIM_TASK_CRASHED ? "CRASHED"
                     : stopped                          ? "stopped"
                     : launcher                         ? (x->rc == 0 ? "ok" : "exited")
                     : is_ok(x)                         ? "ok"
                                                        : "FAIL";
    char prog[48] = "";
    if (x->progress[0]) /* how far a foreign program got at its store */
        ddp_fmt(prog, sizeof prog, "[store: %s]  ", x->progress);
    ddp_fmt(node, sizeof node, "%d", x->node);
    secs6(end, sizeof end, x->end_ns);
    int k = ddp_fmt(report + roff, len - roff,
                    "  %s %s node %s %s connected %s ended %s s  %s%s\n",
                    pad(f[0], sizeof f[0], x->name, 12), pad(f[1], sizeof f[1], who, 9),
                    pad(f[2], sizeof f[2], node, 4), pad(f[3], sizeof f[3], st, 8),
                    pad(f[4], sizeof f[4], cn, 12), end, prog,
                    is_ok(x) || stopped || (launcher && x->rc == 0) ? "" : x->message);
    roff += k > 0 ? (size_t)k : 0;
    return roff >= len ? len - 1 : roff;
}

/* Each job is judged on its own processes: the invariants (ranks 0..N-1
 * once each, one world size) hold per job, and an expect line speaks of its
 * job= (the run's job by default). Sets r's invariants_ok and expect_ok;
 * inv_why: why the invariants failed. */
static void judge_jobs(const judge_t *j, ddp_sim_result_t res, ddp_scn_result_t *r,
                       char *inv_why, size_t inv_len)
{
    const ddp_scenario_t *s = j->s;
    const ddp_sim_outcome_t *outs = j->outs;
    int n = j->n;
    ddp_sim_outcome_t *mine = s->second_job ? malloc(sizeof *mine * (size_t)(n ? n : 1)) : NULL;
    r->invariants_ok = 1;
    r->expect_ok = 1;
    inv_why[0] = '\0';
    int *last_try = NULL;
    for (int t = 0; t < n && !last_try; t++)
        if (outs[t].attempt > 0)
            last_try = calloc((size_t)n + 1, sizeof *last_try);
    for (int t = 0; last_try && t < n; t++)
        if (outs[t].rank >= 0 && outs[t].rank <= n && outs[t].attempt > last_try[outs[t].rank])
            last_try[outs[t].rank] = outs[t].attempt;
    for (int job = 0; job <= (mine ? 1 : 0); job++) {
        judge_t jj = *j;
        jj.job = job;
        jj.last_try = job ? NULL : last_try;
        if (mine) {
            jj.n = 0;
            for (int t = 0; t < n; t++)
                if (outs[t].job == job)
                    mine[jj.n++] = outs[t];
            jj.outs = mine;
        }
        int jr = 0;
        for (int t = 0; t < jj.n; t++)
            jr |= is_rank(&jj.outs[t]);
        r->why[0] = '\0';
        if (r->invariants_ok && !(r->invariants_ok = check_invariants(&jj, res)))
            snprintf(inv_why, inv_len, "%s%s", job ? "job 2: " : "", r->why);
        r->why[0] = '\0';
        for (int i = 0; i < s->nexpect && r->expect_ok; i++)
            if (s->expect[i].job == job)
                r->expect_ok = check_expect(&jj, i, jr);
        if (!r->expect_ok)
            break;
    }
    free(mine);
    free(last_try);
}

void ddp__scenario_judge(const ddp_scenario_t *s, const ddp_sim_outcome_t *outs,
                         int n, int expected_world, ddp_sim_result_t res,
                         const char *deadlock_report, char *report,
                         size_t report_len, ddp_scn_result_t *r)
{
    r->sim_result = res;
    judge_t j = {.s = s, .outs = outs, .n = n, .deadlock_report = deadlock_report,
                 .expected_world = expected_world, .why = r->why,
                 .whylen = sizeof r->why};
    int first_rank = -1, first_node = -1, first_tier = -1;
    int explain = r->first_rank; /* a rank whose message the caller wants (-1 none) */
    r->first_rank = -1;
    r->rank_error[0] = '\0';
    size_t roff = 0;
    if (report && report_len)
        report[0] = '\0';
    for (int t = 0; t < j.n; t++) {
        const ddp_sim_outcome_t *x = &outs[t];
        if (!is_process(x))
            continue;
        if (x->end_ns > r->virtual_ns)
            r->virtual_ns = x->end_ns;
        r->retries += x->retries;
        int stopped = stopped_by_harness(x, res);
        if (is_rank(x)) {
            r->ranks++;
            if (x->state == DDP_SIM_TASK_CRASHED)
                r->crashed++;
            else if (stopped)
                r->stopped++;
            else if (is_ok(x))
                r->ok++;
            else
                r->failed++;
        }
        /* The most causal failure (root_cause.c), then the lowest rank and
         * node: the same pick whatever order the outcomes come in. */
        int xr = x->rank >= 0 ? x->rank : j.n + 1, xc;
        int tier = cause_of(s, x, res, &xc);
        if (tier >= 0 && (first_rank < 0 || ddp__scn_more_causal(tier, xr, x->node, first_tier,
                                                                 first_rank, first_node))) {
            first_rank = xr;
            first_node = x->node;
            first_tier = tier;
            take_first_error(s, x, xc, r);
        }
        if (explain >= 0 && x->rank == explain && is_process(x) && !is_ok(x) &&
            x->message[0] && !r->rank_error[0])
            snprintf(r->rank_error, sizeof r->rank_error, "%s", x->message);
        if (report && roff + 1 < report_len)
            roff = report_row(x, stopped, report, report_len, roff);
    }
    char inv_why[sizeof r->why];
    judge_jobs(&j, res, r, inv_why, sizeof inv_why);
    if (!r->invariants_ok && !r->why[0])
        snprintf(r->why, sizeof r->why, "%s", inv_why);
    else if (!r->invariants_ok)
        snprintf(r->why + strlen(r->why), sizeof r->why - strlen(r->why), "; %s", inv_why);
    if (res == DDP_SIM_WALL_LIMIT || res == DDP_SIM_LIVELOCK)
        stop_as_first_error(r, res, deadlock_report);
    failure_classes(s, outs, n, res, r->classes, sizeof r->classes);
    r->pass = r->expect_ok && r->invariants_ok;
}

void ddp__scenario_account(const ddp_plan_t *plan, const long long *hits, ddp_scn_result_t *r,
                           char *report, size_t report_len)
{
    r->nhits = plan->nfaults < DDP_SCN_MAX_FAULTS ? plan->nfaults : DDP_SCN_MAX_FAULTS;
    size_t off = report ? strlen(report) : 0;
    for (int i = 0; i < r->nhits; i++) {
        r->hits[i] = hits[i];
        const ddp_fault_t *f = &plan->faults[i];
        if (!report || off + 1 >= report_len)
            continue;
        int w = hits[i] < 0
                    ? snprintf(report + off, report_len - off,
                               "  fault %-9s (line %d)  hits not counted by this executor\n",
                               ddp_fault_kind_name(f->kind), plan->fault_line[i])
                    : snprintf(report + off, report_len - off, "  fault %-9s (line %d)  %lld %s%s\n",
                               ddp_fault_kind_name(f->kind), plan->fault_line[i], hits[i],
                               ddp_fault_kind_info(f->kind)->hits,
                               !hits[i] && f->may_miss ? " (may-miss)" : "");
        off = w > 0 && (size_t)w < report_len - off ? off + (size_t)w : report_len - 1;
    }
    ddp__scn_held_first(plan, hits, r);
    if (!r->pass || r->skipped)
        return;
    for (int i = 0; i < r->nhits; i++) {
        const ddp_fault_t *f = &plan->faults[i];
        if (hits[i] || f->may_miss)
            continue;
        const ddp_fault_kind_info_t *k = ddp_fault_kind_info(f->kind);
        r->pass = 0;
        r->vacuous = 1;
        snprintf(r->why, sizeof r->why,
                 "vacuous: fault %s (line %d) acted on nothing in this run (0 %s), so the "
                 "verdict does not test it; aim its window at what the job does (start=enter:"
                 "PHASE, start=connect, start=mark:NAME) or, when it may rightly miss this "
                 "accelerator, add may-miss",
                 k->name, plan->fault_line[i], k->hits);
        return;
    }
}

int ddp_scenario_run(const ddp_scenario_t *s, const char *accel,
                     const ddp_scn_run_opts_t *opts, ddp_scn_result_t *r)
{
    static const ddp_scn_run_opts_t none = {0};
    const ddp_scn_run_opts_t *o = opts ? opts : &none;
    memset(r, 0, sizeof *r);
    snprintf(r->accelerator, sizeof r->accelerator, "%s", accel);
    r->first_rank = o->explain_rank - 1; /* the judge's input: whose message */
    ddp_plan_t *plan = NULL;
    ddp_sim_t *sim = NULL;
    ddp_sys_t *wall = o->wall_limit_ns >= 0 ? ddp_sys_posix_new(ddp_env_new()) : NULL;
    /* No limit asked for: 600 s at one virtual instant (a stall), so a run
     * that makes progress is never stopped, whatever its world or host. */
    ddp_sim_opts_t so = {.trace = o->trace, .keep_trace = o->keep_trace, .wall_clock = wall,
                         .wall_limit_ns = o->wall_limit_ns ? o->wall_limit_ns
                                                           : 600 * DDP_NS_PER_S,
                         .wall_stall = o->wall_limit_ns == 0,
                         .tap = o->tap, .tap_arg = o->tap_arg};
    int rc = ddp_scenario_plan(s, accel, o->seed, &plan);
    if (rc == 0 && (plan->entry.gpus > 0 || !strcmp(plan->entry.backend, "nccl")) &&
        !ddp_sim_has_nccl()) {
        r->skipped = 1;
        snprintf(r->why, sizeof r->why, "skipped: GPU scenario: this build has no nccl "
                                        "backend and no simulated NCCL (nccl.h was not "
                                        "found at build time)");
        ddp_plan_free(plan);
        ddp_sys_free(wall);
        return 0;
    }
    if (rc == 0 && plan->entry.plugin_lib[0]) /* a user's code: its own depth */
        so.stack_size = DDP_SIM_STACK_FOREIGN;
    if (rc == 0)
        rc = ddp_plan_simulate(plan, &so, &sim, NULL);
    if (rc) {
        snprintf(r->why, sizeof r->why, "cannot build the run: %s", ddp_err_message());
        ddp_plan_free(plan);
        ddp_sys_free(wall);
        return rc;
    }
    ddp_sim_result_t res = ddp_sim_run(sim);
    ddp_sys_free(wall);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    r->trace_hash = st.trace_hash;
    r->handoffs = st.handoffs;
    int n = ddp_sim_task_count(sim);
    ddp_sim_outcome_t *outs = malloc(sizeof *outs * (size_t)(n ? n : 1));
    if (!outs) {
        ddp_sim_free(sim);
        ddp_plan_free(plan);
        return ddp_err_set(-12, "out of memory");
    }
    for (int t = 0; t < n; t++)
        outs[t] = *ddp_sim_outcome(sim, t);
    ddp__scenario_judge(s, outs, n, plan->expected_world, res,
                        ddp_sim_deadlock_report(sim), o->report, o->report_len, r);
    free(outs);
    long long hits[DDP_SCN_MAX_FAULTS] = {0};
    for (int i = 0; i < plan->nfaults && i < DDP_SCN_MAX_FAULTS; i++)
        hits[i] = ddp_sim_fault_hits(sim, i);
    ddp__scenario_account(plan, hits, r, o->report, o->report_len);
    if (o->trace_out) {
        size_t len = 0;
        const char *tr = ddp_sim_trace(sim, &len);
        *o->trace_out = tr ? strndup(tr, len) : NULL;
    }
    ddp_sim_free(sim);
    ddp_plan_free(plan);
    return 0;
}
