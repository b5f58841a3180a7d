/* harness/check_priv.h — the parts of `ddpsim check` (docs/check.md):
 * check_aim.c discovers what the plugin does and aims faults at it (the
 * generator), check_judge.c decides whether a run shows a bug (the
 * oracles), check.c runs, shrinks and reports. The generator and the
 * oracles share no code: an oracle reads only the scenario and its run. */
#ifndef DDP_HARNESS_CHECK_PRIV_H
#define DDP_HARNESS_CHECK_PRIV_H

#include "ddp/check.h"
#include "ddp/scenario.h"

#define CHK_TIMEOUT_S 30  /* the group timeout of every check run */
#define CHK_HEAL_S 3      /* a transient fault's window */
#define CHK_OUTLAST_S 60  /* a fault that outlasts the timeout */
#define CHK_EXEC_HEAL_S 8 /* a foreign program's healing pause, late start */

/* One run to make: a cluster shape, an accelerator, its fault lines. */
typedef struct chk_cand {
    int nodes, devices;
    char accel[16];
    char faults[2][256]; /* fault lines in the scenario syntax */
    int nf;
    int random;          /* >= 0: explore's draw of that index instead */
} chk_cand_t;

typedef struct chk_cands {
    chk_cand_t *v;
    int n, cap;
} chk_cands_t;

/* ---- discovery (check_aim.c) ---- */
/* The simulator's tap (ddp_scn_run_opts_t.tap) feeding d. */
void ddp__check_tap(void *d, const ddp_fault_event_t *ev, int node, int64_t vt);
/* Marks d's phases and keys that the default plugin's discovery dflt also
 * has as not the user's. */
void ddp__check_mark_user(ddp_check_discovery_t *d, const ddp_check_discovery_t *dflt);
/* The candidates aimed at d's events for plugin p (its declared phases
 * are the ones a fault may name), in the order they should run. 0, or -12. */
int ddp__check_aim(const ddp_check_discovery_t *d, const ddp_plugin_t *p, chk_cands_t *out);
/* The candidates for a foreign program (real runs, 2 nodes x 2 ranks):
 * crashes, healing pauses and late starts aimed at the store events
 * discovered, then partitions and refused connects with netns. */
int ddp__check_aim_exec(const ddp_check_discovery_t *d, int netns, chk_cands_t *out);
void ddp__check_cands_free(chk_cands_t *c);

/* ---- the oracles (check_judge.c) ---- */
enum {
    CHK_NONE = 0,
    CHK_BASELINE,  /* a fault-free baseline failed */
    CHK_NOFAULT,   /* no fault acted, yet the run was not ok */
    CHK_INVARIANT, /* a deadline, a deadlock, a leak, an unnamed cause ... */
    CHK_TRANSIENT, /* a fault that heals well within the deadline broke it */
    CHK_AGREE,     /* the default plugin survives the same fault */
    CHK_CAUSE,     /* a rank went on after its store call failed */
    CHK_COUNT
};
const char *ddp__check_oracle_name(int oracle);

typedef struct chk_verdict {
    int oracle;
    char sentence[1024];
    int rank;         /* CHK_CAUSE: the rank; else -1 */
    char phase[48];   /* CHK_CAUSE: the phase its call failed in ("": the
                         rank went on after a failed store request) */
} chk_verdict_t;

/* Runs s for accel (and, where an oracle needs it, the same run under the
 * default plugin) and judges it. baseline: s is a fault-free baseline;
 * tap: the discovery the run's events go to (NULL: none).
 * Fills r (the user's run) and v. Returns v->oracle (CHK_NONE: no bug
 * shown), or < 0 when s could not run. */
int ddp__check_judge(const ddp_scenario_t *s, const char *accel, int baseline,
                     ddp_check_discovery_t *tap, ddp_scn_result_t *r, chk_verdict_t *v);
/* The same for a foreign program's real run (ro: how; its tap, if any, is
 * fed): baseline, no-fault, invariant (a rank hung past its deadline),
 * transient. */
struct ddp_real_opts;
int ddp__check_judge_real(ddp_sys_t *sys, const ddp_scenario_t *s, const char *accel,
                          const struct ddp_real_opts *ro, int baseline, ddp_scn_result_t *r,
                          chk_verdict_t *v);

#endif
