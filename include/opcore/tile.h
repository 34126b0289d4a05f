/* opcore/tile.h — 2-D tiles in the TCM and the math on them (NKI's tile
 * layer, in C). Include it in a kernel beside kernel.h.
 *
 * A tile is a 2-D block (rows x cols) of one dtype with a row stride and a
 * column stride in elements. oc_tile_alloc places it in this core's TCM;
 * oc_tile_of_tensor views the 2-D matrix of a tensor in place (no copy,
 * for the matmul's big operands); oc_tile_view / _row / _col cut views.
 *
 * The NKI pattern  load -> compute -> store  reads:
 *
 *     oc_tile x = oc_tile_alloc(128, n, OC_FLOAT32);        nl.ndarray(..., buffer=sbuf)
 *     oc_tile_load(&x, in, b, r0, 0, 0.0f);                  nl.load(in[b, r0:r0+128, :])
 *     oc_tile_reduce_rows(&s, &x, OC_TILE_SUMSQ);            nl.sum(nl.square(x), axis=1)
 *     oc_tile_unary(&s, &s, OC_TILE_RSQRT, 1.0f / n, eps);   nl.rsqrt(s / n + eps)
 *     oc_tile_binary(&x, &x, &s, OC_TILE_MUL);               x * s   (s: 128 x 1, broadcast)
 *     oc_tile_store(&x, out, b, r0, 0);                      nl.store(out[...], x)
 *
 * Rules that hold for every function here:
 *   - compute is float32: math, reductions and scans take float32 tiles
 *     (oc_tile_load / oc_tile_copy convert bfloat16, float16, int8 and
 *     int32 on the way in and out);
 *   - an operand whose rows or cols is 1 broadcasts along that dimension
 *     (a 1 x cols row goes down every row, a rows x 1 column across);
 *   - dst may be the same tile as an operand (in place); partial overlap
 *     is not allowed;
 *   - results are deterministic: the same bits on every run, core and core
 *     count; reductions add in a fixed order (16 lane-wise partial sums,
 *     then the lanes pairwise), vectorised without -ffast-math;
 *   - the code is in libopcore, built for AVX2+FMA with a generic fallback
 *     chosen at load time, so a kernel's own flags do not matter;
 *   - a bad argument (shape mismatch, wrong dtype, a window outside the
 *     tensor's batch) fails the kernel with a message naming the function.
 */
#ifndef OPCORE_TILE_H
#define OPCORE_TILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "export.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oc_tile {
    void *data;      /* element (0, 0) */
    int64_t rows, cols;
    int64_t rs, cs;  /* row and column stride, in elements */
    oc_dtype dtype;
    bool in_tcm;     /* allocated by oc_tile_alloc (freed by oc_tile_free) */
} oc_tile;

/* ---- making tiles ----------------------------------------------------------- */

/* A rows x cols tile in this core's TCM, row-major, each row 64-byte
 * aligned. Fails the kernel (bytes asked and free) when the TCM is full. */
OC_API oc_tile oc_tile_alloc(int64_t rows, int64_t cols, oc_dtype dtype);
OC_API void oc_tile_free(oc_tile *t);

/* The 2-D matrix of tensor `x` at flattened leading index `batch` (its last
 * two dims; a 1-D tensor is one row), in place, any strides. The tile is
 * read-only in spirit when x is an input: store results with oc_tile_store
 * into an output instead. */
OC_API oc_tile oc_tile_of_tensor(const oc_tensor *x, int64_t batch);

/* Views (no copy): the window [r0, r0+rows) x [c0, c0+cols), row i, col j. */
OC_API oc_tile oc_tile_view(const oc_tile *t, int64_t r0, int64_t c0, int64_t rows, int64_t cols);
OC_API oc_tile oc_tile_row(const oc_tile *t, int64_t i);
OC_API oc_tile oc_tile_col(const oc_tile *t, int64_t j);

/* The transposed view (cols x rows, strides swapped; no copy): a rows x 1
 * column stored as a 1 x rows row, or B^T for a matmul. */
OC_API oc_tile oc_tile_t(const oc_tile *t);

/* The element (i, j) as float (any dtype) / set it from a float. */
OC_API float oc_tile_get(const oc_tile *t, int64_t i, int64_t j);
OC_API void oc_tile_set(oc_tile *t, int64_t i, int64_t j, float v);

/* ---- sizes that fit ------------------------------------------------------------- */

/* Bytes of a rows x cols tile of `dtype` as oc_tile_alloc lays it out
 * (rows padded to 64 bytes, plus the allocator's header). */
OC_API size_t oc_tile_bytes(int64_t rows, int64_t cols, oc_dtype dtype);

/* The most rows (a multiple of `multiple`, >= 1 asked) such that `ntiles`
 * tiles of rows x cols `dtype` fit in the TCM free now; 0 if not even
 * `multiple` rows fit. */
OC_API int64_t oc_tile_max_rows(int64_t cols, oc_dtype dtype, int ntiles, int64_t multiple);

/* This CPU's per-core L1 data and L2 cache sizes in bytes (sysfs; a floor
 * of 32 KiB / 512 KiB when it cannot be read). Block sizes for the working
 * set of an inner loop follow L1, those of a tile pass L2. */
OC_API size_t oc_tile_l1_bytes(void);
OC_API size_t oc_tile_l2_bytes(void);

/* ---- moving data ---------------------------------------------------------------- */

/* Copy the window of x's 2-D matrix at leading index `batch`, rows
 * [r0, r0 + t->rows) and cols [c0, c0 + t->cols), into tile t, converting
 * dtype. The part outside x (ragged edges; r0, c0 may be negative) is
 * filled with `pad`. Returns the number of rows that were inside x. */
OC_API int64_t oc_tile_load(oc_tile *t, const oc_tensor *x, int64_t batch, int64_t r0, int64_t c0, float pad);

/* Copy tile t into that window of x (an output or Tensor(a!)), converting
 * dtype; only the part inside x is written (the bounds mask). Writing into
 * an input (read-only) tensor fails. */
OC_API void oc_tile_store(const oc_tile *t, oc_tensor *x, int64_t batch, int64_t r0, int64_t c0);

/* dst = src, any dtypes among float32, bfloat16, float16, int8, int32:
 * floats round to nearest even; to int8/int32 rounds to nearest even and
 * saturates (NaN gives 0). Same shape. */
OC_API void oc_tile_copy(oc_tile *dst, const oc_tile *src);

/* Every element = v. */
OC_API void oc_tile_fill(oc_tile *t, float v);

/* ---- element-wise math (float32 tiles) ------------------------------------------ */

typedef enum oc_tile_binop {
    OC_TILE_ADD, OC_TILE_SUB, OC_TILE_MUL, OC_TILE_DIV, OC_TILE_MAX, OC_TILE_MIN
} oc_tile_binop;

typedef enum oc_tile_unop {
    OC_TILE_IDENTITY, OC_TILE_EXP, OC_TILE_LOG, OC_TILE_TANH, OC_TILE_SIGMOID, OC_TILE_SILU,
    OC_TILE_GELU, /* tanh approximation, as nl.gelu and F.gelu(approximate="tanh") */
    OC_TILE_RSQRT, OC_TILE_RECIPROCAL, OC_TILE_SQUARE
} oc_tile_unop;

/* dst = a op b; a or b may broadcast (a row or a column, see above);
 * dst has the full shape. max/min propagate NaN as torch.maximum. */
OC_API void oc_tile_binary(oc_tile *dst, const oc_tile *a, const oc_tile *b, oc_tile_binop op);

/* dst = a op s for a scalar s. */
OC_API void oc_tile_binary_scalar(oc_tile *dst, const oc_tile *a, float s, oc_tile_binop op);

/* dst = f(a * scale + bias) (nl.activation's order: scale, then bias). */
OC_API void oc_tile_unary(oc_tile *dst, const oc_tile *a, oc_tile_unop f, float scale, float bias);

/* dst = f(a * scale + bias[i]) with a rows x 1 bias (one per row, NKI's
 * per-partition bias): exp(x - rowmax) in softmax is this with scale 1. */
OC_API void oc_tile_unary_rowbias(oc_tile *dst, const oc_tile *a, oc_tile_unop f, float scale,
                           const oc_tile *bias);

/* dst = (x - mean) * rstd * w + b in one pass (NKI's two-operation
 * tensor_scalar, then the weight and bias): mean and rstd rows x 1 (one
 * per row, or 1 x 1), w and b 1 x cols (one per column, or 1 x 1) or NULL
 * for none. Evaluated in that order, rounded as the separate
 * oc_tile_binary calls would be (the same bits), reading x once instead of
 * four times: a layer norm's output pass. */
OC_API void oc_tile_normalize(oc_tile *dst, const oc_tile *x, const oc_tile *mean, const oc_tile *rstd,
                              const oc_tile *w, const oc_tile *b);

/* ---- reductions ------------------------------------------------------------------- */

typedef enum oc_tile_redop {
    OC_TILE_SUM, OC_TILE_RMAX, OC_TILE_RMIN, OC_TILE_MEAN, OC_TILE_SUMSQ
} oc_tile_redop;

/* oc_tile_unary_rowbias(dst, a, f, scale, bias) (bias may be NULL: 0) with
 * reductions riding along (NKI's nisa.activation_reduce): `sum` (rows x 1,
 * or NULL) gets the sum of each row of dst, and with `next` given,
 * next_red (next's rows x 1) gets oc_tile_reduce_rows(next_red, next,
 * next_op) of the next block, the same bits as those calls. Each row of
 * next is read from memory in the loop that writes the same row of dst
 * (see oc_tile_normalize_ahead). A row-blocked softmax:
 *
 *     oc_tile_reduce_rows(&m0, &first_block, OC_TILE_RMAX);
 *     for each block: negate its max m, then
 *         oc_tile_activation_reduce(&o, &x, OC_TILE_EXP, 1.0f, &m, &s, &m_next, &x_next, OC_TILE_RMAX);
 *         oc_tile_binary(&o, &o, &s, OC_TILE_DIV);
 *
 * Fused when a, dst and next are unit-stride rows of one length;
 * otherwise it is the separate calls. */
OC_API void oc_tile_activation_reduce(oc_tile *dst, const oc_tile *a, oc_tile_unop f, float scale,
                                      const oc_tile *bias, oc_tile *sum, oc_tile *next_red, const oc_tile *next,
                                      oc_tile_redop next_op);

/* Softmax along each row (NKI's nl.softmax over the free axis): dst =
 * exp(x - max) / sum, dst may be x. The bits of the row-blocked softmax
 * above with 1 / sum (oc_tile_unary RECIPROCAL) and a MUL in place of the
 * DIV (examples/tiles/softmax.c) on the same layout; unit-stride rows run a
 * row at a time: one exp an element with its sum, the row then scaled in
 * place while it is still in cache, the next row's max taken in the same
 * loop (one read and one write of memory, as a copy). A small tile (up to
 * 4096 elements: in L1 with its result) on the AVX-512 or AVX2 path runs in
 * three passes over up to 16 rows at a time (each row's max, its exps with
 * their sum, the products), so the rows' dependent steps overlap. */
OC_API void oc_tile_softmax(oc_tile *dst, const oc_tile *x);

/* Along each row: dst (rows x 1, float32) = op over a's columns.
 * max/min propagate NaN. */
OC_API void oc_tile_reduce_rows(oc_tile *dst, const oc_tile *a, oc_tile_redop op);

/* Down each column: dst (1 x cols, float32) = op over a's rows. */
OC_API void oc_tile_reduce_cols(oc_tile *dst, const oc_tile *a, oc_tile_redop op);

/* Index of the largest element of each row into dst (rows x 1, int32;
 * the first on ties, a NaN counts as largest). */
OC_API void oc_tile_argmax_rows(oc_tile *dst, const oc_tile *a);

/* Each row's mean and variance (NKI's bn_stats + bn_aggr) into mean and
 * var (rows x 1, float32): var = mean((x - mean)^2), the population
 * variance. Each row is read twice while it is still in cache (the mean,
 * then the squared deviations from it), never written: a layer norm's
 * statistics in one pass over memory, with the two-pass variance's
 * accuracy. Rounded as reduce_rows MEAN, then SUMSQ of (a - mean) laid
 * out as a is, divided by cols, would be (the same bits). mean NULL: var
 * gets mean(x^2) instead, the moment about 0 (an RMS norm's statistic;
 * an infinite element makes it infinite, where var + mean^2 is NaN). */
OC_API void oc_tile_moments(oc_tile *mean, oc_tile *var, const oc_tile *a);

/* oc_tile_normalize(dst, x, mean, rstd, w, b), and in the same pass
 * oc_tile_moments(next_mean, next_var, next): the next block's statistics
 * (the same bits as that call). Row i of next is read from memory in the
 * loop that writes row i of dst, so the reads overlap the writes, as
 * NKI's DMA of the next tile overlaps the store of this one; a normalize
 * then a moments call each wait on memory alone. next NULL: only the
 * normalize (the last block); next_mean NULL: next_var gets mean(x^2) as
 * from oc_tile_moments(NULL, ...). For a row-blocked layer norm:
 *
 *     oc_tile_moments(&m0, &v0, &first_block);
 *     for each block: rsqrt of its var, then
 *         oc_tile_normalize_ahead(&out_blk, &x_blk, &m, &rstd, &w, &b, &m_next, &v_next, &x_next);
 *
 * Fused when x, dst, next and the w and b given are unit-stride rows of
 * one length; otherwise it is those two calls. */
OC_API void oc_tile_normalize_ahead(oc_tile *dst, const oc_tile *x, const oc_tile *mean, const oc_tile *rstd,
                                    const oc_tile *w, const oc_tile *b, oc_tile *next_mean, oc_tile *next_var,
                                    const oc_tile *next);

/* ---- shape and order ------------------------------------------------------------- */

/* dst (cols x rows) = a transposed, any dtype (both the same). */
OC_API void oc_tile_transpose(oc_tile *dst, const oc_tile *a);

/* Linear recurrence along each row (nl.tensor_tensor_scan with multiply
 * then add): dst[i][j] = a[i][j] * dst[i][j-1] + b[i][j], dst[i][-1] =
 * init. A prefix sum is a = 1 (a may broadcast, b may not). */
OC_API void oc_tile_scan_rows(oc_tile *dst, const oc_tile *a, const oc_tile *b, float init);

/* dst[i][j] = (c0 + ci * i + cj * j >= 0) ? a[i][j] : fill
 * (nl.affine_select). A causal mask of the query block at q0 against the
 * key block at k0 keeps k0 + j <= q0 + i: c0 = q0 - k0, ci = 1, cj = -1. */
OC_API void oc_tile_affine_select(oc_tile *dst, const oc_tile *a, int64_t c0, int64_t ci, int64_t cj,
                           float fill);

/* ---- matmul ----------------------------------------------------------------------- */

enum {
    OC_TILE_TRANS_A = 1, /* use a's transpose (a is k x m) */
    OC_TILE_TRANS_B = 2  /* use b's transpose (b is n x k) */
};

/* c += op(a) x op(b), m x k times k x n, accumulated in float32: c is a
 * float32 m x n tile; a and b are float32, bfloat16 or float16 (converted
 * exactly to float32), any strides. int8 a and b accumulate exactly into
 * an int32 c, on the int8 kernels of the linear layer below (AMX, AVX-512
 * VNNI, AVX-VNNI, AVX2, portable; the same bits on each) for k < 2^17:
 * b transposed (n x k, a Linear's weights) is read as it is, another
 * op(b), a transposed or strided a are copied into rows first (longer k:
 * a portable loop). Float products with m, n, k <= 256 and a row-major c run libxsmm's
 * JIT kernels (an operand that is not row-major, e.g. a transposed view,
 * is copied first), others BLIS's single-threaded micro-kernels (each core
 * its own call; OC_TILE_XSMM=0 in the environment: BLIS for all); a
 * float32 a and c with at most 32 rows against a larger b run opcore's
 * skinny kernels, which read b once (a decode step's GEMV); bfloat16 a
 * and b with 32 rows or more (a not transposed, unit column strides) run
 * the bfloat16 linear layer's AMX kernel where the CPU has AMX-BF16: b
 * packed in 64-column panels, tdpbf16ps, the products exact and summed in
 * float32 in pairs (not the widened path's bits; denormal inputs read as
 * zero; OC_TILE_ISA=avx512bf16 or lower keeps the widened path);
 * `oc_tile_matmul_path` says which path a dtype takes,
 * `oc_tile_matmul_path_shape` which one a shape takes. */
OC_API void oc_tile_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags);

/* c = op(a) x op(b) into a c of any float dtype: computed in float32 and
 * rounded once (a bfloat16 matmul with a float32 accumulator). */
OC_API void oc_tile_matmul_to(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags);

/* A sentence naming the library, its kernel configuration and, for int8,
 * the instruction set and kernel that run. */
OC_API const char *oc_tile_matmul_path(oc_dtype dtype);

/* The same for one shape class: c (m x n, float32) = a (m x k, float32)
 * op(b) with b of `dtype`. m <= 32 with n or k above 256 (and unit column
 * strides) runs opcore's skinny kernels, which read b once (b transposed,
 * n x k: the linear layer's dot products; b k x n: a row-update loop);
 * bfloat16 from 32 rows on AMX-BF16 as above; other shapes
 * as oc_tile_matmul_path says. int8: the int8 kernel that m rows and k
 * take. */
OC_API const char *oc_tile_matmul_path_shape(oc_dtype dtype, int64_t m, int64_t n, int64_t k,
                                             unsigned flags);

/* ---- low-precision linear layers and skinny products ------------------------------
 *
 * y = x w^T with the weights in torch Linear's (and GGUF's) layout: w is
 * n x k, one row per output, k contiguous. The weights may be float32,
 * bfloat16, float16, GGML's Q8_0 or Q4_0 blocks (used as llama.cpp stores
 * them), or int8 with one float scale per output (dynamic quantisation).
 * Accumulation is float32 (exact int32 inside an integer block).
 *
 * Work is split along n, ggml style: every core of a multicore op calls
 * the same function with ith = oc_cpu_id(), nth = oc_cpu_count(), and
 * writes only its part of y's columns (n split into nth near-equal parts
 * of whole 16-column groups; of 64-column panels for OC_W_I8_PACKED and
 * 8-row groups for OC_W_Q8_0_PACKED / OC_W_Q4_0_PACKED), so
 * the weights are read once, each byte by one core, at memory speed, even
 * when m is 1. A single-core caller
 * passes 0, 1. No barrier is needed after it unless y is read by another
 * core.
 *
 * The micro-kernels are chosen at run time from the CPU's features (AMX
 * for int8 x int8 and bfloat16 weights from 32 rows of x, AVX512-BF16
 * for bfloat16 weights from 32 rows where there is no AMX, AVX-512 VNNI,
 * AVX2 + FMA + F16C, a portable C loop elsewhere); OC_TILE_ISA=avx512bf16,
 * avx512, avx2 or portable in the environment forces a lower path.
 * Integer paths give the same bits on every path (each sum is defined
 * below); float paths accumulate in float32 in an order that depends on
 * the path (within float32 rounding of each other; bfloat16 weights from
 * 32 rows on AMX / AVX512-BF16 within the bound below).
 * oc_tile_linear_path names the path a weight type and m take.
 */

/* GGML's blocks, byte for byte (llama.cpp's block_q8_0 and block_q4_0):
 * 32 weights along k per block, d a float16 scale.
 * Q8_0: w = qs[i] * d. Q4_0: byte i holds element i in its low nibble and
 * element i + 16 in its high nibble, w = (nibble - 8) * d. */
enum { OC_QK = 32 };
typedef struct oc_block_q8_0 {
    oc_half d;
    int8_t qs[OC_QK];
} oc_block_q8_0; /* 34 bytes */
typedef struct oc_block_q4_0 {
    oc_half d;
    uint8_t qs[OC_QK / 2];
} oc_block_q4_0; /* 18 bytes */

typedef enum oc_wtype {
    OC_W_F32,  /* float32 weights */
    OC_W_BF16, /* bfloat16 weights, widened exactly in registers */
    OC_W_F16,  /* float16 weights, widened exactly in registers (F16C) */
    OC_W_Q8_0, /* GGML Q8_0 blocks along k (k a multiple of 32) */
    OC_W_Q4_0, /* GGML Q4_0 blocks along k (k a multiple of 32) */
    OC_W_I8,   /* int8, one float32 scale per output row: w[j][p] * scale[j] */
    OC_W_I8G,  /* int8, one float32 scale per group of `group` along k: q * scale */
    OC_W_U4G,  /* uint4, two per byte (element 2i in the low nibble of byte i,
                * 2i + 1 in the high one), a float32 scale and zero point per
                * group along k: w = (q - zero) * scale (GPTQ / AWQ / torchao) */
    OC_W_I8_PACKED,   /* OC_W_I8 weights prepacked by oc_weights_pack (below) */
    OC_W_Q8_0_PACKED, /* OC_W_Q8_0 weights prepacked by oc_weights_pack */
    OC_W_Q4_0_PACKED  /* OC_W_Q4_0 weights prepacked by oc_weights_pack */
} oc_wtype;

/* A weight matrix: n rows (outputs) of k inputs. Row j starts at
 * data + j * row_bytes; within a row, k elements (float types, int8), k / 2
 * bytes (OC_W_U4G) or k / 32 blocks (Q8_0, Q4_0) are contiguous. scale:
 * OC_W_I8's n scales; for the group types n x (k / group) scales, row j's
 * at scale + j * (k / group), and OC_W_U4G's zero points laid out the
 * same. group: 32, 64 or 128, k a multiple of it. group and zero are
 * read for the group types only (and come last, so a struct filled by a
 * kernel built against an older tile.h still works). Fill it by hand or
 * with oc_weights_of_tensor / oc_weights_grouped. */
typedef struct oc_weights {
    const void *data;
    int64_t n, k;
    int64_t row_bytes;
    oc_wtype type;
    const float *scale;
    int64_t group;
    const float *zero;
} oc_weights;

/* Name ("q4_0") / bytes of one row of k inputs of `type` (0 when k does
 * not fit the type: not a multiple of 32 for the block types). */
OC_API const char *oc_wtype_name(oc_wtype type);
OC_API size_t oc_wtype_row_bytes(oc_wtype type, int64_t k);

/* The weights held by tensor w (2-D, rows may be strided, each row
 * contiguous): float32 / bfloat16 / float16 for those types, n x k; int8
 * n x k with `scale` a float32 tensor of n elements for OC_W_I8; uint8 (or
 * int8) n x (k / 32 * 34) for Q8_0 and n x (k / 32 * 18) for Q4_0 (GGUF's
 * bytes, one row per output). scale must be NULL for the other types. A
 * mismatch fails the kernel naming the type, shapes and dtypes; the
 * result then has data NULL. */
OC_API oc_weights oc_weights_of_tensor(const oc_tensor *w, oc_wtype type, const oc_tensor *scale);

/* Group-wise weights: OC_W_I8G, w int8 n x k; OC_W_U4G, w uint8 n x k / 2
 * (two elements a byte, as above); scale (and for OC_W_U4G zero) float32
 * n x (k / group), contiguous; group 32, 64 or 128 dividing k. zero must be
 * NULL for OC_W_I8G. A mismatch fails the kernel naming the shapes; the
 * result then has data NULL. */
OC_API oc_weights oc_weights_grouped(const oc_tensor *w, oc_wtype type, int64_t group,
                                     const oc_tensor *scale, const oc_tensor *zero);

/* Prepacked weights: OC_W_I8, OC_W_Q8_0 or OC_W_Q4_0 weights (and the
 * int8 scales) rearranged once, at model load, into the layout the
 * kernels read fastest (as torch's linear_prepack / fbgemm, oneDNN and
 * llama.cpp's repacking do), so that no call rearranges w again. The
 * bytes are the caller's (a uint8 tensor kept as a model parameter):
 *   oc_weights_pack_bytes(type, n, k): their size for n x k weights of
 *     type OC_W_I8, OC_W_Q8_0 or OC_W_Q4_0 (0 for another type, for int8
 *     k >= 2^17, too long for exact int32 sums, and for the block types k
 *     not a multiple of 32);
 *   oc_weights_pack(dst, dst_bytes, w, ith, nth): w packed into dst, part
 *     ith of nth (all parts together write every byte; one thread: 0, 1);
 *     dst_bytes must be oc_weights_pack_bytes(w->type, w->n, w->k), and
 *     dst (as the bytes read below) at an address that is a multiple of 4
 *     (a tensor's data is);
 *   oc_weights_of_packed(bytes, nbytes), or oc_weights_of_tensor(t,
 *     OC_W_..._PACKED, NULL) with t a contiguous uint8 tensor of those
 *     bytes: the packed weights (type, n and k from the header, row_bytes
 *     the byte count, an int8 scale into the bytes) that oc_tile_linear
 *     (and for int8 oc_tile_linear_i8) takes, with the same bits as the
 *     unpacked ones.
 * The bytes start with a header (magic, version, layout, n, k):
 *   layout 1, "vnni-panel64" (OC_W_I8_PACKED), is w^T in panels of 64
 *     columns, 4 consecutive k of a column in each 32-bit element (AMX's
 *     and vpdpbusd's operand form). AVX-512 VNNI, AMX, AVX-VNNI and AVX2
 *     read it as it is (the 256-bit sets a row or two of x against each
 *     panel); the portable loop unpacks each panel's rows into scratch
 *     first (the same bits).
 *   layouts 2, "q8_0-x8" (OC_W_Q8_0_PACKED), and 3, "q4_0-x8"
 *     (OC_W_Q4_0_PACKED), are GGML's blocks of 8 rows at a time
 *     interleaved: per block, the 8 rows' float16 scales, then each
 *     4-byte piece of the block's weights for the 8 rows side by side
 *     (the form of llama.cpp's repacked block_q4_0x8), so one 32-byte
 *     load feeds 8 rows. Decoding reads 8 rows of w per row of x with no
 *     reduction across lanes; from 4 rows of x the packed-panel kernels
 *     read the groups as they are (no transpose); the portable loop
 *     rebuilds each block.
 * Bytes of another layout or version, a wrong size or a corrupt header
 * fail the call naming the function and both layouts or sizes. */
OC_API size_t oc_weights_pack_bytes(oc_wtype type, int64_t n, int64_t k);
OC_API void oc_weights_pack(void *dst, size_t dst_bytes, const oc_weights *w, int ith, int nth);
OC_API oc_weights oc_weights_of_packed(const void *bytes, size_t nbytes);

/* y (m x n) = x (m x k) w^T, the columns of part ith of nth (see above);
 * any row strides, unit column strides for x and y. x and y are float32
 * or bfloat16 (a bfloat16 x is widened exactly and runs the float32 x
 * path; a bfloat16 y is the float32 result rounded to nearest even).
 *   float weights: m <= 32 (float32 weights: m <= 4) run opcore's skinny
 *     kernels (each output a dot product over k, 4 rows of w at a time
 *     sharing x's loads); float32 weights with 5 <= m < 48 on AVX-512,
 *     blocks of 4 rows of x by 4 of w (each output a dot product over k,
 *     its bits independent of m and of the part); larger m the tile matmul
 *     (BLIS) on this part's rows of w.
 *   OC_W_BF16 from m = 32 on a CPU with AMX or AVX512-BF16: x is
 *     rounded to bfloat16 (nearest even) and AMX-BF16 (tdpbf16ps) or
 *     vdpbf16ps sums the exact pair products in float32: not the float32
 *     product's bits, but within
 *     (2^-8 + k 2^-23) * sum_p |x[i][p] * w[j][p]| of the exact product
 *     (2^-8: half bfloat16's epsilon, x's rounding; k 2^-23: k float32
 *     epsilons, the sums). OC_TILE_ISA=avx512 (or lower) keeps the
 *     float32 path's bits.
 *   Q8_0 / Q4_0 (and their packed forms): x is quantised to int8
 *     blocks of 32 (per block d = absmax / 127 as float32, q = x / d
 *     rounded to nearest even), each
 *     block's product is exact in int32, and y[i][j] = the sum over
 *     blocks b of (float)isum_b * (dx_b * dw_b), block b going to float32
 *     partial sum b % 8 with fmaf, the 8 partial sums added as
 *     ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)): the same bits on
 *     every path.
 *   OC_W_I8, OC_W_I8_PACKED: each row of x quantised as
 *     oc_tile_quantize_rows does (one scale per row), then
 *     oc_tile_linear_i8: torch's dynamic quantised Linear. */
/*   OC_W_I8G / OC_W_U4G (m <= 32): widened in registers to q'_p =
 *     (float)q (int8) or (float)q - zero (uint4); per group, 16 lane sums
 *     t[p % 16] = fmaf(x_p, q'_p, t[p % 16]) in order of p (from 0), then
 *     acc[l] = fmaf(t[l], scale, acc[l]); y[i][j] = acc's lanes added as
 *     halves (lane l + lane l + 8, then l + 4, l + 2, l + 1): the same
 *     bits on every path and core count. Larger m: the part's rows of w
 *     dequantised ((float)q - zero) * scale, 64 rows at a time, and the
 *     tile matmul (within float32 rounding of the above). */
OC_API void oc_tile_linear(oc_tile *y, const oc_tile *x, const oc_weights *w, int ith, int nth);

/* Dynamic quantisation's product: y (m x n, float32) =
 * ((float)(sum_p xq[i][p] * w[j][p]) * xscale[i]) * w->scale[j], the sum
 * exact in int32 (k < 2^17): xq is m x k int8, xscale m x 1 float32, w
 * OC_W_I8 or OC_W_I8_PACKED. The same bits on every path (x holding -128
 * is exact too; on AVX2 and AVX-VNNI such a call widens both sides to
 * int16, 1.0-1.2x the time of one without it). With packed
 * weights on AVX2 and AVX-VNNI, an xq whose every element is within
 * [-64, 63] (7 bits, as torch's dynamic quantised Linear quantises x on
 * x86) takes one multiply step per 32 products instead of two: on AVX2
 * 1.2-1.4x faster at 16 and 256 rows of x, the same bits. */
OC_API void oc_tile_linear_i8(oc_tile *y, const oc_tile *xq, const oc_tile *xscale,
                              const oc_weights *w, int ith, int nth);

/* A sentence naming the kernel a weight type takes for m rows of x on
 * this CPU (instruction set; skinny or blocked; library). */
OC_API const char *oc_tile_linear_path(oc_wtype type, int64_t m);

/* ---- quantising helpers -------------------------------------------------------- */

/* dst (rows x 1, float32) = max |a[i][j]| over each row (NaN propagates). */
OC_API void oc_tile_absmax_rows(oc_tile *dst, const oc_tile *a);

/* Symmetric int8 quantisation of float32 x into int8 q (same shape), per
 * group of `group` columns along each row (group 0: the whole row):
 * scale (rows x cols / group, float32) = absmax / 127, q = x / scale
 * computed as x * (1 / scale), rounded to nearest even (0 where the scale
 * is 0); q is within [-127, 127]. cols must be a multiple of group. */
OC_API void oc_tile_quantize_rows(oc_tile *q, oc_tile *scale, const oc_tile *x, int64_t group);

/* x (float32) = q (int8) * scale, per group as above. */
OC_API void oc_tile_dequantize_rows(oc_tile *x, const oc_tile *q, const oc_tile *scale,
                                    int64_t group);

/* Rows of float32 x into GGML blocks of `type` (OC_W_Q8_0 or OC_W_Q4_0):
 * row i at (char *)blocks + i * oc_wtype_row_bytes(type, x->cols), as
 * ggml's quantize_row_q8_0 / q4_0 reference functions do (Q8_0: d =
 * absmax / 127, q = x / d rounded to nearest even; Q4_0: d = the element
 * of largest magnitude / -8, q = min(15, (int)(x / d + 8.5))); d stored as
 * float16 (nearest even). x->cols a multiple of 32. */
OC_API void oc_tile_quantize_blocks(void *blocks, oc_wtype type, const oc_tile *x);

/* Asymmetric uint4 quantisation of float32 x (rows x cols) per group of
 * `group` (32, 64 or 128) columns, GPTQ's quantiser: lo = min(min x, 0),
 * hi = max(max x, 0) (both 0: -1 and 1), scale = (hi - lo) / 15, zero =
 * nearbyint(-lo / scale), q = min(15, max(0, nearbyint(x / scale) +
 * zero)); packed two a byte as OC_W_U4G (row i at (char *)packed + i *
 * cols / 2); scale and zero rows x cols / group float32. */
OC_API void oc_tile_quantize_u4(void *packed, oc_tile *scale, oc_tile *zero, const oc_tile *x,
                                int64_t group);

/* x (float32, rows x k) = rows r0 .. r0 + x->rows of w dequantised (any
 * oc_wtype; OC_W_I8 times its scales). */
OC_API void oc_tile_dequantize_weights(oc_tile *x, const oc_weights *w, int64_t r0);

/* dst[i] (rows x 1, float32) = a[i][idx[i]], idx rows x 1 int32 (a
 * cross-entropy's pick); an index outside [0, cols) fails naming it. */
OC_API void oc_tile_gather_rows(oc_tile *dst, const oc_tile *a, const oc_tile *idx);

/* dst (rows x 1, float32) = log(sum_j exp(a[i][j])), computed as max +
 * log(sum exp(a - max)) (an all -inf row gives -inf). */
OC_API void oc_tile_logsumexp_rows(oc_tile *dst, const oc_tile *a);

/* dst (rows x 1, float32) = sum_j a[i][j] * b[i][j]; b may be one row
 * (broadcast). Sums in the reductions' order (see the rules above). */
OC_API void oc_tile_dot_rows(oc_tile *dst, const oc_tile *a, const oc_tile *b);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_TILE_H */
