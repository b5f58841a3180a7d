/* tests/addr_gen.c — address strings for the differential check (see
 * addr_gen.h): numeric forms with the edges glibc draws (leading zeros,
 * hex, octal, parts too wide, trailing dots, spaces), IPv6 with "::",
 * IPv4 tails, zones and brackets, junk, and one-character mutations. */
#include "addr_gen.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct gen {
    ddp_rng_t *rng;
    char *buf;
    size_t len, cap;
} gen_t;

static uint64_t pick(gen_t *g, uint64_t n) { return ddp_rng_below(g->rng, n); }

static void put(gen_t *g, const char *s)
{
    while (*s && g->len + 1 < g->cap)
        g->buf[g->len++] = *s++;
    g->buf[g->len] = '\0';
}

static void putc_(gen_t *g, char c) { put(g, (char[]){c, '\0'}); }

/* A number as inet_aton reads parts: decimal, octal or hex, zero-padded. */
static void number(gen_t *g)
{
    static const uint64_t edge[] = {0,     1,        7,         8,          9,
                                    10,    127,      255,       256,        65535,
                                    65536, 16777215, 16777216,  0xffffffffu, 0x100000000u,
                                    UINT64_MAX};
    uint64_t v = pick(g, 3) ? edge[pick(g, sizeof edge / sizeof edge[0])]
                            : ddp_rng_next(g->rng) >> pick(g, 64);
    char s[64];
    for (uint64_t z = pick(g, 4) == 0 ? pick(g, 12) : 0; z > 0; z--)
        put(g, "0");
    switch (pick(g, 5)) {
    case 0: snprintf(s, sizeof s, "0%llo", (unsigned long long)v); break;
    case 1: snprintf(s, sizeof s, pick(g, 2) ? "0x%llx" : "0X%llX", (unsigned long long)v); break;
    case 2: snprintf(s, sizeof s, "%llu9", (unsigned long long)v); break;
    default: snprintf(s, sizeof s, "%llu", (unsigned long long)v); break;
    }
    put(g, s);
}

static void ipv4(gen_t *g)
{
    int parts = 1 + (int)pick(g, pick(g, 3) ? 4 : 6);
    for (int i = 0; i < parts; i++) {
        if (i)
            put(g, pick(g, 30) ? "." : "..");
        if (pick(g, 3))
            snprintf(g->buf + g->len, g->cap - g->len, "%u", (unsigned)pick(g, 300)),
                g->len += strlen(g->buf + g->len);
        else
            number(g);
    }
    if (!pick(g, 10))
        put(g, ".");
}

static void group(gen_t *g)
{
    static const char hex[] = "0123456789abcdefABCDEF";
    for (int d = 1 + (int)pick(g, pick(g, 8) ? 4 : 6); d > 0; d--)
        putc_(g, hex[pick(g, sizeof hex - 1)]);
}

static void zone(gen_t *g, const ddp_ifaddr_t *ifs, int nifs)
{
    static const char *const z[] = {"", "0", "1", "2", "01", "4294967295", "4294967296",
                                    "18446744073709551617", "1a", " 1", "+1", "-1",
                                    "eth0", "eth9", "lo", "%", "1 "};
    put(g, "%");
    if (nifs > 0 && pick(g, 2)) {
        put(g, ifs[pick(g, (uint64_t)nifs)].name);
        if (!pick(g, 4)) /* an alias ("eth0:1"), or too long for a name */
            put(g, pick(g, 2) ? ":1" : "-long-interface-name");
    } else
        put(g, z[pick(g, sizeof z / sizeof z[0])]);
}

static void ipv6(gen_t *g, const ddp_ifaddr_t *ifs, int nifs)
{
    static const char *const lead[] = {"", "", "", "fe80:", "FE80::", "ff02::", "fd00:",
                                       "::ffff:", ":", "::"};
    int groups = (int)pick(g, 10), gap = pick(g, 3) ? (int)pick(g, (uint64_t)groups + 1) : -1;
    int brackets = !pick(g, 12);
    if (brackets)
        put(g, "[");
    put(g, lead[pick(g, sizeof lead / sizeof lead[0])]);
    for (int i = 0; i < groups; i++) {
        put(g, i == gap ? "::" : i ? ":" : "");
        group(g);
    }
    if (gap == groups)
        put(g, "::");
    if (!pick(g, 6)) {
        put(g, groups || gap >= 0 ? ":" : "");
        ipv4(g);
    }
    if (!pick(g, 4))
        zone(g, ifs, nifs);
    if (brackets)
        put(g, "]");
}

static void junk(gen_t *g)
{
    static const char set[] = "0123456789abcdefxX.:%[] \t\n-+gz/";
    for (int i = (int)pick(g, 40); i > 0; i--)
        putc_(g, set[pick(g, sizeof set - 1)]);
}

/* Insert, delete or replace one character (a space, a dot, a digit). */
static void mutate(gen_t *g)
{
    static const char set[] = " .:0x9%\t]";
    size_t at = g->len ? (size_t)pick(g, g->len + 1) : 0;
    char c = set[pick(g, sizeof set - 1)];
    int op = (int)pick(g, 3);
    if (op == 0 && g->len + 1 < g->cap) {
        memmove(g->buf + at + 1, g->buf + at, g->len - at + 1);
        g->buf[at] = c, g->len++;
    } else if (op == 1 && at < g->len) {
        memmove(g->buf + at, g->buf + at + 1, g->len - at);
        g->len--;
    } else if (at < g->len) {
        g->buf[at] = c;
    }
}

void addr_gen(ddp_rng_t *rng, int family, const ddp_ifaddr_t *ifs, int nifs, char *buf,
              size_t n)
{
    gen_t g = {.rng = rng, .buf = buf, .cap = n};
    buf[0] = '\0';
    int kind = (int)pick(&g, 10); /* mostly the family's own form */
    if (kind < 6)
        family == ADDR_FAM_ATON ? ipv4(&g) : family == ADDR_FAM_PTON6 ? ipv6(&g, ifs, nifs)
                                : pick(&g, 2) ? ipv4(&g) : ipv6(&g, ifs, nifs);
    else if (kind < 8)
        family == ADDR_FAM_ATON ? ipv6(&g, ifs, nifs) : ipv4(&g);
    else
        junk(&g);
    if (!pick(&g, 10))
        put(&g, pick(&g, 2) ? " " : pick(&g, 2) ? " junk" : "\tx");
    if (!pick(&g, 4))
        mutate(&g);
}

const char *addr_family_name(int family)
{
    static const char *const names[] = {"inet_aton", "inet_pton6", "getaddrinfo"};
    return family >= 0 && family < ADDR_NFAM ? names[family] : "?";
}

/* ddpsim's reading as libc would give it: ok, family, 16 bytes, scope. */
typedef struct reading {
    int ok, family;
    uint8_t ip[16];
    uint32_t scope;
} reading_t;

static reading_t ours(int family, const char *text, const ddp_ifaddr_t *ifs, int nifs)
{
    reading_t r = {0};
    ddp_addr_t a;
    const char *zone;
    if (family == ADDR_FAM_ATON)
        r.ok = ddp_inet_aton(text, 0, r.ip), r.family = 4;
    else if (family == ADDR_FAM_PTON6)
        r.ok = ddp_inet_pton6(text, strlen(text), r.ip), r.family = 6;
    else if (ddp_addr_numeric(text, 0, &a, &zone) == 0 &&
             (!zone || ddp_addr_zone(&a, zone, ifs, nifs, &a.scope) == 0)) {
        r.ok = 1, r.family = a.family, r.scope = a.scope;
        memcpy(r.ip, a.ip, 16);
    }
    return r;
}

static reading_t theirs(int family, const char *text)
{
    reading_t r = {0};
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (family == ADDR_FAM_ATON) {
        r.ok = inet_aton(text, (struct in_addr *)(void *)r.ip), r.family = 4;
    } else if (family == ADDR_FAM_PTON6) {
        r.ok = inet_pton(AF_INET6, text, r.ip) == 1, r.family = 6;
    } else if (getaddrinfo(text, NULL, &hints, &res) == 0) {
        r.ok = 1, r.family = res->ai_family == AF_INET6 ? 6 : 4;
        if (r.family == 6) {
            const struct sockaddr_in6 *s6 = (const void *)res->ai_addr;
            memcpy(r.ip, &s6->sin6_addr, 16);
            r.scope = s6->sin6_scope_id;
        } else {
            memcpy(r.ip, &((const struct sockaddr_in *)(const void *)res->ai_addr)->sin_addr, 4);
        }
        freeaddrinfo(res);
    }
    return r;
}

static const char *show(const reading_t *r, char *buf, size_t n)
{
    char a[INET6_ADDRSTRLEN];
    if (!r->ok)
        return "rejected";
    inet_ntop(r->family == 6 ? AF_INET6 : AF_INET, r->ip, a, sizeof a);
    snprintf(buf, n, "%s%%%u", a, (unsigned)r->scope);
    return buf;
}

int addr_agree(int family, const char *text, const ddp_ifaddr_t *ifs, int nifs, char *why,
               size_t n)
{
    reading_t o = ours(family, text, ifs, nifs), t = theirs(family, text);
    if (o.ok == t.ok && (!o.ok || (o.family == t.family && o.scope == t.scope &&
                                   !memcmp(o.ip, t.ip, o.family == 6 ? 16 : 4))))
        return 1;
    char b1[80], b2[80];
    snprintf(why, n, "%s(\"%s\"): ddpsim %s, libc %s", addr_family_name(family), text,
             show(&o, b1, sizeof b1), show(&t, b2, sizeof b2));
    return 0;
}

void addr_diff_run(int family, uint64_t seed, long count, const ddp_ifaddr_t *ifs, int nifs,
                   addr_diff_t *d)
{
    ddp_rng_t rng;
    ddp_rng_seed(&rng, seed);
    memset(d, 0, sizeof *d);
    for (long i = 0; i < count; i++) {
        char text[96], why[sizeof d->first];
        addr_gen(&rng, family, ifs, nifs, text, sizeof text);
        d->tried++;
        if (!addr_agree(family, text, ifs, nifs, why, sizeof why)) {
            if (!d->disagreed++)
                snprintf(d->first, sizeof d->first, "%s", why);
            continue;
        }
        d->accepted += theirs(family, text).ok;
    }
}

ddp_sys_t *diff_start(int argc, char **argv, const char *usage, long *count, uint64_t *seed)
{
    *count = argc > 1 ? atol(argv[1]) : 10000;
    *seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 41;
    ddp_sys_t *sys = *count >= 1 ? ddp_sys_posix_new(NULL) : NULL;
    if (*count < 1)
        fprintf(stderr, "differential: COUNT \"%s\" is not a positive number of inputs "
                        "(usage: %s)\n", argv[1], usage);
    else if (!sys)
        fprintf(stderr, "differential: no POSIX sys (out of memory)\n");
    return sys;
}
