/* sim/sim_nccl_iface.c — which interface NCCL's bootstrap uses: the
 * simulated NCCL's rule (sim/sim_nccl.c), kept apart from it (no nccl.h)
 * so that `make differential` can hold it against the real libnccl's
 * choice on this host (tests/differential/nccl.c, docs/fidelity.md).
 *
 * As NCCL's ncclFindInterfaces reads them (src/misc/socket.cc, utils.cc):
 * NCCL_SOCKET_IFNAME counts only when longer than one character; it is a
 * comma list of name prefixes ("eth0:PORT" entries: the name part; empty
 * entries and ":PORT" ones are dropped); a leading ^ excludes what
 * matches, then a leading = matches whole names; a list left empty
 * matches every interface (so "^=" matches none). Otherwise: ib* first,
 * else anything but docker*, lo* and virbr*, else docker*, else lo*, else
 * virbr* (NCCL_COMM_ID's subnet hint is not modelled). IPv6 loopback
 * addresses never qualify; NCCL_SOCKET_FAMILY AF_INET / AF_INET6 (exactly
 * those words) keeps that family. The first address in the host's order
 * that qualifies is the one. */
#include <stdint.h>
#include <string.h>

#include "sim_priv.h"

/* NCCL's matchIfList: a list entry matches a name by prefix, or exactly;
 * a list without entries matches every name. */
static int match_list(const char *name, const char *list, int exact)
{
    const char *p = list;
    int entries = 0;
    while (*p) {
        size_t n = strcspn(p, ",");
        size_t k = strcspn(p, ":"); /* "eth0:port" entries: the name part */
        if (k < n)
            n = k;
        entries += n > 0;
        if (n > 0 && (exact ? strlen(name) == n && !strncmp(name, p, n)
                            : !strncmp(name, p, n)))
            return 1;
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
    }
    return entries == 0;
}

/* An address NCCL considers at all: of the family asked for, not ::1. */
static int usable(const ddp_ifaddr_t *a, int family)
{
    static const uint8_t loop6[16] = {[15] = 1};
    if (family && a->addr.family != family)
        return 0;
    return !(a->addr.family == 6 && !memcmp(a->addr.ip, loop6, 16));
}

static int family_of(const char *fam)
{
    return !fam ? 0 : !strcmp(fam, "AF_INET") ? 4 : !strcmp(fam, "AF_INET6") ? 6 : 0;
}

static int pick(const ddp_ifaddr_t *all, int n, const char *spec, int family);

/* Unset: ib, anything but docker, lo and virbr, docker, lo, virbr. */
static int default_pick(const ddp_ifaddr_t *all, int n, int family)
{
    static const char *const tries[] = {"ib", "^docker,lo,virbr", "docker", "lo", "virbr"};
    int got = -1;
    for (size_t t = 0; t < sizeof tries / sizeof tries[0] && got < 0; t++)
        got = pick(all, n, tries[t], family);
    return got;
}

int ddp__nccl_boot_iface(const ddp_ifaddr_t *all, int n, const char *spec, const char *fam)
{
    int family = family_of(fam);
    if (!spec || strlen(spec) < 2) /* NCCL ignores it */
        return default_pick(all, n, family);
    return pick(all, n, spec, family);
}

static int pick(const ddp_ifaddr_t *all, int n, const char *spec, int family)
{
    int not = spec[0] == '^';
    if (not)
        spec++;
    int exact = spec[0] == '=';
    if (exact)
        spec++;
    for (int i = 0; i < n; i++)
        if (usable(&all[i], family) && match_list(all[i].name, spec, exact) != not)
            return i;
    return -1;
}
