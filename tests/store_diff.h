/* tests/store_diff.h — generated TCPStore request sequences, sent as the
 * same raw bytes to torch 1.13's own TCPStore server and to ddpsim's
 * (core/store_server.c), replies compared byte for byte (and whether the
 * server closed the connection): the store family of `make differential`
 * (tests/differential/store.c, >= 10,000 sequences) and its sample in
 * `make test` (the store_diff suite). docs/fidelity.md, "The store". */
#ifndef DDP_TEST_STORE_DIFF_H
#define DDP_TEST_STORE_DIFF_H

#include <stdint.h>

#include "ddp/sys.h"

/* The named differences (each a row of docs/fidelity.md): a disagreement
 * of one of these kinds ends its sequence and is counted, not failed. */
enum {
    SD_N_GET_MISSING,  /* GET of a missing key: torch closes, ddpsim replies empty */
    SD_N_KEY_LIMIT,    /* a key over 8 KiB: ddpsim closes, torch serves it */
    SD_N_VALUE_LIMIT,  /* a value over 8 MiB: ddpsim closes, torch stores it */
    SD_N_COUNT_LIMIT,  /* CHECK/WAIT naming more than 128 Ki keys: ddpsim closes */
    SD_N_OPCODE,       /* opcodes 9-17: ddpsim serves the current op, torch closes */
    SD_N_ADD_OVERFLOW, /* an ADD past int64: torch wraps around, ddpsim closes */
    SD_N_CAS_WAKE,     /* COMPARE_SET creates an awaited key: ddpsim wakes, torch not */
    SD_N_REWAIT,       /* a WAIT after an unanswered one: torch still counts the old keys */
    SD_NNAMED
};

typedef struct sd_stats {
    long sequences, requests;
    long agreed;      /* sequences with no difference at all */
    long closes;      /* requests on which both servers closed the connection */
    long waits_open;  /* WAITs neither server answered (timed out client-side) */
    long waits_big;   /* WAITs naming 16 Ki keys or more */
    long named[SD_NNAMED];
    long disagreed; /* unexplained disagreements */
    char first[600]; /* the first one, in words */
    int verbose;     /* set: every one is printed on stderr */
} sd_stats_t;

/* torch's server: the helper process, its stdin (closing it ends it). */
typedef struct sd_torch {
    long pid;
    int in_fd;
    uint16_t port;
} sd_torch_t;

const char *sd_named_name(int which);
/* Starts `scripts/torch-python SCRIPT 127.0.0.1 PORT` (0: any port) and
 * reads the port it listens on: 0; 1 when no Python has torch (why says
 * so); -1 on any other failure (why). Never waits past 120 s. */
int sd_torch_start(sd_torch_t *t, const char *script, uint16_t port, char *why, size_t n);
void sd_torch_stop(sd_torch_t *t);
/* count sequences from seed against srv[0] (torch) and srv[1] (ddpsim),
 * counted into st. big: also values over 8 MiB and WAITs over 128 Ki keys
 * (the full run). 0, or -1 when a server cannot be reached (st->first). */
int sd_run(ddp_sys_t *sys, const ddp_addr_t srv[2], uint64_t seed, long count, int big,
           sd_stats_t *st);

#endif
