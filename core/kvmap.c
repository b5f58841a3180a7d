/* core/kvmap.c — the stores' key table (kvmap.h). */
#include "kvmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t kv_hash(const uint8_t *p, size_t n)
{
    /* FNV-1a: fixed, so table layout is reproducible across runs. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int ddp__kv_init(ddp__kvmap_t *m, size_t nbuckets)
{
    memset(m, 0, sizeof *m);
    if (!(m->buckets = calloc(nbuckets, sizeof *m->buckets)))
        return -ENOMEM;
    m->nbuckets = nbuckets;
    return 0;
}

ddp__kv_node_t *ddp__kv_find(const ddp__kvmap_t *m, const void *key,
                             size_t klen)
{
    uint64_t h = kv_hash(key, klen);
    for (ddp__kv_node_t *e = m->buckets[h & (m->nbuckets - 1)]; e;
         e = e->hnext)
        if (e->hash == h && e->klen == klen &&
            (klen == 0 || memcmp(e->key, key, klen) == 0))
            return e;
    return NULL;
}

static void kv_rehash(ddp__kvmap_t *m)
{
    size_t nb = m->nbuckets * 2;
    ddp__kv_node_t **b = calloc(nb, sizeof *b);
    if (!b)
        return; /* keep the old table: longer chains, still correct */
    for (size_t i = 0; i < m->nbuckets; i++)
        for (ddp__kv_node_t *e = m->buckets[i], *next; e; e = next) {
            next = e->hnext;
            e->hnext = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = nb;
}

ddp__kv_node_t *ddp__kv_get(ddp__kvmap_t *m, const void *key, size_t klen,
                            size_t size)
{
    ddp__kv_node_t *e = ddp__kv_find(m, key, klen);
    if (e)
        return e;
    e = calloc(1, size);
    if (!e || !(e->key = malloc(klen + 1))) {
        free(e);
        return NULL;
    }
    if (klen)
        memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    e->klen = klen;
    e->hash = kv_hash(key, klen);
    if (m->n >= m->nbuckets)
        kv_rehash(m);
    size_t b = e->hash & (m->nbuckets - 1);
    e->hnext = m->buckets[b];
    m->buckets[b] = e;
    e->oprev = m->otail;
    if (m->otail)
        m->otail->onext = e;
    else
        m->ohead = e;
    m->otail = e;
    m->n++;
    return e;
}

void ddp__kv_remove(ddp__kvmap_t *m, ddp__kv_node_t *e)
{
    ddp__kv_node_t **pp = &m->buckets[e->hash & (m->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->oprev)
        e->oprev->onext = e->onext;
    else
        m->ohead = e->onext;
    if (e->onext)
        e->onext->oprev = e->oprev;
    else
        m->otail = e->oprev;
    m->n--;
    free(e->key);
    free(e);
}

void ddp__kv_free(ddp__kvmap_t *m, void (*fini)(ddp__kv_node_t *e))
{
    for (ddp__kv_node_t *e = m->ohead, *next; e; e = next) {
        next = e->onext;
        if (fini)
            fini(e);
        free(e->key);
        free(e);
    }
    free(m->buckets);
    memset(m, 0, sizeof *m);
}
