/* src/tile/tile_internal.h — helpers shared by the tile sources (not public). */
#ifndef OPCORE_TILE_INTERNAL_H
#define OPCORE_TILE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "opcore/dtype.h"
#include "opcore/tile.h"

/* A tensor's 2-D matrix at one leading index. */
typedef struct oc__tile_mat {
    void *data;
    int64_t rows, cols, rs, cs;
    oc_dtype dtype;
} oc__tile_mat;

/* The dtypes a tile may hold. */
bool oc__tile_dtype_ok(oc_dtype dtype);

/* One element as float / store a float, rounding and saturating as
 * oc_tile_copy says. */
float oc__tile_load1(const void *p, oc_dtype dtype);
void oc__tile_store1(void *p, oc_dtype dtype, float v);

/* n elements from src (stride scs) to dst (stride dcs), converting dtype;
 * vectorised runs when both strides are 1. float64 is allowed on either
 * side (tensors may be float64; tiles never are). */
void oc__tile_convert_run(void *dst, oc_dtype ddt, int64_t dcs, const void *src, oc_dtype sdt, int64_t scs,
                          int64_t n);
void oc__tile_fill_run(void *dst, oc_dtype dt, int64_t cs, int64_t n, float v);

/* Fails the kernel unless t is float32 ("fn: argument 'arg' is int8, want float32"). */
bool oc__tile_want_f32(const oc_tile *t, const char *fn, const char *arg);

/* Fails the kernel unless t's dtype converts (a tile dtype, or float64 from
 * a tensor): a complex or int64 tile names the function and argument. */
bool oc__tile_want_convertible(const oc_tile *t, const char *fn, const char *arg);

/* Fails the kernel if dst and src share elements without being the very
 * same tile (tile.h: in place yes, partial overlap no; same_ok false: not
 * even the same tile). Tiles whose bytes do not meet cost two comparisons. */
bool oc__tile_apart(const oc_tile *dst, const oc_tile *src, bool same_ok, const char *fn, const char *src_name);

/* Scratch kept per thread (engine cores are long-lived threads), grown as
 * needed, never shrunk, freed when the thread ends. Slots: the tile matmul
 * uses OC__SCRATCH_MATMUL + 0..4, the low-precision linear layers
 * OC__SCRATCH_LOWP + 0..7 (a linear layer calls the matmul with its own
 * slots still in use). NULL, with fn's error raised, when out of memory. */
enum { OC__SCRATCH_MATMUL = 0, OC__SCRATCH_LOWP = 8, OC__SCRATCH_SLOTS = 16 };
void *oc__tile_scratch(int slot, size_t bytes, const char *fn);

/* exp over n floats on `path` (2 AVX-512, 1 AVX2, 0 the plain loop),
 * capped by the CPU and OC_TILE_ISA; returns the path taken (for tests:
 * every path gives the bits of glibc's AVX2 expf). */
int oc__tile_exp_run(float *d, const float *a, int64_t n, int path);

/* OC_TILE_ISA as the highest instruction set the tile layer may use: 0
 * portable, 1 avx2, 2 avxvnni, 3 avx512, 4 avx512bf16; 5 when
 * unset, empty or another word (the CPU's best). */
enum { OC__ISA_PORTABLE, OC__ISA_AVX2, OC__ISA_AVXVNNI, OC__ISA_AVX512, OC__ISA_AVX512BF16,
       OC__ISA_BEST };
int oc__tile_isa_cap(void);

#endif
