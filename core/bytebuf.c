/* core/bytebuf.c — the store code's growable byte buffer (bytebuf.h). */
#include "bytebuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ddp__bb_reserve(ddp__bb_t *b, size_t n, size_t first_cap)
{
    if (b->off && b->off == b->len)
        b->off = b->len = 0;
    if (b->cap - b->len >= n)
        return 0;
    size_t pending = b->len - b->off;
    size_t nc = b->cap ? b->cap : first_cap;
    while (nc - pending < n) {
        if (nc > SIZE_MAX / 2)
            return -ENOMEM;
        nc *= 2;
    }
    return ddp__bb_grow(b, nc);
}

int ddp__bb_grow(ddp__bb_t *b, size_t cap)
{
    if (b->off) { /* reuse the consumed prefix */
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (cap <= b->cap)
        return 0;
    uint8_t *d = realloc(b->data, cap);
    if (!d)
        return -ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

void ddp__bb_put(ddp__bb_t *b, const void *p, size_t n)
{
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

void ddp__bb_consume(ddp__bb_t *b, size_t n) { b->off += n; }

void ddp__bb_trim(ddp__bb_t *b, size_t keep)
{
    if (b->off != b->len)
        return;
    b->off = b->len = 0;
    if (b->cap > keep) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
}

int ddp__bb_shrink(ddp__bb_t *b, size_t keep)
{
    size_t pending = b->len - b->off;
    if (pending > keep || b->cap <= keep)
        return 0;
    uint8_t *d = malloc(keep ? keep : 1);
    if (!d)
        return -ENOMEM;
    if (pending)
        memcpy(d, b->data + b->off, pending);
    free(b->data);
    b->data = d;
    b->off = 0;
    b->len = pending;
    b->cap = keep;
    return 0;
}

void ddp__bb_free(ddp__bb_t *b)
{
    free(b->data);
    *b = (ddp__bb_t){0};
}
