/* core/endpoint.c — torch 1.13's own readings of where to connect, one
 * function each, used by the simulator and real runs alike and checked
 * against torch itself by `make differential` (tests/torch_gen.c,
 * docs/fidelity.md):
 *
 *   ddp_endpoint_parse    parse_rendezvous_endpoint (elastic/rendezvous/utils.py)
 *   ddp_sys_is_this_host  _matches_machine_hostname (same file)
 *   ddp_gloo_ifnames      GLOO_SOCKET_IFNAME as ProcessGroupGloo reads it
 *                         (c10d init.cpp: strlen > 1, split on ',', one
 *                         gloo device per item)
 */
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/sys.h"
#include "sys_priv.h"

/* str.isspace() over ASCII: the C spaces and \x1c..\x1f. */
static int py_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* The code point of UTF-8 s[0..l) when it is exactly one character of 2
 * or 3 bytes, else -1. */
static long utf8_one(const unsigned char *s, size_t l)
{
    if (l < 2 || l > 3 || (s[0] & (l == 2 ? 0xe0 : 0xf0)) != (l == 2 ? 0xc0 : 0xe0))
        return -1;
    long cp = s[0] & (l == 2 ? 0x1f : 0x0f);
    for (size_t i = 1; i < l; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return -1;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    return l == 3 && cp < 0x800 ? -1 : cp;
}

/* str.isspace() beyond ASCII (what os.environ's UTF-8 decodes to). */
static int py_space_cp(long c)
{
    return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
           c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The length of the Python space that starts (end 0) or ends (end 1)
 * s[0..l): 0 none. */
static size_t space_at(const char *s, size_t l, int end)
{
    const unsigned char *u = (const void *)s;
    if (l && py_space(u[end ? l - 1 : 0]))
        return 1;
    for (size_t k = 2; k <= 3 && k <= l; k++)
        if (py_space_cp(utf8_one(end ? u + l - k : u, k)))
            return k;
    return 0;
}

static int py_word(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '_';
}

/* Python's "$": the end, or just before a final "\n". */
static size_t py_end(const char *s, size_t l) { return l && s[l - 1] == '\n' ? l - 1 : l; }

/* re.match(r"^[\w\.:-]+$", host), \w over ASCII (ddpsim refuses other
 * bytes: docs/fidelity.md). */
static int host_ok(const char *h, size_t l)
{
    size_t e = py_end(h, l);
    for (size_t i = 0; i < e; i++)
        if (!py_word((unsigned char)h[i]) && !strchr(".:-", h[i]))
            return 0;
    return e > 0;
}

/* _try_parse_port: ^[0-9]{1,5}$, then below 2**16. */
static int port_ok(const char *p, size_t l, uint16_t *port)
{
    size_t e = py_end(p, l);
    unsigned v = 0;
    if (e < 1 || e > 5)
        return 0;
    for (size_t i = 0; i < e; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    *port = (uint16_t)v;
    return v < 65536;
}

static int endpoint_error(const char *text, const char *what, int len, const char *part,
                          const char *fix)
{
    ddp_err_set(DDP_ECONFIG, "the rendezvous endpoint \"%s\": %s \"%.*s\"", text, what, len,
                part);
    return ddp_err_hint("%s", fix);
}

/* The host part (brackets off) into host: 0, or DDP_ECONFIG. */
static int endpoint_host(const char *text, const char *h, size_t hl, char *host, size_t n)
{
    if (hl > 1 && h[0] == '[' && h[hl - 1] == ']')
        h++, hl -= 2;
    for (size_t i = 0; i < hl; i++)
        if ((unsigned char)h[i] >= 0x80)
            return endpoint_error(text, "a byte outside ASCII in the host", (int)hl, h,
                                  "write the host name in ASCII (its IDNA form, xn--...)");
    if (!host_ok(h, hl))
        return endpoint_error(text, "the host must be a dot-separated list of labels, an "
                              "IPv4 or an IPv6 address (letters, digits, _ . : -), not",
                              (int)hl, h, "--rdzv_endpoint=HOST[:PORT], e.g. node1:29400 "
                              "or [fd00::1]:29400");
    if (hl >= n)
        return endpoint_error(text, "a host name longer than 255 bytes:", 40, h,
                              "a DNS name has at most 253 characters");
    memcpy(host, h, hl);
    host[hl] = '\0';
    return 0;
}

int ddp_endpoint_parse(const char *text, uint16_t default_port, char *host, size_t n,
                       uint16_t *port)
{
    const char *s = text ? text : "";
    size_t l = strlen(s);
    for (size_t k; (k = space_at(s, l, 1)) > 0;) /* str.strip() */
        l -= k;
    for (size_t k; (k = space_at(s, l, 0)) > 0;)
        s += k, l -= k;
    *port = default_port;
    if (!l) /* torch: no endpoint is localhost */
        return endpoint_host("", "localhost", 9, host, n);
    const char *colon = NULL;
    if (!(s[0] == '[' && s[l - 1] == ']')) /* else "[v6]" alone: no port */
        for (size_t i = l; i-- > 0 && !colon;)
            colon = s[i] == ':' ? s + i : NULL;
    if (colon && !port_ok(colon + 1, l - (size_t)(colon + 1 - s), port))
        return endpoint_error(text, "the port must be a number 0..65535 (1 to 5 digits), not",
                              (int)(l - (size_t)(colon + 1 - s)), colon + 1,
                              "--rdzv_endpoint=HOST:PORT with a port such as 29400");
    return endpoint_host(text, s, colon ? (size_t)(colon - s) : l, host, n);
}

/* Python's ipaddress.ip_address(host): 1 and *a when it reads an address
 * (IPv4 only as four plain decimal parts, IPv6 with any non-empty zone
 * text), else 0. *zoned: it had a zone. */
static int py_ip_address(const char *host, ddp_addr_t *a, int *zoned)
{
    char canon[DDP_ADDR_STRLEN];
    const char *pct = strchr(host, '%');
    memset(a, 0, sizeof *a);
    *zoned = pct != NULL;
    if (ddp_inet_aton(host, 1, a->ip) && !pct) {
        a->family = 4;
        return !strcmp(ddp_addr_format_host(a, canon, sizeof canon), host);
    }
    a->family = 6;
    if (pct && (!pct[1] || strchr(pct + 1, '%')))
        return 0;
    return ddp_inet_pton6(host, pct ? (size_t)(pct - host) : strlen(host), a->ip);
}

/* torch's `addr_info[3] == host`: the canonical name of this host's name
 * (a sys without canonical names has none). */
static int canon_matches(ddp_sys_t *sys, const char *me, const char *host)
{
    char canon[256];
    ddp_errsave_t *keep = ddp_err_save();
    int rc = ddp_sys_canon_name(sys, me, canon, sizeof canon);
    ddp_err_restore(keep);
    return rc == 0 && !strcmp(canon, host);
}

/* torch 1.13's _matches_machine_hostname: "localhost", a loopback address,
 * this host's name or its canonical name, or an address this host's name
 * resolves to (through the sys: the simulator's nodes and DDPSIM_HOSTS
 * alike). torch compares a zoned address as text with getnameinfo's,
 * which a zone never matches here (docs/fidelity.md). */
int ddp_sys_is_this_host(ddp_sys_t *sys, const char *host)
{
    char me[256];
    ddp_addr_t ep, mine[16];
    int zoned;
    if (!strcmp(host, "localhost"))
        return 1;
    int ip = py_ip_address(host, &ep, &zoned);
    if (ip && ddp_addr_is_loopback(&ep))
        return 1;
    if (ddp_sys_hostname(sys, me, sizeof me) != 0)
        return 0;
    if (!strcmp(host, me) || canon_matches(sys, me, host))
        return 1;
    if (!ip || zoned)
        return 0;
    ddp_errsave_t *keep = ddp_err_save();
    int n = ddp_sys_resolve(sys, me, 0, mine, 16);
    ddp_err_restore(keep);
    for (int i = 0; i < n; i++)
        if (ddp_addr_equal(&mine[i], &ep))
            return 1;
    return 0;
}

/* One item of the list: an interface of ifs with an address. */
static int gloo_item(const char *var, const char *value, const char *it, size_t l,
                     const ddp_ifaddr_t *ifs, int nifs)
{
    if (!l) {
        ddp_err_set(DDP_ECONFIG, "%s=\"%s\": an empty interface name in the list (gloo: "
                                 "\"interface or hostname can't be empty\")", var, value);
        return ddp_err_hint("drop the extra comma: names separated by single commas, "
                            "e.g. %s=eth0", var);
    }
    for (int i = 0; i < nifs; i++)
        if (strlen(ifs[i].name) == l && !memcmp(ifs[i].name, it, l))
            return 0;
    char names[256];
    ddp_err_set(DDP_ECONFIG, "%s=\"%s\": no interface \"%.*s\" with an address here "
                             "(there are: %s; gloo: \"Unable to find address for: %.*s\")",
                var, value, (int)l, it, ddp__iface_names(ifs, nifs, names, sizeof names), (int)l,
                it);
    return ddp_err_hint("name interfaces of this host (`ip addr` lists them), or unset %s "
                        "to use the address the host name resolves to", var);
}

int ddp_gloo_ifnames(const char *var, const char *value, const ddp_ifaddr_t *ifs, int nifs,
                     char *first, size_t n)
{
    int count = 0;
    if (!value || strlen(value) <= 1) /* torch ignores it: the host name's device */
        return 0;
    for (const char *p = value; *p; count++) {
        size_t l = strcspn(p, ",");
        int rc = gloo_item(var, value, p, l, ifs, nifs);
        if (rc)
            return rc;
        if (!count)
            snprintf(first, n, "%.*s", (int)l, p);
        p += l + (p[l] == ',');
    }
    return count;
}
