/* harness/scenario_priv.h — what the simulated and the real scenario runners
 * share besides the plan (ddp_scenario_plan): the judge of expectations
 * and invariants. */
#ifndef DDP_SIM_SCENARIO_PRIV_H
#define DDP_SIM_SCENARIO_PRIV_H

#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "fault_line.h"

typedef struct ddp_scn_edit {
    const ddp_scenario_t *s;
} ddp_scn_edit_t;

/* Judges outcomes (one per process/task) against s; fills r's verdict,
 * counts, first error and the per-process report. */
void ddp__scenario_judge(const ddp_scenario_t *s, const ddp_sim_outcome_t *outs,
                         int n, int expected_world, ddp_sim_result_t res,
                         const char *deadlock_report, char *report,
                         size_t report_len, ddp_scn_result_t *r);

/* Hit accounting (docs/scenario-format.md, "Vacuous runs"): hits[i] is
 * what the plan's fault i acted on. Fills r->hits; a run whose
 * expectations held while a fault that is not may-miss acted on nothing
 * becomes vacuous: not a pass, its why naming the fault. Appends a line
 * per fault with its hits to report (the per-process lines; NULL: none). */
void ddp__scenario_account(const struct ddp_plan *plan, const long long *hits,
                           ddp_scn_result_t *r, char *report, size_t report_len);

/* Is rank r in the list "0,3-5" (as the parser validated it)? A NULL list
 * holds every rank. */
int ddp__scenario_rank_in(const char *list, int r);

/* One fault line in the scenario's syntax: harness/fault_line.h. This old
 * name of its writer stays while harness/check_judge.c still calls it. */
static inline void ddp__scenario_put_fault(FILE *o, const ddp_fault_t *f)
{
    ddp__fault_line_put(o, f);
}
/* The root-cause order of the run's summary (harness/root_cause.c,
 * docs/errors.md): the tier of an error code, 0 most causal (a rank a
 * fault killed), 8 least (timeout); a launcher's aggregate is below all. */
int ddp__scn_cause_tier(int code);
#define DDP_SCN_LAUNCHER_TIER 9
/* The tiers from here down are symptoms: a refused or lost peer, a
 * timeout (what a rank held back by a fault causes in the others). */
#define DDP_SCN_SYMPTOM_TIER 6
/* 1 when (tier, rank, node) should be shown ahead of the best so far: a
 * more causal tier, then the lower rank, then the lower node. */
int ddp__scn_more_causal(int tier, int rank, int node, int best_tier,
                         int best_rank, int best_node);
/* The scenario's crash fault that killed x's rank (x crashed), else -1. */
int ddp__scn_killing_fault(const ddp_scenario_t *s, const ddp_sim_outcome_t *x);
/* "rank R, PHASE: killed on node N by the fault on line L (crash); ..." */
void ddp__scn_killed_message(const ddp_scenario_t *s, int fault, const ddp_sim_outcome_t *x,
                             char *buf, size_t len);

/* Where the run's first error is a symptom (DDP_SCN_SYMPTOM_TIER or
 * below) of another rank than the one a pause, stall or late fault held
 * back (aimed by ranks= or node=, and it acted: hits), that rank is the
 * root cause: "rank R[, PHASE]: held back by the fault on line L (KIND);
 * the other ranks' errors follow from it, the first: " and the old first
 * error whole. Both executors (ddp__scenario_account). */
struct ddp_plan;
void ddp__scn_held_first(const struct ddp_plan *plan, const long long *hits,
                         ddp_scn_result_t *r);

/* explore's greedy shrinker (harness/explore.c) with the caller's
 * predicate: pred runs candidate c for accel, fills r, and returns 1 when
 * it still shows what the caller keeps. *steps: changes kept; *runs:
 * candidates run; *last: the last kept candidate's result (untouched when
 * none was kept). */
typedef int (*ddp__shrink_pred_fn)(void *arg, const ddp_scenario_t *c, const char *accel,
                                   ddp_scn_result_t *r);
ddp_scenario_t *ddp__explore_shrink_by(const ddp_scenario_t *s, const char *accel,
                                       ddp__shrink_pred_fn pred, void *arg, int *steps,
                                       int *runs, ddp_scn_result_t *last);

#endif
