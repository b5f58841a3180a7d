/* tests/store_conformance.c — the semantics every store must show (see
 * store_conformance.h). Values follow our TCPStore server's documented
 * behaviour (docs/store-protocol.md). */
#include "store_conformance.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/sys.h"
#include "test.h"

/* ------------------------------------------------ delayed helper thread */

struct ddp_test_later {
    pthread_t th;
    ddp_store_t *st;
    char key[256], val[256];
    int ms, push, rc;
};

static void *later_main(void *arg)
{
    ddp_test_later_t *l = arg;
    ddp_sys_t *sys = l->st->sys;
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, l->ms * DDP_NS_PER_MS));
    int64_t dl = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S);
    l->rc = l->push ? ddp_store_queue_push(l->st, l->key, l->val,
                                           strlen(l->val), dl)
                    : ddp_store_set_str(l->st, l->key, l->val, dl);
    /* SET/PUSH have no reply: make sure it reached a tcp server. */
    if (l->rc == 0)
        l->rc = ddp_store_ping(l->st, dl);
    return NULL;
}

static ddp_test_later_t *later(ddp_store_t *st, const char *key,
                               const char *val, int ms, int push)
{
    ddp_test_later_t *l = calloc(1, sizeof *l);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    l->st = st;
    snprintf(l->key, sizeof l->key, "%s", key);
    snprintf(l->val, sizeof l->val, "%s", val);
    l->ms = ms;
    l->push = push;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&l->th, NULL, later_main, l), 0);
    return l;
}

ddp_test_later_t *ddp_test_set_later(ddp_store_t *st, const char *key,
                                     const char *val, int ms)
{
    return later(st, key, val, ms, 0);
}

ddp_test_later_t *ddp_test_push_later(ddp_store_t *st, const char *key,
                                      const char *val, int ms)
{
    return later(st, key, val, ms, 1);
}

int ddp_test_later_join(ddp_test_later_t *l)
{
    pthread_join(l->th, NULL);
    int rc = l->rc;
    free(l);
    return rc;
}

/* ---------------------------------------------------------- the checks */

static int64_t dl_ms(ddp_store_t *st, int ms)
{
    return ddp_sys_deadline_in(st->sys, ms * DDP_NS_PER_MS);
}

/* Key "<tag>/<name>" in a static rotating buffer. */
static const char *K(const char *tag, const char *name)
{
    static char bufs[8][256];
    static int i;
    char *b = bufs[i++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", tag, name);
    return b;
}

static int buf_is(const ddp_buf_t *b, const char *s)
{
    return b->data && b->len == strlen(s) && memcmp(b->data, s, b->len) == 0;
}

static void get_is(ddp_store_t *st, const char *key, const char *want)
{
    ddp_buf_t b = {0};
    CU_ASSERT_EQUAL(ddp_store_get(st, key, &b, dl_ms(st, 3000)), 0);
    CU_ASSERT(buf_is(&b, want));
    if (!buf_is(&b, want))
        fprintf(stderr, "get %s: \"%.*s\", want \"%s\"\n", key, (int)b.len,
                b.data ? (const char *)b.data : "", want);
    ddp_buf_free(&b);
}

static void set_get_binary(ddp_store_t *st, const char *tag)
{
    const uint8_t bin[] = {0, 1, 2, 0xFF, 0, 'x'};
    const char *k = K(tag, "bin");
    CU_ASSERT_EQUAL(ddp_store_set(st, k, bin, sizeof bin, dl_ms(st, 3000)), 0);
    ddp_buf_t b = {0};
    CU_ASSERT_EQUAL(ddp_store_get(st, k, &b, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(b.len, sizeof bin);
    CU_ASSERT(b.data && memcmp(b.data, bin, sizeof bin) == 0);
    ddp_buf_free(&b);
    /* Overwrite, and the empty value. */
    CU_ASSERT_EQUAL(ddp_store_set_str(st, k, "", dl_ms(st, 3000)), 0);
    get_is(st, k, "");
    CU_ASSERT_EQUAL(ddp_store_set_str(st, k, "v2", dl_ms(st, 3000)), 0);
    get_is(st, k, "v2");
}

static void get_absent_times_out(ddp_store_t *st, const char *tag)
{
    const char *k = K(tag, "never");
    ddp_buf_t b = {0};
    CU_ASSERT_EQUAL(ddp_store_get(st, k, &b, dl_ms(st, 100)), DDP_ETIMEOUT);
    CU_ASSERT_PTR_NULL(b.data);
    const char *msg = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "never"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Timed out"));
    /* The store still works after a timeout. */
    CU_ASSERT_EQUAL(ddp_store_ping(st, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_set_str(st, k, "now", dl_ms(st, 3000)), 0);
    get_is(st, k, "now");
}

static void get_blocks_until_set(ddp_store_t *st, ddp_store_t *other,
                                 const char *tag)
{
    const char *k = K(tag, "late");
    ddp_test_later_t *l = ddp_test_set_later(other, k, "arrived", 50);
    get_is(st, k, "arrived");
    CU_ASSERT_EQUAL(ddp_test_later_join(l), 0);
}

static void add_ascii(ddp_store_t *st, const char *tag)
{
    const char *k = K(tag, "ctr");
    int64_t v = -1;
    CU_ASSERT_EQUAL(ddp_store_add(st, k, 1, &v, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(ddp_store_add(st, k, 2, &v, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(v, 3);
    get_is(st, k, "3");
    CU_ASSERT_EQUAL(ddp_store_add(st, k, -10, &v, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(v, -7);
    get_is(st, k, "-7");
    CU_ASSERT_EQUAL(ddp_store_add(st, k, 0, &v, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(v, -7);
    /* A counter set by hand as text counts from there. */
    const char *k2 = K(tag, "ctr2");
    CU_ASSERT_EQUAL(ddp_store_set_str(st, k2, "40", dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_add(st, k2, 2, &v, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(v, 42);
}

static void check_and_wait(ddp_store_t *st, ddp_store_t *other,
                           const char *tag)
{
    const char *a = K(tag, "wa"), *b = K(tag, "wb");
    const char *ab[2] = {a, b};
    CU_ASSERT_EQUAL(ddp_store_set_str(st, a, "1", dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_check(st, ab, 1, dl_ms(st, 3000)), 1);
    CU_ASSERT_EQUAL(ddp_store_check(st, ab, 2, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_check(st, ab + 1, 1, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_check(st, NULL, 0, dl_ms(st, 3000)), 1);
    CU_ASSERT_EQUAL(ddp_store_wait(st, ab, 1, dl_ms(st, 3000)), 0);
    /* Mixed present/absent: times out naming only the missing key (with
     * how many were waited on), then works. */
    CU_ASSERT_EQUAL(ddp_store_wait(st, ab, 2, dl_ms(st, 100)), DDP_ETIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "wb] (1 of the 2 waited on)"));
    CU_ASSERT_PTR_NULL(strstr(ddp_err_message(), a));
    CU_ASSERT(ddp_err_ctx()->waited_ns >= 0);
    /* None there: every key, as waited on, and no count. */
    const char *cd[2] = {K(tag, "wc"), K(tag, "wd")};
    CU_ASSERT_EQUAL(ddp_store_wait(st, cd, 2, dl_ms(st, 100)), DDP_ETIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "wc"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "wd]"));
    CU_ASSERT_PTR_NULL(strstr(ddp_err_message(), "waited on"));
    ddp_test_later_t *l = ddp_test_set_later(other, b, "2", 50);
    CU_ASSERT_EQUAL(ddp_store_wait(st, ab, 2, dl_ms(st, 5000)), 0);
    CU_ASSERT_EQUAL(ddp_test_later_join(l), 0);
    CU_ASSERT_EQUAL(ddp_store_check(st, ab, 2, dl_ms(st, 3000)), 1);
}

static void compare_set(ddp_store_t *st, const char *tag)
{
    const char *k = K(tag, "cas");
    ddp_buf_t out = {0};
    /* Missing + non-empty expected: nothing stored, reply = expected. */
    CU_ASSERT_EQUAL(ddp_store_compare_set(st, k, "x", 1, "y", 1, &out,
                                          dl_ms(st, 3000)),
                    0);
    CU_ASSERT(buf_is(&out, "x"));
    ddp_buf_free(&out);
    CU_ASSERT_EQUAL(ddp_store_check(st, &k, 1, dl_ms(st, 3000)), 0);
    /* Missing + empty expected: created. */
    CU_ASSERT_EQUAL(ddp_store_compare_set(st, k, "", 0, "first", 5, &out,
                                          dl_ms(st, 3000)),
                    0);
    CU_ASSERT(buf_is(&out, "first"));
    ddp_buf_free(&out);
    /* Present, mismatch: unchanged. */
    CU_ASSERT_EQUAL(ddp_store_compare_set(st, k, "nope", 4, "second", 6, &out,
                                          dl_ms(st, 3000)),
                    0);
    CU_ASSERT(buf_is(&out, "first"));
    ddp_buf_free(&out);
    /* Present, match: swapped. */
    CU_ASSERT_EQUAL(ddp_store_compare_set(st, k, "first", 5, "second", 6,
                                          &out, dl_ms(st, 3000)),
                    0);
    CU_ASSERT(buf_is(&out, "second"));
    ddp_buf_free(&out);
    get_is(st, k, "second");
}

static void numkeys_delete_append(ddp_store_t *st, const char *tag)
{
    int64_t n0 = -1, n = -1;
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &n0, dl_ms(st, 3000)), 0);
    CU_ASSERT(n0 >= 0);
    const char *k = K(tag, "del");
    CU_ASSERT_EQUAL(ddp_store_set_str(st, k, "v", dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &n, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(n, n0 + 1);
    CU_ASSERT_EQUAL(ddp_store_delete_key(st, k, dl_ms(st, 3000)), 1);
    CU_ASSERT_EQUAL(ddp_store_delete_key(st, k, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &n, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(n, n0);
    CU_ASSERT_EQUAL(ddp_store_check(st, &k, 1, dl_ms(st, 3000)), 0);

    const char *ka = K(tag, "app");
    CU_ASSERT_EQUAL(ddp_store_append(st, ka, "ab", 2, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_append(st, ka, "cd", 2, dl_ms(st, 3000)), 0);
    get_is(st, ka, "abcd");
}

static void multi(ddp_store_t *st, ddp_store_t *other, const char *tag)
{
    char k0[64], k1[64], k2[64];
    snprintf(k0, sizeof k0, "%s/m0", tag);
    snprintf(k1, sizeof k1, "%s/m1", tag);
    snprintf(k2, sizeof k2, "%s/m2", tag);
    const char *ks[3] = {k0, k1, k2};
    ddp_buf_t vals[2] = {{(uint8_t *)"zero", 4}, {(uint8_t *)"", 0}};
    CU_ASSERT_EQUAL(ddp_store_multi_set(st, ks, vals, 2, dl_ms(st, 3000)), 0);
    ddp_buf_t out[3] = {{0}};
    CU_ASSERT_EQUAL(ddp_store_multi_get(st, ks, 2, out, dl_ms(st, 3000)), 0);
    CU_ASSERT(buf_is(&out[0], "zero"));
    CU_ASSERT(buf_is(&out[1], ""));
    ddp_buf_free(&out[0]);
    ddp_buf_free(&out[1]);
    /* multi_get waits for every key. */
    CU_ASSERT_EQUAL(ddp_store_multi_get(st, ks, 3, out, dl_ms(st, 100)),
                    DDP_ETIMEOUT);
    ddp_test_later_t *l = ddp_test_set_later(other, k2, "two", 50);
    CU_ASSERT_EQUAL(ddp_store_multi_get(st, ks, 3, out, dl_ms(st, 5000)), 0);
    CU_ASSERT_EQUAL(ddp_test_later_join(l), 0);
    CU_ASSERT(buf_is(&out[2], "two"));
    for (int i = 0; i < 3; i++)
        ddp_buf_free(&out[i]);
    CU_ASSERT_EQUAL(ddp_store_multi_set(st, NULL, NULL, 0, dl_ms(st, 3000)),
                    0);
}

static void queues(ddp_store_t *st, ddp_store_t *other, const char *tag)
{
    const char *q = K(tag, "q");
    int64_t n = -1, keys0 = -1, keys1 = -1;
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &keys0, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_queue_len(st, q, &n, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(ddp_store_queue_push(st, q, "a", 1, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_queue_push(st, q, "bb", 2, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_queue_len(st, q, &n, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(n, 2);
    /* Queues are not keys. */
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &keys1, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(keys1, keys0);
    /* ... but a non-empty queue makes its key exist for CHECK. */
    CU_ASSERT_EQUAL(ddp_store_check(st, &q, 1, dl_ms(st, 3000)), 1);
    ddp_buf_t b = {0};
    CU_ASSERT_EQUAL(ddp_store_queue_pop(st, q, &b, dl_ms(st, 3000)), 0);
    CU_ASSERT(buf_is(&b, "a"));
    ddp_buf_free(&b);
    CU_ASSERT_EQUAL(ddp_store_queue_pop(st, q, &b, dl_ms(st, 3000)), 0);
    CU_ASSERT(buf_is(&b, "bb"));
    ddp_buf_free(&b);
    CU_ASSERT_EQUAL(ddp_store_queue_pop(st, q, &b, dl_ms(st, 100)),
                    DDP_ETIMEOUT);
    CU_ASSERT_PTR_NULL(b.data);
    /* A blocking pop is woken by a push. */
    ddp_test_later_t *l = ddp_test_push_later(other, q, "late", 50);
    CU_ASSERT_EQUAL(ddp_store_queue_pop(st, q, &b, dl_ms(st, 5000)), 0);
    CU_ASSERT_EQUAL(ddp_test_later_join(l), 0);
    CU_ASSERT(buf_is(&b, "late"));
    ddp_buf_free(&b);
    CU_ASSERT_EQUAL(ddp_store_queue_len(st, q, &n, dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(n, 0);
}

static void list_keys(ddp_store_t *st, const char *tag)
{
    const char *a = K(tag, "la"), *b = K(tag, "lb");
    CU_ASSERT_EQUAL(ddp_store_set_str(st, a, "1", dl_ms(st, 3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_set_str(st, b, "2", dl_ms(st, 3000)), 0);
    char **ks = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_store_list_keys(st, &ks, &n, dl_ms(st, 3000)),
                          0);
    int ia = -1, ib = -1;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(ks[i], a))
            ia = (int)i;
        if (!strcmp(ks[i], b))
            ib = (int)i;
        CU_ASSERT(ks[i][0] != '/'); /* the wire prefix never leaks */
    }
    CU_ASSERT(ia >= 0 && ib > ia); /* both, in insertion order */
    int64_t nk = -1;
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &nk, dl_ms(st, 3000)), 0);
    CU_ASSERT(nk >= (int64_t)n);
    ddp_store_free_keys(ks, n);
}

void ddp_test_store_conformance(ddp_store_t *st, ddp_store_t *other,
                                const char *tag)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(other);
    CU_ASSERT_EQUAL(ddp_store_ping(st, dl_ms(st, 3000)), 0);
    set_get_binary(st, tag);
    get_absent_times_out(st, tag);
    get_blocks_until_set(st, other, tag);
    add_ascii(st, tag);
    check_and_wait(st, other, tag);
    compare_set(st, tag);
    numkeys_delete_append(st, tag);
    multi(st, other, tag);
    queues(st, other, tag);
    list_keys(st, tag);
    /* Argument checks are the wrappers', the same for every store. */
    CU_ASSERT_EQUAL(ddp_store_set(st, NULL, "x", 1, dl_ms(st, 10)), -EINVAL);
    CU_ASSERT_EQUAL(ddp_store_get(st, "k", NULL, dl_ms(st, 10)), -EINVAL);
}
