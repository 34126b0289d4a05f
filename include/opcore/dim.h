/* opcore/dim.h — size arithmetic that dynamic shapes can follow.
 *
 * Under torch.compile(dynamic=True), torch.export with a Dim and jax.export
 * with a symbolic dimension, a size is a symbol, not a number. opcore still
 * runs shape functions in plain C on numbers, then explains each result size
 * in terms of the input sizes (see oc_op_trace_shapes in host.h):
 *
 *   - a size copied from an input (oc_empty_like(x), x->sizes[0]) stays
 *     that input's symbol;
 *   - a constant (OC_SHAPE(x->sizes[0], 10)) stays a constant;
 *   - arithmetic on sizes must go through these helpers, which compute the
 *     plain value and record how it was made:
 *
 *         int64_t rows = oc_dim_div(oc_numel(x), x->sizes[x->ndim - 1]);
 *         int64_t out_h = oc_dim_add(oc_dim_div(oc_dim_sub(oc_dim_add(h, 2 * pad), k), stride), 1);
 *
 *     (2 * pad is fine: pad is not a size). oc_numel records its product.
 *
 * Plain C arithmetic on a dynamic size (x->sizes[0] * 2), a C branch on it
 * (n > 4 ? 4 : 3) or a plain C min gives the right number in eager calls,
 * but under a dynamic-shape tracer it is an error that points here, never
 * a silent constant: the tracer runs the shape function with several probe
 * sizes (large ones and small ones, 2, 3, ...) and refuses a result that no
 * oc_dim_* expression explains in every run. (A branch whose outcome is
 * the same at every probe size, e.g. on n > 100000, is not seen: write it
 * with oc_dim_if_gt.) All helpers are ordinary functions in kernels too.
 *
 * The helpers are checked: a result that overflows int64 (oc_dim_mul of two
 * huge sizes) fails the running shape function or kernel with an error
 * naming the op, instead of wrapping to a size that looks valid. A shape
 * function's results are checked too: a tensor whose element count (or byte
 * count) overflows int64 is refused before any framework sees its shape.
 */
#ifndef OPCORE_DIM_H
#define OPCORE_DIM_H

#include <stdint.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

OC_API int64_t oc_dim_add(int64_t a, int64_t b);      /* a + b */
OC_API int64_t oc_dim_sub(int64_t a, int64_t b);      /* a - b */
OC_API int64_t oc_dim_mul(int64_t a, int64_t b);      /* a * b */
OC_API int64_t oc_dim_div(int64_t a, int64_t b);      /* floor(a / b); b > 0 */
OC_API int64_t oc_dim_ceil_div(int64_t a, int64_t b); /* ceil(a / b); b > 0 */
OC_API int64_t oc_dim_mod(int64_t a, int64_t b);      /* a mod b, in [0, b); b > 0 */
OC_API int64_t oc_dim_min(int64_t a, int64_t b);
OC_API int64_t oc_dim_max(int64_t a, int64_t b);

/* a > b ? x : y, for a branch on a size: a C `if (n > 4)` (or a plain C
 * min) on a dynamic size cannot be followed, and is an error under a
 * dynamic-shape tracer; this stays symbolic. Made of the helpers above
 * (y + (x - y) * min(max(a - b, 0), 1)), so a >= b is oc_dim_if_gt(a, b - 1,
 * x, y) and a clamp is oc_dim_min / oc_dim_max. */
OC_API int64_t oc_dim_if_gt(int64_t a, int64_t b, int64_t x, int64_t y);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_DIM_H */
