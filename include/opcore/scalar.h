/* opcore/scalar.h — the schema type `Scalar`: a tagged number.
 *
 * A kernel argument declared `Scalar` in the schema arrives as an oc_scalar
 * passed by value; read it with oc_scalar_to_double / _to_int64 whatever
 * the tag, or switch on the tag.
 */
#ifndef OPCORE_SCALAR_H
#define OPCORE_SCALAR_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oc_scalar_kind {
    OC_SCALAR_FLOAT = 0, /* value.f */
    OC_SCALAR_INT = 1,   /* value.i */
    OC_SCALAR_BOOL = 2   /* value.b */
} oc_scalar_kind;

typedef struct oc_scalar {
    int64_t kind; /* oc_scalar_kind (int64_t keeps the struct two words) */
    union {
        double f;
        int64_t i;
        bool b;
    } value;
} oc_scalar;

static inline oc_scalar oc_scalar_float(double v) { oc_scalar s = {OC_SCALAR_FLOAT, {.f = v}}; return s; }
static inline oc_scalar oc_scalar_int(int64_t v) { oc_scalar s = {OC_SCALAR_INT, {.i = v}}; return s; }
static inline oc_scalar oc_scalar_bool(bool v) { oc_scalar s = {OC_SCALAR_BOOL, {.b = v}}; return s; }

static inline double oc_scalar_to_double(oc_scalar s)
{
    return s.kind == OC_SCALAR_FLOAT ? s.value.f
         : s.kind == OC_SCALAR_INT   ? (double)s.value.i
                                     : (double)s.value.b;
}

static inline int64_t oc_scalar_to_int64(oc_scalar s)
{
    return s.kind == OC_SCALAR_FLOAT ? (int64_t)s.value.f
         : s.kind == OC_SCALAR_INT   ? s.value.i
                                     : (int64_t)s.value.b;
}

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_SCALAR_H */
