/* tests/fuzz/fuzz_scenario.c — libFuzzer harness for the scenario parser and
 * writer (harness/scenario_parse.c): any input is a scenario file; when it
 * parses, writing it and parsing that must give the same scenario
 * (ddp_scenario_equal), and writing again the same text (parse -> write ->
 * parse is the identity). Includes resolve in a directory that does not
 * exist, so the input cannot pull files of the machine in by relative
 * name. An input with a `plugin-library` line is skipped: it would load
 * (and run the constructors of) whatever library of the machine it names;
 * tests/test_plugin_lib.c covers that line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/scenario.h"
#include "fuzz.h"

static int fuzz_scenario_one(const uint8_t *d, size_t n)
{
    if (n > 1 << 16 || memmem(d, n, "plugin-library", 14))
        return 0;
    char *text = fuzz_cstr(d, n);
    if (!text)
        return 0;
    char err[1024];
    ddp_scenario_t *a = NULL, *b = NULL;
    int bad = 0;
    if (ddp_scenario_parse(text, "fuzz.scn", "/nonexistent-ddpsim-fuzz", &a, err,
                           sizeof err) == 0) {
        char *t1 = ddp_scenario_text(a), *t2 = NULL;
        bad = !t1 || ddp_scenario_parse(t1, "written.scn", NULL, &b, err, sizeof err) != 0 ||
              !ddp_scenario_equal(a, b, err, sizeof err) || !(t2 = ddp_scenario_text(b)) ||
              strcmp(t1, t2) != 0;
        if (bad)
            fprintf(stderr, "round trip: %s\n--- written:\n%s", err, t1 ? t1 : "(none)\n");
        free(t1);
        free(t2);
    }
    ddp_scenario_free(a);
    ddp_scenario_free(b);
    free(text);
    return bad;
}

DDP_FUZZ_ENTRY(fuzz_scenario_one)
