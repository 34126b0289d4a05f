/* opcore/iter.h — walking one or more tensors of any rank, strides and
 * dtypes together, with NumPy broadcasting, in contiguous runs.
 *
 *     oc_tensor *out = oc_dst_tensor();
 *     oc_iter it;
 *     oc_iter_init(&it, 1, OC_TENSORS(out, x, bias), 0);  // 1 output first, then inputs
 *     oc_iter_share(&it);                                 // multicore: this core's part
 *     while (oc_iter_next(&it)) {
 *         float *o = it.ptr[0];
 *         const float *a = it.ptr[1], *b = it.ptr[2];
 *         int64_t n = it.len;
 *         if (oc_iter_contiguous(&it))          // every stride 1: the compiler vectorises
 *             for (int64_t i = 0; i < n; i++) o[i] = a[i] + b[i];
 *         else                                  // broadcast (stride 0), transposed, sliced
 *             for (int64_t i = 0; i < n; i++)
 *                 o[i * it.stride[0]] = a[i * it.stride[1]] + b[i * it.stride[2]];
 *     }
 *
 * The walk is a sequence of *runs*: `len` elements where tensor k's elements
 * are at ptr[k] + i * stride[k] (stride in tensor k's own elements). Before
 * walking, the iterator
 *   - broadcasts the inputs against each other (NumPy rules: shapes are
 *     aligned at the last dim; a size-1 or missing dim repeats, with stride 0);
 *   - drops size-1 dims and merges dims that are contiguous in every tensor,
 *     so dense tensors are a single run of numel elements, and a slice or a
 *     broadcast row gives runs as long as its rows;
 *   - picks the innermost dim from the strides (the outputs' first), flips
 *     dims that every tensor walks backwards, and, when one tensor is laid
 *     out across the others (a transpose), walks the two dims in tiles so
 *     both stay in cache.
 * The order of the runs is therefore the iterator's choice; pass
 * OC_ITER_ROW_MAJOR to walk in the row-major order of the broadcast shape
 * (run positions are then flattened indices, as for oc_tensor_to_tcm).
 *
 * Outputs (the first `nout` tensors) must have exactly the broadcast shape
 * and be writable; they may be the same memory as an input (in place) but
 * must not partly overlap one. Any dtype mix is allowed: the iterator moves
 * pointers, the kernel reads and converts the values (see opcore/vec.h for
 * bfloat16 and float16 runs).
 *
 * A NULL tensor (an optional `Tensor?` argument that is None) is skipped:
 * it takes no part in the broadcast shape, its ptr is NULL in every run and
 * its stride 0. Outputs cannot be NULL. For a `Tensor[]` list, build the
 * pointer array from its items (`ts[i] = &list.items[i]`).
 *
 * To walk every dim but one (a softmax along `dim`, a reduction), iterate
 * over views whose `dim` has size 1 (copy the oc_tensor struct and set
 * sizes[dim] = 1): each run element is then the start of a line along `dim`,
 * which the kernel walks with the tensor's own stride.
 *
 * Errors (shapes that do not broadcast, a read-only or wrongly shaped
 * output, a meta tensor, too many tensors) end the running kernel with a
 * message naming the tensor, like every opcore call; outside a kernel
 * oc_iter_init returns the status and oc_errmsg() says why.
 */
#ifndef OPCORE_ITER_H
#define OPCORE_ITER_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"
#include "tensor_ops.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most tensors one iterator walks together. */
#define OC_ITER_MAX_TENSORS 16

/* Flags for oc_iter_init. */
enum {
    /* Walk in the row-major order of the broadcast shape: no reordering,
     * flipping or tiling; `pos` is the flattened index of each run. */
    OC_ITER_ROW_MAJOR = 1u << 0,
    /* Allow outputs whose elements share memory (a stride-0, expanded
     * view): such elements are written several times, by several cores in
     * a multicore op. Without it that is an error. */
    OC_ITER_ALLOW_OVERLAP = 1u << 1
};

/* The walk's private state (see src/kernel/iter.c); kernels read only the
 * public fields of oc_iter. */
struct oc__iter_state {
    int32_t nact, nlev;
    bool unit;                                       /* every stride 1 */
    int8_t act[OC_ITER_MAX_TENSORS];                 /* the non-NULL tensors */
    int64_t n0, n1, tw, th;                          /* two inner dims; tile width, height */
    int64_t ntw, nth;                                /* tiles across dim 0, dim 1 */
    int64_t step0[OC_ITER_MAX_TENSORS], step1[OC_ITER_MAX_TENSORS]; /* bytes */
    int64_t lsize[OC_MAX_DIMS];                      /* outer dims 2.. */
    int64_t lstep[OC_ITER_MAX_TENSORS][OC_MAX_DIMS]; /* bytes */
    int64_t idx[OC_MAX_DIMS];
    int64_t ty, tx, row, off, rows, cols;            /* tile, row in it, offset; its size */
    char *base[OC_ITER_MAX_TENSORS];                 /* element 0 of the walk */
    int64_t curoff[OC_ITER_MAX_TENSORS];             /* the current row's start, bytes */
    int64_t next, hi, share_align;
};

typedef struct oc_iter {
    /* ---- the current run: valid after oc_iter_next returned true -------- */
    int64_t len;                           /* elements in the run (> 0) */
    void *ptr[OC_ITER_MAX_TENSORS];        /* tensor k's element 0 of the run */
    int64_t stride[OC_ITER_MAX_TENSORS];   /* tensor k's step within the run, in its
                                              elements: 1 dense, 0 broadcast, or any */
    int64_t pos;                           /* position of the run's first element in
                                              the walk (0 .. numel-1) */

    /* ---- the whole walk: set by oc_iter_init ----------------------------- */
    int32_t ntensors;                      /* tensors walked (outputs first) */
    int32_t nout;                          /* how many of them are outputs */
    int32_t ndim;                          /* rank of the broadcast shape */
    int64_t shape[OC_MAX_DIMS];            /* the broadcast shape */
    int64_t numel;                         /* its number of elements */

    /* ---- private: the walk's state ---------------------------------------- */
    struct oc__iter_state oc__;
} oc_iter;

/* Prepare a walk over `n` tensors, the first `nout` of them outputs.
 * OC_TENSORS(out, x, y) supplies `n, tensors`. Starts at the first run of
 * the whole walk. */
OC_API oc_status oc_iter_init(oc_iter *it, int nout, int n, const oc_tensor *const *tensors,
                              unsigned flags);

/* The next run into len / ptr / pos (stride is fixed for the whole walk);
 * false when the walk (or the range set below) is done. */
OC_API bool oc_iter_next(oc_iter *it);

/* Limit the walk to positions [lo, hi) (clamped to [0, numel)) and restart
 * it there; runs are cut at both ends. oc_iter_range(it, 0, it->numel)
 * restarts the whole walk. */
OC_API void oc_iter_range(oc_iter *it, int64_t lo, int64_t hi);

/* Limit the walk to part `id` of `count` near-equal parts (ranges aligned so
 * that parts do not share the output's cache lines where the layout allows). */
OC_API void oc_iter_part(oc_iter *it, uint32_t id, uint32_t count);

/* This core's part in a multicore op: oc_iter_part(it, oc_cpu_id(),
 * oc_cpu_count()). In a single-core op the whole walk. */
OC_API void oc_iter_share(oc_iter *it);

/* True if every tensor's stride in this walk is 1 (NULL tensors aside):
 * the run is plain arrays, the loop the compiler vectorises. */
static inline bool oc_iter_contiguous(const oc_iter *it) { return it->oc__.unit; }

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_ITER_H */
