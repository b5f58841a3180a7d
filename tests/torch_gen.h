/* tests/torch_gen.h — generated inputs read by ddpsim (core/endpoint.c) and
 * by torch 1.13 itself (tests/differential/torch_oracle.py, one Python
 * process a family), compared: the torch half of docs/fidelity.md's
 * differential check. Used by the addr suite (a sample inside make test)
 * and tests/differential/addr.c (make differential, >= 10,000 a family). */
#ifndef DDP_TEST_TORCH_GEN_H
#define DDP_TEST_TORCH_GEN_H

#include <stdint.h>
#include <stdio.h>

#include "ddp/sys.h"

/* parse_rendezvous_endpoint, _matches_machine_hostname, GLOO_SOCKET_IFNAME */
enum { TORCH_FAM_ENDPOINT, TORCH_FAM_THISHOST, TORCH_FAM_GLOO, TORCH_NFAM };

typedef struct torch_diff {
    long tried, accepted, deliberate, disagreed; /* accepted: by torch */
    int skipped;                                 /* no torch here: why says so */
    char why[200];
    char first[400]; /* the first disagreement, in words */
} torch_diff_t;

const char *torch_family_name(int family);
/* count generated inputs from seed, read by ddpsim over sys (this host's
 * name and interfaces) and by the oracle (python: the path of
 * torch_oracle.py), compared into d. 0, or -1 with d->why when the oracle
 * could not run (d->skipped when torch is not installed). */
int torch_diff_run(int family, uint64_t seed, long count, ddp_sys_t *sys, const char *oracle,
                   torch_diff_t *d);

/* Every disagreement after the first, one a line, to f (NULL: none). */
void torch_diff_log(FILE *f);

#endif
