/* core/store_acl.c — the store server's opt-in access control
 * (docs/store-protocol.md, "Access control"): the peer allowlist
 * (--allow CIDR[,CIDR...]) and the shared token's comparison. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "store_priv.h"

/* One "ADDR" or "ADDR/BITS" of text[0..n) into *r; 0 or -1. */
static int parse_rule(const char *text, size_t n, ddp__store_cidr_t *r)
{
    char buf[DDP_ADDR_STRLEN];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        char *end = NULL;
        *slash = '\0';
        if (!slash[1] || slash[1] < '0' || slash[1] > '9')
            return -1;
        bits = strtol(slash + 1, &end, 10);
        if (*end)
            return -1;
    }
    ddp_addr_t a;
    if (ddp_addr_parse(buf, 0, &a) != 0)
        return -1;
    long max = a.family == 4 ? 32 : 128;
    if (bits < 0)
        bits = max;
    if (bits > max)
        return -1;
    r->family = a.family;
    r->bits = (int)bits;
    memcpy(r->ip, a.ip, sizeof r->ip);
    return 0;
}

int ddp__store_acl_parse(const char *text, ddp__store_acl_t *out)
{
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        return 0;
    for (const char *p = text;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && (*p == ' ' || *p == '\t'))
            p++, n--;
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        ddp__store_cidr_t r;
        if (parse_rule(p, n, &r) != 0) {
            ddp__store_acl_free(out);
            return ddp_err_set(DDP_ECONFIG,
                               "store server: bad allow entry \"%.*s\" in "
                               "\"%s\"; expected an address or ADDR/BITS "
                               "(10.0.0.0/8, 127.0.0.1, fd00::/8, ::1), "
                               "comma-separated",
                               (int)n, p, text);
        }
        ddp__store_cidr_t *rs =
            realloc(out->rules, sizeof *rs * (out->n + 1));
        if (!rs) {
            ddp__store_acl_free(out);
            return ddp_err_set(-ENOMEM, "out of memory for the allow list");
        }
        out->rules = rs;
        out->rules[out->n++] = r;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

int ddp__store_acl_allows(const ddp__store_acl_t *acl, const ddp_addr_t *a)
{
    if (!acl->n)
        return 1;
    /* An IPv4 client is also ::ffff:a.b.c.d, the address a dual-stack
     * listener sees it at: IPv6 rules that cover it (::ffff:10.0.0.0/104,
     * ::/0) match it too. */
    uint8_t mapped[16] = {[10] = 0xFF, [11] = 0xFF};
    memcpy(mapped + 12, a->ip, 4);
    for (size_t i = 0; i < acl->n; i++) {
        const ddp__store_cidr_t *r = &acl->rules[i];
        const uint8_t *ip = a->ip;
        if (r->family == 6 && a->family == 4)
            ip = mapped;
        else if (r->family != a->family)
            continue;
        int full = r->bits / 8, rest = r->bits % 8;
        if (memcmp(r->ip, ip, (size_t)full) != 0)
            continue;
        if (rest) {
            uint8_t mask = (uint8_t)(0xFF << (8 - rest));
            if ((r->ip[full] & mask) != (ip[full] & mask))
                continue;
        }
        return 1;
    }
    return 0;
}

void ddp__store_acl_free(ddp__store_acl_t *acl)
{
    free(acl->rules);
    acl->rules = NULL;
    acl->n = 0;
}

int ddp__store_token_eq(const uint8_t *a, size_t an, const uint8_t *b,
                        size_t bn)
{
    /* Constant time in the token's length: no early exit on a mismatch. */
    unsigned diff = an != bn;
    for (size_t i = 0; i < bn; i++)
        diff |= (unsigned)(b[i] ^ (i < an ? a[i] : 0));
    return diff == 0;
}
