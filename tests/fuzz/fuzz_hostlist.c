/* tests/fuzz/fuzz_hostlist.c — libFuzzer harness for core/hostlist.c: any
 * input is an expression; when it expands, compressing the hosts must
 * succeed and expanding that must give the same hosts in the same order
 * (expand -> compress -> expand is the identity; else abort). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/cluster.h"
#include "fuzz.h"

static int fuzz_hostlist_one(const uint8_t *d, size_t n)
{
    if (n > 4096)
        return 0; /* long inputs only slow the search down */
    char *expr = fuzz_cstr(d, n);
    if (!expr)
        return 0;
    char **hosts = NULL, **back = NULL, *c = NULL;
    size_t nh = 0, nb = 0;
    int bad = 0;
    if (ddp_hostlist_expand(expr, 20000, &hosts, &nh) == 0) {
        bad = nh == 0 || ddp_hostlist_compress((const char *const *)hosts, nh, &c) != 0 ||
              ddp_hostlist_expand(c, 20000, &back, &nb) != 0 || nb != nh;
        for (size_t i = 0; !bad && i < nh; i++)
            bad = strcmp(hosts[i], back[i]) != 0;
    }
    ddp_hostlist_free(hosts, nh);
    ddp_hostlist_free(back, nb);
    free(c);
    free(expr);
    return bad;
}

DDP_FUZZ_ENTRY(fuzz_hostlist_one)
