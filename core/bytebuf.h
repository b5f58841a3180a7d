/* core/bytebuf.h — a growable byte buffer, internal to the store code.
 *
 * Bytes [off, len) of data are pending: appended at len, consumed from off.
 * Room is made by first sliding the pending bytes back over the consumed
 * prefix, then by doubling the capacity (from a caller-chosen first size). */
#ifndef DDP_BYTEBUF_H
#define DDP_BYTEBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct ddp__bb {
    uint8_t *data;
    size_t off, len, cap;
} ddp__bb_t;

/* Bytes appended and not yet consumed. */
static inline size_t ddp__bb_pending(const ddp__bb_t *b)
{
    return b->len - b->off;
}

/* Room for n more bytes at data + len (first allocation: first_cap, then
 * doubling). 0 or -ENOMEM (the buffer is then unchanged but for a slide). */
int ddp__bb_reserve(ddp__bb_t *b, size_t n, size_t first_cap);
/* Slides the pending bytes to the front and makes the capacity at least
 * cap (exactly cap when it grows). 0 or -ENOMEM. */
int ddp__bb_grow(ddp__bb_t *b, size_t cap);
/* Appends n bytes (the caller reserved room). */
void ddp__bb_put(ddp__bb_t *b, const void *p, size_t n);
/* Marks n pending bytes consumed. */
void ddp__bb_consume(ddp__bb_t *b, size_t n);
/* Once nothing is pending: empty, and released when larger than keep. */
void ddp__bb_trim(ddp__bb_t *b, size_t keep);
/* When at most keep bytes are pending and the capacity is larger: they
 * move to a buffer of keep bytes, the larger one is released. 0, or
 * -ENOMEM (b unchanged). */
int ddp__bb_shrink(ddp__bb_t *b, size_t keep);
void ddp__bb_free(ddp__bb_t *b);

#endif
