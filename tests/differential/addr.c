/* tests/differential/addr.c — make differential: ddpsim's address parser
 * (core/addr.c) against this host's inet_aton, inet_pton(AF_INET6) and
 * getaddrinfo(AI_NUMERICHOST) on COUNT generated strings a family (default
 * 10000, seed SEED, default 41). Prints one line a family; exit 1 on any
 * disagreement (a deliberate one would be listed in docs/fidelity.md). */
#include <stdio.h>
#include <stdlib.h>

#include "../addr_gen.h"

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 10000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 41;
    if (count < 1) {
        fprintf(stderr, "differential: COUNT \"%s\" is not a positive number of inputs "
                        "(usage: addr [COUNT [SEED]])\n", argv[1]);
        return 2;
    }
    ddp_sys_t *sys = ddp_sys_posix_new(NULL);
    ddp_ifaddr_t ifs[64];
    int n = sys ? ddp_sys_ifaddrs(sys, ifs, 64) : 0;
    long bad = 0;
    for (int f = 0; f < ADDR_NFAM; f++) {
        addr_diff_t d;
        addr_diff_run(f, seed + (uint64_t)f, count, ifs, n > 0 ? n : 0, &d);
        printf("%-12s %ld inputs, %ld accepted by libc, %ld disagreements%s%s\n",
               addr_family_name(f), d.tried, d.accepted, d.disagreed,
               d.disagreed ? "; first: " : "", d.disagreed ? d.first : "");
        bad += d.disagreed;
    }
    if (sys)
        ddp_sys_free(sys);
    return bad ? 1 : 0;
}
