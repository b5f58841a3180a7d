/* tests/differential/nccl.c — make differential, the NCCL family: which
 * interface NCCL's bootstrap uses under COUNT generated NCCL_SOCKET_IFNAME
 * / NCCL_SOCKET_FAMILY settings (default 10000, seed SEED, default 41),
 * the simulated NCCL's rule against the real libnccl.so.2 on this host
 * (tests/nccl_diff.c). One line of figures; exit 1 on any disagreement,
 * 0 with "skipped: ..." without libnccl.so.2. */
#include <stdio.h>
#include <stdlib.h>

#include "../nccl_diff.h"

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 10000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 41;
    if (count < 1) {
        fprintf(stderr, "differential nccl: COUNT \"%s\" is not a positive number of inputs "
                        "(usage: nccl [COUNT [SEED]])\n", argv[1]);
        return 2;
    }
    void *fn;
    char why[200];
    if (!nd_open(&fn, why, sizeof why)) {
        printf("nccl         skipped: %s\n", why);
        return 0;
    }
    nd_stats_t st = {0};
    if (nd_run(fn, seed, count, &st) != 0) {
        fprintf(stderr, "differential nccl: %s\n", st.first);
        return 1;
    }
    printf("nccl         %ld inputs, %ld with an interface in real NCCL, %ld disagreements%s%s\n",
           st.tried, st.found, st.disagreed, st.disagreed ? "; first: " : "",
           st.disagreed ? st.first : "");
    return st.disagreed ? 1 : 0;
}
