/* tests/store_wire.h — TCPStore requests built by hand, byte by byte, for
 * the tests that check the server on the wire (test_store_server.c over
 * real sockets, test_store_hostile.c over a fake sys): they do not go
 * through our own client. */
#ifndef DDP_TEST_STORE_WIRE_H
#define DDP_TEST_STORE_WIRE_H

#include <stdint.h>
#include <string.h>

#include "test.h"

typedef struct msg {
    uint8_t b[1 << 16];
    size_t n;
} msg_t;

static inline void m_raw(msg_t *m, const void *p, size_t n)
{
    CU_ASSERT_FATAL(m->n + n <= sizeof m->b);
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static inline void m_u8(msg_t *m, uint8_t v) { m_raw(m, &v, 1); }
static inline void m_u32(msg_t *m, uint32_t v) { m_raw(m, &v, 4); }
static inline void m_u64(msg_t *m, uint64_t v) { m_raw(m, &v, 8); }
static inline void m_bytes(msg_t *m, const void *p, size_t n)
{
    m_u64(m, n);
    m_raw(m, p, n);
}
static inline void m_str(msg_t *m, const char *s) { m_bytes(m, s, strlen(s)); }

#endif
