/* tests/torch_gen.c — inputs for the torch half of the differential check
 * (see torch_gen.h): rendezvous endpoints (spaces Python strips and C
 * does not, brackets, ports of 0 to 7 digits, hosts from addr_gen.c's
 * numeric forms, names with odd bytes), hosts for the store-hosting
 * decision (this host's name in other cases and with a trailing dot, its
 * addresses with and without zones, loopback spellings, other names) and
 * GLOO_SOCKET_IFNAME lists (this host's interfaces, unknown names, empty
 * items, spaces, one character, duplicates). All of a family's inputs go
 * to one torch process. */
#include "torch_gen.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "addr_gen.h"
#include "ddp/err.h"

#define TEXT_MAX 160

typedef struct ctx {
    ddp_sys_t *sys;
    char host[256];
    ddp_ifaddr_t ifs[64];
    int nifs;
} ctx_t;

static uint64_t below(ddp_rng_t *r, uint64_t n) { return ddp_rng_below(r, n); }

static void cat(char *b, size_t n, const char *s)
{
    size_t l = strlen(b);
    snprintf(b + l, n - l, "%s", s);
}

static const char *one(ddp_rng_t *r, const char *const *v, size_t n) { return v[below(r, n)]; }
#define ONE(r, v) one(r, v, sizeof v / sizeof v[0])

/* This host's name: as it is, in other cases, with a suffix. */
static void my_name(ddp_rng_t *r, const ctx_t *c, char *b, size_t n)
{
    static const char *const tail[] = {".", ".localdomain", "1", "-", " ", ".."};
    char t[256];
    snprintf(t, sizeof t, "%s", c->host);
    for (size_t i = 0, k = below(r, 4); t[i] && k; i++)
        if (k == 3 || (k == 1 && i == 0) || (k == 2 && below(r, 2)))
            t[i] = (char)toupper((unsigned char)t[i]);
    cat(b, n, t);
    if (!below(r, 3))
        cat(b, n, ONE(r, tail));
}

/* One of this host's addresses, an IPv6 one sometimes with a zone. */
static void my_addr(ddp_rng_t *r, const ctx_t *c, char *b, size_t n)
{
    char a[DDP_ADDR_STRLEN], z[32];
    if (!c->nifs) {
        cat(b, n, "127.0.0.1");
        return;
    }
    const ddp_ifaddr_t *f = &c->ifs[below(r, (uint64_t)c->nifs)];
    cat(b, n, ddp_addr_format_host(&f->addr, a, sizeof a));
    if (f->addr.family == 6 && !below(r, 3)) {
        if (below(r, 2))
            snprintf(z, sizeof z, "%%%s", below(r, 4) ? f->name : "lo");
        else
            snprintf(z, sizeof z, "%%%u", (unsigned)f->index);
        cat(b, n, z);
    }
}

static void loopback(ddp_rng_t *r, char *b, size_t n)
{
    static const char *const v[] = {
        "127.0.0.1",  "127.0.0.2",       "127.1",         "0x7f.1",     "0177.0.0.1",
        "127.255.255.255", "127.0.0.01", "::1",           "::0:1",      "0:0:0:0:0:0:0:1",
        "::ffff:127.0.0.1", "::ffff:7f00:1", "::1%lo",    "::1%1",      "::1%",
        "::1%%",      "[::1]",           "::127.0.0.1",   "0::1",       " 127.0.0.1",
        "127.0.0.1 ", "128.0.0.1",       "0.0.0.0",       "::",         "1::1",
        "::1%eth0%",  "0000:0000::0001", "::00001",       "127.0.0.1\n", "127.000.0.1"};
    cat(b, n, ONE(r, v));
}

static void odd_name(ddp_rng_t *r, char *b, size_t n)
{
    static const char *const v[] = {
        "localhost", "LOCALHOST", "localhost.", "node1", "node-1.cluster", "a_b", "x", "",
        "-", ".", ":", "::", "\xc3\xa9", "n\xc3\xb6" "de", "n\xe2\x82\xac", "a b", "a/b",
        "a@b", "a%b", "[", "]", "[]", "a\nb", "a\n", "ip-10-0-0-1.ec2.internal", "\xff",
        "\xd9\xa1", "a\x1f", "_"};
    static const char set[] = "abXZ09_.-:[]% \t\n/@";
    if (below(r, 2)) {
        cat(b, n, ONE(r, v));
        return;
    }
    for (uint64_t i = 1 + below(r, 12); i > 0; i--)
        cat(b, n, (char[]){set[below(r, sizeof set - 1)], '\0'});
}

/* A host: a name, a numeric form, this host's name or address, loopback. */
static void host_part(ddp_rng_t *r, const ctx_t *c, char *b, size_t n)
{
    char t[96];
    switch (below(r, 6)) {
    case 0: odd_name(r, b, n); break;
    case 1:
        addr_gen(r, ADDR_FAM_GAI, c->ifs, c->nifs, t, sizeof t);
        cat(b, n, t);
        break;
    case 2: my_name(r, c, b, n); break;
    case 3: my_addr(r, c, b, n); break;
    default: loopback(r, b, n); break;
    }
}

/* Insert, delete or replace one character. */
static void mutate(ddp_rng_t *r, char *b, size_t n)
{
    static const char set[] = " :[]\n.%9-\xc3";
    size_t l = strlen(b), at = (size_t)below(r, l + 1);
    char ch = set[below(r, sizeof set - 1)];
    uint64_t op = below(r, 3);
    if (op == 0 && l + 1 < n) {
        memmove(b + at + 1, b + at, l - at + 1);
        b[at] = ch;
    } else if (at < l) {
        if (op == 1)
            memmove(b + at, b + at + 1, l - at);
        else
            b[at] = ch;
    }
}

static void spaces(ddp_rng_t *r, char *b, size_t n)
{
    static const char *const v[] = {" ",    "\t",   "\n",   "\r\n",     "\x0b",
                                    "\x0c", "\x1c", "\x1f", "\xc2\xa0", "\xc2\x85"};
    for (uint64_t i = 1 + below(r, 2); i > 0; i--)
        cat(b, n, ONE(r, v));
}

static void port_part(ddp_rng_t *r, char *b, size_t n)
{
    static const char *const v[] = {"0",     "1",  "29400", "65535", "65536", "99999", "000080",
                                    "00000", "",   "8x",    "+1",    " 1",    "1 ",    "\xd9\xa1",
                                    "80:90", ":",  "123456", "-1",   "1\n"};
    cat(b, n, ":");
    if (below(r, 2)) {
        cat(b, n, ONE(r, v));
        return;
    }
    for (uint64_t i = below(r, 8); i > 0; i--)
        cat(b, n, (char[]){(char)('0' + below(r, 10)), '\0'});
}

static void gen_endpoint(ddp_rng_t *r, const ctx_t *c, char *b, size_t n)
{
    int brackets = !below(r, 5);
    if (!below(r, 8))
        spaces(r, b, n);
    cat(b, n, brackets ? "[" : "");
    if (below(r, 20))
        host_part(r, c, b, n);
    cat(b, n, brackets ? "]" : "");
    if (below(r, 3))
        port_part(r, b, n);
    if (!below(r, 8))
        spaces(r, b, n);
    if (!below(r, 6))
        mutate(r, b, n);
}

static void gen_thishost(ddp_rng_t *r, const ctx_t *c, char *b, size_t n)
{
    host_part(r, c, b, n);
    if (!below(r, 8))
        mutate(r, b, n);
}

static void gen_gloo(ddp_rng_t *r, const ctx_t *c, char *b, size_t n)
{
    static const char *const tiny[] = {"", "x", ",", "e", " ", "\n"};
    static const char *const other[] = {"ifb0", "eth1",  "ib0",   "docker0", "lo0",
                                        "ETH0", "eth0:1", "^lo",  "=eth0",   " eth0",
                                        "eth0 ", "e",    "x",     "",        "lo\n",
                                        "enp0s1", "bond0", "\xc3\xa9"};
    if (!below(r, 10)) {
        cat(b, n, ONE(r, tiny));
        return;
    }
    for (uint64_t i = 0, k = 1 + below(r, 4); i < k; i++) {
        if (i)
            cat(b, n, below(r, 12) ? "," : ",,");
        if (c->nifs && below(r, 3))
            cat(b, n, c->ifs[below(r, (uint64_t)c->nifs)].name);
        else
            cat(b, n, ONE(r, other));
    }
    if (!below(r, 8))
        cat(b, n, ",");
}

const char *torch_family_name(int family)
{
    static const char *const names[] = {"endpoint", "thishost", "gloo"};
    return family >= 0 && family < TORCH_NFAM ? names[family] : "?";
}

/* text as a C string literal's inside, for messages. */
static const char *esc(const char *text, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (const unsigned char *p = (const void *)text; *p && o + 5 < n; p++)
        o += (size_t)(*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\'
                          ? snprintf(buf + o, n - o, "%c", *p)
                          : snprintf(buf + o, n - o, "\\x%02x", *p));
    return buf;
}

static int unhex(const char *h, char *out, size_t n)
{
    size_t o = 0;
    unsigned v;
    if (!strcmp(h, "-"))
        h = "";
    for (; h[0] && h[1] && o + 1 < n; h += 2) {
        if (sscanf(h, "%2x", &v) != 1)
            return -1;
        out[o++] = (char)v;
    }
    out[o] = '\0';
    return 0;
}

/* One input's two readings: 1 agree, 0 not (why says how); *acc: torch
 * accepted it; *delib: a deliberate difference (docs/fidelity.md). */
typedef int (*compare_fn)(const ctx_t *c, const char *text, const char *ans, char *why,
                          size_t n, int *acc, int *delib);

static int cmp_endpoint(const ctx_t *c, const char *text, const char *ans, char *why, size_t n,
                        int *acc, int *delib)
{
    char host[256], th[256] = "", hex[520] = "", e[200];
    uint16_t port = 0;
    unsigned tp = 0;
    (void)c;
    int ok = ddp_endpoint_parse(text, 29400, host, sizeof host, &port) == 0;
    int tok = sscanf(ans, "ok %519s %u", hex, &tp) == 2 && unhex(hex, th, sizeof th) == 0;
    *acc = tok;
    if (ok == tok && (!ok || (!strcmp(host, th) && port == tp)))
        return 1;
    /* ASCII only: torch's \w and strip() are Unicode's */
    *delib = tok && !ok && strstr(ddp_err_ctx()->what, "outside ASCII");
    if (*delib)
        return 1;
    char a[300], b[300];
    snprintf(a, sizeof a, ok ? "host \"%s\" port %u" : "rejected", esc(host, e, sizeof e),
             (unsigned)port);
    snprintf(b, sizeof b, tok ? "host \"%s\" port %u" : "rejected", esc(th, e, sizeof e), tp);
    snprintf(why, n, "endpoint(\"%s\"): ddpsim %s, torch %s", esc(text, e, sizeof e), a, b);
    return 0;
}

static int cmp_thishost(const ctx_t *c, const char *text, const char *ans, char *why, size_t n,
                        int *acc, int *delib)
{
    char e[200];
    int ours = ddp_sys_is_this_host(c->sys, text);
    (void)delib;
    *acc = ans[0] == '1';
    if (ours == *acc)
        return 1;
    snprintf(why, n, "thishost(\"%s\"): ddpsim %d, torch %d", esc(text, e, sizeof e), ours,
             *acc);
    return 0;
}

static int cmp_gloo(const ctx_t *c, const char *text, const char *ans, char *why, size_t n,
                    int *acc, int *delib)
{
    char first[32], e[200];
    int rc = ddp_gloo_ifnames("GLOO_SOCKET_IFNAME", text, c->ifs, c->nifs, first, sizeof first);
    (void)delib;
    *acc = !strcmp(ans, "ok");
    if ((rc >= 0) == *acc)
        return 1;
    snprintf(why, n, "gloo(\"%s\"): ddpsim %s, torch %s", esc(text, e, sizeof e),
             rc >= 0 ? "ok" : ddp_err_ctx()->what, *acc ? "ok" : "error");
    return 0;
}

static FILE *g_log;

void torch_diff_log(FILE *f) { g_log = f; }

typedef void (*gen_fn)(ddp_rng_t *r, const ctx_t *c, char *b, size_t n);

static const struct {
    gen_fn gen;
    compare_fn cmp;
} fams[TORCH_NFAM] = {{gen_endpoint, cmp_endpoint},
                      {gen_thishost, cmp_thishost},
                      {gen_gloo, cmp_gloo}};

/* Runs the oracle over dir/in into dir/out: 0, or -1 with d->why. */
static int oracle_run(const char *oracle, int family, const char *dir, torch_diff_t *d)
{
    char cmd[1024], line[200] = "";
    snprintf(cmd, sizeof cmd, "scripts/torch-python %s %s < %s/in > %s/out 2> %s/err", oracle,
             torch_family_name(family), dir, dir, dir);
    int st = system(cmd);
    if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    d->skipped = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 127;
    snprintf(cmd, sizeof cmd, "%s/err", dir);
    FILE *f = fopen(cmd, "r");
    if (f && !fgets(line, sizeof line, f))
        line[0] = '\0';
    if (f)
        fclose(f);
    line[strcspn(line, "\n")] = '\0';
    snprintf(d->why, sizeof d->why, d->skipped ? "no torch (sh scripts/deps.sh --torch)"
                                               : "the torch oracle failed: %s", line);
    return -1;
}

static int write_inputs(const char *path, const char *texts, long count)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (long i = 0; i < count; i++) {
        for (const unsigned char *p = (const void *)(texts + i * TEXT_MAX); *p; p++)
            fprintf(f, "%02x", *p);
        fputc('\n', f);
    }
    return fclose(f) ? -1 : 0;
}

static void compare_all(int family, const ctx_t *c, const char *texts, FILE *out,
                        torch_diff_t *d)
{
    char ans[600], why[sizeof d->first];
    for (long i = 0; i < d->tried; i++) {
        int acc = 0, delib = 0;
        if (!fgets(ans, sizeof ans, out)) {
            snprintf(d->first, sizeof d->first, "the oracle answered %ld of %ld inputs", i,
                     d->tried);
            d->disagreed += d->tried - i;
            return;
        }
        ans[strcspn(ans, "\n")] = '\0';
        if (fams[family].cmp(c, texts + i * TEXT_MAX, ans, why, sizeof why, &acc, &delib))
            ;
        else if (!d->disagreed++)
            snprintf(d->first, sizeof d->first, "%s", why);
        else if (g_log)
            fprintf(g_log, "%s\n", why);
        d->accepted += acc;
        d->deliberate += delib;
    }
}

int torch_diff_run(int family, uint64_t seed, long count, ddp_sys_t *sys, const char *oracle,
                   torch_diff_t *d)
{
    ctx_t c = {.sys = sys};
    char dir[] = "/tmp/ddpsim-torchdiff-XXXXXX", path[64];
    char *texts = calloc((size_t)count, TEXT_MAX);
    ddp_rng_t rng;
    memset(d, 0, sizeof *d);
    if (!texts || !mkdtemp(dir)) {
        free(texts);
        snprintf(d->why, sizeof d->why, "no memory or no temporary folder for %ld inputs",
                 count);
        return -1;
    }
    ddp_sys_hostname(sys, c.host, sizeof c.host);
    c.nifs = ddp_sys_ifaddrs(sys, c.ifs, 64);
    c.nifs = c.nifs > 0 ? c.nifs : 0;
    ddp_rng_seed(&rng, seed);
    for (long i = 0; i < count; i++)
        fams[family].gen(&rng, &c, texts + i * TEXT_MAX, TEXT_MAX);
    d->tried = count;
    snprintf(path, sizeof path, "%s/in", dir);
    int rc = write_inputs(path, texts, count) ? -1 : oracle_run(oracle, family, dir, d);
    snprintf(path, sizeof path, "%s/out", dir);
    FILE *out = rc ? NULL : fopen(path, "r");
    if (out) {
        compare_all(family, &c, texts, out, d);
        fclose(out);
    }
    for (const char *const *f = (const char *const[]){"in", "out", "err", NULL}; *f; f++)
        snprintf(path, sizeof path, "%s/%s", dir, *f), unlink(path);
    rmdir(dir);
    free(texts);
    return rc;
}
