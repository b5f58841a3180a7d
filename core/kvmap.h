/* core/kvmap.h — the stores' key table, internal: a chained hash table
 * (FNV-1a, power-of-two buckets, doubled once it holds as many keys as
 * buckets) with an insertion-order list, so listing keys is deterministic
 * whatever the hash.
 *
 * Intrusive: a user's entry struct starts with a ddp__kv_node_t and the
 * map allocates it (ddp__kv_get with the entry's size, zeroed), so the
 * node pointer is the entry pointer. Keys are bytes (any value, any
 * length); the map keeps a copy with a NUL after it. */
#ifndef DDP_KVMAP_H
#define DDP_KVMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct ddp__kv_node {
    struct ddp__kv_node *hnext;        /* bucket chain */
    struct ddp__kv_node *oprev, *onext; /* insertion order */
    uint64_t hash;
    char *key; /* klen bytes, then a NUL */
    size_t klen;
} ddp__kv_node_t;

typedef struct ddp__kvmap {
    ddp__kv_node_t **buckets;
    size_t nbuckets, n;
    ddp__kv_node_t *ohead, *otail; /* insertion order */
} ddp__kvmap_t;

/* An empty map with nbuckets (a power of two) buckets; 0 or -ENOMEM. */
int ddp__kv_init(ddp__kvmap_t *m, size_t nbuckets);
ddp__kv_node_t *ddp__kv_find(const ddp__kvmap_t *m, const void *key,
                             size_t klen);
/* The node for key, created when missing as a zeroed block of size bytes
 * (the user's entry, node first). NULL only when out of memory. */
ddp__kv_node_t *ddp__kv_get(ddp__kvmap_t *m, const void *key, size_t klen,
                            size_t size);
/* Unlinks e and frees it with its key (the caller freed its payload). */
void ddp__kv_remove(ddp__kvmap_t *m, ddp__kv_node_t *e);
/* Frees every node (fini, when not NULL, frees each one's payload first)
 * and the table. */
void ddp__kv_free(ddp__kvmap_t *m, void (*fini)(ddp__kv_node_t *e));

#endif
