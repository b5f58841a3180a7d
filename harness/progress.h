/* harness/progress.h — the progress line of long work (ddpsim explore,
 * ddpsim run; docs/testing.md § progress): done/total, rate, ETA.
 *
 * On a terminal (DDP_PROGRESS_BAR) one line on `out` is redrawn in place,
 * at most ten times a second; elsewhere (DDP_PROGRESS_LINES) a plain line
 * every `interval_s` seconds (10), none for work that ends sooner. The
 * clock is a parameter, so a test can drive it. Internal to ddpsim (the
 * harness and its tools); the scripts' counterpart is scripts/progress.sh. */
#ifndef DDP_HARNESS_PROGRESS_H
#define DDP_HARNESS_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

enum { DDP_PROGRESS_OFF = 0, DDP_PROGRESS_BAR = 1, DDP_PROGRESS_LINES = 2 };

typedef struct ddp_progress {
    const char *what;      /* "explore", "run" */
    const char *unit;      /* "runs" */
    long long total, done;
    int mode;              /* DDP_PROGRESS_* */
    double interval_s;     /* LINES: seconds between lines (default 10) */
    FILE *out;             /* NULL: stderr */
    double (*clock)(void); /* monotonic seconds; NULL: the real clock */
    double t0, last;
    int shown;             /* BAR: a line is on the terminal now */
} ddp_progress_t;

/* "explore 120/1000 runs (12%), 8.3 runs/s, ETA 1m46s, 14s elapsed" and,
 * when note is not empty, "; " note. Returns snprintf's count. */
int ddp_progress_format(char *buf, size_t n, const char *what, const char *unit,
                        long long done, long long total, double elapsed_s,
                        const char *note);

/* p must be zeroed first (`ddp_progress_t pg = {0};`): its clock and
 * interval_s are kept, so a test can set them before the start. */
void ddp_progress_start(ddp_progress_t *p, const char *what, const char *unit,
                        long long total, int mode, FILE *out);
/* done so far; draws when due (always at done == total in BAR mode). */
void ddp_progress_update(ddp_progress_t *p, long long done, const char *note);
/* BAR: erases the line, before something else is printed on `out`. */
void ddp_progress_clear(ddp_progress_t *p);
/* BAR: keep 1 leaves the last line drawn (ends it with a newline), keep 0
 * erases it. */
void ddp_progress_end(ddp_progress_t *p, int keep);

#endif
