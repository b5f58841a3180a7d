/* harness/fault_line.h — a fault line ("fault crash ranks=1 start=5s", or
 * "late ranks=3 by=20s"; docs/scenario-format.md, "Faults") as a value
 * with its own parser, cluster check and writer: what a scenario file and
 * a plan file (harness/plan.c) both hold, read by the same code. */
#ifndef DDP_HARNESS_FAULT_LINE_H
#define DDP_HARNESS_FAULT_LINE_H

#include <stdio.h>

#include "ddp/faults.h"
#include "scn_line.h"

/* The words of a fault that name a target, checked against the cluster. */
enum {
    DDP__AT_NODE, DDP__AT_PEER, DDP__AT_NODES, DDP__AT_RANKS, DDP__AT_PHASE, DDP__AT_START,
    DDP__AT_END, DDP__AT_COUNT
};

/* Parses a fault statement's tokens: tok[0] is "fault" (tok[1] the kind)
 * or "late". plugin: the plugin named so far ("" or NULL: none yet; a
 * phase= may then name any registered plugin's phase). Fills *f (its
 * ranks malloc'd, the caller's) and at[] (line 0: key not given). 0, or
 * DDP_ECONFIG with l's error (nothing left allocated). */
int ddp__fault_line_parse(ddp__ln_t *l, const char *plugin, const ddp__tok_t *tok, int ntok,
                          ddp_fault_t *f, ddp__where_t at[DDP__AT_COUNT]);

/* The cluster a fault must fit: a rank, node or phase that does not exist
 * would never fire, and a fault test would pass as a clean run. */
typedef struct ddp__fault_cluster {
    int nodes;
    long world;         /* ranks 0..world-1 */
    const char *world_why; /* how world was counted, for the error */
    const char *plugin; /* the plugin the run uses ("" or NULL: default) */
} ddp__fault_cluster_t;

/* f (parsed with at[]) against c: 0, or DDP_ECONFIG at the word that is
 * wrong. */
int ddp__fault_line_check(ddp__ln_t *l, const ddp_fault_t *f, const ddp__where_t *at,
                          const ddp__fault_cluster_t *c);

/* One line read alone (a plan file's): lexed with its words' columns
 * counted from col (where text starts on l's line), parsed, checked
 * against c. 0, or DDP_ECONFIG with l's error "file:line:col: ...". */
int ddp__fault_line_read(ddp__ln_t *l, const char *text, int col, const ddp__fault_cluster_t *c,
                         ddp_fault_t *f);

/* Writes f as a fault line (no newline) that ddp__fault_line_parse reads
 * back to the same fault. */
void ddp__fault_line_put(FILE *o, const ddp_fault_t *f);

#endif
