/* core/sys.c — what every sys implementation shares: addresses, the
 * all-or-nothing send/recv helpers, host connect, free port, and the PRNG.
 * Everything here is written against the ops table only. */
#include "ddp/host.h"
#include "ddp/sys.h"
#include "sys_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"

int ddp_addr_try_parse(const char *text, uint16_t port, ddp_addr_t *out)
{
    const char *zone;
    if (ddp_addr_numeric(text, port, out, &zone) != 0 ||
        (zone && ddp_addr_zone(out, zone, NULL, 0, &out->scope) != 0))
        return -1;
    return 0;
}

int ddp_addr_parse(const char *text, uint16_t port, ddp_addr_t *out)
{
    if (ddp_addr_try_parse(text, port, out) == 0)
        return 0;
    return ddp_err_set(DDP_ECONFIG,
                       "\"%s\" is not a numeric IPv4 or IPv6 address",
                       text ? text : "");
}

char *ddp_addr_format_host(const ddp_addr_t *a, char *buf, size_t n)
{
    if (!inet_ntop(a->family == 6 ? AF_INET6 : AF_INET, a->ip, buf,
                   (socklen_t)n))
        snprintf(buf, n, "?");
    return buf;
}

/* Decimal digits of v at p; returns the end. */
static char *put_dec(char *p, unsigned v)
{
    char d[10];
    int k = 0;
    do
        d[k++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (k > 0)
        *p++ = d[--k];
    return p;
}

char *ddp_addr_format(const ddp_addr_t *a, char *buf, size_t n)
{
    if (a->family != 6 && n >= sizeof "255.255.255.255:65535") {
        /* IPv4 by hand: the simulator formats an address on every connect
         * and accept, and snprintf + inet_ntop cost ten times this. */
        char *p = buf;
        for (int i = 0; i < 4; i++) {
            p = put_dec(p, a->ip[i]);
            *p++ = i < 3 ? '.' : ':';
        }
        *put_dec(p, a->port) = '\0';
        return buf;
    }
    char host[INET6_ADDRSTRLEN];
    ddp_addr_format_host(a, host, sizeof host);
    snprintf(buf, n, a->family == 6 ? "[%s]:%u" : "%s:%u", host,
             (unsigned)a->port);
    return buf;
}

int ddp_addr_equal(const ddp_addr_t *a, const ddp_addr_t *b)
{
    size_t len = a->family == 6 ? 16 : 4;
    return a->family == b->family && a->port == b->port &&
           memcmp(a->ip, b->ip, len) == 0;
}

int ddp_addr_is_any(const ddp_addr_t *a)
{
    static const uint8_t zero[16];
    return memcmp(a->ip, zero, a->family == 6 ? 16 : 4) == 0;
}

int64_t ddp_sys_deadline_in(ddp_sys_t *s, int64_t ns)
{
    int64_t now = ddp_sys_now(s);
    /* now + ns, or NEVER where it would reach it. Not NEVER - now: a
     * simulated node's clock skewed back may read below zero, and that
     * difference overflowed (every wait on such a node lost its deadline). */
    if (ns > 0 && now >= DDP_DEADLINE_NEVER - ns)
        return DDP_DEADLINE_NEVER;
    return now + ns;
}

int ddp_sys_send_all(ddp_sys_t *s, int fd, const void *buf, size_t n,
                     int64_t deadline)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = ddp_sys_send(s, fd, p, n, deadline);
        if (w < 0)
            return (int)w;
        if (w == 0)
            return ddp_err_set(DDP_EPEER_LOST, "peer closed while sending");
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int ddp_sys_recv_all(ddp_sys_t *s, int fd, void *buf, size_t n,
                     int64_t deadline)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = ddp_sys_recv(s, fd, p, n, deadline);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return ddp_err_set(DDP_EPEER_LOST,
                               "connection closed by peer with %zu bytes "
                               "still expected",
                               n);
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int ddp_sys_connect_host(ddp_sys_t *s, const char *host, uint16_t port,
                         int64_t deadline)
{
    ddp_addr_t addrs[8];
    int n = ddp_sys_resolve(s, host, port, addrs, 8);
    if (n < 0)
        return n;
    int rc = -EHOSTUNREACH;
    for (int i = 0; i < n; i++) {
        rc = ddp_sys_connect(s, &addrs[i], deadline);
        if (rc >= 0)
            return rc;
    }
    return rc;
}

int ddp_sys_free_port(ddp_sys_t *s, uint16_t *port)
{
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", 0, &any);
    int fd = ddp_sys_listen(s, &any, 1);
    if (fd < 0)
        return fd;
    ddp_addr_t bound;
    int rc = ddp_sys_local_addr(s, fd, &bound);
    ddp_sys_close(s, fd);
    if (rc < 0)
        return rc;
    *port = bound.port;
    return 0;
}

void ddp_sys_free(ddp_sys_t *sys)
{
    if (sys && sys->ops->destroy)
        sys->ops->destroy(sys);
}

/* ---- PRNG: xoshiro256** seeded through splitmix64 ---- */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ddp_rng_seed(ddp_rng_t *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t ddp_rng_next(ddp_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Bulk bytes (a model's parameters, per rank, thousands of ranks per
 * simulation): one draw keys a counter-based stream (wyrand: an add and a
 * 64x64->128 multiply per word, about a quarter of xoshiro256**'s work). */
static inline uint64_t wyrand(uint64_t *x)
{
    *x += 0xa0761d6478bd642full;
    __extension__ unsigned __int128 m = (unsigned __int128)*x * (*x ^ 0xe7037ed1a0b428dbull);
    return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

void ddp_rng_fill(ddp_rng_t *r, void *buf, size_t n)
{
    uint64_t x = ddp_rng_next(r);
    unsigned char *p = buf;
    size_t i = 0;
    /* Unrolled: the loop's own add, compare and branch were a third of its
     * instructions (thousands of ranks fill a model each). */
#pragma GCC unroll 4
    for (; i + 8 <= n; i += 8) {
        uint64_t w = wyrand(&x);
        memcpy(p + i, &w, 8);
    }
    if (i < n) {
        uint64_t w = wyrand(&x);
        memcpy(p + i, &w, n - i);
    }
}

double ddp_rng_double(ddp_rng_t *rng)
{
    return (double)(ddp_rng_next(rng) >> 11) * 0x1.0p-53;
}

uint64_t ddp_rng_below(ddp_rng_t *rng, uint64_t n)
{
    /* Rejection keeps it unbiased; the loop ends with probability 1. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = ddp_rng_next(rng);
    while (x >= lim);
    return x % n;
}

int ddp_sys_ifaddrs(ddp_sys_t *s, ddp_ifaddr_t *out, int max)
{
    if (!s->ops->ifaddrs)
        return ddp_err_set(DDP_EUNSUPPORTED, "the %s sys cannot list this host's "
                                             "addresses", s->ops->name);
    if (max <= 0)
        return ddp_err_set(-EINVAL, "ifaddrs: no room for addresses");
    return s->ops->ifaddrs(s, out, max);
}

#define SYS_MAX_IFADDRS 64

int ddp_sys_local_addrs(ddp_sys_t *s, ddp_addr_t *out, int max)
{
    ddp_ifaddr_t ifs[SYS_MAX_IFADDRS];
    int n = ddp_sys_ifaddrs(s, ifs, max < SYS_MAX_IFADDRS ? max : SYS_MAX_IFADDRS);
    for (int i = 0; i < n; i++)
        out[i] = ifs[i].addr;
    return n;
}

/* "lo, eth0": each name of ifs once, or "none". */
const char *ddp__iface_names(const ddp_ifaddr_t *ifs, int n, char *names, size_t size)
{
    size_t off = 0;
    names[0] = '\0';
    for (int i = 0; i < n && off + 20 < size; i++) {
        int dup = 0;
        for (int k = 0; k < i; k++)
            dup |= !strcmp(ifs[k].name, ifs[i].name);
        if (!dup)
            off += (size_t)snprintf(names + off, size - off, "%s%s", off ? ", " : "",
                                    ifs[i].name);
    }
    return names[0] ? names : "none";
}

int ddp_sys_iface_addr(ddp_sys_t *s, const char *name, int prefer, ddp_addr_t *out)
{
    ddp_ifaddr_t ifs[SYS_MAX_IFADDRS];
    int n = ddp_sys_ifaddrs(s, ifs, SYS_MAX_IFADDRS), found = -1;
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++)
        if (!strcmp(ifs[i].name, name) &&
            (found < 0 || (ifs[i].addr.family == prefer && ifs[found].addr.family != prefer)))
            found = i;
    if (found >= 0) {
        *out = ifs[found].addr;
        return 0;
    }
    char names[256];
    return ddp_err_set(DDP_ENOT_FOUND, "no interface \"%s\" with an address here (there are: %s)",
                       name, ddp__iface_names(ifs, n, names, sizeof names));
}

/* A zone that glibc would refuse: what it is, and what would do. */
static int zone_error(const char *host, const ddp_addr_t *a, const char *zone,
                      const ddp_ifaddr_t *ifs, int n)
{
    char names[256];
    ddp__iface_names(ifs, n, names, sizeof names);
    if (!ddp_addr_is_link_local(a))
        ddp_err_set(DDP_ENOT_FOUND, "cannot resolve host \"%s\": a zone index (%%%s) names an "
                                    "interface only for a link-local address (fe80::/10), and "
                                    "this one is not (getaddrinfo: EAI_NONAME): drop "
                                    "the zone, or give it as a number", host, zone);
    else
        ddp_err_set(DDP_ENOT_FOUND, "cannot resolve host \"%s\": a link-local IPv6 address "
                                    "whose zone \"%s\" is no interface of this host (there "
                                    "are: %s; getaddrinfo: EAI_NONAME): name the "
                                    "interface that reaches it, or use a global address",
                    host, zone, names);
    return ddp_err_hint("fe80::1%%eth0: the zone is the interface of this host on the "
                        "link to the address");
}

/* out's zone as this host's interface index: 1, or DDP_ENOT_FOUND. Its
 * table of interfaces (3.3 KiB) is on the heap: on the stack, under the
 * error's printf, it was the deepest frame of a simulated rank
 * (docs/simulator.md § 1, the stack margin check). */
static int resolve_zone(ddp_sys_t *s, const char *host, ddp_addr_t *out, const char *zone)
{
    ddp_ifaddr_t *ifs = malloc(SYS_MAX_IFADDRS * sizeof *ifs);
    if (!ifs)
        return ddp_err_set(-ENOMEM, "cannot resolve host \"%s\": out of memory for the "
                                    "table of interfaces its zone %%%s is looked up in",
                           host, zone);
    ddp_errsave_t *keep = ddp_err_save();
    int n = ddp_sys_ifaddrs(s, ifs, SYS_MAX_IFADDRS);
    ddp_err_restore(keep);
    if (n < 0)
        n = 0;
    int rc = ddp_addr_zone(out, zone, ifs, n, &out->scope) != 0
                 ? zone_error(host, out, zone, ifs, n)
                 : 1;
    free(ifs);
    return rc;
}

int ddp_sys_resolve_numeric(ddp_sys_t *s, const char *host, uint16_t port, ddp_addr_t *out)
{
    const char *zone;
    size_t l = host ? strlen(host) : 0;
    if (l > 2 && host[0] == '[' && host[l - 1] == ']') {
        ddp_err_set(DDP_ENOT_FOUND, "cannot resolve host \"%s\": an IPv6 address in "
                                    "brackets is a host name to getaddrinfo (EAI_NONAME; "
                                    "torch retries \"gai error -2\"): write it without, "
                                    "MASTER_ADDR=%.*s", host, (int)(l - 2), host + 1);
        return ddp_err_hint("brackets belong to HOST:PORT forms only, "
                            "--rdzv_endpoint=[ADDR]:PORT");
    }
    if (ddp_addr_numeric(host, port, out, &zone) != 0)
        return 0;
    return zone ? resolve_zone(s, host, out, zone) : 1;
}

int ddp_addr_in_net(const ddp_addr_t *a, const ddp_addr_t *net, int prefix)
{
    if (a->family != net->family)
        return 0;
    int bits = a->family == 4 ? 32 : 128;
    if (prefix < 0 || prefix > bits)
        prefix = bits;
    for (int i = 0; i < prefix / 8; i++)
        if (a->ip[i] != net->ip[i])
            return 0;
    int r = prefix % 8;
    return !r || ((a->ip[prefix / 8] ^ net->ip[prefix / 8]) & (0xff00 >> r) & 0xff) == 0;
}

int ddp_sys_lib_open(ddp_sys_t *s, const char *path, void **lib, char *real, size_t n)
{
    *lib = NULL;
    if (!s->ops->lib_open)
        return ddp_err_set(DDP_EUNSUPPORTED, "the %s sys cannot load shared libraries",
                           s->ops->name);
    if (!path || !*path || !real || n < 2)
        return ddp_err_set(-EINVAL, "lib_open: no path, or no room for it");
    return s->ops->lib_open(s, path, lib, real, n);
}

void *ddp_sys_lib_sym(ddp_sys_t *s, void *lib, const char *name)
{
    return lib && name && s->ops->lib_sym ? s->ops->lib_sym(s, lib, name) : NULL;
}

void ddp_sys_lib_close(ddp_sys_t *s, void *lib)
{
    if (lib && s->ops->lib_close)
        s->ops->lib_close(s, lib);
}

int ddp_sys_nccl_api(ddp_sys_t *s, const struct ddp_nccl_api **out)
{
    *out = NULL;
    if (!s->ops->nccl_api) {
        ddp_err_set(DDP_EUNSUPPORTED, "the %s sys offers no NCCL library", s->ops->name);
        return ddp_err_hint("use the tcp backend");
    }
    return s->ops->nccl_api(s, out);
}

int ddp_addr_is_loopback(const ddp_addr_t *a)
{
    static const uint8_t v6_loop[16] = {[15] = 1};
    return a->family == 4 ? a->ip[0] == 127 : !memcmp(a->ip, v6_loop, 16);
}

/* The rule every sys shares unless it knows better: loopback is this
 * host's alone, whatever the name that led to it (a Debian /etc/hosts maps
 * the host's own name to 127.0.1.1). */
int ddp_sys_canon_name(ddp_sys_t *s, const char *host, char *buf, size_t n)
{
    if (!s->ops->canon_name)
        return ddp_err_set(DDP_EUNSUPPORTED, "this sys (%s) has no canonical host names",
                           s->ops->name);
    return s->ops->canon_name(s, host, buf, n);
}

int ddp_sys_node_local(ddp_sys_t *s, const ddp_addr_t *addr)
{
    if (s->ops->node_local)
        return s->ops->node_local(s, addr);
    return ddp_addr_is_loopback(addr);
}

int ddp_sys_fd_limit_raise(ddp_sys_t *s, long *before, long *after)
{
    *before = *after = -1;
    if (!s->ops->fd_limit_raise)
        return ddp_err_set(DDP_EUNSUPPORTED, "sys %s has no open-file limit to raise",
                           s->ops->name);
    return s->ops->fd_limit_raise(s, before, after);
}

int ddp_out_write(const char *path, const char *what,
                  int (*fill)(FILE *f, void *arg), void *arg)
{
    ddp_out_t *o;
    int rc = ddp_out_open(path, what, &o);
    if (rc)
        return rc;
    rc = fill(ddp_out_file(o), arg);
    /* A fill that failed on a write: commit reports the write's own error
     * (ENOSPC ...) and removes the temporary file. */
    if (rc && !ferror(ddp_out_file(o))) {
        ddp_out_abort(o);
        return ddp_err_wrap("writing %s \"%s\" failed", what, path);
    }
    return ddp_out_commit(o);
}
