/* tests/differential/addr.c — make differential, on COUNT generated inputs
 * a family (default 10000, seed SEED, default 41):
 *  - ddpsim's address parser (core/addr.c) against this host's inet_aton,
 *    inet_pton(AF_INET6) and getaddrinfo(AI_NUMERICHOST) (tests/addr_gen.c);
 *  - ddpsim's readings of core/endpoint.c against torch 1.13's own: the
 *    rendezvous endpoint, the store-hosting decision, GLOO_SOCKET_IFNAME
 *    (tests/torch_gen.c; one Python process a family, "skipped: ..."
 *    without torch; -v: every disagreement on stderr).
 * Prints one line a family; exit 1 on any disagreement not listed in
 * docs/fidelity.md. */
#include <stdio.h>
#include <string.h>

#include "../addr_gen.h"
#include "../torch_gen.h"

static long libc_families(ddp_sys_t *sys, long count, uint64_t seed)
{
    ddp_ifaddr_t ifs[64];
    int n = ddp_sys_ifaddrs(sys, ifs, 64);
    long bad = 0;
    for (int f = 0; f < ADDR_NFAM; f++) {
        addr_diff_t d;
        addr_diff_run(f, seed + (uint64_t)f, count, ifs, n > 0 ? n : 0, &d);
        printf("%-12s %ld inputs, %ld accepted by libc, %ld disagreements%s%s\n",
               addr_family_name(f), d.tried, d.accepted, d.disagreed,
               d.disagreed ? "; first: " : "", d.disagreed ? d.first : "");
        bad += d.disagreed;
    }
    return bad;
}

static long torch_families(ddp_sys_t *sys, long count, uint64_t seed)
{
    long bad = 0;
    for (int f = 0; f < TORCH_NFAM; f++) {
        torch_diff_t d;
        fflush(stdout);
        if (torch_diff_run(f, seed + (uint64_t)f, count, sys,
                           "tests/differential/torch_oracle.py", &d) != 0) {
            printf("%-12s %s: %s\n", torch_family_name(f), d.skipped ? "skipped" : "FAILED",
                   d.why);
            bad += !d.skipped;
            continue;
        }
        printf("%-12s %ld inputs, %ld accepted by torch, %ld deliberate, %ld disagreements%s%s\n",
               torch_family_name(f), d.tried, d.accepted, d.deliberate, d.disagreed,
               d.disagreed ? "; first: " : "", d.disagreed ? d.first : "");
        bad += d.disagreed;
    }
    return bad;
}

int main(int argc, char **argv)
{
    long count;
    uint64_t seed;
    ddp_sys_t *sys = diff_start(argc, argv, "addr [COUNT [SEED [-v]]]", &count, &seed);
    if (!sys)
        return 2;
    if (argc > 3 && !strcmp(argv[3], "-v"))
        torch_diff_log(stderr);
    long bad = libc_families(sys, count, seed) + torch_families(sys, count, seed);
    ddp_sys_free(sys);
    return bad ? 1 : 0;
}
