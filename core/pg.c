/* core/pg.c — what every process-group backend shares: element types,
 * reduction operators and the local reduction kernel. */
#include "ddp/pg.h"

#include <stdint.h>
#include <string.h>

/* The one table of element types: X(enum, C type, name, sum function). */
#define DDP__DTYPES(X)                                                         \
    X(DDP_INT32, int32_t, "int32", add_int32)                                  \
    X(DDP_INT64, int64_t, "int64", add_int64)                                  \
    X(DDP_FLOAT, float, "float", add_float)                                    \
    X(DDP_DOUBLE, double, "double", add_double)

size_t ddp_dtype_size(ddp_dtype_t t)
{
    switch (t) {
#define DDP__SIZE(e, ctype, name, addfn)                                              \
    case e:                                                                    \
        return sizeof(ctype);
        DDP__DTYPES(DDP__SIZE)
#undef DDP__SIZE
    default:
        return 0;
    }
}

const char *ddp_dtype_name(ddp_dtype_t t)
{
    switch (t) {
#define DDP__NAME(e, ctype, name, addfn)                                              \
    case e:                                                                    \
        return name;
        DDP__DTYPES(DDP__NAME)
#undef DDP__NAME
    default:
        return "?";
    }
}

const char *ddp_redop_name(ddp_redop_t op)
{
    switch (op) {
    case DDP_SUM:
        return "sum";
    case DDP_MAX:
        return "max";
    case DDP_MIN:
        return "min";
    default:
        return "?";
    }
}

/* Integer sums wrap (two's complement) like NCCL's and Gloo's do: signed
 * overflow would be undefined behaviour, so the add runs on the unsigned
 * type; converting back is implementation-defined, and modulo on every
 * compiler ddpsim supports. Floats add natively. */
static inline int32_t add_int32(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}
static inline int64_t add_int64(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline float add_float(float a, float b) { return a + b; }
static inline double add_double(double a, double b) { return a + b; }

/* Elements are moved with memcpy: buffers come from users and from offsets
 * into wire buffers, so they need not be aligned for the type (a typed
 * access would be undefined); compilers turn these into plain loads. */
#define DDP__REDUCE_LOOP(ctype, combine)                                       \
    do {                                                                       \
        uint8_t *a_ = acc;                                                     \
        const uint8_t *b_ = in;                                                \
        for (size_t i_ = 0; i_ < n; i_++) {                                    \
            ctype x_, y_;                                                      \
            memcpy(&x_, a_ + i_ * sizeof x_, sizeof x_);                       \
            memcpy(&y_, b_ + i_ * sizeof y_, sizeof y_);                       \
            x_ = combine;                                                      \
            memcpy(a_ + i_ * sizeof x_, &x_, sizeof x_);                       \
        }                                                                      \
    } while (0)

/* max/min keep acc unless `in` compares strictly greater/smaller, so a NaN
 * already in acc stays and a NaN arriving is ignored: the result never
 * depends on anything but the order of the inputs. */
#define DDP__REDUCE_TYPE(ctype, addfn)                                         \
    do {                                                                       \
        switch (op) {                                                          \
        case DDP_SUM:                                                          \
            DDP__REDUCE_LOOP(ctype, addfn(x_, y_));                            \
            break;                                                             \
        case DDP_MAX:                                                          \
            DDP__REDUCE_LOOP(ctype, y_ > x_ ? y_ : x_);                        \
            break;                                                             \
        case DDP_MIN:                                                          \
            DDP__REDUCE_LOOP(ctype, y_ < x_ ? y_ : x_);                        \
            break;                                                             \
        default:                                                               \
            break;                                                             \
        }                                                                      \
    } while (0)

void ddp_reduce_into(void *acc, const void *in, size_t n, ddp_dtype_t t,
                     ddp_redop_t op)
{
    switch (t) {
#define DDP__REDUCE_CASE(e, ctype, name, addfn)                                \
    case e:                                                                    \
        DDP__REDUCE_TYPE(ctype, addfn);                                        \
        break;
        DDP__DTYPES(DDP__REDUCE_CASE)
#undef DDP__REDUCE_CASE
    default:
        break;
    }
}
