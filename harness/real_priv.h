/* harness/real_priv.h — what the real runner and the processes it starts
 * share (harness/real.c, harness/real_child.c). */
#ifndef DDP_HARNESS_REAL_PRIV_H
#define DDP_HARNESS_REAL_PRIV_H

#include "ddp/sim.h"

/* 1 if the fault is realised inside the processes (libfiu at the sys
 * seam's points), 0 if by the runner (signals, links, port holders). */
int ddp__real_in_process(const ddp_sim_fault_t *f);

#endif
