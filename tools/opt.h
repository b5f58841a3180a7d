/* tools/opt.h — the one option parser of every ddpsim subcommand.
 *
 * Each subcommand declares a table of its options, one line per option
 * (the OPT_* macros below), and calls ddp_opt_parse, which runs getopt_long
 * over it. Every numeric value is parsed strictly (strtoll/strtoull/strtod
 * with end-pointer and errno checks) and range-checked. Any bad input gets
 * exactly one line on stderr that names the subcommand, the option and its
 * valid form, and the parse returns 2 (the exit status for bad input):
 *
 *   ddpsim sim: bad --timeout "abc"; expected seconds > 0 (at most 10000000)
 *   ddpsim sim: --timeout needs a value; expected seconds > 0 (at most 10000000)
 *   ddpsim sim: unknown option "--bogus"; expected one of --accelerator, ...
 *
 * Long options may be abbreviated to a unique prefix and take their value
 * as "--opt VALUE" or "--opt=VALUE" (getopt_long's rules); -h is --help. */
#ifndef DDP_TOOLS_OPT_H
#define DDP_TOOLS_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum ddp_opt_kind {
    DDP_OPT_FLAG, /* no value: *(int *)dst = ival */
    DDP_OPT_STR,  /* *(const char **)dst = the value (non-empty) */
    DDP_OPT_INT,  /* *(int *)dst: a decimal integer in [lo, hi] */
    DDP_OPT_LONG, /* *(long *)dst: the same */
    DDP_OPT_U64,  /* *(uint64_t *)dst: a decimal integer in [lo, 2^64-1] */
    DDP_OPT_SEC,  /* *(double *)dst: seconds in [lo, hi] (> lo when ival) */
    DDP_OPT_NS,   /* *(int64_t *)dst: the same seconds, in nanoseconds */
    DDP_OPT_FN,   /* fn(value, dst): 0, or -1 and the value is bad (form says
                     why), or a ddpsim code < -1 with the error context
                     (and its hint) saying why */
    DDP_OPT_HELP, /* prints the usage on stdout; the parse returns 1 */
} ddp_opt_kind_t;

typedef struct ddp_opt {
    const char *name; /* the long name, without "--" */
    char short_name;  /* 0: none */
    ddp_opt_kind_t kind;
    void *dst;
    double lo, hi; /* range of INT, LONG, U64 (lo), SEC, NS */
    int ival;      /* FLAG: the value stored; SEC/NS: 1 when lo is excluded */
    const char *form; /* the valid form in messages; NULL: made from the range */
    int (*fn)(const char *value, void *dst);
} ddp_opt_t;

#define OPT_FLAG(n, s, d, v) {n, s, DDP_OPT_FLAG, d, 0, 0, v, NULL, NULL}
#define OPT_STR(n, d, form) {n, 0, DDP_OPT_STR, d, 0, 0, 0, form, NULL}
/* A string option with a short form too (-k PATTERN). */
#define OPT_STR_SHORT(n, s, d, form) {n, s, DDP_OPT_STR, d, 0, 0, 0, form, NULL}
#define OPT_INT(n, d, lo, hi) {n, 0, DDP_OPT_INT, d, lo, hi, 0, NULL, NULL}
#define OPT_LONG(n, d, lo, hi) {n, 0, DDP_OPT_LONG, d, lo, hi, 0, NULL, NULL}
#define OPT_U64(n, d, lo) {n, 0, DDP_OPT_U64, d, lo, 0, 0, NULL, NULL}
/* Seconds in [lo, hi]; the _POS forms: in (0, hi]. */
#define OPT_SEC(n, d, lo, hi) {n, 0, DDP_OPT_SEC, d, lo, hi, 0, NULL, NULL}
#define OPT_SEC_POS(n, d, hi) {n, 0, DDP_OPT_SEC, d, 0, hi, 1, NULL, NULL}
#define OPT_NS(n, d, lo, hi) {n, 0, DDP_OPT_NS, d, lo, hi, 0, NULL, NULL}
#define OPT_NS_POS(n, d, hi) {n, 0, DDP_OPT_NS, d, 0, hi, 1, NULL, NULL}
#define OPT_FN(n, d, fn, form) {n, 0, DDP_OPT_FN, d, 0, 0, 0, form, fn}
#define OPT_HELP {"help", 'h', DDP_OPT_HELP, NULL, 0, 0, 0, NULL, NULL}

/* A subcommand's options. */
typedef struct ddp_opt_spec {
    const char *cmd;        /* "sim", "store serve", ... (for messages) */
    const ddp_opt_t *opts;
    size_t nopts;
    void (*usage)(FILE *f); /* what --help prints */
    int in_order;    /* options end at the first operand: what follows is a
                        program's or a command's own arguments */
    int underscores; /* --a_b names the option --a-b too (torchrun's) */
    int min_operands, max_operands; /* max < 0: any */
    const char *operands; /* their form, for messages: "FILE...", "PORT" */
} ddp_opt_spec_t;

#define DDP_OPT_SPEC(c, table, use) \
    .cmd = c, .opts = table, .nopts = sizeof table / sizeof table[0], .usage = use

/* Parses argv[1..argc) (argv[0] is the subcommand's name) and stores each
 * option through its table entry. The operands (the arguments that are
 * not options, in their order) end up in argv[1..1+*noperands).
 * Returns 0; 1 when --help printed the usage (exit 0); 2 after one line
 * on stderr for bad input (exit 2). */
int ddp_opt_parse(const ddp_opt_spec_t *spec, int argc, char **argv, int *noperands);

/* Stores value through the option called name (a default from the
 * environment, say), with the checks and the message of the command line;
 * origin, when not NULL, is named in the message ("PET_NNODES"). 0 or 2. */
int ddp_opt_apply(const ddp_opt_spec_t *spec, const char *name, const char *value,
                  const char *origin);

/* The one-line message for a bad value: "ddpsim CMD: bad WHAT "VALUE";
 * expected FORM". Returns 2. */
int ddp_opt_bad(const char *cmd, const char *what, const char *value, const char *form);

/* Strict numbers: the whole text, no blanks, in range. 0 or -1. */
int ddp_opt_int(const char *s, long long lo, long long hi, long long *out);
int ddp_opt_u64(const char *s, uint64_t lo, uint64_t *out);
int ddp_opt_num(const char *s, double lo, double hi, int lo_open, double *out);

/* Values that are names ddpsim knows, for OPT_FN (dst: const char **, or
 * const ddp_plugin_t ** for the plugin), and their forms for messages
 * (made from the registries). */
int ddp_opt_accel(const char *value, void *dst);        /* an accelerator */
int ddp_opt_accel_or_all(const char *value, void *dst); /* ... or "all" */
/* A plugin's name or a plugin library's path (ddp_plugin_is_library_path:
 * loaded and registered then); a library that does not load is a code
 * < -1, as OPT_FN allows (its message and hint on the one line). */
int ddp_opt_plugin(const char *value, void *dst);
int ddp_opt_plugin_name(const char *value, void *dst); /* its name, checked */
const char *ddp_opt_accel_form(int with_all);
const char *ddp_opt_plugin_form(void);

/* A directory that exists or can be made (made, mode 0777 less the umask;
 * dst: const char **). */
int ddp_opt_dir(const char *value, void *dst);
#define DDP_OPT_DIR_FORM "a directory that exists or can be made"

/* --shard K/N (dst: ddp_shard_t *; docs/sweeps.md). */
int ddp_opt_shard(const char *value, void *dst);
#define DDP_OPT_SHARD_FORM "K/N with 1 <= K <= N <= 100000 (shard K of N)"

/* What a command returns after ddp_opt_parse returned rc != 0. */
#define DDP_OPT_EXIT(rc) ((rc) == 1 ? 0 : (rc))
/* Parses, or returns from the calling command: 0 after --help, 2 after bad
 * input. */
#define DDP_OPT_PARSE_OR_RETURN(spec, argc, argv, noperands)                  \
    do {                                                                      \
        int prc_ = ddp_opt_parse(spec, argc, argv, noperands);                \
        if (prc_)                                                             \
            return DDP_OPT_EXIT(prc_);                                        \
    } while (0)

/* Output paths: 2 after one line when path cannot be written as a file
 * (checked by opening it for appending; a file this made is removed
 * again), 0 when it can. NULL path: 0. */
int ddp_opt_writable(const char *cmd, const char *opt, const char *path);

#endif
