/* harness/root_cause.c — which rank's error the run's summary shows.
 *
 * When one rank fails for a reason (a bad variable, a name that does not
 * resolve, a port taken), the others usually fail later and only because of
 * it: they time out waiting for the rank that stopped, or lose it. Showing
 * the lowest failing rank's message would then show an effect (rank 0's
 * 60 s timeout) and hide the cause another rank already named. So the
 * summary takes the failing rank whose error is highest in this table, and
 * among equals the lowest rank (then the lowest node). The order is
 * documented in docs/errors.md ("Root cause first"); keep the two alike.
 */
#include <errno.h>

#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/plan.h"
#include "scenario_priv.h"

/* Most causal first. A code not listed ranks with "any other error". */
static const struct {
    int code;
    int tier;
} cause_table[] = {
    /* 0: a rank the scenario's fault killed: the others' errors follow */
    {DDP_EKILLED, 0},
    /* 1: the launch itself is wrong; nothing else can go right */
    {DDP_ECONFIG, 1},
    /* 2: a host name or key that does not exist */
    {DDP_ENOT_FOUND, 2},
    /* 3: rank 0 could not serve where everyone looks */
    {-EADDRINUSE, 3},
    /* 4: an address nobody can reach */
    {-EHOSTUNREACH, 4},
    {-ENETUNREACH, 4},
    {-EADDRNOTAVAIL, 4},
    /* 5 is any other error (protocol, limit, unsupported, internal, ...) */
    /* 6 (DDP_SCN_SYMPTOM_TIER): nobody listening yet, or the listener went away: a symptom of a
     * peer that stopped */
    {-ECONNREFUSED, 6},
    {-ECONNRESET, 6},
    {-EPIPE, 6},
    {DDP_ECANCELED, 6},
    /* 7: the peer vanished mid-operation */
    {DDP_EPEER_LOST, 7},
    {DDP_ECLOSED, 7}, /* another agent's run ended and closed it */
    /* 8: waited for someone who never came: almost always an effect */
    {DDP_ETIMEOUT, 8},
    {DDP_EHUNG, 8},
    /* 9 (DDP_SCN_LAUNCHER_TIER): a launcher's aggregate ("2 of 2 worker
     * process(es) failed"): its workers' own errors say why */
};

#define OTHER_TIER 5

int ddp__scn_cause_tier(int code)
{
    for (size_t i = 0; i < sizeof cause_table / sizeof cause_table[0]; i++)
        if (cause_table[i].code == code)
            return cause_table[i].tier;
    return OTHER_TIER;
}

int ddp__scn_more_causal(int tier, int rank, int node, int best_tier,
                         int best_rank, int best_node)
{
    if (tier != best_tier)
        return tier < best_tier;
    return rank < best_rank || (rank == best_rank && node < best_node);
}

/* 1 when fault f of the scenario aims at the process of rank on node. */
static int aims_at(const ddp_fault_t *f, int rank, int node)
{
    ddp_rankset_t rs;
    if (f->ranks && f->ranks[0])
        return ddp_rankset_parse(f->ranks, &rs) == 0 && ddp_rankset_has(&rs, rank);
    return f->node < 0 || f->node == node;
}

int ddp__scn_killing_fault(const ddp_scenario_t *s, const ddp_sim_outcome_t *x)
{
    if (x->state != DDP_SIM_TASK_CRASHED || x->rank < 0 || x->thread)
        return -1;
    for (int i = 0; i < s->nfaults; i++)
        if (s->faults[i].kind == DDP_FAULT_CRASH && aims_at(&s->faults[i], x->rank, x->node))
            return i;
    return -1;
}

void ddp__scn_killed_message(const ddp_scenario_t *s, int fault, const ddp_sim_outcome_t *x,
                             char *buf, size_t len)
{
    /* Every rank's error's shape, "rank R, PHASE: ...": what ddpsim check
     * keys its findings by. A real run's rank has no phase: its node. */
    const char *phase = x->phase[0] ? x->phase : s->faults[fault].phase;
    char where[80];
    if (phase && phase[0])
        snprintf(where, sizeof where, "%s: killed on node %d", phase, x->node);
    else
        snprintf(where, sizeof where, "node %d: killed", x->node);
    snprintf(buf, len,
             "rank %d, %s by the fault on line %d (crash); the other ranks' errors (a "
             "lost peer or a timeout) follow from it",
             x->rank, where, s->fault_line[fault]);
}

/* The lowest rank fault f aims at among the world's: ranks listed, else
 * the first of node f->node (the world spread evenly over the nodes, as
 * every launcher here spreads it); -1 when none. */
static int lowest_aimed(const ddp_fault_t *f, const ddp_plan_t *plan)
{
    int world = plan->expected_world;
    if (f->ranks && f->ranks[0]) {
        for (int r = 0; r < world; r++)
            if (aims_at(f, r, -1))
                return r;
        return -1;
    }
    if (f->node < 0 || plan->nnodes < 1 || world % plan->nnodes)
        return -1;
    int first = f->node * (world / plan->nnodes);
    return first < world ? first : -1;
}

/* A fault that held ranks back (pause, stall, late), aimed at some of them
 * (ranks= or node=), and acted: its index, and its lowest aimed rank into
 * *rank; -1 when none. */
static int holding_fault(const ddp_plan_t *plan, const long long *hits, int *rank)
{
    for (int i = 0; i < plan->nfaults && i < DDP_SCN_MAX_FAULTS; i++) {
        const ddp_fault_t *f = &plan->faults[i];
        int holds = f->kind == DDP_FAULT_PAUSE || f->kind == DDP_FAULT_STALL ||
                    f->kind == DDP_FAULT_LATE;
        if (holds && hits[i] > 0 && (*rank = lowest_aimed(f, plan)) >= 0)
            return i;
    }
    return -1;
}

void ddp__scn_held_first(const ddp_plan_t *plan, const long long *hits, ddp_scn_result_t *r)
{
    int rank = -1;
    int f = r->first_code ? holding_fault(plan, hits, &rank) : -1;
    if (f < 0 || rank == r->first_rank ||
        ddp__scn_cause_tier(r->first_code) < DDP_SCN_SYMPTOM_TIER ||
        !strncmp(r->first_error, "the harness stopped", 19))
        return;
    char was[sizeof r->first_error];
    memcpy(was, r->first_error, sizeof was);
    const ddp_fault_t *x = &plan->faults[f];
    char where[96] = "";
    if (!(x->ranks && x->ranks[0]))
        snprintf(where, sizeof where, " (node %d's ranks)", x->node);
    if (x->phase && x->phase[0])
        snprintf(where + strlen(where), sizeof where - strlen(where), ", %s", x->phase);
    snprintf(r->first_error, sizeof r->first_error,
             "rank %d%s: held back by the fault on line %d (%s); the other ranks' errors "
             "follow from it, the first: %s",
             rank, where, plan->fault_line[f], ddp_fault_kind_name(x->kind), was);
    r->first_rank = rank;
}
