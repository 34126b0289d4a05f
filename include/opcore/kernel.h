/* opcore/kernel.h — everything a kernel (compute source) may use.
 *
 * A kernel is a plain C function whose signature follows its op's schema
 * (the C type of each schema type is listed in args.h):
 *
 *     schema                              kernel prototype
 *     relu(Tensor x) -> Tensor            oc_tensor *relu(const oc_tensor *x);
 *     scale(Tensor x, float s) -> Tensor  oc_tensor *scale(const oc_tensor *x, double s);
 *     linear(Tensor x, Tensor w, Tensor? b) -> Tensor
 *                                         oc_tensor *linear(const oc_tensor *x, const oc_tensor *w,
 *                                                           const oc_tensor *b);   (b NULL: None)
 *     pool(Tensor x, int[2] k) -> Tensor  oc_tensor *pool(const oc_tensor *x, oc_int_list k);
 *     norm(Tensor x) -> (Tensor, Tensor)  void norm(const oc_tensor *x);
 *     sgd_(Tensor(a!) p, Tensor g, float lr) -> ()
 *                                         void sgd_(oc_tensor *p, const oc_tensor *g, double lr);
 *
 * Tensors arrive dense and row-major: every Tensor, Tensor? and Tensor[]
 * item a kernel receives (and the gradients a backward op receives, which
 * torch often hands over expanded, with stride 0) has oc_is_contiguous()
 * true, so `x->data` is a flat array of oc_numel(x) elements. opcore makes
 * a dense copy only when the caller's tensor is not contiguous (a
 * transpose, a slice, an expanded gradient); contiguous tensors are passed
 * as they are, at no cost. A `Tensor(a!)` argument or a result buffer that
 * is not contiguous is computed in a dense copy and written back into the
 * caller's elements after the kernel. An op whose kernel handles any
 * strides (through the accessors, the streams, oc_iter or oc_copy_) opts
 * out with `.strided = true` in its oc_def (library.h) and then gets the
 * caller's views as they are.
 *
 * Memory written by a kernel never aliases what it reads, as in torch: a
 * `Tensor(a!)` argument (or a result buffer given to oc_op_call) that has
 * internal overlap (a stride 0 from expand(), an overlapping as_strided
 * view) is refused, as is one sharing some memory with an input or with
 * another written tensor ("unsupported operation: some elements of the
 * input tensor and the written-to tensor refer to a single memory
 * location"); one that is the very same view as an input (`op(x, out=x)`,
 * `add_(x, x)`) is computed as if the input had been copied first (the
 * kernel reads a copy). Read-only arrays (a JAX array, a NumPy array or
 * memmap that is not writeable) are refused as `Tensor(a!)` arguments.
 *
 * An op with exactly one fresh `Tensor` result has a kernel returning
 * oc_tensor *; every other op (several results, `()`, `Tensor(a!)`) has a
 * kernel returning void that writes its results through
 * oc_dst_tensor_at(i) and its `Tensor(a!)` arguments in place.
 *
 * It runs on an opcore engine core, on an engine-owned stack of the op's
 * configured size, with that core's TCM (a private scratch arena):
 *
 *   - single-core op: one core runs it; it may create and return its result
 *     (copied into the caller's output) or write into oc_dst_tensor() and
 *     return that;
 *   - multicore op (built with --multicore, or `.multicore = true` in its
 *     oc_def): every core runs it at once; each writes its share of the
 *     results, split by oc_cpu_id() and oc_cpu_count(), and returns
 *     oc_dst_tensor() -- every core, even one with nothing to do -- or NULL
 *     on every core. A tensor a core made itself is refused, and so is a
 *     launch where some cores returned oc_dst_tensor() and others NULL (a
 *     core returning NULL may have skipped its share). Cores combine values
 *     with oc_barrier() and the oc_all_* collectives below (a global sum, a
 *     softmax over all elements).
 *
 * Accessors (all allowed in single-core and multicore ops):
 *   - element-wise:  oc_acc a = oc_accessor(t, OC_FLOAT32, 2); OC_AT(a, float, i, j)
 *   - streaming:     oc_stream *s = oc_read_stream(t); OC_STREAM_READ(s, float) ...
 *   - TCM:           float *buf = oc_tcm_malloc(n * 4);
 *                    oc_tensor_to_tcm(t, buf, start, count); ... oc_tcm_to_tensor(...)
 *
 * Failing: OC_CHECK(cond, "fmt", ...) ends the kernel (on this core) and the
 * caller gets the formatted message as an error naming the op. Faults (bad
 * pointers, stack overflow) are reported the same way; the process goes on.
 *
 * printf works on every core and is written at once (line-buffered).
 */
#ifndef OPCORE_KERNEL_H
#define OPCORE_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "check.h"
#include "dict.h"
#include "dim.h"
#include "iter.h"
#include "scalar.h"
#include "tensor.h"
#include "tensor_ops.h"
#include "vecmath.h" /* vectorised expf/logf/... and reductions at the default flags */

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- multicore model ----------------------------------------------------- */

/* This core's id, 0 .. oc_cpu_count()-1 (0 in a single-core op). */
OC_API uint32_t oc_cpu_id(void);

/* Number of cores running this op (1 in a single-core op). */
OC_API uint32_t oc_cpu_count(void);

/* The op's output, allocated by the caller from the shape function's
 * answer. Every core sees the same tensor. Same as oc_dst_tensor_at(0). */
OC_API oc_tensor *oc_dst_tensor(void);

/* Result `index` of the op (0-based, in schema order): a fresh result's
 * output, or the mutated argument of a `Tensor(a!)` result. An index the
 * op does not have fails the kernel. */
OC_API oc_tensor *oc_dst_tensor_at(int index);

/* Number of results of the running op. */
OC_API int oc_num_results(void);

/* Split [0, n) into oc_cpu_count() near-equal contiguous parts and give
 * this core's part as [*lo, *hi). Multiples of `align` elements per part
 * (except the last) keep cores off each other's cache lines; use 1 for none. */
OC_API void oc_core_range(int64_t n, int64_t align, int64_t *lo, int64_t *hi);

/* ---- launch grid ----------------------------------------------------------
 *
 * An op with a grid (`.grid = {2, 2}` in its oc_def, oc_set_grid in its
 * shape function, or a per-call grid: op[2, 2](...) in Python) runs its
 * kernel once per program instance of an N-d grid (up to 3 axes), as NKI's
 * kernel[grid](...). Instances are handed to whichever engine core is free
 * (one shared counter), in any order and not all at once: an instance must
 * not wait for another, so oc_barrier and oc_all_* fail in a grid launch.
 * Instances write disjoint parts of the results. oc_cpu_id() and
 * oc_cpu_count() are the instance's linear (row-major) id and the number
 * of instances, so oc_core_range() splits work over instances.
 *
 * Outside a grid launch, a multicore op is the 1-d grid of its cores
 * (oc_program_id(0) == oc_cpu_id()) and a single-core op the grid [1]. */

/* This instance's index along `axis` (0, 1 or 2); 0 for an axis past the
 * grid's. Another axis fails the kernel. */
OC_API int64_t oc_program_id(int axis);

/* The grid's size along `axis` (1 for an axis past the grid's). */
OC_API int64_t oc_num_programs(int axis);

/* ---- combining across cores (multicore ops) -------------------------------
 *
 * Every core of the launch must make the same sequence of these calls; each
 * returns once all cores have made it. They are safe whatever the scheduling
 * (any oc_cpu_count(), more cores than CPUs included): waiting cores sleep
 * instead of spinning when it takes long. If a core fails (OC_CHECK, a
 * fault) or returns while others wait, the waiting cores fail too and the
 * call reports the first failure. In a single-core op they return at once.
 *
 * The oc_all_* collectives combine one value (or buffer) per core in core
 * order (0, 1, ...), so the result is the same on every run and every
 * core. */

/* Wait until every core of this launch has reached this barrier. */
OC_API void oc_barrier(void);

OC_API double oc_all_sum(double v);
OC_API double oc_all_max(double v);
OC_API double oc_all_min(double v);
OC_API int64_t oc_all_sum_i64(int64_t v);

/* Tensor collectives: every core passes a buffer of the same n elements
 * (its own: a local array, a TCM block, a tensor it made); on return each
 * core's buffer holds the element-wise sum over all cores, added in core
 * order (the same bits on every run). The cores split the adding between
 * them. A count that differs between cores fails the kernel on every core.
 * For per-core partial results of a reduction: a softmax's column sums, a
 * fused linear + cross-entropy's dW. */
OC_API void oc_all_sum_f32(float *data, int64_t n);
OC_API void oc_all_sum_f64(double *data, int64_t n);
/* The same over a contiguous float32 or float64 tensor's elements. */
OC_API void oc_all_sum_tensor(oc_tensor *t);

/* A workspace shared by the cores of this launch: every core calls it with
 * the same size, in the same order, and gets the same zero-filled,
 * 64-byte-aligned block (NULL for 0 bytes), freed when the launch ends.
 * It belongs to this call of the op: two threads calling the op at once
 * get two workspaces (a file-level static table would be shared by them,
 * and race). Cores write disjoint parts of it, then oc_barrier() before
 * reading each other's. At most 8 per launch; out of memory fails the
 * kernel. A barrier-like call: not in a grid launch. */
OC_API void *oc_shared_alloc(size_t bytes);

/* ---- element-wise accessor --------------------------------------------- */

/* A typed, strided view for indexing by coordinates. Built once per tensor
 * (checks dtype and ndim), then indexing is plain pointer arithmetic.
 * Compile with -DOC_DEBUG (opcore build --debug) to bounds-check every
 * access. */
typedef struct oc_acc {
    char *data;                   /* first element */
    int32_t ndim;
    int32_t elem_size;
    int64_t sizes[OC_MAX_DIMS];
    int64_t strides[OC_MAX_DIMS]; /* in elements */
} oc_acc;

/* Read-only variant: made from a const oc_tensor *, OC_AT gives const lvalues. */
typedef struct oc_cacc {
    const char *data;
    int32_t ndim;
    int32_t elem_size;
    int64_t sizes[OC_MAX_DIMS];
    int64_t strides[OC_MAX_DIMS];
} oc_cacc;

OC_API oc_acc oc_accessor_rw(oc_tensor *t, oc_dtype dtype, int ndim);
OC_API oc_cacc oc_accessor_ro(const oc_tensor *t, oc_dtype dtype, int ndim);

/* oc_accessor(t, dtype, ndim): an oc_acc for an oc_tensor *, an oc_cacc
 * (read-only) for a const oc_tensor *, such as a kernel's inputs:
 *     oc_cacc in = oc_accessor(x, OC_FLOAT32, 2);       x: const oc_tensor *
 *     oc_acc out = oc_accessor(oc_dst_tensor(), OC_FLOAT32, 2);
 * `oc_acc a = oc_accessor(x, ...)` on a const tensor does not compile; the
 * compiler's "invalid initializer" points at the line below and names the
 * macro oc_accessor_of_a_const_tensor_is_an_oc_cacc: declare it oc_cacc.
 * (oc_accessor_ro makes a read-only accessor of a writable tensor.) */
#define oc_accessor(t, dtype, ndim) oc_accessor_of_a_const_tensor_is_an_oc_cacc(t)((t), (dtype), (ndim))
#define oc_accessor_of_a_const_tensor_is_an_oc_cacc(t) \
    _Generic((t), const oc_tensor *: oc_accessor_ro, oc_tensor *: oc_accessor_rw) /* const oc_tensor * gives an oc_cacc: write `oc_cacc a = oc_accessor(...)` */

/* OC_AT's failure under OC_DEBUG: index `index` of dim `dim` (-1: the
 * number of indices) is outside `size`; fails the kernel. Not for direct use. */
OC_API void oc_accessor_out_of_bounds(int ndim, int dim, int64_t index, int64_t size);

static inline int64_t oc__acc_offset(int ndim, const int64_t *sizes, const int64_t *strides,
                                     int nidx, const int64_t *idx)
{
    int64_t off = 0;
#ifdef OC_DEBUG
    if (nidx != ndim) oc_accessor_out_of_bounds(ndim, -1, nidx, ndim);
#else
    (void)ndim;
#endif
    for (int d = 0; d < nidx; d++) {
#ifdef OC_DEBUG
        if (idx[d] < 0 || idx[d] >= sizes[d]) oc_accessor_out_of_bounds(ndim, d, idx[d], sizes[d]);
#else
        (void)sizes;
#endif
        off += idx[d] * strides[d];
    }
    return off;
}

#define OC__NIDX(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* OC_AT(acc, T, i, j, ...): the element at (i, j, ...) as an lvalue of type T
 * (const T for an oc_cacc). */
#define OC_AT(a, T, ...)                                                     \
    (*(_Generic((a).data, const char *: (const T *)(const void *)(a).data,   \
                          char *: (T *)(void *)(a).data) +                   \
       oc__acc_offset((a).ndim, (a).sizes, (a).strides, OC__NIDX(__VA_ARGS__), \
                      (const int64_t[]){__VA_ARGS__})))

/* ---- streaming accessors ------------------------------------------------ */

/* A sequential reader or writer over a tensor's elements in flattened
 * (row-major) order, buffered in this core's TCM (one 4 KiB buffer by
 * default). Writes reach the tensor when the buffer fills and on close.
 *
 * Coherence: while a write stream on a tensor is open, any other stream or
 * accessor on overlapping memory may see stale data. What happens then is
 * the tensor's policy (t->coherence, set with oc_set_coherence): COHERENT
 * fails the kernel, INCOHERENT_VERBOSE warns on stderr, INCOHERENT_QUIET
 * allows it. */
typedef struct oc_stream oc_stream;

/* Open a stream over all elements, or over the flattened range
 * [start, start + count) (each core can stream its own share). */
OC_API oc_stream *oc_read_stream(const oc_tensor *t);
OC_API oc_stream *oc_write_stream(oc_tensor *t);
OC_API oc_stream *oc_read_stream_range(const oc_tensor *t, int64_t start, int64_t count);
OC_API oc_stream *oc_write_stream_range(oc_tensor *t, int64_t start, int64_t count);

/* Flush (for writers) and release the stream's TCM. Streams left open are
 * closed at the end of the kernel. */
OC_API void oc_stream_close(oc_stream *s);

/* Elements left to read or write. */
OC_API int64_t oc_stream_remaining(const oc_stream *s);

/* Set a tensor's coherence policy (OC_COHERENT by default). */
OC_API void oc_set_coherence(const oc_tensor *t, oc_coherence policy);

/* The fast path of OC_STREAM_READ/WRITE: a pointer to the next element;
 * when the TCM buffer runs out, oc_stream_refill (readers) refills it and
 * oc_stream_flush (writers) writes it out first. Not for direct use. */
struct oc_stream {
    char *pos, *end;   /* window into the TCM buffer */
    int32_t elem_size;
    int32_t dtype;
};
OC_API void *oc_stream_refill(oc_stream *s);
OC_API void *oc_stream_flush(oc_stream *s);

static inline const void *oc__stream_next_read(oc_stream *s)
{
    if (__builtin_expect(s->pos == s->end, 0)) return oc_stream_refill(s);
    const void *p = s->pos;
    s->pos += s->elem_size;
    return p;
}

static inline void *oc__stream_next_write(oc_stream *s)
{
    if (__builtin_expect(s->pos == s->end, 0)) return oc_stream_flush(s);
    void *p = s->pos;
    s->pos += s->elem_size;
    return p;
}

/* OC_STREAM_READ(s, float): the next element. Reading past the end fails. */
#define OC_STREAM_READ(s, T) (*(const T *)oc__stream_next_read(s))
/* OC_STREAM_WRITE(s, float, v): append the next element. */
#define OC_STREAM_WRITE(s, T, v) (*(T *)oc__stream_next_write(s) = (v))

/* ---- TCM ----------------------------------------------------------------- */

/* Allocate from this core's TCM arena (64-byte aligned). When the arena
 * cannot hold `bytes`, the kernel fails here (OC_ENOMEM, with the bytes
 * asked and free); a size of 0 gives NULL. Whatever a kernel leaves
 * allocated is released after the call. */
OC_API void *oc_tcm_malloc(size_t bytes);
OC_API void oc_tcm_free(void *p);

/* Size of this core's TCM arena and the bytes free in it. */
OC_API size_t oc_tcm_capacity(void);
OC_API size_t oc_tcm_available(void);

/* TCM accessor: copy `count` elements starting at flattened index `start`
 * between a tensor and a TCM buffer. Range-checked on every call (the range
 * must lie inside the tensor and `tcm` inside this core's TCM); any strides.
 * Writing into a const (input) tensor does not compile (const) and is
 * refused at run time (OC_TENSOR_READONLY). */
OC_API void oc_tensor_to_tcm(const oc_tensor *t, void *tcm, int64_t start, int64_t count);
OC_API void oc_tcm_to_tensor(oc_tensor *t, const void *tcm, int64_t start, int64_t count);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_KERNEL_H */
