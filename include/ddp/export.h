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

/* DDP_NOINLINE keeps a helper's buffers out of its caller's frame. For
 * helpers off the common path (an error report, rank 0's own work): every
 * simulated rank runs on a stack of its own, and each page a rank's deepest
 * wait touches is a page per rank (4 KiB x 16,384 ranks = 64 MiB). */
#if defined(__GNUC__) || defined(__clang__)
#define DDP_NOINLINE __attribute__((noinline))
#else
#define DDP_NOINLINE
#endif

#endif
