/* ddp/export.h — DDP_API marks the public API: the library is built with
 * -fvisibility=hidden, so libddpsim.so exports exactly the functions the
 * public headers declare with it (tests/exports-check.sh compares the two).
 * Internal functions (ddp__*, statics across files) stay hidden. */
#ifndef DDP_EXPORT_H
#define DDP_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define DDP_API __attribute__((visibility("default")))
#else
#define DDP_API
#endif

#endif
