/* harness/scn_line.c — one line of the scenario format: lexer, value
 * parsers and value writers (harness/scn_line.h). */
#include "scn_line.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/sim.h"
#include "ddp/sys.h"

ddp__where_t ddp__ln_here(const ddp__ln_t *l, int col)
{
    return (ddp__where_t){.file = l->file, .line = l->line, .col = col};
}

static int ln_verr(ddp__ln_t *l, int col, const char *fmt, va_list ap)
{
    if (!l->failed && l->err && l->errlen) {
        int n = snprintf(l->err, l->errlen, "%s:%d:%d: ", l->file, l->line, col);
        if (n >= 0 && (size_t)n < l->errlen)
            vsnprintf(l->err + n, l->errlen - (size_t)n, fmt, ap);
    }
    l->failed = 1;
    return DDP_ECONFIG;
}

int ddp__ln_err(ddp__ln_t *l, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = ln_verr(l, col, fmt, ap);
    va_end(ap);
    return rc;
}

int ddp__ln_err_at(ddp__ln_t *l, ddp__where_t w, const char *fmt, ...)
{
    l->file = w.file;
    l->line = w.line;
    va_list ap;
    va_start(ap, fmt);
    int rc = ln_verr(l, w.col, fmt, ap);
    va_end(ap);
    return rc;
}

const char *ddp__tok_got(const ddp__tok_t *t, char *buf, size_t n)
{
    if (!t)
        snprintf(buf, n, "end of line");
    else
        snprintf(buf, n, "\"%.60s\"", t->text);
    return buf;
}

/* ---- lexer: one line into tokens ---- */
int ddp__ln_lex(ddp__ln_t *l, const char *line, size_t from, ddp__tok_t *tok, int *ntok)
{
    *ntok = 0;
    const char *c = line + from;
    while (*c) {
        while (*c == ' ' || *c == '\t' || *c == '\r')
            c++;
        if (!*c || *c == '#')
            break;
        if (*ntok == DDP__LN_MAX_TOKENS)
            return ddp__ln_err(l, (int)(c - line) + 1,
                        "expected at most %d words on a line, got more", DDP__LN_MAX_TOKENS);
        ddp__tok_t *t = &tok[(*ntok)++];
        memset(t, 0, sizeof *t);
        t->col = (int)(c - line) + 1;
        size_t n = 0;
        int in_quote = 0, quote_col = 0;
        while (*c) {
            if (!in_quote && (*c == ' ' || *c == '\t' || *c == '\r' || *c == '#'))
                break;
            if (*c == '"') {
                if (!in_quote)
                    quote_col = (int)(c - line) + 1;
                in_quote = !in_quote;
                t->quoted = 1;
                c++;
                continue;
            }
            if (in_quote && *c == '\\' && (c[1] == '"' || c[1] == '\\')) {
                c++;
            } else if (!in_quote && *c == '=' && !t->eq) {
                if (n + 1 >= DDP__LN_TOKEN_MAX)
                    return ddp__ln_err(l, t->col, "expected a word shorter than %d "
                                           "characters, got a longer one", DDP__LN_TOKEN_MAX);
                t->text[n++] = '\0';
                t->eq = t->text + n;
                t->vcol = (int)(c - line) + 2;
                c++;
                continue;
            }
            if (n + 1 >= DDP__LN_TOKEN_MAX)
                return ddp__ln_err(l, t->col, "expected a word shorter than %d "
                                       "characters, got a longer one", DDP__LN_TOKEN_MAX);
            t->text[n++] = *c++;
        }
        if (in_quote)
            return ddp__ln_err(l, quote_col, "expected a closing '\"', got end of line");
        t->text[n] = '\0';
        t->len = (int)(c - line) + 1 - t->col;
        if (t->eq && !t->text[0])
            return ddp__ln_err(l, t->col, "expected key=value, got \"=%s\"", t->eq);
    }
    return 0;
}

/* ---- values ---- */
int ddp__ln_long(ddp__ln_t *l, const char *v, int col, long min, long max,
                      const char *what, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < min || x > max)
        return ddp__ln_err(l, col, "expected %s (an integer %ld..%ld), got \"%.60s\"",
                    what, min, max, v);
    *out = x;
    return 0;
}

int ddp__ln_int(ddp__ln_t *l, const char *v, int col, long min, long max,
                     const char *what, int *out)
{
    long x;
    int rc = ddp__ln_long(l, v, col, min, max, what, &x);
    if (rc == 0)
        *out = (int)x;
    return rc;
}

/* 30s, 500ms, 1.5m, 100us, 2h, 0s. A whole number is read exactly (the
 * writer prints whole numbers of its unit, so any duration reads back to
 * the same nanosecond); a fraction goes through strtod. */
int ddp__ln_duration(ddp__ln_t *l, const char *v, int col, int64_t *out)
{
    static const struct { const char *u; int64_t ns; } units[] = {
        {"ns", 1}, {"us", 1000}, {"ms", DDP_NS_PER_MS}, {"s", DDP_NS_PER_S},
        {"m", 60 * DDP_NS_PER_S}, {"h", 3600 * DDP_NS_PER_S}};
    const int64_t limit = INT64_C(9000000000000000000);
    const char *u = v;
    while (isdigit((unsigned char)*u))
        u++;
    for (size_t i = 0; u != v && i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(u, units[i].u))
            continue;
        int64_t x = 0;
        int big = 0;
        for (const char *c = v; c < u && !big; c++) {
            big = x > (limit - 9) / 10;
            x = big ? x : x * 10 + (*c - '0');
        }
        if (!big && x <= limit / units[i].ns) {
            *out = x * units[i].ns;
            return 0;
        }
    }
    /* A decimal fraction: digits with one '.' (no sign, exponent or hex). */
    int digits = 0, dots = 0;
    for (u = v; isdigit((unsigned char)*u) || *u == '.'; u++)
        digits += *u != '.', dots += *u == '.';
    char *end = NULL;
    double x = digits && dots == 1 ? strtod(v, &end) : -1;
    for (size_t i = 0; x >= 0 && end == u && i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].u) && x * (double)units[i].ns < 9e18) {
            *out = (int64_t)(x * (double)units[i].ns + 0.5);
            return 0;
        }
    return ddp__ln_err(l, col, "expected a duration such as 30s, 500ms, 2m or 100us, "
                        "got \"%.60s\"", v);
}

/* A bandwidth fault's rate, in tc's units: bit, kbit, mbit, gbit are bits
 * per second and bps, kbps, mbps, gbps bytes per second (k = 1000, as tc
 * reads them); a whole number, 1 bit/s .. DDP_SIM_RATE_MAX. */
static const struct { const char *u; uint64_t bps; } rate_units[] = {
    {"gbit", 1000000000}, {"mbit", 1000000}, {"kbit", 1000}, {"bit", 1},
    {"gbps", 8000000000}, {"mbps", 8000000}, {"kbps", 8000}, {"bps", 8}};
#define NRATE_UNITS (sizeof rate_units / sizeof rate_units[0])

int ddp__ln_rate(ddp__ln_t *l, const char *v, int col, uint64_t *out)
{
    const char *u = v;
    uint64_t x = 0;
    while (isdigit((unsigned char)*u) && x <= DDP_SIM_RATE_MAX)
        x = x * 10 + (uint64_t)(*u++ - '0');
    for (size_t i = 0; u != v && !isdigit((unsigned char)*u) && i < NRATE_UNITS; i++)
        if (!strcmp(u, rate_units[i].u) && x > 0 && x <= DDP_SIM_RATE_MAX / rate_units[i].bps) {
            *out = x * rate_units[i].bps;
            return 0;
        }
    return ddp__ln_err(l, col, "expected a rate such as 1mbit, 500kbit or 100kbps (a whole number "
                        "and a unit: bit, kbit, mbit, gbit bits per second, or bps, kbps, "
                        "mbps, gbps bytes per second; 1bit .. 10gbit), got \"%.60s\"", v);
}

/* "0,3-5": each rank a number; checked, kept as text (the sim's form). */
int ddp__ln_rank_list(ddp__ln_t *l, const char *v, int col, char *out, size_t n)
{
    ddp_rankset_t rs;
    if (!*v)
        return ddp__ln_err(l, col, "expected a rank list such as 3 or 0,2-5, got \"\"");
    if (ddp_rankset_parse(v, &rs))
        return ddp__ln_err(l, col, "expected a rank list such as 3 or 0,2-5 (at most %d ranks or "
                            "ranges), got \"%.60s\"",
                    DDP_RANKSET_MAX, v);
    if (strlen(v) >= n)
        return ddp__ln_err(l, col, "expected a rank list shorter than %zu characters", n);
    snprintf(out, n, "%s", v);
    return 0;
}

/* A node: its index or one of the scenario's host names. */
int ddp__ln_node(ddp__ln_t *l, const char *v, int col, int *out)
{
    if (isdigit((unsigned char)v[0]))
        return ddp__ln_int(l, v, col, 0, 4095, "a node index", out);
    const ddp__kv_node_t *e =
        l->hosts && l->hosts->buckets ? ddp__kv_find(l->hosts, v, strlen(v)) : NULL;
    if (e) {
        *out = ((const ddp__ln_host_t *)e)->node;
        return 0;
    }
    return ddp__ln_err(l, col, "expected a node index or a host name of `hosts`, got \"%.60s\"", v);
}

int ddp__ln_node_set(ddp__ln_t *l, const char *v, int col, uint64_t *set)
{
    char buf[DDP__LN_TOKEN_MAX];
    snprintf(buf, sizeof buf, "%s", v);
    *set = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",+", &save); t; t = strtok_r(NULL, ",+", &save)) {
        char *dash = strchr(t, '-');
        int a, b;
        if (dash) {
            *dash = '\0';
            const char *what = "a node index (partition sides hold nodes 0..63)";
            if (ddp__ln_int(l, t, col, 0, 63, what, &a) ||
                ddp__ln_int(l, dash + 1, col, 0, 63, what, &b))
                return DDP_ECONFIG;
        } else {
            if (ddp__ln_node(l, t, col, &a))
                return DDP_ECONFIG;
            if (a > 63)
                return ddp__ln_err(l, col, "expected a node 0..63 in a partition side, got %d", a);
            b = a;
        }
        for (int i = a; i <= b; i++)
            *set |= 1ull << i;
    }
    if (!*set)
        return ddp__ln_err(l, col, "expected nodes on one side of the partition (e.g. nodes=1 "
                            "or nodes=0-1), got \"%.60s\"", v);
    return 0;
}


/* A key repeated on a fault or expect line (mentions= may repeat) is an
 * error at the repeat: the second value would silently win (or leak). */
int ddp__ln_once(ddp__ln_t *l, const ddp__tok_t *tok, int i, const char *what)
{
    for (int j = 2; j < i; j++)
        if (tok[j].eq && !strcmp(tok[j].text, tok[i].text))
            return ddp__ln_err(l, tok[i].col, "expected each key once on %s line, got a second "
                                       "%s= (the first is at column %d)",
                        what, tok[i].text, tok[j].col);
    return 0;
}

/* ---- phases a crash fault may name ---- */

/* " rate=N" in the largest bit unit that writes it exactly. */
void ddp__put_rate(FILE *o, uint64_t bps)
{
    size_t i = 0;
    while (bps % rate_units[i].bps) /* "bit" (1) divides every rate */
        i++;
    fprintf(o, " rate=%llu%s", (unsigned long long)(bps / rate_units[i].bps), rate_units[i].u);
}

void ddp__put_duration(FILE *o, const char *key, int64_t ns)
{
    if (ns % DDP_NS_PER_S == 0)
        fprintf(o, "%s%lds", key, (long)(ns / DDP_NS_PER_S));
    else if (ns % DDP_NS_PER_MS == 0)
        fprintf(o, "%s%ldms", key, (long)(ns / DDP_NS_PER_MS));
    else if (ns % 1000 == 0)
        fprintf(o, "%s%ldus", key, (long)(ns / 1000));
    else
        fprintf(o, "%s%ldns", key, (long)ns);
}

void ddp__put_quoted(FILE *o, const char *s)
{
    fputc('"', o);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', o);
        fputc(*s, o);
    }
    fputc('"', o);
}

/* A word as the lexer reads it back: bare when it is a plain word, else
 * quoted (blanks, '#', '"', '\\', '=' or nothing at all). A carriage return
 * is a blank to the lexer outside quotes (CRLF files), so a word holding
 * one, which only quotes can give, is quoted. */
void ddp__put_word(FILE *o, const char *s)
{
    if (!*s || strpbrk(s, " \t\r#\"\\="))
        ddp__put_quoted(o, s);
    else
        fputs(s, o);
}

int ddp__ln_check_node(ddp__ln_t *l, ddp__where_t at, int node, int nodes, const char *key)
{
    if (node < nodes)
        return 0;
    return ddp__ln_err_at(l, at, "expected %s a node 0..%d (the cluster has %d node%s), got %d",
                          key, nodes - 1, nodes, nodes == 1 ? "" : "s", node);
}
