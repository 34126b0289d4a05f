/* Tile matmul on libxsmm for small tiles, BLIS otherwise
 * (docs/gemm_library.md says why each).
 *
 * Small float32 products (m, n, k <= XSMM_MAX_DIM, c with unit column
 * stride) run libxsmm's JIT kernels, dispatched per shape (libxsmm caches
 * them): libxsmm's API is column-major, so the row-major c = op(a) op(b)
 * is the column-major c^T = op(b)^T op(a)^T, and each operand must be
 * row-major with unit column stride; one that is not (a transposed view,
 * e.g. K in S = Q K^T) is first copied row-major into a per-thread scratch
 * (an 8 x 8 AVX transpose: a few percent of the product). libxsmm's
 * kernels need AVX2+FMA here; without them, or when libxsmm cannot make a
 * kernel, BLIS runs. The order of the additions depends only on the shape,
 * so results are the same bits on every run. The tiniest of these (m n k
 * <= TINY_MACS, beta 0) run tiny_sgemm, a loop with libxsmm's order of
 * additions (the same bits) and without its per-call cost.
 *
 * Otherwise float32 operands go to bli_sgemm as they are, any strides (a
 * transpose is a swap of strides, no copy). bfloat16 and float16 operands are
 * widened to float32 first (exact) into a per-thread scratch that is kept
 * between calls, then the same sgemm: the accumulator is float32 either
 * way. libblis is the serial build, linked statically into libopcore:
 * each engine core makes its own single-threaded call.
 *
 * Skinny float32 products (m <= 32 rows of a, n or k above libxsmm's
 * sizes, float32 a and c) go to lowp_skinny.c, which reads b once.
 * bfloat16 a and b from 32 rows of a go to the bfloat16 linear layer's
 * AMX-BF16 kernel where the CPU has it (lowp_bf16.c): exact products
 * summed in float32, 5-6x the widened BLIS path here.
 *
 * int8 x int8 -> int32: BLIS has no integer GEMM; the linear layer's int8
 * kernels (lowp.c: AMX, AVX-512 VNNI, AVX-VNNI, AVX2, portable, exact
 * int32 sums) take it for k < 2^17, op(b) read as rows of b^T (b
 * transposed is read as it is); longer k keeps opcore's portable loop
 * (vectorised by the compiler); oc_tile_matmul_path says which. */
#include <blis.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if OC_TILE_XSMM && !defined(__x86_64__) /* its use here is x86-64 only (AVX2) */
#undef OC_TILE_XSMM
#define OC_TILE_XSMM 0
#endif
#if OC_TILE_XSMM
#include <immintrin.h>
#include <libxsmm.h>
#endif

#include "core/alloc.h"
#include "core/internal.h"
#include "opcore/tile.h"
#include "tile/lowp_internal.h"
#include "tile/tile_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(OC_TILE_NO_CLONES)
#define OC_TILE_FN __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define OC_TILE_FN
#endif

static void *scratch_get(int slot, size_t bytes)
{
    return oc__tile_scratch(OC__SCRATCH_MATMUL + slot, bytes, "oc_tile_matmul");
}

/* A matrix as BLIS sees it: float data and strides of op(x). */
typedef struct {
    float *p;
    int64_t rows, cols, rs, cs;
} fmat;

/* BLIS wants a valid stride even along a dim of extent 1. */
static void fix_strides(fmat *m)
{
    if (m->rows == 1 && m->cols == 1) m->rs = m->cs = 1;
    else if (m->rows == 1) m->rs = m->cols * (m->cs < 0 ? -m->cs : m->cs);
    else if (m->cols == 1) m->cs = m->rows * (m->rs < 0 ? -m->rs : m->rs);
}

/* op(t) as float32: in place for float32, else widened into scratch slot. */
static bool as_f32(const oc_tile *t, bool trans, int slot, fmat *m)
{
    if (t->dtype == OC_FLOAT32) {
        *m = (fmat){t->data, t->rows, t->cols, t->rs, t->cs};
    } else {
        float *p = scratch_get(slot, (size_t)(t->rows * t->cols) * sizeof(float));
        if (!p) return false;
        size_t es = oc_dtype_size(t->dtype);
        for (int64_t i = 0; i < t->rows; i++)
            oc__tile_convert_run(p + i * t->cols, OC_FLOAT32, 1, (const char *)t->data + i * t->rs * (int64_t)es,
                                 t->dtype, t->cs, t->cols);
        *m = (fmat){p, t->rows, t->cols, t->cols, 1};
    }
    if (trans) *m = (fmat){m->p, m->cols, m->rows, m->cs, m->rs};
    fix_strides(m);
    return true;
}

static bool shapes_ok(const char *fn, const oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags)
{
    int64_t m = flags & OC_TILE_TRANS_A ? a->cols : a->rows, ka = flags & OC_TILE_TRANS_A ? a->rows : a->cols;
    int64_t kb = flags & OC_TILE_TRANS_B ? b->cols : b->rows, n = flags & OC_TILE_TRANS_B ? b->rows : b->cols;
    if (ka == kb && c->rows == m && c->cols == n) return true;
    oc__raise(OC_EINVAL, "%s: c is %lld x %lld, op(a) %lld x %lld, op(b) %lld x %lld (want c m x n = op(a) m x k "
              "times op(b) k x n)", fn, (long long)c->rows, (long long)c->cols, (long long)m, (long long)ka,
              (long long)kb, (long long)n);
    return false;
}

static bool float_in(oc_dtype d) { return d == OC_FLOAT32 || d == OC_BFLOAT16 || d == OC_FLOAT16; }

#if OC_TILE_XSMM
/* m, n and k up to this go to libxsmm. On 128 x 128 x 128 here: Q K^T
 * (K a transposed view) 45-50 GFLOP/s on BLIS's "sup" dot-product kernel,
 * 69-73 copied and on libxsmm; P V 69-74 on BLIS, 73-78 on libxsmm
 * (docs/gemm_library.md). */
#define XSMM_MAX_DIM 256

static bool xsmm_on;
static pthread_once_t xsmm_once = PTHREAD_ONCE_INIT;

/* libxsmm when the CPU has AVX2 and FMA (libxsmm's kernels for older
 * CPUs are no faster than BLIS's) and OC_TILE_XSMM is not "0". */
static void xsmm_init(void)
{
    if (oc__env_off("OC_TILE_XSMM")) return;
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
    libxsmm_init();
    xsmm_on = true;
}

static bool xsmm_enabled(void)
{
    static _Thread_local bool known; /* this thread has passed the once: a small product's call skips it */
    if (!known) pthread_once(&xsmm_once, xsmm_init), known = true;
    return xsmm_on;
}

/* dst (8 x 8, row stride ld) = the transpose of src (8 x 8, row stride ls). */
__attribute__((target("avx2"))) static void transpose8(float *dst, int64_t ld, const float *src, int64_t ls)
{
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ls), r2 = _mm256_loadu_ps(src + 2 * ls),
           r3 = _mm256_loadu_ps(src + 3 * ls), r4 = _mm256_loadu_ps(src + 4 * ls),
           r5 = _mm256_loadu_ps(src + 5 * ls), r6 = _mm256_loadu_ps(src + 6 * ls),
           r7 = _mm256_loadu_ps(src + 7 * ls);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* m as a row-major matrix with unit column stride: itself when it is one,
 * else a copy into scratch slot (a transposed view goes 8 x 8 blocks at a
 * time). Returns the data and sets *ld, or NULL (out of memory). */
static const float *xsmm_rowmajor(const fmat *m, int slot, int64_t *ld)
{
    if (m->cs == 1 && m->rs >= m->cols) {
        *ld = m->rs;
        return m->p;
    }
    float *p = scratch_get(slot, (size_t)(m->rows * m->cols) * sizeof(float));
    if (!p) return NULL;
    int64_t r = m->rows, c = m->cols, i0 = 0, j0 = 0;
    if (m->rs == 1 && m->cs >= m->rows) { /* a transposed view: its columns are contiguous */
        for (i0 = 0; i0 + 8 <= r; i0 += 8)
            for (j0 = 0; j0 + 8 <= c; j0 += 8) transpose8(p + i0 * c + j0, c, m->p + j0 * m->cs + i0, m->cs);
        j0 = c - c % 8;
    }
    /* the rest: rows i0.. (all columns), and columns j0.. of rows ..i0 */
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = i < i0 ? j0 : 0; j < c; j++) p[i * c + j] = m->p[i * m->rs + j * m->cs];
    *ld = c;
    return p;
}

/* m x n x k up to this runs tiny_sgemm, not a libxsmm kernel: tiles::matmul
 * [8, 64] x [64, 8] through torch.ops took 3.2 us a call with libxsmm's
 * kernel, 2.1-2.4 us with BLIS's or this loop (Xeon, Sapphire Rapids). */
#define TINY_MACS 8192

/* c (row stride ldc) = a (m x k, row stride lda) b (k x n, row stride ldb)
 * as libxsmm's kernels add: each element's products in order of k, one
 * fused multiply-add each, from zero; the same bits (a test compares).
 * Blocks of 8 x 8 elements keep their sums in 8 AVX registers, 8
 * independent chains of additions: the same loop on a float array was
 * compiled through memory and waited on each addition (4x slower at
 * [8, 64] x [64, 8]). */
/* One or two rows of a (R) against NV blocks of 8 columns of b from j0:
 * R x NV sums in registers, each the same chain in order of k. */
#define TINY_ROWS(R, NV)                                                                       \
    do {                                                                                       \
        __m256 acc[R][NV];                                                                     \
        for (int r = 0; r < (R); r++)                                                          \
            for (int v = 0; v < (NV); v++) acc[r][v] = _mm256_setzero_ps();                   \
        for (int64_t p = 0; p < k; p++) {                                                      \
            __m256 bv[NV];                                                                     \
            for (int v = 0; v < (NV); v++) bv[v] = _mm256_loadu_ps(b + p * ldb + j0 + 8 * v); \
            for (int r = 0; r < (R); r++) {                                                    \
                __m256 av = _mm256_set1_ps(a[(i0 + r) * lda + p]);                             \
                for (int v = 0; v < (NV); v++) acc[r][v] = _mm256_fmadd_ps(bv[v], av, acc[r][v]); \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < (R); r++)                                                          \
            for (int v = 0; v < (NV); v++)                                                     \
                _mm256_storeu_ps(c + (i0 + r) * ldc + j0 + 8 * v, acc[r][v]);                 \
        j0 += 8 * (NV);                                                                        \
    } while (0)

/* m <= 2 (a decoding step's attention: q K^T, then p V): up to 4 blocks of
 * 8 columns at once, where the 8 x 8 loop below would run 8 rows (the
 * last one repeated) for each real one. The same chains, the same bits. */
__attribute__((target("avx2,fma"))) static void tiny_sgemm_rows(float *c, int64_t ldc,
                                                               const float *a, int64_t lda,
                                                               const float *b, int64_t ldb,
                                                               int64_t i0, int rows, int64_t n,
                                                               int64_t k)
{
    int64_t j0 = 0;
    if (rows == 1) {
        for (; j0 + 32 <= n;) TINY_ROWS(1, 4);
        for (; j0 + 8 <= n;) TINY_ROWS(1, 1);
    } else {
        for (; j0 + 32 <= n;) TINY_ROWS(2, 4);
        for (; j0 + 8 <= n;) TINY_ROWS(2, 1);
    }
    for (int r = 0; r < rows; r++) /* the last columns, under 8 */
        for (int64_t j = j0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < k; p++)
                acc = __builtin_fmaf(b[p * ldb + j], a[(i0 + r) * lda + p], acc);
            c[(i0 + r) * ldc + j] = acc;
        }
}

__attribute__((target("avx2,fma"))) static void tiny_sgemm(float *c, int64_t ldc, const float *a,
                                                          int64_t lda, const float *b, int64_t ldb,
                                                          int64_t m, int64_t n, int64_t k)
{
    if (m <= 2) {
        tiny_sgemm_rows(c, ldc, a, lda, b, ldb, 0, (int)m, n, k);
        return;
    }
    for (int64_t i0 = 0; i0 < m; i0 += 8) {
        int64_t rows = m - i0 < 8 ? m - i0 : 8;
        for (int64_t j0 = 0; j0 < n; j0 += 8) {
            int64_t cols = n - j0 < 8 ? n - j0 : 8;
            if (cols == 8) { /* the sums in 8 registers (rows past m repeat the last row's) */
                __m256 acc[8];
                const float *ar[8];
                for (int r = 0; r < 8; r++) {
                    acc[r] = _mm256_setzero_ps();
                    ar[r] = a + (i0 + (r < rows ? r : rows - 1)) * lda;
                }
                for (int64_t p = 0; p < k; p++) {
                    __m256 bv = _mm256_loadu_ps(b + p * ldb + j0);
#pragma GCC unroll 8
                    for (int r = 0; r < 8; r++)
                        acc[r] = _mm256_fmadd_ps(bv, _mm256_set1_ps(ar[r][p]), acc[r]);
                }
                for (int r = 0; r < rows; r++) _mm256_storeu_ps(c + (i0 + r) * ldc + j0, acc[r]);
                continue;
            }
            float acc[8][8] = {{0}}; /* a last block under 8 columns wide */
            for (int64_t p = 0; p < k; p++)
                for (int r = 0; r < rows; r++) {
                    float av = a[(i0 + r) * lda + p];
                    const float *bp = b + p * ldb + j0;
                    for (int q = 0; q < cols; q++) acc[r][q] = __builtin_fmaf(bp[q], av, acc[r][q]);
                }
            for (int r = 0; r < rows; r++)
                for (int q = 0; q < cols; q++) c[(i0 + r) * ldc + j0 + q] = acc[r][q];
        }
    }
}

/* c = op(a) op(b) + beta c on libxsmm; false when the shape or c's
 * strides do not fit it, or libxsmm has no kernel (BLIS runs instead). */
static bool xsmm_sgemm(fmat *c, const fmat *a, const fmat *b, float beta)
{
    int64_t m = c->rows, n = c->cols, k = a->cols;
    if (m > XSMM_MAX_DIM || n > XSMM_MAX_DIM || k > XSMM_MAX_DIM || c->cs != 1 || c->rs < n || !xsmm_enabled())
        return false;
    /* column-major: c^T (n x m, ld c->rs) = op(b)^T (n x k) op(a)^T (k x m) */
    int64_t lda, ldb;
    const float *pb = xsmm_rowmajor(b, 3, &lda);
    if (!pb) return true; /* raised */
    const float *pa = xsmm_rowmajor(a, 4, &ldb);
    if (!pa) return true;
    if (beta == 0.0f && m * n * k <= TINY_MACS) {
        tiny_sgemm(c->p, c->rs, pa, ldb, pb, lda, m, n, k);
        return true;
    }
    libxsmm_blasint xm = n, xn = m, xk = k, xlda = lda, xldb = ldb, xldc = c->rs;
    float alpha = 1.0f;
    int flags = beta == 0.0f ? LIBXSMM_GEMM_FLAG_BETA_0 : 0, prefetch = LIBXSMM_GEMM_PREFETCH_NONE;
    /* the last shape this thread dispatched, kept: a loop of one small
     * product skips libxsmm's lookup (its registry's hash and lock) */
    static _Thread_local struct {
        libxsmm_blasint m, n, k, lda, ldb, ldc;
        int flags;
        float beta;
        libxsmm_smmfunction f;
    } last;
    libxsmm_smmfunction f = last.f;
    if (!f || last.m != xm || last.n != xn || last.k != xk || last.lda != xlda || last.ldb != xldb ||
        last.ldc != xldc || last.flags != flags || last.beta != beta) {
        f = libxsmm_smmdispatch(xm, xn, xk, &xlda, &xldb, &xldc, &alpha, &beta, &flags, &prefetch);
        if (!f) return false;
        last.m = xm, last.n = xn, last.k = xk, last.lda = xlda, last.ldb = xldb, last.ldc = xldc;
        last.flags = flags, last.beta = beta, last.f = f;
    }
    f(pb, pa, c->p);
    return true;
}
#endif

/* BLIS's configuration. BLIS's own CPU check picks its AVX-512 one ('skx')
 * only on Intel models it knows to have two FMA units per core; elsewhere (a
 * VM reporting a model BLIS does not list, as this project's Sapphire Rapids
 * guest does) it takes 'haswell', AVX2 kernels at half the FMA width. Where
 * BLIS took haswell on a CPU with AVX-512 F/DQ/BW/VL and AVX512-BF16 or AMX
 * (Cooper Lake and later Xeons: two FMA units each), opcore hands BLIS its
 * skx context for products of SKX_MIN_M rows of c or more: BLIS alone,
 * interleaved, skx ran 1.06-1.56x haswell's GFLOP/s from 48 rows (1.52x at
 * 128x2048x1024, 1.19x at 64x960x576) and 0.55-0.84x below (haswell's
 * small-m kernels: 0.78x at 32x960x576). BLIS_ARCH_TYPE (BLIS's own
 * setting) or OC_TILE_ISA below avx512 keep BLIS's choice. NULL: BLIS's. */
#define SKX_MIN_M 48
cntx_t *bli_gks_lookup_nat_cntx(arch_t id); /* in BLIS, not in its public header's exports */

static cntx_t *blis_cntx_v;
static pthread_once_t blis_once = PTHREAD_ONCE_INIT;

static void blis_choose(void)
{
    bli_init();
#if defined(__x86_64__) && defined(__GNUC__)
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    bool two_fma = __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-tile");
    if (avx512 && two_fma && __builtin_cpu_is("intel") && !getenv("BLIS_ARCH_TYPE") &&
        oc__tile_isa_cap() >= OC__ISA_AVX512 && bli_arch_query_id() == BLIS_ARCH_HASWELL)
        blis_cntx_v = bli_gks_lookup_nat_cntx(BLIS_ARCH_SKX); /* NULL if not built in */
#endif
}

static cntx_t *blis_cntx(void)
{
    pthread_once(&blis_once, blis_choose);
    return blis_cntx_v;
}

/* The configuration BLIS chose itself (BLIS initialised first: with
 * BLIS_ARCH_TYPE set, BLIS's query aborts before its init). */
static const char *blis_arch_name(void)
{
    blis_cntx();
    return bli_arch_string(bli_arch_query_id());
}

static void sgemm(fmat *c, const fmat *a, const fmat *b, float beta)
{
#if OC_TILE_XSMM
    if (xsmm_sgemm(c, a, b, beta)) return;
#endif
    float one = 1.0f;
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, c->rows, c->cols, a->cols, &one, a->p, a->rs,
                 a->cs, b->p, b->rs, b->cs, &beta, c->p, c->rs, c->cs,
                 c->rows >= SKX_MIN_M ? blis_cntx() : NULL, NULL);
}

/* int8: c[i][j] += sum_p a(i,p) * b(p,j), exact in int32. op(b) is
 * copied to int16 rows so the inner loop is a contiguous widening
 * multiply-add the compiler vectorises. */
OC_TILE_FN static void int8_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags)
{
    int64_t m = c->rows, n = c->cols, k = flags & OC_TILE_TRANS_A ? a->rows : a->cols;
    int16_t *bp = scratch_get(0, (size_t)(k * n) * sizeof(int16_t));
    if (!bp) return;
    const int8_t *pa = a->data, *pb = b->data;
    int64_t brs = flags & OC_TILE_TRANS_B ? b->cs : b->rs, bcs = flags & OC_TILE_TRANS_B ? b->rs : b->cs;
    int64_t ars = flags & OC_TILE_TRANS_A ? a->cs : a->rs, acs = flags & OC_TILE_TRANS_A ? a->rs : a->cs;
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) bp[p * n + j] = pb[p * brs + j * bcs];
    int32_t *row = scratch_get(1, (size_t)n * sizeof(int32_t));
    if (!row) return;
    int32_t *pc = c->data;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) row[j] = pc[i * c->rs + j * c->cs];
        for (int64_t p = 0; p < k; p++) {
            int32_t av = pa[i * ars + p * acs];
            const int16_t *br = bp + p * n;
            for (int64_t j = 0; j < n; j++) row[j] += av * br[j];
        }
        for (int64_t j = 0; j < n; j++) pc[i * c->rs + j * c->cs] = row[j];
    }
}

void oc_tile_matmul(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags)
{
    const char *fn = "oc_tile_matmul";
    if (!shapes_ok(fn, c, a, b, flags)) return;
    if (a->dtype == OC_INT8 && b->dtype == OC_INT8) {
        if (c->dtype != OC_INT32) {
            oc__raise(OC_EINVAL, "%s: int8 a and b accumulate into an int32 c, got a %s c", fn,
                      oc_dtype_name(c->dtype));
            return;
        }
        if (oc__lowp_i8_matmul_takes(c, flags & OC_TILE_TRANS_A ? a->rows : a->cols))
            oc__lowp_i8_matmul(c, a, b, flags);
        else
            int8_matmul(c, a, b, flags);
        return;
    }
    if (!float_in(a->dtype) || !float_in(b->dtype) || c->dtype != OC_FLOAT32) {
        oc__raise(OC_EINVAL, "%s: a %s, b %s, c %s (want float32/bfloat16/float16 a and b with a float32 c, "
                  "or int8 a and b with an int32 c)", fn, oc_dtype_name(a->dtype), oc_dtype_name(b->dtype),
                  oc_dtype_name(c->dtype));
        return;
    }
    if (oc__lowp_skinny_takes(c, a, b, flags)) { /* m <= 32: b read once (lowp_skinny.c) */
        oc__lowp_skinny_matmul(c, a, b, flags, true, fn);
        return;
    }
    if (oc__lowp_bf16_matmul_takes(c, a, b, flags)) { /* AMX-BF16 (lowp_bf16.c) */
        oc__lowp_bf16_matmul(c, a, b, flags, true, fn);
        return;
    }
    fmat fa, fb, fc = {c->data, c->rows, c->cols, c->rs, c->cs};
    if (!as_f32(a, flags & OC_TILE_TRANS_A, 0, &fa) || !as_f32(b, flags & OC_TILE_TRANS_B, 1, &fb)) return;
    fix_strides(&fc);
    if (fa.cols == 0) return;
    sgemm(&fc, &fa, &fb, 1.0f);
}

void oc_tile_matmul_to(oc_tile *c, const oc_tile *a, const oc_tile *b, unsigned flags)
{
    const char *fn = "oc_tile_matmul_to";
    if (!shapes_ok(fn, c, a, b, flags)) return;
    if (c->dtype == OC_INT32) {
        oc_tile_fill(c, 0.0f);
        oc_tile_matmul(c, a, b, flags);
        return;
    }
    if (!float_in(c->dtype) || !float_in(a->dtype) || !float_in(b->dtype)) {
        oc__raise(OC_EINVAL, "%s: a %s, b %s, c %s (want float dtypes)", fn, oc_dtype_name(a->dtype),
                  oc_dtype_name(b->dtype), oc_dtype_name(c->dtype));
        return;
    }
    if (oc__lowp_skinny_takes(c, a, b, flags)) {
        oc__lowp_skinny_matmul(c, a, b, flags, false, fn);
        return;
    }
    if (oc__lowp_bf16_matmul_takes(c, a, b, flags)) { /* AMX-BF16 (lowp_bf16.c) */
        oc__lowp_bf16_matmul(c, a, b, flags, false, fn);
        return;
    }
    fmat fa, fb;
    if (!as_f32(a, flags & OC_TILE_TRANS_A, 0, &fa) || !as_f32(b, flags & OC_TILE_TRANS_B, 1, &fb)) return;
    bool direct = c->dtype == OC_FLOAT32; /* sgemm writes c itself (beta 0) */
    float *acc = direct ? c->data : scratch_get(2, (size_t)(c->rows * c->cols) * sizeof(float));
    if (!acc) return;
    fmat fc = direct ? (fmat){acc, c->rows, c->cols, c->rs, c->cs} : (fmat){acc, c->rows, c->cols, c->cols, 1};
    fix_strides(&fc);
    if (fa.cols == 0) {
        oc_tile_fill(c, 0.0f);
        return;
    }
    sgemm(&fc, &fa, &fb, 0.0f);
    if (direct) return;
    oc_tile acc_t = {acc, c->rows, c->cols, c->cols, 1, OC_FLOAT32, false};
    oc_tile_copy(c, &acc_t); /* one rounding, to c's dtype */
}

const char *oc_tile_matmul_path(oc_dtype dtype)
{
    static _Thread_local char buf[384];
    const char *arch = blis_arch_name();
    switch (dtype) {
    case OC_FLOAT32:
    case OC_BFLOAT16:
    case OC_FLOAT16: {
        char small[160] = "";
#if OC_TILE_XSMM
        if (xsmm_enabled())
            snprintf(small, sizeof small,
                     "a loop in libxsmm's order when m n k <= %d, libxsmm %s JIT kernels when "
                     "m, n, k <= %d and c is row-major, else ", TINY_MACS, LIBXSMM_VERSION,
                     XSMM_MAX_DIM);
#endif
        char cfg[96];
        if (blis_cntx())
            snprintf(cfg, sizeof cfg, "configuration 'skx' from %d rows of c, else '%s'", SKX_MIN_M,
                     arch);
        else
            snprintf(cfg, sizeof cfg, "configuration '%s'", arch);
        if (dtype == OC_FLOAT32)
            snprintf(buf, sizeof buf, "float32: %sBLIS %s sgemm, %s, single-threaded", small,
                     bli_info_get_version_str(), cfg);
        else
            snprintf(buf, sizeof buf, "%s: widened to float32 (exact), then %sBLIS %s sgemm, %s "
                     "(no bf16/fp16 GEMM kernel in this BLIS)", oc_dtype_name(dtype), small,
                     bli_info_get_version_str(), cfg);
        break;
    }
    case OC_INT8: return oc__lowp_i8_matmul_path(1, 1);
    default: snprintf(buf, sizeof buf, "%s: no matmul path", oc_dtype_name(dtype)); break;
    }
    return buf;
}

const char *oc_tile_matmul_path_shape(oc_dtype dtype, int64_t m, int64_t n, int64_t k,
                                      unsigned flags)
{
    const char *skinny = oc__lowp_skinny_path(dtype, m, n, k, flags);
    if (dtype == OC_INT8) {
        const char *i8 = oc__lowp_i8_matmul_path(m, k);
        if (!i8) return "int8, k >= 2^17: opcore's portable int32 loop (compiler-vectorised)";
        return i8;
    }
    if (skinny) return skinny;
    const char *bf16 = oc__lowp_bf16_matmul_path(dtype, m, flags);
    return bf16 ? bf16 : oc_tile_matmul_path(dtype);
}
