/* examples/stages/run_stages.c — runs scenario files with the `stages`
 * plugin in ddpsim's simulator, under every accelerator each scenario
 * lists, and prints one verdict line per run:
 *
 *   ./run_stages stages-clean.scn stages-crash-in-split.scn
 *
 * Exit status: 0 every run met its scenario's expectations, 1 one did
 * not, 2 a file could not be loaded. */
#include <stdio.h>
#include <string.h>

#include <ddp/accel.h>
#include <ddp/err.h>
#include <ddp/plugin.h>
#include <ddp/scenario.h>

#include "stages_plugin.h"

int main(int argc, char **argv)
{
    /* A scenario names its plugin (`plugin stages`): register it first. */
    if (ddp_plugin_register(&stages_plugin) != 0) {
        fprintf(stderr, "run_stages: %s\n", ddp_err_message());
        return 2;
    }
    int failed = 0, runs = 0;
    for (int i = 1; i < argc; i++) {
        char err[512];
        ddp_scenario_t *s = NULL;
        if (ddp_scenario_load(argv[i], &s, err, sizeof err) != 0) {
            fprintf(stderr, "run_stages: %s\n", err);
            return 2;
        }
        printf("%s: %s\n", argv[i], s->name);
        for (size_t a = 0; a < ddp_accel_count(); a++) {
            const char *accel = ddp_accel_at(a)->name;
            if (!ddp_scenario_has_accel(s, accel))
                continue;
            ddp_scn_result_t r;
            if (ddp_scenario_run(s, accel, NULL, &r) != 0) {
                fprintf(stderr, "run_stages: %s: %s\n", argv[i], r.why);
                return 2;
            }
            runs++;
            failed += !r.pass;
            printf("  %-12s %-4s %d ok, %d failed, %d crashed%s%s\n", accel,
                   r.pass ? "PASS" : "FAIL", r.ok, r.failed, r.crashed,
                   r.pass ? (r.first_error[0] ? "; expected: " : "") : "; ",
                   r.pass ? r.first_error : r.why);
        }
        ddp_scenario_free(s);
    }
    printf("%d run(s), %d failed\n", runs, failed);
    return failed ? 1 : 0;
}
