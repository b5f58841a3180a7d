/* tests/test_progress.c — the progress line of long work
 * (harness/progress.h): its fields, and when it is drawn, on a fake clock
 * (no timing assertion: the clock is the test's). */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/progress.h"

static double g_now;
static double fake_clock(void)
{
    return g_now;
}

static void test_format_fields(void)
{
    char b[256];
    ddp_progress_format(b, sizeof b, "run", "runs", 30, 120, 15.0, "ddp real-x.scn");
    CU_ASSERT_STRING_EQUAL(b, "run 30/120 runs (25%), 2.0 runs/s, ETA 45s, 15s elapsed; "
                              "ddp real-x.scn");
    ddp_progress_format(b, sizeof b, "explore", "runs", 1, 1000, 2.0, NULL);
    CU_ASSERT_STRING_EQUAL(b, "explore 1/1000 runs (0%), 0.5 runs/s, ETA 33m18s, 2s "
                              "elapsed");
    ddp_progress_format(b, sizeof b, "mutate", "mutants", 0, 10, 0.0, "");
    CU_ASSERT_STRING_EQUAL(b, "mutate 0/10 mutants (0%), 0.0 mutants/s, ETA ?, 0s elapsed");
    ddp_progress_format(b, sizeof b, "run", "runs", 3, 3, 4000.0, NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(b, "(100%), "));
    CU_ASSERT_PTR_NOT_NULL(strstr(b, "ETA 0s, 1h06m elapsed"));
}

static char *drive(int mode, const double *times, int n, long long total)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    ddp_progress_t p = {.clock = fake_clock};
    g_now = 100;
    ddp_progress_start(&p, "run", "runs", total, mode, out);
    for (int i = 0; i < n; i++) {
        g_now = 100 + times[i];
        ddp_progress_update(&p, i + 1, NULL);
    }
    ddp_progress_end(&p, 0);
    fclose(out);
    return buf;
}

/* Not on a terminal: a plain line each 10 s of the clock, none sooner. */
static void test_lines_every_interval(void)
{
    const double quick[] = {1, 2, 3};
    char *s = drive(DDP_PROGRESS_LINES, quick, 3, 3);
    CU_ASSERT_STRING_EQUAL(s, "");
    free(s);
    const double slow[] = {4, 9, 10, 12, 19, 20, 35};
    s = drive(DDP_PROGRESS_LINES, slow, 7, 10);
    CU_ASSERT_STRING_EQUAL(s, "run 3/10 runs (30%), 0.3 runs/s, ETA 23s, 10s elapsed\n"
                              "run 6/10 runs (60%), 0.3 runs/s, ETA 13s, 20s elapsed\n"
                              "run 7/10 runs (70%), 0.2 runs/s, ETA 15s, 35s elapsed\n");
    free(s);
}

/* On a terminal: one line redrawn in place (carriage return, erase), at
 * most every 0.1 s and always at the end, erased by end. */
static void test_bar_redraws_in_place(void)
{
    const double t[] = {0.01, 0.02, 0.5, 0.51};
    char *s = drive(DDP_PROGRESS_BAR, t, 4, 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\r\033[K[#####...............] run 1/4 runs (25%), "));
    CU_ASSERT_PTR_NULL(strstr(s, "run 2/4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "run 3/4 runs"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "[####################] run 4/4 runs (100%), "));
    CU_ASSERT_PTR_NULL(strchr(s, '\n'));
    size_t n = strlen(s);
    CU_ASSERT(n > 4 && strcmp(s + n - 4, "\r\033[K") == 0);
    free(s);
    s = drive(DDP_PROGRESS_OFF, t, 4, 4);
    CU_ASSERT_STRING_EQUAL(s, "");
    free(s);
}

/* scripts/progress.sh prints the same line as the tools, on the same
 * (fake) clock. */
static void test_shell_same_line(void)
{
    static const struct {
        long long done, total, el;
        const char *note;
    } c[] = {{30, 120, 15, "ddp shard 1"}, {1, 1000, 2, ""}, {0, 10, 0, ""},
             {3, 3, 4000, "end"}, {7, 10, 35, ""}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char want[256], cmd[512], got[256] = "";
        ddp_progress_format(want, sizeof want, "mutate", "mutants", c[i].done, c[i].total,
                            (double)c[i].el, c[i].note);
        snprintf(cmd, sizeof cmd,
                 "PROGRESS_NOW=1000 sh -c '. scripts/progress.sh; progress_start mutate "
                 "mutants %lld; PROGRESS_NOW=%lld progress_fmt %lld \"%s\"'",
                 c[i].total, 1000 + c[i].el, c[i].done, c[i].note);
        FILE *p = popen(cmd, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        if (!fgets(got, sizeof got, p))
            got[0] = '\0';
        CU_ASSERT_EQUAL(pclose(p), 0);
        got[strcspn(got, "\n")] = '\0';
        CU_ASSERT_STRING_EQUAL(got, want);
    }
}

/* The commands draw it: ddpsim run and explore with --progress, on
 * stderr (the fields only: the figures are the clock's). */
static void test_commands_draw_it(void)
{
    static char err[1 << 16];
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "run scenarios/clean-start.scn "
                                             "scenarios/crash-joining.scn --accelerator ddp "
                                             "--jobs 1 --progress",
                                       1, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "] run 0/2 runs (0%), "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, " runs/s, ETA "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "; now scenarios/clean-start.scn ddp"));
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "explore --ranks 4 --runs 5 --seed 1 --progress",
                                       1, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "] explore 5/5 runs (100%), "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "ETA 0s, "));
    /* --no-progress: nothing on stderr */
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "explore --ranks 4 --runs 5 --seed 1 "
                                             "--no-progress", 1, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
}

DDP_SUITE("progress", NULL, NULL,
          {"the line's fields: done/total, percent, rate, ETA, elapsed", test_format_fields},
          {"not a terminal: a line per 10 s, none sooner", test_lines_every_interval},
          {"a terminal: one line redrawn in place", test_bar_redraws_in_place},
          {"scripts/progress.sh prints the same line", test_shell_same_line},
          {"run and explore draw it with --progress", test_commands_draw_it})
