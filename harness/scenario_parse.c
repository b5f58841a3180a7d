/* harness/scenario_parse.c — the scenario file format (docs/scenario-format.md):
 * one statement per line, `#` comments, `include "file"`, key=value
 * arguments. Every error is "file:line:col: expected ..., got ..."; unknown
 * keywords, keys and fault kinds are errors, never ignored. */
#include "ddp/scenario.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ddp/accel.h"
#include "ddp/cluster.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/pg.h"
#include "ddp/plugin.h"

#define MAX_INCLUDE_DEPTH 8
#define MAX_TOKENS 48
#define TOKEN_MAX 512

/* Phases the plugin enters (crash faults may name one). */
static const char *const phases[] = {
    "init_ddp_connection", "store server", "store connect", "wait for workers",
    "process group init", "barrier", "connected", "configure_ddp", "teardown"};
#define NPHASES (sizeof phases / sizeof phases[0])

typedef struct token {
    char text[TOKEN_MAX];
    int col;
    int quoted;
    char *eq;   /* after '=' in text for key=value words (NULL otherwise) */
    int vcol;   /* column of the value */
    int len;    /* characters in the source line (quotes included) */
} token_t;

typedef struct pctx {
    ddp_scenario_t *s;
    char *err;
    size_t errlen;
    const char *file; /* current file (for errors) */
    int line;
    int failed;
    int scenario_line; /* where `scenario` was seen (0: not yet) */
    int hosts_line;
    int nodes_line;    /* where `nodes` was seen (0: not) */
} pctx_t;

/* The column just past a token: where "end of line" is reported. */
#define END_OF(t) ((t).col + (t).len)

static int perr(pctx_t *p, int col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr(pctx_t *p, int col, const char *fmt, ...)
{
    if (!p->failed && p->err && p->errlen) {
        int n = snprintf(p->err, p->errlen, "%s:%d:%d: ", p->file, p->line, col);
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < p->errlen)
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    p->failed = 1;
    return DDP_ECONFIG;
}

/* "got ..." for a token. */
static const char *got(const token_t *t, char *buf, size_t n)
{
    if (!t)
        snprintf(buf, n, "end of line");
    else
        snprintf(buf, n, "\"%.60s\"", t->text);
    return buf;
}

/* ---- lexer: one line into tokens ---- */
static int lex_line(pctx_t *p, const char *line, token_t *tok, int *ntok)
{
    *ntok = 0;
    const char *c = line;
    while (*c) {
        while (*c == ' ' || *c == '\t' || *c == '\r')
            c++;
        if (!*c || *c == '#')
            break;
        if (*ntok == MAX_TOKENS)
            return perr(p, (int)(c - line) + 1,
                        "expected at most %d words on a line, got more", MAX_TOKENS);
        token_t *t = &tok[(*ntok)++];
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
                if (n + 1 >= TOKEN_MAX)
                    return perr(p, t->col, "expected a word shorter than %d "
                                           "characters, got a longer one", TOKEN_MAX);
                t->text[n++] = '\0';
                t->eq = t->text + n;
                t->vcol = (int)(c - line) + 2;
                c++;
                continue;
            }
            if (n + 1 >= TOKEN_MAX)
                return perr(p, t->col, "expected a word shorter than %d "
                                       "characters, got a longer one", TOKEN_MAX);
            t->text[n++] = *c++;
        }
        if (in_quote)
            return perr(p, quote_col, "expected a closing '\"', got end of line");
        t->text[n] = '\0';
        t->len = (int)(c - line) + 1 - t->col;
        if (t->eq && !t->text[0])
            return perr(p, t->col, "expected key=value, got \"=%s\"", t->eq);
    }
    return 0;
}

/* ---- values ---- */
static int parse_long(pctx_t *p, const char *v, int col, long min, long max,
                      const char *what, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < min || x > max)
        return perr(p, col, "expected %s (an integer %ld..%ld), got \"%.60s\"",
                    what, min, max, v);
    *out = x;
    return 0;
}

static int parse_int(pctx_t *p, const char *v, int col, long min, long max,
                     const char *what, int *out)
{
    long x;
    int rc = parse_long(p, v, col, min, max, what, &x);
    if (rc == 0)
        *out = (int)x;
    return rc;
}

/* 30s, 500ms, 1.5m, 100us, 2h, 0s */
static int parse_duration(pctx_t *p, const char *v, int col, int64_t *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    static const struct { const char *u; double ns; } units[] = {
        {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
    for (size_t i = 0; end != v && !errno && x >= 0 && i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].u) && x * units[i].ns < 9e18) {
            *out = (int64_t)(x * units[i].ns + 0.5);
            return 0;
        }
    return perr(p, col, "expected a duration such as 30s, 500ms, 2m or 100us, "
                        "got \"%.60s\"", v);
}

/* "0,3-5": each rank a number; checked, kept as text (the sim's form). */
static int parse_rank_list(pctx_t *p, const char *v, int col, char *out, size_t n)
{
    const char *c = v;
    if (!*c)
        return perr(p, col, "expected a rank list such as 3 or 0,2-5, got \"\"");
    while (*c) {
        if (!isdigit((unsigned char)*c))
            return perr(p, col, "expected a rank list such as 3 or 0,2-5, got \"%.60s\"", v);
        char *e;
        long a = strtol(c, &e, 10), b = a;
        if (*e == '-') {
            if (!isdigit((unsigned char)e[1]))
                return perr(p, col, "expected a rank list such as 3 or 0,2-5, got \"%.60s\"", v);
            b = strtol(e + 1, &e, 10);
        }
        if (b < a || b > 1 << 20)
            return perr(p, col, "expected a rank range low-high with low <= high, got \"%.60s\"", v);
        if (*e && *e != ',')
            return perr(p, col, "expected a rank list such as 3 or 0,2-5, got \"%.60s\"", v);
        c = *e ? e + 1 : e;
        if (*e == ',' && !*c)
            return perr(p, col, "expected a rank after ',', got end of \"%.60s\"", v);
    }
    if (strlen(v) >= n)
        return perr(p, col, "expected a rank list shorter than %zu characters", n);
    snprintf(out, n, "%s", v);
    return 0;
}

/* A node: its index or one of the scenario's host names. */
static int parse_node(pctx_t *p, const char *v, int col, int *out)
{
    if (isdigit((unsigned char)v[0]))
        return parse_int(p, v, col, 0, 4095, "a node index", out);
    for (int i = 0; i < p->s->nhosts; i++)
        if (!strcmp(p->s->hosts[i], v)) {
            *out = i;
            return 0;
        }
    return perr(p, col, "expected a node index or a host name of `hosts`, got \"%.60s\"", v);
}

static int parse_node_set(pctx_t *p, const char *v, int col, uint64_t *set)
{
    char buf[TOKEN_MAX];
    snprintf(buf, sizeof buf, "%s", v);
    *set = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",+", &save); t; t = strtok_r(NULL, ",+", &save)) {
        char *dash = strchr(t, '-');
        int a, b;
        if (dash) {
            *dash = '\0';
            if (parse_int(p, t, col, 0, 63, "a node index (partition sides hold nodes 0..63)", &a) ||
                parse_int(p, dash + 1, col, 0, 63, "a node index (partition sides hold nodes 0..63)", &b))
                return DDP_ECONFIG;
        } else {
            if (parse_node(p, t, col, &a))
                return DDP_ECONFIG;
            if (a > 63)
                return perr(p, col, "expected a node 0..63 in a partition side, got %d", a);
            b = a;
        }
        for (int i = a; i <= b; i++)
            *set |= 1ull << i;
    }
    if (!*set)
        return perr(p, col, "expected nodes on one side of the partition (e.g. nodes=1 "
                            "or nodes=0-1), got \"%.60s\"", v);
    return 0;
}

static int need_args(pctx_t *p, const token_t *tok, int ntok, int want, const char *what)
{
    char g[80];
    if (ntok - 1 < want)
        return perr(p, ntok ? END_OF(tok[ntok - 1]) : 1,
                    "expected %s after \"%s\", got end of line", what, tok[0].text);
    if (ntok - 1 > want)
        return perr(p, tok[want + 1].col, "expected end of line after %s, got %s", what,
                    got(&tok[want + 1], g, sizeof g));
    if (tok[1].eq)
        return perr(p, tok[1].col, "expected %s, got \"%s=%s\"", what, tok[1].text,
                    tok[1].eq);
    return 0;
}

static int set_str(pctx_t *p, const token_t *t, char *dst, size_t n, const char *what)
{
    if (strlen(t->text) >= n)
        return perr(p, t->col, "expected %s of at most %zu characters, got \"%.60s...\"",
                    what, n - 1, t->text);
    snprintf(dst, n, "%s", t->text);
    return 0;
}

/* ---- statements ---- */
static int st_env(pctx_t *p, token_t *tok, int ntok, int unset)
{
    ddp_scenario_t *s = p->s;
    int node = -1, i = 1;
    if (i < ntok && tok[i].eq && !strcmp(tok[i].text, "node")) {
        if (parse_node(p, tok[i].eq, tok[i].vcol, &node))
            return DDP_ECONFIG;
        i++;
    }
    if (i >= ntok)
        return perr(p, END_OF(tok[ntok - 1]),
                    unset ? "expected a variable name after \"unset\", got end of line"
                          : "expected KEY=VALUE after \"env\", got end of line");
    for (; i < ntok; i++) {
        token_t *t = &tok[i];
        if (unset == !!t->eq)
            return perr(p, t->col, unset ? "expected a variable name, got \"%s=%s\""
                                         : "expected KEY=VALUE, got \"%s%s\"",
                        t->text, t->eq ? t->eq : "");
        for (const char *c = t->text; *c; c++)
            if (!(isalnum((unsigned char)*c) || *c == '_') || isdigit((unsigned char)t->text[0]))
                return perr(p, t->col, "expected a variable name ([A-Za-z_][A-Za-z0-9_]*), "
                                       "got \"%.60s\"", t->text);
        if (strlen(t->text) >= sizeof s->env[0].key)
            return perr(p, t->col, "expected a variable name of at most %zu characters",
                        sizeof s->env[0].key - 1);
        ddp_scn_env_t *e = realloc(s->env, sizeof *e * (size_t)(s->nenv + 1));
        if (!e)
            return perr(p, t->col, "out of memory");
        s->env = e;
        e = &s->env[s->nenv++];
        e->node = node;
        snprintf(e->key, sizeof e->key, "%s", t->text);
        e->value = unset ? NULL : strdup(t->eq);
    }
    return 0;
}

static int st_fault(pctx_t *p, token_t *tok, int ntok)
{
    ddp_scenario_t *s = p->s;
    char g[80];
    if (ntok < 2)
        return perr(p, tok[0].col + 5, "expected a fault kind (refuse, reset, blackhole, "
                                       "delay, partition, crash, pause, resolve, point), got end of line");
    if (s->nfaults == DDP_SCN_MAX_FAULTS)
        return perr(p, tok[0].col, "expected at most %d faults, got more", DDP_SCN_MAX_FAULTS);
    ddp_sim_fault_t *f = &s->faults[s->nfaults];
    memset(f, 0, sizeof *f);
    f->node = f->task = f->peer_node = -1;
    if (tok[1].eq || ddp_sim_fault_kind_parse(tok[1].text, &f->kind) != 0)
        return perr(p, tok[1].col, "expected a fault kind (refuse, reset, blackhole, delay, "
                                   "partition, crash, pause, resolve, point), got %s",
                    got(&tok[1], g, sizeof g));
    s->fault_line[s->nfaults] = p->line;
    s->nfaults++; /* owned strings are freed with the scenario from here on */
    int have_target = 0, have_end = 0, have_delay = 0;
    for (int i = 2; i < ntok; i++) {
        token_t *t = &tok[i];
        const char *k = t->text, *v = t->eq;
        int c = t->vcol;
        if (!v)
            return perr(p, t->col, "expected key=value (node=, peer=, port=, nodes=, ranks=, "
                                   "start=, end=, count=, p=, delay=, after=, phase=, point=), "
                                   "got \"%.60s\"", k);
        int rc = 0;
        if (!strcmp(k, "node")) {
            rc = parse_node(p, v, c, &f->node);
            have_target = 1;
        } else if (!strcmp(k, "peer")) {
            rc = parse_node(p, v, c, &f->peer_node);
        } else if (!strcmp(k, "port")) {
            int port = 0;
            rc = parse_int(p, v, c, 1, 65535, "a port", &port);
            f->port = (uint16_t)port;
        } else if (!strcmp(k, "nodes")) {
            rc = parse_node_set(p, v, c, &f->node_set);
            have_target = 1;
        } else if (!strcmp(k, "ranks")) {
            char buf[128];
            rc = parse_rank_list(p, v, c, buf, sizeof buf);
            if (rc == 0)
                f->ranks = strdup(buf);
            have_target = 1;
        } else if (!strcmp(k, "start")) {
            rc = parse_duration(p, v, c, &f->start_ns);
        } else if (!strcmp(k, "end")) {
            rc = parse_duration(p, v, c, &f->end_ns);
            have_end = 1;
        } else if (!strcmp(k, "count")) {
            rc = parse_int(p, v, c, 1, INT_MAX, "a count", &f->count);
        } else if (!strcmp(k, "p")) {
            char *e;
            double x = strtod(v, &e);
            if (!*v || *e || !(x > 0 && x <= 1))
                rc = perr(p, c, "expected a probability in (0, 1], got \"%.60s\"", v);
            f->probability = x;
        } else if (!strcmp(k, "delay")) {
            rc = parse_duration(p, v, c, &f->delay_ns);
            have_delay = 1;
        } else if (!strcmp(k, "after")) {
            long b;
            rc = parse_long(p, v, c, 0, LONG_MAX, "a byte count", &b);
            f->after_bytes = b;
        } else if (!strcmp(k, "phase")) {
            size_t j = 0;
            while (j < NPHASES && strcmp(phases[j], v))
                j++;
            if (j == NPHASES)
                rc = perr(p, c, "expected a phase (\"store connect\", \"wait for workers\", "
                                "\"process group init\", \"barrier\", \"connected\", "
                                "\"configure_ddp\", \"teardown\", ...), got \"%.60s\"", v);
            else
                f->phase = phases[j];
        } else if (!strcmp(k, "point")) {
            if (ddp_sim_fault_point_check(v) != 0)
                rc = perr(p, c, "%s", ddp_err_ctx()->what);
            else
                f->point = ddp_fault_point_find(v)->name; /* static text */
        } else {
            rc = perr(p, t->col, "expected a fault key (node, peer, port, nodes, ranks, start, "
                                 "end, count, p, delay, after, phase, point), got \"%.60s\"", k);
        }
        if (rc)
            return rc;
    }
    int last = END_OF(tok[ntok - 1]);
    if (f->end_ns && f->end_ns <= f->start_ns)
        return perr(p, tok[1].col, "expected end= after start=, got end <= start");
    if (f->kind == DDP_FAULT_PARTITION && !f->node_set)
        return perr(p, last, "expected nodes= (one side of the partition), got end of line");
    if (f->kind == DDP_FAULT_DELAY && !have_delay)
        return perr(p, last, "expected delay= (extra latency), got end of line");
    if ((f->kind == DDP_FAULT_CRASH || f->kind == DDP_FAULT_PAUSE) && !have_target)
        return perr(p, last, "expected ranks= or node= (whom the %s hits), got end of line",
                    tok[1].text);
    if (f->kind == DDP_FAULT_PAUSE && !have_end)
        return perr(p, last, "expected end= (when the pause ends), got end of line");
    if (f->phase && f->kind != DDP_FAULT_CRASH)
        return perr(p, tok[1].col, "expected phase= only on crash faults, got it on %s",
                    tok[1].text);
    if (f->kind == DDP_FAULT_POINT && !f->point)
        return perr(p, last, "expected point= (a fault point such as pg/tcp/handshake; "
                             "docs/fault-points.md), got end of line");
    if (f->point && f->kind != DDP_FAULT_POINT)
        return perr(p, tok[1].col, "expected point= only on point faults, got it on %s",
                    tok[1].text);
    return 0;
}

static int st_expect(pctx_t *p, token_t *tok, int ntok)
{
    ddp_scenario_t *s = p->s;
    char g[80];
    static const char *const kinds[] = {"ok", "fail", "crashed", "invariants"};
    if (ntok < 2)
        return perr(p, tok[0].col + 6, "expected ok, fail, crashed or invariants, got end of line");
    if (s->nexpect == DDP_SCN_MAX_EXPECT)
        return perr(p, tok[0].col, "expected at most %d expect lines, got more",
                    DDP_SCN_MAX_EXPECT);
    ddp_scn_expect_t *e = &s->expect[s->nexpect];
    memset(e, 0, sizeof *e);
    size_t k = 0;
    while (k < 4 && (tok[1].eq || strcmp(tok[1].text, kinds[k])))
        k++;
    if (k == 4)
        return perr(p, tok[1].col, "expected ok, fail, crashed or invariants, got %s",
                    got(&tok[1], g, sizeof g));
    e->kind = (ddp_scn_expect_kind_t)k;
    e->line = p->line;
    for (int i = 2; i < ntok; i++) {
        token_t *t = &tok[i];
        const char *v = t->eq;
        int rc = 0;
        if (!v)
            return perr(p, t->col, "expected key=value (ranks=, error=, mentions=, "
                                   "within=, match=), got \"%.60s\"", t->text);
        if (e->kind == DDP_EXPECT_INVARIANTS)
            return perr(p, t->col, "expected end of line after \"expect invariants\", got \"%s=\"",
                        t->text);
        if (!strcmp(t->text, "ranks")) {
            if (!strcmp(v, "others") || !strcmp(v, "all"))
                snprintf(e->ranks, sizeof e->ranks, "%s", !strcmp(v, "all") ? "" : v);
            else
                rc = parse_rank_list(p, v, t->vcol, e->ranks, sizeof e->ranks);
        } else if (!strcmp(t->text, "error")) {
            if (e->kind != DDP_EXPECT_FAIL)
                return perr(p, t->col, "expected error= only after \"expect fail\", got it after "
                                       "\"expect %s\"", kinds[k]);
            int known = 0;
#define CLASS_OF(name, value, desc) known |= !strcasecmp(v, ddp_scn_error_class(value));
            DDP_ERR_LIST(CLASS_OF)
#undef CLASS_OF
            for (int en = 1; en < 134 && !known; en++)
                known = !strcasecmp(v, ddp_scn_error_class(-en));
            if (!known)
                return perr(p, t->vcol, "expected an error class (timeout, peer_lost, protocol, "
                                        "config, addrinuse, connrefused, ...), got \"%.60s\"", v);
            snprintf(e->error, sizeof e->error, "%s", v);
        } else if (!strcmp(t->text, "mentions")) {
            if (e->nmentions == DDP_SCN_MAX_MENTIONS)
                return perr(p, t->col, "expected at most %d mentions= per line",
                            DDP_SCN_MAX_MENTIONS);
            if (!*v || strlen(v) >= sizeof e->mentions[0])
                return perr(p, t->vcol, "expected a text of 1..%zu characters, got \"%.40s\"",
                            sizeof e->mentions[0] - 1, v);
            snprintf(e->mentions[e->nmentions++], sizeof e->mentions[0], "%s", v);
        } else if (!strcmp(t->text, "within")) {
            rc = parse_duration(p, v, t->vcol, &e->within_ns);
        } else if (!strcmp(t->text, "match")) {
            if (strcmp(v, "some") && strcmp(v, "every"))
                return perr(p, t->vcol, "expected match=every or match=some, got \"%.60s\"", v);
            e->some = !strcmp(v, "some");
        } else {
            return perr(p, t->col, "expected an expect key (ranks, error, mentions, within, "
                                   "match), got \"%.60s\"", t->text);
        }
        if (rc)
            return rc;
    }
    if (e->nmentions && e->kind != DDP_EXPECT_FAIL)
        return perr(p, tok[1].col, "expected mentions= only after \"expect fail\"");
    s->nexpect++;
    return 0;
}

static int parse_text(pctx_t *p, const char *text, const char *file,
                      const char *dir, int depth);

static int st_include(pctx_t *p, token_t *tok, int ntok, const char *dir, int depth)
{
    if (need_args(p, tok, ntok, 1, "a file name in quotes"))
        return DDP_ECONFIG;
    if (depth >= MAX_INCLUDE_DEPTH)
        return perr(p, tok[1].col, "expected includes nested at most %d deep (an include "
                                   "cycle?), got deeper", MAX_INCLUDE_DEPTH);
    char path[1024];
    if (tok[1].text[0] == '/' || !dir || !*dir)
        snprintf(path, sizeof path, "%s", tok[1].text);
    else
        snprintf(path, sizeof path, "%s/%s", dir, tok[1].text);
    FILE *f = fopen(path, "r");
    if (!f)
        return perr(p, tok[1].col, "expected a readable file, got \"%s\" (%s)", path,
                    strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (!buf)
        return perr(p, tok[1].col, "out of memory reading \"%s\"", path);
    buf[len] = '\0';
    char sub[1024];
    snprintf(sub, sizeof sub, "%s", path);
    char *slash = strrchr(sub, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(sub, sizeof sub, ".");
    const char *saved_file = p->file;
    int saved_line = p->line;
    char *fname = strdup(path);
    int rc = parse_text(p, buf, fname, sub, depth + 1);
    free(fname);
    free(buf);
    p->file = saved_file;
    p->line = saved_line;
    return rc;
}

static int statement(pctx_t *p, token_t *tok, int ntok, const char *dir, int depth)
{
    ddp_scenario_t *s = p->s;
    const char *kw = tok[0].text;
    char g[80];
    long v;
    if (tok[0].eq || tok[0].quoted)
        return perr(p, tok[0].col, "expected a keyword (scenario, nodes, devices, fault, "
                                   "expect, ... see docs/scenario-format.md), got %s",
                    got(&tok[0], g, sizeof g));
#define ONE(what) if (need_args(p, tok, ntok, 1, what)) return DDP_ECONFIG
    if (!strcmp(kw, "include"))
        return st_include(p, tok, ntok, dir, depth);
    if (!strcmp(kw, "scenario")) {
        ONE("a name in quotes");
        if (p->scenario_line)
            return perr(p, tok[0].col, "expected one `scenario` line per file, got a second "
                                       "(the first is on line %d)", p->scenario_line);
        p->scenario_line = p->line;
        return set_str(p, &tok[1], s->name, sizeof s->name, "a name");
    }
    if (!strcmp(kw, "tags")) {
        for (int i = 1; i < ntok; i++) {
            if (s->ntags == DDP_SCN_MAX_TAGS || tok[i].eq)
                return perr(p, tok[i].col, "expected at most %d tag words, got %s",
                            DDP_SCN_MAX_TAGS, got(&tok[i], g, sizeof g));
            if (set_str(p, &tok[i], s->tags[s->ntags], sizeof s->tags[0], "a tag"))
                return DDP_ECONFIG;
            s->ntags++;
        }
        return 0;
    }
    if (!strcmp(kw, "nodes")) {
        ONE("a node count");
        if (s->nhosts)
            return perr(p, tok[0].col, "expected `nodes` before `hosts` (hosts already "
                                       "set the node count to %d)", s->nhosts);
        p->nodes_line = p->line;
        return parse_int(p, tok[1].text, tok[1].col, 1, 4096, "a node count", &s->nodes);
    }
    if (!strcmp(kw, "devices")) {
        ONE("devices per node");
        return parse_int(p, tok[1].text, tok[1].col, 1, 64, "devices per node", &s->devices);
    }
    if (!strcmp(kw, "num_nodes")) {
        ONE("the Trainer's num_nodes");
        return parse_int(p, tok[1].text, tok[1].col, 1, 4096, "num_nodes", &s->num_nodes);
    }
    if (!strcmp(kw, "tasks_per_node")) {
        ONE("tasks per node");
        return parse_int(p, tok[1].text, tok[1].col, 1, 64, "tasks per node",
                         &s->tasks_per_node);
    }
    if (!strcmp(kw, "gpus")) {
        ONE("a GPU count");
        return parse_int(p, tok[1].text, tok[1].col, 0, 64, "a GPU count", &s->gpus);
    }
    if (!strcmp(kw, "hosts")) {
        ONE("a hostlist expression such as \"gpu[01-04]\"");
        char **h = NULL;
        size_t n = 0;
        if (ddp_hostlist_expand(tok[1].text, 4096, &h, &n) != 0)
            return perr(p, tok[1].col, "expected a hostlist expression such as \"gpu[01-04]\", "
                                       "got \"%.60s\": %s", tok[1].text, ddp_err_message());
        if (n == 0) {
            ddp_hostlist_free(h, n);
            return perr(p, tok[1].col, "expected at least one host, got an empty list");
        }
        ddp_hostlist_free(s->hosts, (size_t)s->nhosts);
        s->hosts = h;
        s->nhosts = (int)n;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (!strcmp(h[i], h[j]))
                    return perr(p, tok[1].col, "expected distinct host names, got \"%s\" twice",
                                h[i]);
        if (p->nodes_line && s->nodes != (int)n)
            return perr(p, tok[1].col, "expected %d hosts (`nodes %d` on line %d), got %zu",
                        s->nodes, s->nodes, p->nodes_line, n);
        s->nodes = (int)n;
        p->hosts_line = p->line;
        return 0;
    }
    if (!strcmp(kw, "launcher")) {
        ONE("a launcher (auto, per-node, slurm, torchrun, mpi, lsf)");
        if (ddp_sim_launcher_parse(tok[1].text, &s->launcher) != 0)
            return perr(p, tok[1].col, "expected a launcher (auto, per-node, slurm, torchrun, "
                                       "mpi, lsf), got \"%.60s\"", tok[1].text);
        return 0;
    }
    if (!strcmp(kw, "accelerators")) {
        if (ntok < 2)
            return perr(p, tok[0].col + 13, "expected `all` or accelerator names, got end of line");
        s->naccels = 0;
        for (int i = 1; i < ntok; i++) {
            if (!strcmp(tok[i].text, "all") && ntok == 2 && !tok[i].eq)
                return 0;
            if (tok[i].eq || !ddp_accel_find(tok[i].text))
                return perr(p, tok[i].col, "expected an accelerator (ddp, ddp_spawn, ddp_cpu, "
                                           "ddp2, ddp_hpc, ddp_cpu_hpc) or `all` alone, got %s",
                            got(&tok[i], g, sizeof g));
            if (s->naccels == DDP_SCN_MAX_ACCELS)
                return perr(p, tok[i].col, "expected at most %d accelerators", DDP_SCN_MAX_ACCELS);
            snprintf(s->accels[s->naccels++], sizeof s->accels[0], "%s", tok[i].text);
        }
        return 0;
    }
    if (!strcmp(kw, "backend")) {
        ONE("a backend (tcp, nccl)");
        if (!ddp_pg_backend_find(tok[1].text))
            return perr(p, tok[1].col, "expected a backend (tcp, nccl), got \"%.60s\"", tok[1].text);
        return set_str(p, &tok[1], s->backend, sizeof s->backend, "a backend");
    }
    if (!strcmp(kw, "plugin")) {
        ONE("a plugin name");
        if (!ddp_plugin_find(tok[1].text))
            return perr(p, tok[1].col, "expected a plugin (%s), got \"%.60s\"",
                        strstr(ddp_err_message(), "one of ") ? strstr(ddp_err_message(), "one of ") + 7
                                                             : "default", tok[1].text);
        return set_str(p, &tok[1], s->plugin, sizeof s->plugin, "a plugin name");
    }
    if (!strcmp(kw, "cluster")) {
        ONE("a cluster environment (lightning, slurm, torchelastic, lsf, mpi, kubeflow)");
        if (!strcmp(tok[1].text, "auto")) {
            s->cluster[0] = '\0';
            return 0;
        }
        if (!ddp_cluster_find(tok[1].text))
            return perr(p, tok[1].col, "expected a cluster environment (auto, lightning, slurm, "
                                       "torchelastic, lsf, mpi, kubeflow), got \"%.60s\"",
                        tok[1].text);
        return set_str(p, &tok[1], s->cluster, sizeof s->cluster, "a cluster name");
    }
    if (!strcmp(kw, "timeout")) {
        ONE("a duration");
        return parse_duration(p, tok[1].text, tok[1].col, &s->timeout_ns);
    }
    if (!strcmp(kw, "store_timeout")) {
        ONE("a duration");
        return parse_duration(p, tok[1].text, tok[1].col, &s->store_timeout_ns);
    }
    if (!strcmp(kw, "train")) {
        ONE("a duration");
        return parse_duration(p, tok[1].text, tok[1].col, &s->train_ns);
    }
    if (!strcmp(kw, "master_late")) {
        ONE("a duration");
        return parse_duration(p, tok[1].text, tok[1].col, &s->master_late_ns);
    }
    if (!strcmp(kw, "latency")) {
        ONE("a duration");
        return parse_duration(p, tok[1].text, tok[1].col, &s->latency_ns);
    }
    if (!strcmp(kw, "seed")) {
        ONE("a seed");
        char *e;
        errno = 0;
        unsigned long long x = strtoull(tok[1].text, &e, 10);
        if (!isdigit((unsigned char)tok[1].text[0]) || *e || errno)
            return perr(p, tok[1].col, "expected a seed (a non-negative integer), got \"%.60s\"",
                        tok[1].text);
        s->seed = x;
        return 0;
    }
    if (!strcmp(kw, "port")) {
        ONE("a port or none");
        s->no_port = !strcmp(tok[1].text, "none");
        if (s->no_port)
            return 0;
        if (parse_long(p, tok[1].text, tok[1].col, 1, 65535, "a port or none", &v))
            return DDP_ECONFIG;
        s->port = (uint16_t)v;
        return 0;
    }
    if (!strcmp(kw, "master_addr")) {
        ONE("a host name, an address or none");
        if (!strcmp(tok[1].text, "none"))
            snprintf(s->master_addr, sizeof s->master_addr, "-");
        else
            return set_str(p, &tok[1], s->master_addr, sizeof s->master_addr, "a host");
        return 0;
    }
    if (!strcmp(kw, "port_taken")) {
        if (ntok == 1) {
            s->port_taken = s->port ? s->port : 29500;
            return 0;
        }
        ONE("a port (or nothing: the scenario's port)");
        if (parse_long(p, tok[1].text, tok[1].col, 1, 65535, "a port", &v))
            return DDP_ECONFIG;
        s->port_taken = (uint16_t)v;
        return 0;
    }
    if (!strcmp(kw, "env"))
        return st_env(p, tok, ntok, 0);
    if (!strcmp(kw, "unset"))
        return st_env(p, tok, ntok, 1);
    if (!strcmp(kw, "fault"))
        return st_fault(p, tok, ntok);
    if (!strcmp(kw, "expect"))
        return st_expect(p, tok, ntok);
#undef ONE
    return perr(p, tok[0].col, "expected a keyword (scenario, tags, include, nodes, devices, "
                               "num_nodes, tasks_per_node, hosts, launcher, gpus, accelerators, "
                               "backend, plugin, cluster, timeout, store_timeout, train, seed, port, "
                               "master_addr, master_late, port_taken, latency, env, unset, "
                               "fault, expect), got \"%.60s\"", kw);
}

static int parse_text(pctx_t *p, const char *text, const char *file,
                      const char *dir, int depth)
{
    p->file = file;
    p->line = 0;
    const char *c = text;
    char line[4096];
    while (*c) {
        const char *nl = strchr(c, '\n');
        size_t n = nl ? (size_t)(nl - c) : strlen(c);
        p->line++;
        if (n >= sizeof line)
            return perr(p, 1, "expected a line of at most %zu characters, got %zu",
                        sizeof line - 1, n);
        memcpy(line, c, n);
        line[n] = '\0';
        c = nl ? nl + 1 : c + n;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)line[i] < 0x20 && line[i] != '\t' && line[i] != '\r')
                return perr(p, (int)i + 1, "expected text, got a control character (0x%02x)",
                            (unsigned char)line[i]);
        token_t tok[MAX_TOKENS];
        int ntok = 0;
        if (lex_line(p, line, tok, &ntok))
            return DDP_ECONFIG;
        if (ntok && statement(p, tok, ntok, dir, depth))
            return DDP_ECONFIG;
        p->file = file; /* restored after includes */
    }
    return 0;
}

ddp_scenario_t *ddp_scenario_new(void)
{
    ddp_scenario_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->nodes = 2;
    s->devices = 2;
    s->timeout_ns = 60 * DDP_NS_PER_S;
    s->seed = 1;
    return s;
}

void ddp_scenario_free(ddp_scenario_t *s)
{
    if (!s)
        return;
    ddp_hostlist_free(s->hosts, (size_t)s->nhosts);
    for (int i = 0; i < s->nenv; i++)
        free(s->env[i].value);
    free(s->env);
    for (int i = 0; i < s->nfaults; i++)
        free((char *)s->faults[i].ranks);
    free(s);
}

/* Whole-file checks, reported at the statement that is wrong. */
static int finish(pctx_t *p, int last_line)
{
    ddp_scenario_t *s = p->s;
    if (!p->scenario_line) {
        p->line = 1;
        return perr(p, 1, "expected a `scenario \"NAME\"` line, got none in the file");
    }
    if (s->nexpect == 0) {
        p->line = last_line + 1;
        return perr(p, 1, "expected at least one `expect` line (ok, fail, crashed or "
                          "invariants), got end of file");
    }
    for (int i = 0; i < s->nfaults; i++) {
        const ddp_sim_fault_t *f = &s->faults[i];
        p->line = s->fault_line[i];
        if (f->node >= s->nodes || f->peer_node >= s->nodes ||
            (s->nodes < 64 && (f->node_set >> s->nodes)))
            return perr(p, 1, "expected fault nodes below the node count %d, got a node "
                              "outside the cluster", s->nodes);
        if (f->kind == DDP_FAULT_PARTITION && s->nodes <= 64 &&
            f->node_set == (s->nodes == 64 ? ~0ull : (1ull << s->nodes) - 1))
            return perr(p, 1, "expected a partition leaving some nodes on the other side, "
                              "got every node on one side");
    }
    return 0;
}

int ddp_scenario_parse(const char *text, const char *name, const char *dir,
                       ddp_scenario_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    ddp_scenario_t *s = ddp_scenario_new();
    if (!s)
        return ddp_err_set(-ENOMEM, "out of memory");
    snprintf(s->file, sizeof s->file, "%s", name ? name : "");
    pctx_t p = {.s = s, .err = err, .errlen = errlen};
    int rc = parse_text(&p, text, name ? name : "<text>", dir, 0);
    int lines = p.line;
    p.file = name ? name : "<text>";
    if (rc == 0)
        rc = finish(&p, lines);
    if (rc) {
        ddp_scenario_free(s);
        return ddp_err_set(DDP_ECONFIG, "%s", err && errlen ? err : "scenario parse error");
    }
    *out = s;
    return 0;
}

int ddp_scenario_load(const char *path, ddp_scenario_t **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return ddp_err_set(DDP_ECONFIG, "%s", err);
    }
    size_t cap = 4096, len = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        return ddp_err_set(-ENOMEM, "%s", err);
    }
    buf[len] = '\0';
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    int rc = ddp_scenario_parse(buf, path, dir, out, err, errlen);
    free(buf);
    return rc;
}

int ddp_scenario_has_accel(const ddp_scenario_t *s, const char *accel)
{
    if (s->naccels == 0)
        return 1;
    for (int i = 0; i < s->naccels; i++)
        if (!strcmp(s->accels[i], accel))
            return 1;
    return 0;
}

int ddp_scenario_has_tag(const ddp_scenario_t *s, const char *tag)
{
    for (int i = 0; i < s->ntags; i++)
        if (!strcmp(s->tags[i], tag))
            return 1;
    return 0;
}

const char *ddp_scn_error_class(int code)
{
    static _Thread_local char buf[40];
    const char *n = ddp_err_name(code);
    if (!strncmp(n, "DDP_E", 5))
        n += 5;
    else if (n[0] == 'E')
        n += 1;
    size_t i = 0;
    for (; n[i] && i + 1 < sizeof buf; i++)
        buf[i] = (char)tolower((unsigned char)n[i]);
    buf[i] = '\0';
    return buf;
}

/* ---- writing (explore's shrunk schedules, round trips) ---- */
static void put_duration(FILE *o, const char *key, int64_t ns)
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

static void put_quoted(FILE *o, const char *s)
{
    fputc('"', o);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', o);
        fputc(*s, o);
    }
    fputc('"', o);
}

int ddp_scenario_write(const ddp_scenario_t *s, FILE *o)
{
    fprintf(o, "scenario ");
    put_quoted(o, s->name[0] ? s->name : "unnamed");
    fputc('\n', o);
    if (s->ntags) {
        fprintf(o, "tags");
        for (int i = 0; i < s->ntags; i++)
            fprintf(o, " %s", s->tags[i]);
        fputc('\n', o);
    }
    if (s->nhosts) {
        char *expr = NULL;
        if (ddp_hostlist_compress((const char *const *)s->hosts, (size_t)s->nhosts, &expr) == 0) {
            fprintf(o, "hosts ");
            put_quoted(o, expr);
            fputc('\n', o);
        }
        free(expr);
    } else {
        fprintf(o, "nodes %d\n", s->nodes);
    }
    fprintf(o, "devices %d\n", s->devices);
    if (s->num_nodes)
        fprintf(o, "num_nodes %d\n", s->num_nodes);
    if (s->tasks_per_node)
        fprintf(o, "tasks_per_node %d\n", s->tasks_per_node);
    if (s->gpus)
        fprintf(o, "gpus %d\n", s->gpus);
    if (s->launcher)
        fprintf(o, "launcher %s\n", ddp_sim_launcher_name(s->launcher));
    fprintf(o, "accelerators");
    if (!s->naccels)
        fprintf(o, " all");
    for (int i = 0; i < s->naccels; i++)
        fprintf(o, " %s", s->accels[i]);
    fputc('\n', o);
    if (s->backend[0])
        fprintf(o, "backend %s\n", s->backend);
    if (s->plugin[0])
        fprintf(o, "plugin %s\n", s->plugin);
    if (s->cluster[0])
        fprintf(o, "cluster %s\n", s->cluster);
    put_duration(o, "timeout ", s->timeout_ns);
    fputc('\n', o);
    if (s->store_timeout_ns) {
        put_duration(o, "store_timeout ", s->store_timeout_ns);
        fputc('\n', o);
    }
    if (s->train_ns) {
        put_duration(o, "train ", s->train_ns);
        fputc('\n', o);
    }
    fprintf(o, "seed %llu\n", (unsigned long long)s->seed);
    if (s->no_port)
        fprintf(o, "port none\n");
    else if (s->port)
        fprintf(o, "port %u\n", (unsigned)s->port);
    if (s->master_addr[0])
        fprintf(o, "master_addr %s\n", strcmp(s->master_addr, "-") ? s->master_addr : "none");
    if (s->master_late_ns) {
        put_duration(o, "master_late ", s->master_late_ns);
        fputc('\n', o);
    }
    if (s->port_taken)
        fprintf(o, "port_taken %u\n", (unsigned)s->port_taken);
    if (s->latency_ns) {
        put_duration(o, "latency ", s->latency_ns);
        fputc('\n', o);
    }
    for (int i = 0; i < s->nenv; i++) {
        const ddp_scn_env_t *e = &s->env[i];
        fprintf(o, "%s", e->value ? "env " : "unset ");
        if (e->node >= 0)
            fprintf(o, "node=%d ", e->node);
        fprintf(o, "%s", e->key);
        if (e->value) {
            fputc('=', o);
            put_quoted(o, e->value);
        }
        fputc('\n', o);
    }
    for (int i = 0; i < s->nfaults; i++) {
        const ddp_sim_fault_t *f = &s->faults[i];
        fprintf(o, "fault %s", ddp_sim_fault_kind_name(f->kind));
        if (f->node >= 0)
            fprintf(o, " node=%d", f->node);
        if (f->peer_node >= 0)
            fprintf(o, " peer=%d", f->peer_node);
        if (f->port)
            fprintf(o, " port=%u", (unsigned)f->port);
        if (f->node_set) {
            fprintf(o, " nodes=");
            int first = 1;
            for (int b = 0; b < 64; b++)
                if (f->node_set >> b & 1) {
                    fprintf(o, "%s%d", first ? "" : ",", b);
                    first = 0;
                }
        }
        if (f->ranks)
            fprintf(o, " ranks=%s", f->ranks);
        if (f->start_ns)
            put_duration(o, " start=", f->start_ns);
        if (f->end_ns)
            put_duration(o, " end=", f->end_ns);
        if (f->count)
            fprintf(o, " count=%d", f->count);
        if (f->probability > 0 && f->probability < 1)
            fprintf(o, " p=%.6g", f->probability);
        if (f->delay_ns)
            put_duration(o, " delay=", f->delay_ns);
        if (f->after_bytes)
            fprintf(o, " after=%lld", (long long)f->after_bytes);
        if (f->phase) {
            fprintf(o, " phase=");
            put_quoted(o, f->phase);
        }
        if (f->point)
            fprintf(o, " point=%s", f->point);
        fputc('\n', o);
    }
    static const char *const kinds[] = {"ok", "fail", "crashed", "invariants"};
    for (int i = 0; i < s->nexpect; i++) {
        const ddp_scn_expect_t *e = &s->expect[i];
        fprintf(o, "expect %s", kinds[e->kind]);
        if (e->ranks[0])
            fprintf(o, " ranks=%s", e->ranks);
        if (e->error[0])
            fprintf(o, " error=%s", e->error);
        for (int m = 0; m < e->nmentions; m++) {
            fprintf(o, " mentions=");
            put_quoted(o, e->mentions[m]);
        }
        if (e->within_ns)
            put_duration(o, " within=", e->within_ns);
        if (e->some)
            fprintf(o, " match=some");
        fputc('\n', o);
    }
    return ferror(o) ? -EIO : 0;
}
