/* tests/differential/launch.c ORACLE — make differential's launch-contract
 * family: the blocks tests/differential/launch_oracle.py wrote (torch
 * 1.13's own code on generated torchrun configurations) against ddpsim's
 * launchers (tests/launch_diff.c). One line of figures; exit 1 on an
 * unexplained disagreement, 2 when ORACLE cannot be read. */
#include <stdio.h>

#include "../launch_diff.h"

int main(int argc, char **argv)
{
    FILE *f = argc == 2 ? fopen(argv[1], "r") : NULL;
    if (!f) {
        fprintf(stderr, "differential: cannot read the oracle's output \"%s\" (usage: launch "
                        "FILE, FILE written by tests/differential/launch_oracle.py)\n",
                argc == 2 ? argv[1] : "");
        return 2;
    }
    launch_diff_t d;
    int rc = launch_diff_read(f, &d);
    fclose(f);
    if (rc != 0) {
        fprintf(stderr, "differential: %s: %s\n", argv[1], d.first);
        return 2;
    }
    printf("torchrun     %ld configurations, %ld rejected by torch, %ld workers compared, "
           "%ld explained, %ld disagreements%s%s\n",
           d.configs, d.torch_rejected, d.workers, d.explained, d.disagreed,
           d.disagreed ? "; first: " : "", d.disagreed ? d.first : "");
    for (int w = 0; w < LAUNCH_NWHY; w++)
        if (d.why[w])
            printf("  explained (docs/fidelity.md): %-40s %ld\n", launch_why_name(w), d.why[w]);
    return d.disagreed ? 1 : 0;
}
