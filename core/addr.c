/* core/addr.c — numeric addresses read as glibc reads them, so that the
 * simulator and the real path accept and reject the same MASTER_ADDR:
 *
 *   inet_aton       "a.b.c.d", "a.b.c", "a.b", "a"; each part decimal,
 *                   0x hex or 0 octal; the last part fills what is left
 *                   ("189" is 0.0.0.189, "10.1" is 10.0.0.1)
 *   inet_pton6      RFC 4291 text, one "::", an IPv4 tail
 *   getaddrinfo     AI_NUMERICHOST: inet_aton with nothing after it, else
 *                   inet_pton6 with an optional "%zone"; a zone names an
 *                   interface of a link-local address, or is a number
 *
 * No brackets: "[::1]" is a host name to getaddrinfo (and found nowhere).
 * tests/addr_gen.c checks all of it against this host's libc. */
#include <string.h>

#include "ddp/sys.h"

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int hex_value(int c)
{
    if (is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One inet_aton part at *p (a digit): strtoul(base 0) that gives up past
 * 32 bits. 0 and *v, or -1 when the value does not fit. */
static int aton_part(const char **p, uint32_t *v)
{
    const char *s = *p;
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hex_value(s[2]) >= 0)
        base = 16, s += 2;
    else if (s[0] == '0')
        base = 8;
    uint64_t x = 0;
    for (int d; (d = hex_value(*s)) >= 0 && d < base; s++)
        if ((x = x * (uint64_t)base + (uint64_t)d) > 0xffffffffu)
            return -1;
    *v = (uint32_t)x;
    *p = s;
    return 0;
}

static int is_space(int c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int ddp_inet_aton(const char *text, int exact, uint8_t ip[4])
{
    static const uint32_t max[4] = {0xffffffffu, 0xffffffu, 0xffffu, 0xffu};
    uint8_t part[4] = {0};
    int n = 0;
    uint32_t v = 0;
    const char *p = text;
    for (;;) {
        if (!is_digit(*p) || aton_part(&p, &v) != 0)
            return 0;
        if (*p != '.')
            break;
        if (n > 2 || v > 0xff)
            return 0;
        part[n++] = (uint8_t)v;
        p++;
    }
    if (*p && (exact || !is_space(*p)))
        return 0;
    if (v > max[n])
        return 0;
    for (int i = 3; i >= n; i--, v >>= 8)
        part[i] = (uint8_t)(v & 0xff);
    memcpy(ip, part, 4);
    return 1;
}

/* inet_pton(AF_INET)'s strict dotted quad over [s, end): four decimal
 * parts of 0..255 without leading zeros. */
static int pton4(const char *s, const char *end, uint8_t out[4])
{
    int parts = 0, digits = 0;
    unsigned v = 0;
    for (; s < end; s++) {
        if (is_digit(*s)) {
            if ((digits && v == 0) || (v = v * 10 + (unsigned)(*s - '0')) > 255)
                return 0;
            if (!digits++ && ++parts > 4)
                return 0;
            out[parts - 1] = (uint8_t)v;
        } else if (*s == '.' && digits && parts < 4) {
            digits = 0, v = 0;
        } else {
            return 0;
        }
    }
    return parts == 4 && digits;
}

/* Where "::" stood, zeros: the groups after it move to the end. */
static int expand_gap(uint8_t *tmp, int at, int len, uint8_t ip[16])
{
    if (at >= 0) {
        if (len == 16)
            return 0; /* "::" would stand for no group at all */
        memmove(tmp + 16 - (len - at), tmp + at, (size_t)(len - at));
        memset(tmp + at, 0, (size_t)(16 - len));
        len = 16;
    }
    if (len != 16)
        return 0;
    memcpy(ip, tmp, 16);
    return 1;
}

int ddp_inet_pton6(const char *text, size_t len, uint8_t ip[16])
{
    const char *s = text, *end = text + len, *tok;
    uint8_t tmp[16] = {0};
    int n = 0, gap = -1, digits = 0;
    unsigned v = 0;
    if (s == end || (*s == ':' && (++s == end || *s != ':')))
        return 0;
    for (tok = s; s < end;) {
        int c = *s++, d = hex_value(c);
        if (d >= 0) {
            if (digits++ == 4)
                return 0;
            v = v << 4 | (unsigned)d;
        } else if (c == ':' && !digits) {
            if (gap >= 0)
                return 0;
            gap = n, tok = s;
        } else if (c == ':') {
            if (s == end || n + 2 > 16)
                return 0;
            tmp[n++] = (uint8_t)(v >> 8), tmp[n++] = (uint8_t)v;
            digits = 0, v = 0, tok = s;
        } else if (c == '.' && n + 4 <= 16 && pton4(tok, end, tmp + n)) {
            n += 4, digits = 0;
            break;
        } else {
            return 0;
        }
    }
    if (digits) {
        if (n + 2 > 16)
            return 0;
        tmp[n++] = (uint8_t)(v >> 8), tmp[n++] = (uint8_t)v;
    }
    return expand_gap(tmp, gap, n, ip);
}

int ddp_addr_numeric(const char *text, uint16_t port, ddp_addr_t *out, const char **zone)
{
    memset(out, 0, sizeof *out);
    out->port = port;
    *zone = NULL;
    if (!text)
        return -1;
    if (ddp_inet_aton(text, 1, out->ip)) {
        out->family = 4;
        return 0;
    }
    const char *pct = strchr(text, '%');
    if (!ddp_inet_pton6(text, pct ? (size_t)(pct - text) : strlen(text), out->ip))
        return -1;
    out->family = 6;
    *zone = pct ? pct + 1 : NULL;
    return 0;
}

int ddp_addr_is_link_local(const ddp_addr_t *a)
{
    const uint8_t *b = a->ip;
    return a->family == 6 && ((b[0] == 0xfe && (b[1] & 0xc0) == 0x80) ||
                              (b[0] == 0xff && ((b[1] & 0x0f) == 1 || (b[1] & 0x0f) == 2)));
}

int ddp_addr_zone(const ddp_addr_t *a, const char *zone, const ddp_ifaddr_t *ifs,
                  int nifs, uint32_t *scope)
{
    /* if_nametoindex: a name of 15 characters at most; Linux reads "eth0:1"
     * (an alias) as eth0 */
    size_t zl = strlen(zone), nl = strcspn(zone, ":");
    for (int i = 0; ddp_addr_is_link_local(a) && zl < 16 && i < nifs; i++)
        if (ifs[i].index && strlen(ifs[i].name) == nl && !strncmp(ifs[i].name, zone, nl)) {
            *scope = ifs[i].index;
            return 0;
        }
    if (!is_digit(zone[0]))
        return -1;
    uint64_t x = 0;
    for (; is_digit(*zone); zone++)
        if ((x = x * 10 + (uint64_t)(*zone - '0')) > 0xffffffffu)
            return -1;
    if (*zone)
        return -1;
    *scope = (uint32_t)x;
    return 0;
}
