/* core/fmt.c — ddp_fmt (ddp/fmt.h): a bounded writer for the few
 * conversions hot paths use, vsnprintf for the rest. */
#include "ddp/fmt.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t cap, len; /* len counts every byte, stored or not */
} fw_t;

static void fw_mem(fw_t *w, const char *s, size_t n)
{
    if (w->len + 1 < w->cap) {
        size_t room = w->cap - 1 - w->len;
        memcpy(w->buf + w->len, s, n < room ? n : room);
    }
    w->len += n;
}

static void fw_int(fw_t *w, unsigned long long v, int negative)
{
    char d[24];
    int n = (int)sizeof d;
    do
        d[--n] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    if (negative)
        d[--n] = '-';
    fw_mem(w, d + n, sizeof d - (size_t)n);
}

static void fw_signed(fw_t *w, long long v)
{
    fw_int(w, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v, v < 0);
}

/* The length modifier and conversion at p ("%" already read): 'i' int,
 * 'u' unsigned, 'I'/'U' long, 'L'/'V' long long, 'z' size_t, 's', '%'; 0
 * for anything else (flags, width, precision, other conversions).
 * *adv: the characters it took. */
static char conv_at(const char *p, int *adv)
{
    switch (p[0]) {
    case 'd': *adv = 1; return 'i';
    case 'u': *adv = 1; return 'u';
    case 's': *adv = 1; return 's';
    case '%': *adv = 1; return '%';
    case 'z': *adv = 2; return p[1] == 'u' ? 'z' : 0;
    case 'l':
        if (p[1] == 'd' || p[1] == 'u') {
            *adv = 2;
            return p[1] == 'd' ? 'I' : 'U';
        }
        if (p[1] == 'l' && (p[2] == 'd' || p[2] == 'u')) {
            *adv = 3;
            return p[2] == 'd' ? 'L' : 'V';
        }
        return 0;
    default: return 0;
    }
}

int ddp_vfmt(char *buf, size_t n, const char *fmt, va_list ap)
{
    /* One pass; a conversion it does not do starts over with vsnprintf on
     * a copy of the arguments taken before any was read. */
    va_list again;
    va_copy(again, ap);
    fw_t w = {buf, n, 0};
    const char *p = fmt;
    for (const char *q; (q = strchr(p, '%'));) {
        fw_mem(&w, p, (size_t)(q - p));
        int adv = 0;
        switch (conv_at(q + 1, &adv)) {
        case 'i': fw_signed(&w, va_arg(ap, int)); break;
        case 'u': fw_int(&w, va_arg(ap, unsigned), 0); break;
        case 'I': fw_signed(&w, va_arg(ap, long)); break;
        case 'U': fw_int(&w, va_arg(ap, unsigned long), 0); break;
        case 'L': fw_signed(&w, va_arg(ap, long long)); break;
        case 'V': fw_int(&w, va_arg(ap, unsigned long long), 0); break;
        case 'z': fw_int(&w, va_arg(ap, size_t), 0); break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            s = s ? s : "(null)";
            fw_mem(&w, s, strlen(s));
            break;
        }
        case '%': fw_mem(&w, "%", 1); break;
        default: {
            int r = vsnprintf(buf, n, fmt, again);
            va_end(again);
            return r;
        }
        }
        p = q + 1 + adv;
    }
    va_end(again);
    fw_mem(&w, p, strlen(p));
    if (n)
        buf[w.len < n ? w.len : n - 1] = '\0';
    return (int)w.len;
}

int ddp_fmt(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = ddp_vfmt(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

size_t ddp_utf8_seq(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (n == 0)
        return 0;
    if (p[0] < 0x80)
        return 1;
    /* RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF. */
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        len = 2;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        len = 3;
        if (p[0] == 0xE0)
            lo = 0xA0;
        else if (p[0] == 0xED)
            hi = 0x9F;
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        len = 4;
        if (p[0] == 0xF0)
            lo = 0x90;
        else if (p[0] == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return len;
}

void ddp_utf8_escape(char *s, size_t cap)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = ddp_utf8_seq(s + i, n - i);
        if (k) {
            i += k;
            continue;
        }
        /* One byte becomes four ("\xNN"): the tail moves, cut to fit. */
        if (n + 3 >= cap)
            n = cap > 4 ? cap - 4 : 0;
        if (i >= n) {
            s[n] = '\0';
            break;
        }
        unsigned char b = (unsigned char)s[i];
        memmove(s + i + 4, s + i + 1, n - i - 1);
        n += 3;
        s[n] = '\0';
        static const char hex[] = "0123456789abcdef";
        s[i] = '\\';
        s[i + 1] = 'x';
        s[i + 2] = hex[b >> 4];
        s[i + 3] = hex[b & 15];
        i += 4;
    }
}
