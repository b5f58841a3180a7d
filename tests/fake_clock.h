/* tests/fake_clock.h — a fake clock over a real (POSIX) sys, for tests of
 * the real path's wait and retry loops: a copy of the sys whose now and
 * sleep_until are virtual (a sleep moves the clock to its target at once),
 * so a test observes each loop's sleeps and the virtual time at which it
 * gave up, never the wall clock. The POSIX sys reads its clock and sleeps
 * through the ops of the sys it is called with (core/sys_posix.c), so its
 * own loops run on this clock too. */
#ifndef DDP_TEST_FAKE_CLOCK_H
#define DDP_TEST_FAKE_CLOCK_H

#include <stdint.h>

#include "ddp/sys.h"

typedef struct ddp_fake_clock {
    ddp_sys_t sys;              /* first: hand &sys to the code under test */
    ddp_sys_ops_t ops;
    const ddp_sys_ops_t *real;  /* the real sys's ops */
    int64_t now;                /* virtual ns */
    int sleeps;                 /* sleep_until calls */
    int late_sleeps;            /* ... asked for a time at or before now */
    int64_t first_sleep, last_sleep; /* their targets (0: none yet) */
    int64_t max_sleep;          /* the latest target asked for */
    int64_t connect_cost;       /* virtual ns each connect takes */
    int connects;               /* connect calls */
    /* A loop that does not stop at its deadline sleeps on: past max_sleeps
     * sleeps, on_cap(arg) is called once (it ends what the loop waits for,
     * so that a broken loop ends and its test fails instead of hanging). */
    int max_sleeps;
    int capped;
    void (*on_cap)(void *arg);
    void *arg;
} ddp_fake_clock_t;

/* fc over real (its impl and environment shared, not owned: nothing to
 * free), the clock at start ns, at most 10,000 sleeps. */
void ddp_fake_clock_init(ddp_fake_clock_t *fc, ddp_sys_t *real, int64_t start);

#endif
