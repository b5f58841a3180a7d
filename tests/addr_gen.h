/* tests/addr_gen.h — generated address strings, read by ddpsim's parser
 * (core/addr.c) and by this host's libc, compared: the differential check
 * of docs/fidelity.md. Used by the addr suite (a sample inside make test)
 * and tests/differential/addr.c (make differential, >= 10,000 a family). */
#ifndef DDP_TEST_ADDR_GEN_H
#define DDP_TEST_ADDR_GEN_H

#include <stdint.h>

#include "ddp/sys.h"

/* What is compared: inet_aton, inet_pton(AF_INET6), and
 * getaddrinfo(AI_NUMERICHOST, AF_UNSPEC) with zones. */
enum { ADDR_FAM_ATON, ADDR_FAM_PTON6, ADDR_FAM_GAI, ADDR_NFAM };

typedef struct addr_diff {
    long tried, accepted, disagreed; /* accepted: by libc */
    char first[200];                 /* the first disagreement, in words */
} addr_diff_t;

const char *addr_family_name(int family);
/* One generated string (NUL-terminated, < n) for family; zones name
 * ifs' interfaces among others. */
void addr_gen(ddp_rng_t *rng, int family, const ddp_ifaddr_t *ifs, int nifs, char *buf,
              size_t n);
/* Both readings of text for family: 1 when they agree, else 0 and why. */
int addr_agree(int family, const char *text, const ddp_ifaddr_t *ifs, int nifs, char *why,
               size_t n);
/* count generated strings from seed through addr_agree, counted into d. */
void addr_diff_run(int family, uint64_t seed, long count, const ddp_ifaddr_t *ifs, int nifs,
                   addr_diff_t *d);

/* A differential driver's start: its arguments, [COUNT [SEED ...]] (COUNT
 * default 10000, SEED 41), and a POSIX sys of this host; NULL after saying
 * what was wrong (usage: the arguments' form). */
ddp_sys_t *diff_start(int argc, char **argv, const char *usage, long *count, uint64_t *seed);

#endif
