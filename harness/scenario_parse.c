/* harness/scenario_parse.c — the scenario file format (docs/scenario-format.md):
 * one statement per line, `#` comments, `include "file"`, key=value
 * arguments. Every error is "file:line:col: expected ..., got ..."; unknown
 * keywords, keys and fault kinds are errors, never ignored. */
#include "ddp/scenario.h"
#include "ddp/sim.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
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
#include "ddp/sys.h"

#include "core/kvmap.h"
#include "core/store_priv.h"
#include "scenario_priv.h"
#include "fault_line.h"
#include "scn_line.h"

#define MAX_INCLUDE_DEPTH 8
#define MAX_TOKENS DDP__LN_MAX_TOKENS

typedef ddp__tok_t token_t;
typedef ddp__where_t where_t;

typedef struct pctx {
    ddp__ln_t l;       /* the current file and line (for errors), the error */
    ddp_scenario_t *s;
    int scenario_line; /* where `scenario` was seen (0: not yet) */
    int nodes_line;    /* where `nodes` was seen (0: not) */
    where_t hosts_at;  /* the last `hosts` value (line 0: none) */
    where_t fault_at[DDP_SCN_MAX_FAULTS][DDP__AT_COUNT]; /* line 0: key not given */
    where_t *env_at;   /* per s->env entry: its node= value (line 0: none) */
    where_t net_at[DDP_SCN_MAX_NET]; /* per s->net entry: its node= value */
    int env_cap;       /* entries allocated in s->env and env_at */
    char **names;      /* included files' names, freed at the end */
    int nnames;
    /* host name -> node (ddp__ln_host_t; buckets NULL: no `hosts` yet). A
     * table keeps `hosts` and node=NAME linear in the hosts (4096 names
     * of 500 characters compared pairwise took seconds). */
    ddp__kvmap_t hostmap;
} pctx_t;

static where_t here(const pctx_t *p, int col)
{
    return ddp__ln_here(&p->l, col);
}

/* The column just past a token: where "end of line" is reported. */
#define END_OF(t) DDP__TOK_END(t)

/* An error at column col of the current line; at a remembered place. */
#define perr(p, ...) ddp__ln_err(&(p)->l, __VA_ARGS__)
#define PERR_AT(p, ...) ddp__ln_err_at(&(p)->l, __VA_ARGS__)


static int need_args(pctx_t *p, const token_t *tok, int ntok, int want, const char *what)
{
    char g[80];
    if (ntok - 1 < want)
        return perr(p, ntok ? END_OF(tok[ntok - 1]) : 1,
                    "expected %s after \"%s\", got end of line", what, tok[0].text);
    if (ntok - 1 > want)
        return perr(p, tok[want + 1].col, "expected end of line after %s, got %s", what,
                    ddp__tok_got(&tok[want + 1], g, sizeof g));
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
/* A leading node=N (or node=all, the default spelled out: how a variable
 * itself named node is written, `env node=all node=VALUE`) of env, unset,
 * iface, resolve and somaxconn lines: *node (-1: every node), *at where it
 * was given, *i past it. */
static int node_key(pctx_t *p, token_t *tok, int ntok, int *i, int *node, where_t *at)
{
    if (*i < ntok && tok[*i].eq && !strcmp(tok[*i].text, "node")) {
        if (strcmp(tok[*i].eq, "all") && ddp__ln_node(&p->l, tok[*i].eq, tok[*i].vcol, node))
            return DDP_ECONFIG;
        if (*node >= 0)
            *at = here(p, tok[*i].vcol);
        (*i)++;
    }
    return 0;
}

static int st_env(pctx_t *p, token_t *tok, int ntok, int unset)
{
    ddp_scenario_t *s = p->s;
    int node = -1, i = 1;
    where_t node_at = {0};
    if (node_key(p, tok, ntok, &i, &node, &node_at))
        return DDP_ECONFIG;
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
        if (s->nenv == p->env_cap) { /* doubled: one entry at a time was quadratic */
            int cap = p->env_cap ? 2 * p->env_cap : 16;
            ddp_scn_env_t *e = realloc(s->env, sizeof *e * (size_t)cap);
            if (e)
                s->env = e;
            where_t *w = e ? realloc(p->env_at, sizeof *w * (size_t)cap) : NULL;
            if (!w)
                return perr(p, t->col, "out of memory");
            p->env_at = w;
            p->env_cap = cap;
        }
        p->env_at[s->nenv] = node_at;
        ddp_scn_env_t *e = &s->env[s->nenv++];
        e->node = node;
        snprintf(e->key, sizeof e->key, "%s", t->text);
        e->value = unset ? NULL : strdup(t->eq);
    }
    return 0;
}

/* `iface [node=N] NAME ADDR/PREFIX...` and `resolve [node=N] NAME
 * ADDR...`: one entry per address, in order. */
static int st_net(pctx_t *p, token_t *tok, int ntok, int resolve)
{
    ddp_scenario_t *s = p->s;
    int node = -1, i = 1;
    where_t node_at = {0};
    const char *what = resolve ? "a host name, then the addresses it resolves to"
                               : "an interface name, then its ADDR/PREFIX addresses";
    if (node_key(p, tok, ntok, &i, &node, &node_at))
        return DDP_ECONFIG;
    if (i + 1 >= ntok)
        return perr(p, END_OF(tok[ntok - 1]), "expected %s, got end of line", what);
    const token_t *name = &tok[i++];
    size_t maxname = resolve ? 63 : 15;
    if (name->eq || !name->text[0] || strlen(name->text) > maxname)
        return perr(p, name->col, "expected %s (%s of 1..%zu characters), got \"%.60s\"",
                    what, resolve ? "a host name" : "an interface name", maxname, name->text);
    for (; i < ntok; i++) {
        const token_t *t = &tok[i];
        char host[64];
        const char *slash = resolve ? NULL : strchr(t->text, '/');
        size_t hl = slash ? (size_t)(slash - t->text) : strlen(t->text);
        ddp_addr_t a;
        if (t->eq || hl >= sizeof host)
            goto bad;
        memcpy(host, t->text, hl);
        host[hl] = '\0';
        if (ddp_addr_try_parse(host, 0, &a) != 0)
            goto bad;
        if (!resolve) {
            char *end = NULL;
            long pre = slash ? strtol(slash + 1, &end, 10) : -1;
            if (!slash || !end || *end || end == slash + 1 || pre < 0 ||
                pre > (a.family == 4 ? 32 : 128))
                return perr(p, t->col, "expected ADDR/PREFIX with a prefix of 0..%d, got "
                                       "\"%.60s\"", a.family == 4 ? 32 : 128, t->text);
        }
        if (s->nnet >= DDP_SCN_MAX_NET)
            return perr(p, t->col, "expected at most %d iface and resolve addresses",
                        DDP_SCN_MAX_NET);
        p->net_at[s->nnet] = node_at;
        ddp_scn_net_t *e = &s->net[s->nnet++];
        e->kind = resolve ? DDP_NET_RESOLVE : DDP_NET_IFACE;
        e->node = node;
        snprintf(e->name, sizeof e->name, "%s", name->text);
        snprintf(e->value, sizeof e->value, "%s", t->text);
        continue;
    bad:
        return perr(p, t->col, "expected %s, got \"%.60s\"",
                    resolve ? "an IPv4 or IPv6 address (10.0.0.1, fd00::1)"
                            : "an address with its prefix (10.0.0.2/24, fd00::2/64)",
                    t->text);
    }
    return 0;
}

/* `somaxconn [node=N] K`: the node's listen backlog cap. */
static int st_somaxconn(pctx_t *p, token_t *tok, int ntok)
{
    ddp_scenario_t *s = p->s;
    int node = -1, i = 1, k;
    where_t node_at = {0};
    if (node_key(p, tok, ntok, &i, &node, &node_at))
        return DDP_ECONFIG;
    if (i >= ntok)
        return perr(p, END_OF(tok[ntok - 1]), "expected a backlog cap (1..%d), got end "
                                              "of line", DDP_SIM_SOMAXCONN_MAX);
    if (i + 1 < ntok)
        return perr(p, tok[i + 1].col, "expected end of line after the backlog cap, got "
                                       "\"%.60s\"", tok[i + 1].text);
    if (tok[i].eq || ddp__ln_int(&p->l, tok[i].text, tok[i].col, 1, DDP_SIM_SOMAXCONN_MAX,
                                  "a backlog cap", &k))
        return tok[i].eq ? perr(p, tok[i].col, "expected a backlog cap (1..%d), got "
                                               "\"%.60s=\"", DDP_SIM_SOMAXCONN_MAX, tok[i].text)
                         : DDP_ECONFIG;
    if (s->nnet >= DDP_SCN_MAX_NET)
        return perr(p, tok[0].col, "expected at most %d iface, resolve and somaxconn lines",
                    DDP_SCN_MAX_NET);
    p->net_at[s->nnet] = node_at;
    ddp_scn_net_t *e = &s->net[s->nnet++];
    e->kind = DDP_NET_SOMAXCONN;
    e->node = node;
    e->name[0] = '\0';
    snprintf(e->value, sizeof e->value, "%d", k);
    return 0;
}

/* second_job [start=D] [port=P] */
static int st_second_job(pctx_t *p, token_t *tok, int ntok)
{
    ddp_scenario_t *s = p->s;
    if (s->second_job)
        return perr(p, tok[0].col, "expected one second_job line, got a second");
    s->second_job = 1;
    for (int i = 1; i < ntok; i++) {
        long v;
        if (!tok[i].eq)
            return perr(p, tok[i].col, "expected start=DURATION or port=PORT, got \"%.60s\"",
                        tok[i].text);
        for (int j = 1; j < i; j++)
            if (!strcmp(tok[j].text, tok[i].text))
                return perr(p, tok[i].col, "expected each key once on a second_job line, got "
                                           "a second %s= (the first is at column %d)",
                            tok[i].text, tok[j].col);
        if (!strcmp(tok[i].text, "start")) {
            if (ddp__ln_duration(&p->l, tok[i].eq, tok[i].vcol, &s->job2_start_ns))
                return DDP_ECONFIG;
        } else if (!strcmp(tok[i].text, "port")) {
            if (ddp__ln_long(&p->l, tok[i].eq, tok[i].vcol, 1, 65535, "a port", &v))
                return DDP_ECONFIG;
            s->job2_port = (uint16_t)v;
        } else {
            return perr(p, tok[i].col, "expected a second_job key (start, port), got "
                                       "\"%.60s\"", tok[i].text);
        }
    }
    return 0;
}
static int st_fault(pctx_t *p, token_t *tok, int ntok)
{
    ddp_scenario_t *s = p->s;
    if (s->nfaults == DDP_SCN_MAX_FAULTS)
        return perr(p, tok[0].col, "expected at most %d faults, got more", DDP_SCN_MAX_FAULTS);
    if (ddp__fault_line_parse(&p->l, s->plugin, tok, ntok, &s->faults[s->nfaults],
                              p->fault_at[s->nfaults]))
        return DDP_ECONFIG;
    s->fault_line[s->nfaults++] = p->l.line;
    return 0;
}


/* error=CLASS or CLASS|CLASS|...: any one of them. */
static int parse_error_classes(pctx_t *p, const token_t *t, ddp_scn_expect_t *e)
{
    const char *v = t->eq;
    if (strlen(v) >= sizeof e->error)
        return perr(p, t->vcol, "expected error classes of at most %zu characters in "
                                "all, got \"%.60s\"", sizeof e->error - 1, v);
    for (const char *c = v;;) {
        size_t cl = strcspn(c, "|");
        char one[sizeof e->error];
        snprintf(one, sizeof one, "%.*s", (int)cl, c);
        int known = 0;
#define CLASS_OF(name, value, desc) known |= !strcasecmp(one, ddp_scn_error_class(value));
        DDP_ERR_LIST(CLASS_OF)
#undef CLASS_OF
        for (int en = 1; en < 134 && !known; en++)
            known = !strcasecmp(one, ddp_scn_error_class(-en));
        if (!known)
            return perr(p, t->vcol + (int)(c - v),
                        "expected an error class (timeout, peer_lost, protocol, "
                        "config, addrinuse, connrefused, ...; several as "
                        "timeout|peer_lost), got \"%.60s\"", one);
        if (!c[cl])
            break;
        c += cl + 1;
    }
    return 0;
}

/* A mentions= or excludes= text's room (its NUL included). */
#define TEXT_MAX sizeof(((ddp_scn_expect_t *)0)->mentions[0])

/* mentions=TEXT / excludes=TEXT: one more text of a list of
 * DDP_SCN_MAX_MENTIONS. */
static int add_text(pctx_t *p, const token_t *t, char list[][TEXT_MAX], int *n)
{
    if (*n == DDP_SCN_MAX_MENTIONS)
        return perr(p, t->col, "expected at most %d %s= per line", DDP_SCN_MAX_MENTIONS,
                    t->text);
    if (!*t->eq || strlen(t->eq) >= TEXT_MAX)
        return perr(p, t->vcol, "expected a text of 1..%zu characters, got \"%.40s\"",
                    TEXT_MAX - 1, t->eq);
    snprintf(list[(*n)++], TEXT_MAX, "%s", t->eq);
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
                    ddp__tok_got(&tok[1], g, sizeof g));
    e->kind = (ddp_scn_expect_kind_t)k;
    e->line = p->l.line;
    for (int i = 2; i < ntok; i++) {
        token_t *t = &tok[i];
        const char *v = t->eq;
        int rc = 0;
        if (!v)
            return perr(p, t->col, "expected key=value (ranks=, error=, mentions=, "
                                   "within=, from=, match=), got \"%.60s\"", t->text);
        if (e->kind == DDP_EXPECT_INVARIANTS)
            return perr(p, t->col, "expected end of line after \"expect invariants\", got \"%s=\"",
                        t->text);
        if (strcmp(t->text, "mentions") && strcmp(t->text, "excludes") &&
            ddp__ln_once(&p->l, tok, i, "an expect"))
            return DDP_ECONFIG;
        if (!strcmp(t->text, "ranks")) {
            if (!strcmp(v, "others") || !strcmp(v, "all") || !strcmp(v, "agents"))
                snprintf(e->ranks, sizeof e->ranks, "%s", !strcmp(v, "all") ? "" : v);
            else
                rc = ddp__ln_rank_list(&p->l, v, t->vcol, e->ranks, sizeof e->ranks);
        } else if (!strcmp(t->text, "error")) {
            if (e->kind != DDP_EXPECT_FAIL)
                return perr(p, t->col, "expected error= only after \"expect fail\", got it after "
                                       "\"expect %s\"", kinds[k]);
            if (parse_error_classes(p, t, e))
                return DDP_ECONFIG;
            snprintf(e->error, sizeof e->error, "%s", v);
        } else if (!strcmp(t->text, "mentions")) {
            rc = add_text(p, t, e->mentions, &e->nmentions);
        } else if (!strcmp(t->text, "excludes")) {
            rc = add_text(p, t, e->excludes, &e->nexcludes);
        } else if (!strcmp(t->text, "within")) {
            rc = ddp__ln_duration(&p->l, v, t->vcol, &e->within_ns);
        } else if (!strcmp(t->text, "from")) {
            if (strcmp(v, "join"))
                return perr(p, t->vcol, "expected from=join (within= counted from each "
                                        "rank's first store contact), got \"%.60s\"", v);
            e->from_join = t->col;
        } else if (!strcmp(t->text, "match")) {
            if (strcmp(v, "some") && strcmp(v, "every"))
                return perr(p, t->vcol, "expected match=every or match=some, got \"%.60s\"", v);
            e->some = !strcmp(v, "some");
        } else if (!strcmp(t->text, "restarts")) {
            rc = ddp__ln_int(&p->l, v, t->vcol, 0, 1000, "a restart count (0..1000)", &e->restarts);
            e->restarts++;
        } else if (!strcmp(t->text, "job")) {
            if (strcmp(v, "1") && strcmp(v, "2"))
                return perr(p, t->vcol, "expected job=1 (the run's job) or job=2 (the "
                                        "second_job's), got \"%.60s\"", v);
            e->job = !strcmp(v, "2");
        } else {
            return perr(p, t->col, "expected an expect key (ranks, error, mentions, excludes, "
                                   "within, from, match, job, restarts), got \"%.60s\"",
                        t->text);
        }
        if (rc)
            return rc;
    }
    if ((e->nmentions || e->nexcludes) && e->kind != DDP_EXPECT_FAIL)
        return perr(p, tok[1].col, "expected mentions= and excludes= only after \"expect "
                                   "fail\"");
    if (e->from_join && !e->within_ns)
        return perr(p, e->from_join, "expected within= with from=join (it says where "
                                     "within= counts from)");
    e->from_join = !!e->from_join;
    s->nexpect++;
    return 0;
}

static int parse_text(pctx_t *p, const char *text, size_t len, const char *file,
                      const char *dir, int depth);

/* Scenario files and includes are read like rank files: through the sys
 * seam's bounded read (a FIFO, a device or a huge file is refused with a
 * sentence, never read until memory runs out). */
static int read_scenario_file(const char *path, char **buf, size_t *len)
{
    ddp_sys_t *sys = ddp_sys_posix_new(ddp_env_new());
    if (!sys)
        return ddp_err_set(-ENOMEM, "out of memory reading \"%s\"", path);
    int rc = ddp_sys_read_file(sys, path, buf, len);
    ddp_sys_free(sys);
    return rc;
}


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
    char *buf = NULL;
    size_t len = 0;
    if (read_scenario_file(path, &buf, &len) != 0)
        return perr(p, tok[1].col, "expected a readable file, got \"%s\" (%s)", path,
                    ddp_err_ctx()->what);
    char sub[1024];
    snprintf(sub, sizeof sub, "%s", path);
    char *slash = strrchr(sub, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(sub, sizeof sub, ".");
    const char *saved_file = p->l.file;
    int saved_line = p->l.line;
    /* Kept to the end of the parse: finish() may report at a line of it. */
    char *fname = strdup(path);
    char **names = fname ? realloc(p->names, sizeof *names * (size_t)(p->nnames + 1)) : NULL;
    if (!names) {
        free(fname);
        free(buf);
        return perr(p, tok[1].col, "out of memory");
    }
    p->names = names;
    p->names[p->nnames++] = fname;
    int rc = parse_text(p, buf, len, fname, sub, depth + 1);
    free(buf);
    p->l.file = saved_file;
    p->l.line = saved_line;
    return rc;
}

/* "default, subgroups, rpc": the registered plugins, for messages. */
static const char *plugin_names(char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ddp_plugin_count() && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "",
                                ddp_plugin_at(i)->name);
    return buf;
}

void ddp_scenario_use_plugin(ddp_scenario_t *s, const ddp_plugin_t *pl)
{
    const char *lib = ddp_plugin_library(pl);
    snprintf(s->plugin, sizeof s->plugin, "%s", pl->name);
    snprintf(s->plugin_lib, sizeof s->plugin_lib, "%s", lib ? lib : "");
}

/* A one-argument keyword's argument, or return the error. */
#define ONE(what) if (need_args(p, tok, ntok, 1, what)) return DDP_ECONFIG
/* What a keyword group's function returns for a keyword not of its group. */
#define NOT_MINE 1

/* hosts EXPR: each line adds hosts after those of earlier lines (the
 * writer splits a long list over several lines). */
static int st_hosts(pctx_t *p, token_t *tok, int ntok)
{
    ddp_scenario_t *s = p->s;
    ONE("a hostlist expression such as \"gpu[01-04]\"");
    char **h = NULL;
    size_t n = 0, have = (size_t)s->nhosts;
    if (have >= 4096 || ddp_hostlist_expand(tok[1].text, 4096 - have, &h, &n) != 0)
        return perr(p, tok[1].col, "expected a hostlist expression such as \"gpu[01-04]\", "
                                   "got \"%.60s\": %s",
                    tok[1].text, have >= 4096 ? "the scenario has 4096 hosts already"
                                              : ddp_err_message());
    if (n == 0) {
        ddp_hostlist_free(h, n);
        return perr(p, tok[1].col, "expected at least one host, got an empty list");
    }
    char **all = realloc(s->hosts, sizeof *all * (have + n));
    if (!all) {
        ddp_hostlist_free(h, n);
        return perr(p, tok[1].col, "out of memory");
    }
    memcpy(all + have, h, sizeof *h * n);
    free(h); /* the names now belong to s->hosts */
    s->hosts = all;
    s->nhosts = (int)(have + n);
    if (!p->hostmap.buckets && ddp__kv_init(&p->hostmap, 64) != 0)
        return perr(p, tok[1].col, "out of memory");
    for (size_t i = have; i < have + n; i++) {
        size_t len = strlen(all[i]);
        if (ddp__kv_find(&p->hostmap, all[i], len))
            return perr(p, tok[1].col, "expected distinct host names, got \"%s\" twice",
                        all[i]);
        ddp__kv_node_t *e = ddp__kv_get(&p->hostmap, all[i], len, sizeof(ddp__ln_host_t));
        if (!e)
            return perr(p, tok[1].col, "out of memory");
        ((ddp__ln_host_t *)e)->node = (int)i;
    }
    if (p->nodes_line && s->nodes < s->nhosts)
        return perr(p, tok[1].col, "expected %d hosts (`nodes %d` on line %d), got %d",
                    s->nodes, s->nodes, p->nodes_line, s->nhosts);
    if (!p->nodes_line)
        s->nodes = s->nhosts;
    p->hosts_at = here(p, tok[1].col);
    return 0;
}

/* The cluster's shape: scenario, tags, nodes, devices, num_nodes,
 * tasks_per_node, gpus, launcher, accelerators (NOT_MINE: another word). */
static int st_shape(pctx_t *p, token_t *tok, int ntok)
{
    ddp_scenario_t *s = p->s;
    const char *kw = tok[0].text;
    char g[80];
    if (!strcmp(kw, "scenario")) {
        ONE("a name in quotes");
        if (p->scenario_line)
            return perr(p, tok[0].col, "expected one `scenario` line per file, got a second "
                                       "(the first is on line %d)", p->scenario_line);
        p->scenario_line = p->l.line;
        return set_str(p, &tok[1], s->name, sizeof s->name, "a name");
    }
    if (!strcmp(kw, "tags")) {
        for (int i = 1; i < ntok; i++) {
            if (s->ntags == DDP_SCN_MAX_TAGS || tok[i].eq)
                return perr(p, tok[i].col, "expected at most %d tag words, got %s",
                            DDP_SCN_MAX_TAGS, ddp__tok_got(&tok[i], g, sizeof g));
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
        p->nodes_line = p->l.line;
        return ddp__ln_int(&p->l, tok[1].text, tok[1].col, 1, 16384, "a node count", &s->nodes);
    }
    if (!strcmp(kw, "devices")) {
        ONE("devices per node");
        return ddp__ln_int(&p->l, tok[1].text, tok[1].col, 1, 64, "devices per node", &s->devices);
    }
    if (!strcmp(kw, "num_nodes")) {
        ONE("the Trainer's num_nodes");
        return ddp__ln_int(&p->l, tok[1].text, tok[1].col, 1, 4096, "num_nodes", &s->num_nodes);
    }
    if (!strcmp(kw, "tasks_per_node")) {
        ONE("tasks per node");
        return ddp__ln_int(&p->l, tok[1].text, tok[1].col, 1, 64, "tasks per node",
                         &s->tasks_per_node);
    }
    if (!strcmp(kw, "gpus")) {
        ONE("a GPU count");
        return ddp__ln_int(&p->l, tok[1].text, tok[1].col, 0, 64, "a GPU count", &s->gpus);
    }
    if (!strcmp(kw, "launcher")) {
        ONE("a launcher (auto, per-node, slurm, torchrun, mpi, lsf, kubeflow)");
        if (ddp_sim_launcher_parse(tok[1].text, &s->launcher) != 0)
            return perr(p, tok[1].col, "expected a launcher (auto, per-node, slurm, torchrun, "
                                       "mpi, lsf, kubeflow), got \"%.60s\"", tok[1].text);
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
                            ddp__tok_got(&tok[i], g, sizeof g));
            if (s->naccels == DDP_SCN_MAX_ACCELS)
                return perr(p, tok[i].col, "expected at most %d accelerators", DDP_SCN_MAX_ACCELS);
            snprintf(s->accels[s->naccels++], sizeof s->accels[0], "%s", tok[i].text);
        }
        return 0;
    }
    return NOT_MINE;
}

/* What runs on it: backend, plugin, plugin-library, exec, cluster
 * (NOT_MINE: another word). */
static int st_stack(pctx_t *p, token_t *tok, int ntok, const char *dir)
{
    ddp_scenario_t *s = p->s;
    const char *kw = tok[0].text;
    char g2[256];
    if (!strcmp(kw, "backend")) {
        ONE("a backend (tcp, nccl)");
        if (!ddp_pg_backend_find(tok[1].text))
            return perr(p, tok[1].col, "expected a backend (tcp, nccl), got \"%.60s\"", tok[1].text);
        return set_str(p, &tok[1], s->backend, sizeof s->backend, "a backend");
    }
    if (!strcmp(kw, "plugin")) {
        ONE("a plugin name");
        const ddp_plugin_t *pl = ddp_plugin_find(tok[1].text);
        if (!pl)
            return perr(p, tok[1].col, "expected a plugin (%s; one of your own: a "
                                       "`plugin-library PATH` line instead), got \"%.60s\"",
                        plugin_names(g2, sizeof g2), tok[1].text);
        if (s->plugin_lib[0] && strcmp(s->plugin, pl->name))
            return perr(p, tok[1].col, "expected plugin \"%s\", the one the plugin-library "
                                       "line loads, got \"%.60s\"", s->plugin, tok[1].text);
        ddp_scenario_use_plugin(s, pl);
        return 0;
    }
    if (!strcmp(kw, "plugin-library")) {
        ONE("a plugin library's path");
        char path[1024];
        if (tok[1].text[0] == '/' || !dir || !*dir)
            snprintf(path, sizeof path, "%s", tok[1].text);
        else
            snprintf(path, sizeof path, "%s/%s", dir, tok[1].text);
        const ddp_plugin_t *pl;
        if (ddp_plugin_load(NULL, path, &pl) != 0) {
            const ddp_errctx_t *c = ddp_err_ctx();
            return perr(p, tok[1].col, "expected a plugin library, got \"%.200s\": %s%s%s",
                        tok[1].text, c->what, c->hint[0] ? "; hint: " : "", c->hint);
        }
        if (s->plugin[0] && !s->plugin_lib[0] && strcmp(s->plugin, pl->name))
            return perr(p, tok[1].col, "expected the library of plugin \"%s\" (the plugin "
                                       "line's), got one of plugin \"%s\"", s->plugin, pl->name);
        ddp_scenario_use_plugin(s, pl);
        return 0;
    }
    if (!strcmp(kw, "exec")) {
        ONE("a command line in quotes");
        if (!tok[1].text[0])
            return perr(p, tok[1].col, "expected a command line, got an empty string");
        return set_str(p, &tok[1], s->exec, sizeof s->exec, "a command line");
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
    return NOT_MINE;
}

/* How the run goes: timeouts, store memory, train, master_late, latency,
 * seed, ports, master_addr (NOT_MINE: another word). */
static int st_run(pctx_t *p, token_t *tok, int ntok)
{
    ddp_scenario_t *s = p->s;
    const char *kw = tok[0].text;
    long v;
    if (!strcmp(kw, "timeout")) {
        ONE("a duration");
        return ddp__ln_duration(&p->l, tok[1].text, tok[1].col, &s->timeout_ns);
    }
    if (!strcmp(kw, "store_timeout")) {
        ONE("a duration");
        return ddp__ln_duration(&p->l, tok[1].text, tok[1].col, &s->store_timeout_ns);
    }
    if (!strcmp(kw, "store_memory")) {
        ONE("a size");
        if (ddp__store_parse_memory(tok[1].text, &s->store_memory) != 0)
            return perr(p, tok[1].col, "expected a memory budget of 1 MiB or more, in bytes "
                                       "with an optional K, M or G (binary: 64M), got \"%.60s\"",
                        tok[1].text);
        return 0;
    }
    if (!strcmp(kw, "train")) {
        ONE("a duration");
        return ddp__ln_duration(&p->l, tok[1].text, tok[1].col, &s->train_ns);
    }
    if (!strcmp(kw, "master_late")) {
        ONE("a duration");
        return ddp__ln_duration(&p->l, tok[1].text, tok[1].col, &s->master_late_ns);
    }
    if (!strcmp(kw, "latency")) {
        ONE("a duration");
        return ddp__ln_duration(&p->l, tok[1].text, tok[1].col, &s->latency_ns);
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
        if (ddp__ln_long(&p->l, tok[1].text, tok[1].col, 1, 65535, "a port or none", &v))
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
        if (ddp__ln_long(&p->l, tok[1].text, tok[1].col, 1, 65535, "a port", &v))
            return DDP_ECONFIG;
        s->port_taken = (uint16_t)v;
        return 0;
    }
    return NOT_MINE;
}

static int statement(pctx_t *p, token_t *tok, int ntok, const char *dir, int depth)
{
    char g[80];
    const char *kw = tok[0].text;
    if (tok[0].eq || tok[0].quoted)
        return perr(p, tok[0].col, "expected a keyword (scenario, nodes, devices, fault, "
                                   "expect, ... see docs/scenario-format.md), got %s",
                    ddp__tok_got(&tok[0], g, sizeof g));
    if (!strcmp(kw, "include"))
        return st_include(p, tok, ntok, dir, depth);
    if (!strcmp(kw, "hosts"))
        return st_hosts(p, tok, ntok);
    int rc = st_shape(p, tok, ntok);
    if (rc == NOT_MINE)
        rc = st_stack(p, tok, ntok, dir);
    if (rc == NOT_MINE)
        rc = st_run(p, tok, ntok);
    if (rc != NOT_MINE)
        return rc;
    if (!strcmp(kw, "second_job"))
        return st_second_job(p, tok, ntok);
    if (!strcmp(kw, "env"))
        return st_env(p, tok, ntok, 0);
    if (!strcmp(kw, "unset"))
        return st_env(p, tok, ntok, 1);
    if (!strcmp(kw, "iface"))
        return st_net(p, tok, ntok, 0);
    if (!strcmp(kw, "resolve"))
        return st_net(p, tok, ntok, 1);
    if (!strcmp(kw, "somaxconn"))
        return st_somaxconn(p, tok, ntok);
    if (!strcmp(kw, "fault"))
        return st_fault(p, tok, ntok);
    if (!strcmp(kw, "late")) /* `late ranks=3 by=20s`: a fault of kind late */
        return st_fault(p, tok, ntok);
    if (!strcmp(kw, "expect"))
        return st_expect(p, tok, ntok);
    return perr(p, tok[0].col, "expected a keyword (scenario, tags, include, nodes, devices, "
                               "num_nodes, tasks_per_node, hosts, launcher, gpus, accelerators, "
                               "backend, plugin, plugin-library, exec, cluster, timeout, "
                               "store_timeout, store_memory, train, seed, port, master_addr, "
                               "master_late, "
                               "port_taken, second_job, latency, env, unset, iface, resolve, "
                               "somaxconn, fault, expect), got \"%.60s\"", kw);
}
#undef ONE

/* A line's characters are text: a tab or a carriage return, nothing else
 * below 0x20. A NUL byte is named: it would otherwise end the file early. */
static int check_line_chars(pctx_t *p, const char *line, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch == 0)
            return perr(p, (int)i + 1, "expected text, got a NUL byte (a binary or "
                                       "corrupted file? every line must be text)");
        if (ch < 0x20 && ch != '\t' && ch != '\r')
            return perr(p, (int)i + 1, "expected text, got a control character (0x%02x)", ch);
    }
    return 0;
}

/* text holds len bytes: a NUL inside them is an error, never the end. */
static int parse_text(pctx_t *p, const char *text, size_t len, const char *file,
                      const char *dir, int depth)
{
    p->l.file = file;
    p->l.line = 0;
    const char *c = text, *end = text + len;
    char line[4096];
    while (c < end) {
        const char *nl = memchr(c, '\n', (size_t)(end - c));
        size_t n = nl ? (size_t)(nl - c) : (size_t)(end - c);
        p->l.line++;
        if (n >= sizeof line)
            return perr(p, 1, "expected a line of at most %zu characters, got %zu",
                        sizeof line - 1, n);
        memcpy(line, c, n);
        line[n] = '\0';
        c = nl ? nl + 1 : end;
        if (check_line_chars(p, line, n))
            return DDP_ECONFIG;
        token_t tok[MAX_TOKENS];
        int ntok = 0;
        if (ddp__ln_lex(&p->l, line, 0, tok, &ntok))
            return DDP_ECONFIG;
        if (ntok && statement(p, tok, ntok, dir, depth))
            return DDP_ECONFIG;
        p->l.file = file; /* restored after includes */
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

/* The most processes per node any accelerator the scenario runs can give
 * one rank each: ddp2 runs one rank per node (its rank is the node rank,
 * whatever the launcher starts); every other accelerator runs `devices`
 * per node, or `tasks_per_node` when an external launcher starts more. */
static int ranks_per_node(const ddp_scenario_t *s, int *only_ddp2)
{
    int per = 0;
    *only_ddp2 = 1;
    for (size_t i = 0; i < ddp_accel_count(); i++) {
        const char *a = ddp_accel_at(i)->name;
        if (!ddp_scenario_has_accel(s, a))
            continue;
        int ddp2 = !strcmp(a, "ddp2");
        int n = ddp2 ? 1 : s->tasks_per_node > s->devices ? s->tasks_per_node : s->devices;
        *only_ddp2 &= ddp2;
        if (n > per)
            per = n;
    }
    return per;
}

static int check_node(pctx_t *p, where_t at, int node, const char *key)
{
    return ddp__ln_check_node(&p->l, at, node, p->s->nodes, key);
}

/* A fault's targets against the cluster the whole file declared. */
static int check_fault(pctx_t *p, int i)
{
    const ddp_scenario_t *s = p->s;
    int only_ddp2, per = ranks_per_node(s, &only_ddp2);
    char why[160];
    snprintf(why, sizeof why, "the largest world of the scenario's accelerators: %d node%s x "
             "%d rank%s per node%s", s->nodes, s->nodes == 1 ? "" : "s", per,
             per == 1 ? "" : "s", only_ddp2 ? ", ddp2 runs one per node" : "");
    ddp__fault_cluster_t c = {.nodes = s->nodes, .world = (long)s->nodes * per,
                              .world_why = why, .plugin = s->plugin};
    return ddp__fault_line_check(&p->l, &s->faults[i], p->fault_at[i], &c);
}


/* Whole-file checks, reported at the statement that is wrong. */
static int finish(pctx_t *p, const char *file, int last_line)
{
    ddp_scenario_t *s = p->s;
    p->l.file = file;
    if (!p->scenario_line) {
        p->l.line = 1;
        return perr(p, 1, "expected a `scenario \"NAME\"` line, got none in the file");
    }
    if (s->nexpect == 0) {
        p->l.line = last_line + 1;
        return perr(p, 1, "expected at least one `expect` line (ok, fail, crashed or "
                          "invariants), got end of file");
    }
    if (p->nodes_line && s->nhosts && s->nhosts != s->nodes)
        return PERR_AT(p, p->hosts_at, "expected %d hosts (`nodes %d` on line %d), got %d",
                       s->nodes, s->nodes, p->nodes_line, s->nhosts);
    for (int i = 0; i < s->nfaults; i++)
        if (check_fault(p, i))
            return DDP_ECONFIG;
    for (int i = 0; i < s->nenv; i++)
        if (p->env_at[i].line && check_node(p, p->env_at[i], s->env[i].node, "node= to be"))
            return DDP_ECONFIG;
    for (int i = 0; i < s->nnet; i++)
        if (p->net_at[i].line && check_node(p, p->net_at[i], s->net[i].node, "node= to be"))
            return DDP_ECONFIG;
    return 0;
}

/* ddp_scenario_parse of len bytes, which may hold a NUL (an error). */
static int parse_bytes(const char *text, size_t len, const char *name, const char *dir,
                       ddp_scenario_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    ddp_scenario_t *s = ddp_scenario_new();
    if (!s)
        return ddp_err_set(-ENOMEM, "out of memory");
    snprintf(s->file, sizeof s->file, "%s", name ? name : "");
    pctx_t p = {.l = {.err = err, .errlen = errlen}, .s = s};
    p.l.hosts = &p.hostmap;
    int rc = parse_text(&p, text, len, name ? name : "<text>", dir, 0);
    if (rc == 0)
        rc = finish(&p, name ? name : "<text>", p.l.line);
    for (int i = 0; i < p.nnames; i++)
        free(p.names[i]);
    free(p.names);
    free(p.env_at);
    ddp__kv_free(&p.hostmap, NULL); /* also when no `hosts` line made it */
    if (rc) {
        ddp_scenario_free(s);
        return ddp_err_set(DDP_ECONFIG, "%s", err && errlen ? err : "scenario parse error");
    }
    *out = s;
    return 0;
}

int ddp_scenario_parse(const char *text, const char *name, const char *dir,
                       ddp_scenario_t **out, char *err, size_t errlen)
{
    return parse_bytes(text, strlen(text), name, dir, out, err, errlen);
}

int ddp_scenario_load(const char *path, ddp_scenario_t **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    if (read_scenario_file(path, &buf, &len) != 0) {
        int code = ddp_err_ctx()->code;
        snprintf(err, errlen, "%s", ddp_err_ctx()->what);
        return ddp_err_set(code == -ENOMEM ? code : DDP_ECONFIG, "%s", err);
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    int rc = parse_bytes(buf, len, path, dir, out, err, errlen);
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

/* ---- equality (round trips: parse -> write -> parse) ---- */

static int str_eq(const char *a, const char *b)
{
    return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b));
}

#define DIFF(cond, ...)                                                        \
    do {                                                                       \
        if (cond) {                                                            \
            snprintf(why, n, __VA_ARGS__);                                     \
            return 0;                                                          \
        }                                                                      \
    } while (0)

static int fault_equal(const ddp_fault_t *a, const ddp_fault_t *b, int i,
                       char *why, size_t n)
{
    DIFF(a->kind != b->kind || a->node != b->node || a->task != b->task ||
             a->peer_node != b->peer_node || a->port != b->port ||
             a->node_set != b->node_set,
         "fault %d: kind, node, task, peer, port or nodes differ", i + 1);
    DIFF(a->start_ns != b->start_ns || a->end_ns != b->end_ns,
         "fault %d: start/end %lld/%lld vs %lld/%lld ns", i + 1, (long long)a->start_ns,
         (long long)a->end_ns, (long long)b->start_ns, (long long)b->end_ns);
    DIFF(a->count != b->count || a->probability != b->probability ||
             a->delay_ns != b->delay_ns || a->after_bytes != b->after_bytes,
         "fault %d: count, p, delay or after differ", i + 1);
    DIFF(!str_eq(a->phase, b->phase) || !str_eq(a->ranks, b->ranks) ||
             !str_eq(a->point, b->point),
         "fault %d: phase, ranks or point differ", i + 1);
    DIFF(a->rate_bps != b->rate_bps, "fault %d: rate %llu vs %llu bit/s", i + 1,
         (unsigned long long)a->rate_bps, (unsigned long long)b->rate_bps);
    DIFF(memcmp(&a->start_on, &b->start_on, sizeof a->start_on) ||
             memcmp(&a->end_on, &b->end_on, sizeof a->end_on) || a->may_miss != b->may_miss ||
             a->kill_mode != b->kill_mode,
         "fault %d: start/end events, may-miss or mode differ", i + 1);
    return 1;
}

int ddp_scenario_equal(const ddp_scenario_t *a, const ddp_scenario_t *b, char *why,
                       size_t n)
{
    char tmp[8];
    if (!why || !n)
        why = tmp, n = sizeof tmp;
    why[0] = '\0';
    DIFF(strcmp(a->name, b->name), "name \"%s\" vs \"%s\"", a->name, b->name);
    DIFF(a->ntags != b->ntags, "%d vs %d tags", a->ntags, b->ntags);
    for (int i = 0; i < a->ntags; i++)
        DIFF(strcmp(a->tags[i], b->tags[i]), "tag \"%s\" vs \"%s\"", a->tags[i], b->tags[i]);
    DIFF(a->nodes != b->nodes || a->devices != b->devices || a->num_nodes != b->num_nodes ||
             a->tasks_per_node != b->tasks_per_node || a->gpus != b->gpus ||
             a->launcher != b->launcher,
         "nodes, devices, num_nodes, tasks_per_node, gpus or launcher differ");
    DIFF(a->nhosts != b->nhosts, "%d vs %d hosts", a->nhosts, b->nhosts);
    for (int i = 0; i < a->nhosts; i++)
        DIFF(strcmp(a->hosts[i], b->hosts[i]), "host %d \"%s\" vs \"%s\"", i, a->hosts[i],
             b->hosts[i]);
    DIFF(a->naccels != b->naccels, "%d vs %d accelerators", a->naccels, b->naccels);
    for (int i = 0; i < a->naccels; i++)
        DIFF(strcmp(a->accels[i], b->accels[i]), "accelerator %d differs", i);
    DIFF(strcmp(a->backend, b->backend) || strcmp(a->plugin, b->plugin) ||
             strcmp(a->cluster, b->cluster),
         "backend, plugin or cluster differ");
    DIFF(strcmp(a->plugin_lib, b->plugin_lib), "plugin-library \"%s\" vs \"%s\"",
         a->plugin_lib, b->plugin_lib);
    DIFF(strcmp(a->exec, b->exec), "exec \"%s\" vs \"%s\"", a->exec, b->exec);
    DIFF(a->timeout_ns != b->timeout_ns || a->store_timeout_ns != b->store_timeout_ns ||
             a->train_ns != b->train_ns || a->master_late_ns != b->master_late_ns ||
             a->latency_ns != b->latency_ns,
         "timeout, store_timeout, train, master_late or latency differ");
    DIFF(a->store_memory != b->store_memory, "store_memory %zu vs %zu", a->store_memory,
         b->store_memory);
    DIFF(a->seed != b->seed || a->port != b->port || a->no_port != b->no_port ||
             a->port_taken != b->port_taken,
         "seed, port or port_taken differ");
    DIFF(a->second_job != b->second_job || a->job2_start_ns != b->job2_start_ns ||
             a->job2_port != b->job2_port,
         "second_job differs");
    DIFF(strcmp(a->master_addr, b->master_addr), "master_addr \"%s\" vs \"%s\"",
         a->master_addr, b->master_addr);
    DIFF(a->nnet != b->nnet, "%d vs %d iface/resolve entries", a->nnet, b->nnet);
    for (int i = 0; i < a->nnet; i++)
        DIFF(a->net[i].kind != b->net[i].kind || a->net[i].node != b->net[i].node ||
                 strcmp(a->net[i].name, b->net[i].name) ||
                 strcmp(a->net[i].value, b->net[i].value),
             "iface/resolve entry %d (%s) differs", i, a->net[i].name);
    DIFF(a->nenv != b->nenv, "%d vs %d env entries", a->nenv, b->nenv);
    for (int i = 0; i < a->nenv; i++)
        DIFF(a->env[i].node != b->env[i].node || strcmp(a->env[i].key, b->env[i].key) ||
                 !a->env[i].value != !b->env[i].value ||
                 (a->env[i].value && strcmp(a->env[i].value, b->env[i].value)),
             "env entry %d (%s) differs", i, a->env[i].key);
    DIFF(a->nfaults != b->nfaults, "%d vs %d faults", a->nfaults, b->nfaults);
    for (int i = 0; i < a->nfaults; i++)
        if (!fault_equal(&a->faults[i], &b->faults[i], i, why, n))
            return 0;
    DIFF(a->nexpect != b->nexpect, "%d vs %d expect lines", a->nexpect, b->nexpect);
    for (int i = 0; i < a->nexpect; i++) {
        const ddp_scn_expect_t *x = &a->expect[i], *y = &b->expect[i];
        DIFF(x->kind != y->kind || strcmp(x->ranks, y->ranks) || strcmp(x->error, y->error) ||
                 x->nmentions != y->nmentions || x->within_ns != y->within_ns ||
                 x->from_join != y->from_join || x->some != y->some || x->job != y->job ||
                 x->restarts != y->restarts,
             "expect %d differs", i + 1);
        for (int m = 0; m < x->nmentions; m++)
            DIFF(strcmp(x->mentions[m], y->mentions[m]), "expect %d: mentions differ", i + 1);
        DIFF(x->nexcludes != y->nexcludes, "expect %d: excludes differ", i + 1);
        for (int m = 0; m < x->nexcludes; m++)
            DIFF(strcmp(x->excludes[m], y->excludes[m]), "expect %d: excludes differ", i + 1);
    }
    return 1;
}
#undef DIFF

/* ---- writing (explore's shrunk schedules, round trips) ---- */
/* Whether the first n hosts of h compress into one word. */
static int hosts_fit(const char *const *h, int n)
{
    char *e = NULL;
    int fits = ddp_hostlist_compress(h, (size_t)n, &e) == 0 && strlen(e) < DDP__LN_TOKEN_MAX;
    free(e);
    return fits;
}

/* The hosts in order, as `hosts` lines whose words fit the lexer: the most
 * hosts whose compressed expression stays within a word, line after line.
 * The count is found by doubling, then halving between the last count that
 * fit and the first that did not, so a line of k hosts costs about 2 log2 k
 * compressions of at most 2k hosts, not a binary search over all the hosts
 * left (4096 hosts that need a line each took seconds). */
static int put_hosts(const ddp_scenario_t *s, FILE *o)
{
    const char *const *h = (const char *const *)s->hosts;
    for (int i = 0; i < s->nhosts;) {
        int left = s->nhosts - i;
        int lo = 1, hi = left + 1; /* lo fits (1 always does); hi does not, or is past the end */
        while (lo < left) { /* doubling */
            int c = lo > left / 2 ? left : 2 * lo;
            if (!hosts_fit(h + i, c)) {
                hi = c;
                break;
            }
            lo = c;
        }
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if (hosts_fit(h + i, mid))
                lo = mid;
            else
                hi = mid;
        }
        char *expr = NULL;
        if (ddp_hostlist_compress(h + i, (size_t)lo, &expr) != 0)
            return -EINVAL;
        fprintf(o, "hosts ");
        ddp__put_quoted(o, expr);
        fputc('\n', o);
        free(expr);
        i += lo;
    }
    return 0;
}

/* The cluster's shape: scenario, tags, hosts or nodes, devices, ...,
 * accelerators. 0, or -EINVAL when the host names make no hostlist. */
static int put_shape(const ddp_scenario_t *s, FILE *o)
{
    fprintf(o, "scenario ");
    ddp__put_quoted(o, s->name);
    fputc('\n', o);
    if (s->ntags) {
        fprintf(o, "tags");
        for (int i = 0; i < s->ntags; i++) {
            fputc(' ', o);
            ddp__put_word(o, s->tags[i]);
        }
        fputc('\n', o);
    }
    if (s->nhosts) {
        if (put_hosts(s, o) != 0)
            return ddp_err_set(-EINVAL, "the scenario's host names cannot be written as "
                                        "hostlists");
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
    return 0;
}

/* What runs on it: plugin-library, backend, plugin, cluster, exec. */
static void put_stack(const ddp_scenario_t *s, FILE *o)
{
    static const struct { const char *kw; size_t off; } names[] = {
        {"backend", offsetof(ddp_scenario_t, backend)},
        {"plugin", offsetof(ddp_scenario_t, plugin)},
        {"cluster", offsetof(ddp_scenario_t, cluster)}};
    if (s->plugin_lib[0]) { /* its library: the plugin it names */
        fputs("plugin-library ", o);
        ddp__put_quoted(o, s->plugin_lib);
        fputc('\n', o);
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = (const char *)s + names[i].off;
        if (v[0] && !(names[i].off == offsetof(ddp_scenario_t, plugin) && s->plugin_lib[0])) {
            fprintf(o, "%s ", names[i].kw);
            ddp__put_word(o, v);
            fputc('\n', o);
        }
    }
    if (s->exec[0]) {
        fputs("exec ", o);
        ddp__put_quoted(o, s->exec);
        fputc('\n', o);
    }
}

/* How the run goes: timeouts, store memory, train, seed, ports,
 * master_addr, master_late, second_job, latency. */
static void put_run(const ddp_scenario_t *s, FILE *o)
{
    ddp__put_duration(o, "timeout ", s->timeout_ns);
    fputc('\n', o);
    if (s->store_timeout_ns) {
        ddp__put_duration(o, "store_timeout ", s->store_timeout_ns);
        fputc('\n', o);
    }
    if (s->store_memory) { /* the largest unit that divides it */
        size_t m = s->store_memory;
        int u = !(m & ((1u << 30) - 1)) ? 30 : !(m & ((1u << 20) - 1)) ? 20
                : !(m & ((1u << 10) - 1)) ? 10 : 0;
        fprintf(o, "store_memory %zu%s\n", m >> u, u == 30 ? "G" : u == 20 ? "M"
                                                   : u == 10 ? "K" : "");
    }
    if (s->train_ns) {
        ddp__put_duration(o, "train ", s->train_ns);
        fputc('\n', o);
    }
    fprintf(o, "seed %llu\n", (unsigned long long)s->seed);
    if (s->no_port)
        fprintf(o, "port none\n");
    else if (s->port)
        fprintf(o, "port %u\n", (unsigned)s->port);
    if (s->master_addr[0]) {
        fprintf(o, "master_addr ");
        ddp__put_word(o, strcmp(s->master_addr, "-") ? s->master_addr : "none");
        fputc('\n', o);
    }
    if (s->master_late_ns) {
        ddp__put_duration(o, "master_late ", s->master_late_ns);
        fputc('\n', o);
    }
    if (s->port_taken)
        fprintf(o, "port_taken %u\n", (unsigned)s->port_taken);
    if (s->second_job) {
        fputs("second_job", o);
        if (s->job2_start_ns)
            ddp__put_duration(o, " start=", s->job2_start_ns);
        if (s->job2_port)
            fprintf(o, " port=%u", (unsigned)s->job2_port);
        fputc('\n', o);
    }
    if (s->latency_ns) {
        ddp__put_duration(o, "latency ", s->latency_ns);
        fputc('\n', o);
    }
}

/* The network's and the environment's lines: iface, resolve,
 * somaxconn, env, unset. */
static void put_net_env(const ddp_scenario_t *s, FILE *o)
{
    for (int i = 0; i < s->nnet; i++) {
        const ddp_scn_net_t *e = &s->net[i];
        fprintf(o, "%s ", ddp_net_kind_name(e->kind));
        if (e->node >= 0)
            fprintf(o, "node=%d ", e->node);
        if (e->name[0]) {
            ddp__put_word(o, e->name);
            fputc(' ', o);
        }
        ddp__put_word(o, e->value);
        fputc('\n', o);
    }
    for (int i = 0; i < s->nenv; i++) {
        const ddp_scn_env_t *e = &s->env[i];
        fprintf(o, "%s", e->value ? "env " : "unset ");
        if (e->node >= 0)
            fprintf(o, "node=%d ", e->node);
        else if (e->value && !strcmp(e->key, "node"))
            fprintf(o, "node=all "); /* else read back as the selector */
        fprintf(o, "%s", e->key);
        if (e->value) {
            fputc('=', o);
            ddp__put_quoted(o, e->value);
        }
        fputc('\n', o);
    }
}

static void put_expect(const ddp_scn_expect_t *e, FILE *o)
{
    static const char *const kinds[] = {"ok", "fail", "crashed", "invariants"};
    fprintf(o, "expect %s", kinds[e->kind]);
    if (e->ranks[0])
        fprintf(o, " ranks=%s", e->ranks);
    if (e->error[0])
        fprintf(o, " error=%s", e->error);
    for (int m = 0; m < e->nmentions; m++) {
        fprintf(o, " mentions=");
        ddp__put_quoted(o, e->mentions[m]);
    }
    for (int m = 0; m < e->nexcludes; m++) {
        fprintf(o, " excludes=");
        ddp__put_quoted(o, e->excludes[m]);
    }
    if (e->within_ns)
        ddp__put_duration(o, " within=", e->within_ns);
    if (e->from_join)
        fprintf(o, " from=join");
    if (e->some)
        fprintf(o, " match=some");
    if (e->job)
        fprintf(o, " job=2");
    if (e->restarts)
        fprintf(o, " restarts=%d", e->restarts - 1);
    fputc('\n', o);
}

int ddp_scenario_write(const ddp_scenario_t *s, FILE *o)
{
    int rc = put_shape(s, o);
    if (rc)
        return rc;
    put_stack(s, o);
    put_run(s, o);
    put_net_env(s, o);
    for (int i = 0; i < s->nfaults; i++) {
        ddp__fault_line_put(o, &s->faults[i]);
        fputc('\n', o);
    }
    for (int i = 0; i < s->nexpect; i++)
        put_expect(&s->expect[i], o);
    return ferror(o) ? -EIO : 0;
}

char *ddp_scenario_text(const ddp_scenario_t *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        ddp_err_set(-ENOMEM, "out of memory");
        return NULL;
    }
    int rc = ddp_scenario_write(s, m);
    if (fclose(m) != 0 && rc == 0)
        rc = ddp_err_set(-ENOMEM, "out of memory");
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
