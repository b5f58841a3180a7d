/* tests/fuzz/fuzz.h — what the harnesses share. Each defines a static
 * `int NAME_one(const uint8_t *data, size_t size)` returning non-zero when
 * the input breaks its property, and DDP_FUZZ_ENTRY(NAME_one) makes that the
 * libFuzzer entry point (a broken property aborts: libFuzzer then keeps the
 * input as the reproducer). tests/test_fuzz.c defines DDP_FUZZ_NO_ENTRY to
 * call the NAME_one functions itself. */
#ifndef DDP_FUZZ_H
#define DDP_FUZZ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef DDP_FUZZ_NO_ENTRY
#define DDP_FUZZ_ENTRY(one)
#else
#define DDP_FUZZ_ENTRY(one)                                                    \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);              \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)               \
    {                                                                          \
        if (one(data, size))                                                   \
            abort();                                                           \
        return 0;                                                              \
    }
#endif

/* The input as a NUL-terminated string (malloc'd; NULL when out of memory). */
static inline char *fuzz_cstr(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, d, n);
        s[n] = '\0';
    }
    return s;
}

#endif
