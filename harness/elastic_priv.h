/* harness/elastic_priv.h — the elastic agent of the torchrun-elastic
 * launcher (harness/elastic.c), run by a DDP_PLAN_AGENT process in the
 * simulator (harness/plan.c) and for real (harness/real_child.c). */
#ifndef DDP_ELASTIC_PRIV_H
#define DDP_ELASTIC_PRIV_H

#include "ddp/sys.h"

/* What each worker process runs (spawned with the worker's environment). */
typedef struct ddp_elastic_worker {
    int (*fn)(ddp_sys_t *sys, void *arg);
    void *arg;
} ddp_elastic_worker_t;

/* Runs the agent to its end: 0 when its workers succeeded; else the error
 * (DDP_ECLOSED: the rendezvous was closed; DDP_EPEER_LOST: its worker
 * group failed with no restart left; DDP_ETIMEOUT: a round never
 * completed; DDP_ECONFIG: a PET_* variable). *restarts: the worker-group
 * restarts a failure cost. */
int ddp__elastic_agent(ddp_sys_t *sys, const ddp_elastic_worker_t *w, int *restarts);

#endif
