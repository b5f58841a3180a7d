/* harness/scn_line.h — one line of the scenario format (docs/scenario-format.md),
 * read and written: the lexer (words, key=value words, quoted strings), the
 * value parsers (integers, durations, rates, rank lists, nodes) with their
 * "file:line:col: expected ..., got ..." errors, and the value writers that
 * print what the parsers read back. Shared by the scenario parser
 * (harness/scenario_parse.c) and the fault line (harness/fault_line.c). */
#ifndef DDP_HARNESS_SCN_LINE_H
#define DDP_HARNESS_SCN_LINE_H

#include <stdint.h>
#include <stdio.h>

#include "core/kvmap.h"

#define DDP__LN_MAX_TOKENS 48
#define DDP__LN_TOKEN_MAX 512

/* The line being read: where it is (for errors) and the first error. */
typedef struct ddp__ln {
    const char *file;
    int line;
    char *err; /* the first error, "file:line:col: ..." (NULL: none kept) */
    size_t errlen;
    int failed;
    const ddp__kvmap_t *hosts; /* host name -> node (ddp__ln_host_t); NULL: none */
} ddp__ln_t;

/* An entry of ddp__ln_t.hosts: a host name's node index. */
typedef struct ddp__ln_host {
    ddp__kv_node_t kv;
    int node;
} ddp__ln_host_t;

typedef struct ddp__tok {
    char text[DDP__LN_TOKEN_MAX];
    int col;
    int quoted;
    char *eq;   /* after '=' in text for key=value words (NULL otherwise) */
    int vcol;   /* column of the value */
    int len;    /* characters in the source line (quotes included) */
} ddp__tok_t;

/* Where a word was, for errors found later (a fault aimed past the
 * cluster that later lines declared). file must outlive the parse. */
typedef struct ddp__where {
    const char *file;
    int line, col;
} ddp__where_t;

/* The column just past a token: where "end of line" is reported. */
#define DDP__TOK_END(t) ((t).col + (t).len)

ddp__where_t ddp__ln_here(const ddp__ln_t *l, int col);
/* Records "file:line:col: " + fmt as l's error (the first one only);
 * returns DDP_ECONFIG. */
int ddp__ln_err(ddp__ln_t *l, int col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same at a remembered place (l's file and line become w's). */
int ddp__ln_err_at(ddp__ln_t *l, ddp__where_t w, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "got ..." for a token (NULL: end of line). */
const char *ddp__tok_got(const ddp__tok_t *t, char *buf, size_t n);
/* line from its byte `from` on into at most DDP__LN_MAX_TOKENS tokens;
 * columns count from line's first byte (1). */
int ddp__ln_lex(ddp__ln_t *l, const char *line, size_t from, ddp__tok_t *tok, int *ntok);
/* tok[i]'s key given earlier on the line (from tok[2]) is an error. */
int ddp__ln_once(ddp__ln_t *l, const ddp__tok_t *tok, int i, const char *what);

/* Values: 0, or DDP_ECONFIG with l's error at col. */
int ddp__ln_long(ddp__ln_t *l, const char *v, int col, long min, long max, const char *what,
                 long *out);
int ddp__ln_int(ddp__ln_t *l, const char *v, int col, long min, long max, const char *what,
                int *out);
int ddp__ln_duration(ddp__ln_t *l, const char *v, int col, int64_t *out);
int ddp__ln_rate(ddp__ln_t *l, const char *v, int col, uint64_t *out);
int ddp__ln_rank_list(ddp__ln_t *l, const char *v, int col, char *out, size_t n);
/* A node: its index or one of l->hosts' names. */
int ddp__ln_node(ddp__ln_t *l, const char *v, int col, int *out);
/* One side of a partition: "1", "0-1", "a,b" -> a bit per node 0..63. */
int ddp__ln_node_set(ddp__ln_t *l, const char *v, int col, uint64_t *set);
/* node < nodes, else an error at `at`: "expected KEY a node 0..N-1 ...". */
int ddp__ln_check_node(ddp__ln_t *l, ddp__where_t at, int node, int nodes, const char *key);

/* Writers: what the parsers above read back exactly. */
void ddp__put_duration(FILE *o, const char *key, int64_t ns);
void ddp__put_rate(FILE *o, uint64_t bps);
void ddp__put_quoted(FILE *o, const char *s);
/* Bare when the lexer reads it back as one word, else quoted. */
void ddp__put_word(FILE *o, const char *s);

#endif
