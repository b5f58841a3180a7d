/* ddp/fmt.h — snprintf for hot paths.
 *
 * ddp_fmt and ddp_vfmt keep snprintf's contract (at most n - 1 bytes and
 * a NUL stored, the full length returned) and format %s, %d, %u, %ld, %lu,
 * %lld, %llu, %zu and %% themselves; any other conversion, flag, width or
 * precision in fmt hands the whole call to vsnprintf. They are what a
 * simulated rank formats on every connect, key and trace line, where
 * printf's own cost (and its deep stack frame, a page per rank) showed in
 * the full plugin init. A plugin formatting its own keys may use them. */
#ifndef DDP_FMT_H
#define DDP_FMT_H

#include <stdarg.h>
#include <stddef.h>

#include "ddp/export.h"

#ifdef __cplusplus
extern "C" {
#endif

DDP_API int ddp_fmt(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
DDP_API int ddp_vfmt(char *buf, size_t n, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* The length of the valid UTF-8 sequence at s[0..n) (1 for ASCII), or 0
 * when it is not one (a stray byte, an overlong form, a surrogate). */
DDP_API size_t ddp_utf8_seq(const char *s, size_t n);
/* Rewrites each byte of the NUL-terminated s (in a buffer of cap bytes)
 * that is not part of valid UTF-8 as "\xNN", cutting the end to fit: text
 * from a file or the network is echoed in errors and JSON as valid text. */
DDP_API void ddp_utf8_escape(char *s, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
