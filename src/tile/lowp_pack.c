/* Prepacked weights (opcore/tile.h, oc_weights_pack): the byte formats,
 * packing, reading the header back, and unpacking for the code that reads
 * rows. Three layouts share one header:
 *
 *   layout 1, "vnni-panel64" (OC_W_I8_PACKED, from OC_W_I8):
 *     n float32 scales, padded to a multiple of 64 bytes;
 *     ceil(n / 64) panels of pbytes = kp * 64 + 256 bytes each: panel c
 *     holds columns [64 c, 64 c + 64) of w^T as kp / 4 rows of 64 int32
 *     (4 consecutive k of one column in each, k zero-padded to kp, a
 *     multiple of 64; columns past n zero), then the 64 columns' int8 sums
 *     over k as int32. That is the B operand of AMX's tdpbusd (16 x 64-byte
 *     rows) and of vpdpbusd with x's 4 bytes broadcast.
 *   layouts 2, "q8_0-x8", and 3, "q4_0-x8" (OC_W_Q8_0_PACKED /
 *     OC_W_Q4_0_PACKED, from GGML's Q8_0 / Q4_0 rows): ceil(n / 8) groups
 *     of 8 rows, each k / 32 blocks of OC__LOWP_QX8_BYTES (lowp_internal.h:
 *     the 8 rows' float16 scales, then each 4-byte quad of the block for
 *     the 8 rows side by side), rows past n zero. One 32-byte load gives
 *     a quad of 8 rows, one lane a row: a row of x meets 8 rows of w with
 *     no shuffles and no reduction across lanes, as llama.cpp's repacked
 *     block_q4_0x8 does.
 *
 * Little-endian, as the CPUs that run it. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "opcore/tile.h"
#include "tile/lowp_internal.h"

/* The packed bytes hold float32 scales and int32 column sums (and float16
 * scales) read in place: their address must be a multiple of 4 (a
 * tensor's data is). */
static bool aligned4(const void *bytes, const char *fn)
{
    if (!((uintptr_t)bytes % 4)) return true;
    oc__raise(OC_EINVAL,
              "%s: packed weights at %p, not a multiple of 4 bytes (their scales are read in "
              "place): keep them in a tensor of their own",
              fn, bytes);
    return false;
}

#define PK_VERSION 1u
#define HDR OC__LOWP_PK_HDR
#define PANEL OC__LOWP_PANEL

static const char pk_magic[8] = {'O', 'C', 'P', 'K', 'I', '8', 0, 0};

typedef struct pk_header {
    char magic[8];
    uint32_t version, layout;
    int64_t n, k, kp, total;
    char packed_by[32]; /* the kernel set of the packing process, for messages */
} pk_header;
_Static_assert(sizeof(pk_header) <= HDR, "header");

/* layout l: the weights it packs, the type it reads back as (and their
 * oc_wtype_name, lowp.c's, which calls this file), its name */
static const struct {
    oc_wtype from, as;
    const char *from_name, *as_name, *name;
} layouts[] = {
    {OC_W_F32, OC_W_F32, "", "", ""},
    {OC_W_I8, OC_W_I8_PACKED, "int8", "int8-packed", "vnni-panel64"},
    {OC_W_Q8_0, OC_W_Q8_0_PACKED, "q8_0", "q8_0-packed", "q8_0-x8"},
    {OC_W_Q4_0, OC_W_Q4_0_PACKED, "q4_0", "q4_0-packed", "q4_0-x8"},
};
#define N_LAYOUTS (sizeof layouts / sizeof layouts[0])

static unsigned layout_from(oc_wtype t)
{
    for (unsigned l = 1; l < N_LAYOUTS; l++)
        if (layouts[l].from == t) return l;
    return 0;
}

static unsigned layout_as(oc_wtype t)
{
    for (unsigned l = 1; l < N_LAYOUTS; l++)
        if (layouts[l].as == t) return l;
    return 0;
}

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
static int64_t kp_of(int64_t k) { return round_up(k > 0 ? k : 1, 64); }
static int64_t pbytes_of(int64_t kp) { return kp * PANEL + PANEL * 4; }
static int64_t scales_bytes(int64_t n) { return round_up(4 * n, 64); }

/* bytes of one group of 8 rows of Q weights (bt Q8_0 or Q4_0) */
static int64_t gstride_of(oc_wtype bt, int64_t k) { return k / OC_QK * OC__LOWP_QX8_BYTES(bt); }

size_t oc_weights_pack_bytes(oc_wtype type, int64_t n, int64_t k)
{
    if (n < 0 || k < 0) return 0;
    if (type == OC_W_I8) {
        if (k >= OC__LOWP_I8_MAX_K || n > ((int64_t)1 << 40) / kp_of(k)) return 0;
        return (size_t)(HDR + scales_bytes(n) + (n + PANEL - 1) / PANEL * pbytes_of(kp_of(k)));
    }
    if ((type == OC_W_Q8_0 || type == OC_W_Q4_0) && k % OC_QK == 0 && k < ((int64_t)1 << 30)) {
        int64_t gs = gstride_of(type, k);
        if (gs && (n + 7) / 8 > ((int64_t)1 << 40) / gs) return 0;
        return (size_t)(HDR + (n + 7) / 8 * gs);
    }
    return 0;
}

static void pack_i8(char *out, const oc_weights *w, int ith, int nth)
{
    int64_t n = w->n, k = w->k, kp = kp_of(k), pb = pbytes_of(kp), np = (n + PANEL - 1) / PANEL;
    if (ith == 0) {
        memset(out + HDR, 0, (size_t)scales_bytes(n));
        memcpy(out + HDR, w->scale, (size_t)n * sizeof(float));
    }
    char *panels = out + HDR + scales_bytes(n);
    for (int64_t c = np * ith / nth; c < np * (ith + 1) / nth; c++) {
        char *pk = panels + c * pb;
        int32_t *sum = (int32_t *)(void *)(pk + kp * PANEL);
        int nc = n - c * PANEL >= PANEL ? PANEL : (int)(n - c * PANEL);
        memset(pk, 0, (size_t)pb);
        for (int col = 0; col < nc; col++) {
            const int8_t *wr = (const int8_t *)w->data + (c * PANEL + col) * w->row_bytes;
            int32_t s = 0;
            for (int64_t p = 0; p < k; p++) {
                pk[(p / 4) * PANEL * 4 + col * 4 + p % 4] = (char)wr[p];
                s += wr[p];
            }
            memcpy(sum + col, &s, sizeof s);
        }
    }
}

/* Groups of 8 rows of GGML blocks, interleaved (layouts 2 and 3). */
static void pack_qx8(char *out, const oc_weights *w, int ith, int nth)
{
    oc_wtype bt = w->type;
    int64_t nb = w->k / OC_QK, gs = gstride_of(bt, w->k), ng = (w->n + 7) / 8;
    int64_t bb = bt == OC_W_Q8_0 ? (int64_t)sizeof(oc_block_q8_0) : (int64_t)sizeof(oc_block_q4_0);
    int nq = (int)(bb - 2) / 4;
    for (int64_t g = ng * ith / nth; g < ng * (ith + 1) / nth; g++) {
        char *o = out + HDR + g * gs;
        memset(o, 0, (size_t)gs);
        for (int r = 0; r < 8 && g * 8 + r < w->n; r++) {
            const char *row = (const char *)w->data + (g * 8 + r) * w->row_bytes;
            for (int64_t b = 0; b < nb; b++) {
                const char *blk = row + b * bb;
                char *ob = o + b * OC__LOWP_QX8_BYTES(bt);
                memcpy(ob + 2 * r, blk, 2);
                for (int q = 0; q < nq; q++) memcpy(ob + 16 + 32 * q + 4 * r, blk + 2 + 4 * q, 4);
            }
        }
    }
}

void oc_weights_pack(void *dst, size_t dst_bytes, const oc_weights *w, int ith, int nth)
{
    const char *fn = "oc_weights_pack";
    unsigned l = w ? layout_from(w->type) : 0;
    if (!w || !w->data || !l || (w->type == OC_W_I8) != (w->scale != NULL)) {
        char tb[32];
        if (w && !l) snprintf(tb, sizeof tb, "weight type %d", (int)w->type);
        oc__raise(OC_EINVAL,
                  "%s: want OC_W_I8 weights with their scales (one per output), or OC_W_Q8_0 / "
                  "OC_W_Q4_0 weights (GGML blocks, no scale), got %s",
                  fn,
                  !w                                ? "NULL"
                  : !l                              ? tb
                  : !w->data                        ? "NULL data"
                  : w->scale                        ? "a scale with block weights"
                                                    : "int8 weights without scales");
        return;
    }
    const char *tn = layouts[l].from_name;
    int64_t rb = w->type == OC_W_I8     ? w->k
                 : w->type == OC_W_Q8_0 ? w->k / OC_QK * (int64_t)sizeof(oc_block_q8_0)
                                        : w->k / OC_QK * (int64_t)sizeof(oc_block_q4_0);
    if (w->n < 0 || w->k < 0 || (w->n > 1 && w->row_bytes < rb)) {
        oc__raise(OC_EINVAL, "%s: %s weights of %lld x %lld with row_bytes %lld (want >= %lld)",
                  fn, tn, (long long)w->n, (long long)w->k, (long long)w->row_bytes,
                  (long long)rb);
        return;
    }
    if (nth < 1 || ith < 0 || ith >= nth) {
        oc__raise(OC_EINVAL, "%s: part ith = %d of nth = %d (want 0 <= ith < nth)", fn, ith, nth);
        return;
    }
    size_t need = oc_weights_pack_bytes(w->type, w->n, w->k);
    if (!need) {
        if (w->type == OC_W_I8)
            oc__raise(OC_EINVAL, "%s: int8 weights %lld x %lld (want k < %d)", fn,
                      (long long)w->n, (long long)w->k, OC__LOWP_I8_MAX_K);
        else
            oc__raise(OC_EINVAL, "%s: %s weights %lld x %lld (want k a multiple of %d)", fn, tn,
                      (long long)w->n, (long long)w->k, OC_QK);
        return;
    }
    if (dst && !aligned4(dst, fn)) return;
    if (!dst || dst_bytes != need) {
        oc__raise(OC_EINVAL,
                  "%s: %s weights %lld x %lld pack into %zu bytes "
                  "(oc_weights_pack_bytes), got a buffer of %zu%s",
                  fn, tn, (long long)w->n, (long long)w->k, need, dst ? dst_bytes : 0,
                  dst ? "" : " (NULL)");
        return;
    }
    char *out = dst;
    if (ith == 0) {
        pk_header h;
        memset(&h, 0, sizeof h);
        memcpy(h.magic, pk_magic, sizeof pk_magic);
        h.version = PK_VERSION, h.layout = l;
        h.n = w->n, h.k = w->k, h.kp = l == 1 ? kp_of(w->k) : w->k, h.total = (int64_t)need;
        snprintf(h.packed_by, sizeof h.packed_by, "%s", oc__lowp_kernels_get()->isa);
        memset(out, 0, HDR);
        memcpy(out, &h, sizeof h);
    }
    if (l == 1)
        pack_i8(out, w, ith, nth);
    else
        pack_qx8(out, w, ith, nth);
}

/* The header at `bytes` read and checked against the rest; NULL after
 * raising fn's error. */
static const pk_header *header_of(const void *bytes, size_t nbytes, const char *fn,
                                  pk_header *h)
{
    if (!bytes) {
        oc__raise(OC_EINVAL, "%s: no packed weights (NULL)", fn);
        return NULL;
    }
    if (!aligned4(bytes, fn)) return NULL;
    if (nbytes < HDR) {
        oc__raise(OC_EINVAL,
                  "%s: %zu bytes cannot be packed weights (the header alone is %d; "
                  "oc_weights_pack makes them)",
                  fn, nbytes, HDR);
        return NULL;
    }
    memcpy(h, bytes, sizeof *h);
    if (memcmp(h->magic, pk_magic, sizeof pk_magic)) {
        oc__raise(OC_EINVAL,
                  "%s: these bytes are not packed weights (no OCPKI8 header: corrupt, or "
                  "not made by oc_weights_pack)",
                  fn);
        return NULL;
    }
    h->packed_by[sizeof h->packed_by - 1] = 0;
    if (h->version != PK_VERSION || h->layout < 1 || h->layout >= N_LAYOUTS) {
        oc__raise(OC_EINVAL,
                  "%s: weights packed in layout %u version %u (by '%s'); this build runs "
                  "layouts 1 (%s), 2 (%s) and 3 (%s), version %u, on every CPU: pack them "
                  "again with oc_weights_pack",
                  fn, h->layout, h->version, h->packed_by, layouts[1].name, layouts[2].name,
                  layouts[3].name, PK_VERSION);
        return NULL;
    }
    const char *tn = layouts[h->layout].as_name;
    size_t want = oc_weights_pack_bytes(layouts[h->layout].from, h->n, h->k);
    int64_t kp = h->layout == 1 ? kp_of(h->k) : h->k;
    if (!want || h->kp != kp || h->total != (int64_t)want) {
        oc__raise(OC_EINVAL,
                  "%s: corrupt header of %s weights (n %lld, k %lld, kp %lld, %lld "
                  "bytes: want kp %lld and %zu bytes)",
                  fn, tn, (long long)h->n, (long long)h->k, (long long)h->kp,
                  (long long)h->total, (long long)kp, want);
        return NULL;
    }
    if (nbytes != want) {
        oc__raise(OC_EINVAL, "%s: %s weights %lld x %lld are %zu bytes, got a buffer of %zu",
                  fn, tn, (long long)h->n, (long long)h->k, want, nbytes);
        return NULL;
    }
    return h;
}

oc_weights oc_weights_of_packed(const void *bytes, size_t nbytes)
{
    oc_weights r = {0};
    pk_header h;
    if (!header_of(bytes, nbytes, "oc_weights_of_packed", &h)) return r;
    r.data = bytes;
    r.n = h.n;
    r.k = h.k;
    r.row_bytes = h.total;
    r.type = layouts[h.layout].as;
    if (h.layout == 1) r.scale = (const float *)(const void *)((const char *)bytes + HDR);
    return r;
}

/* w's header read back and checked against w (its type, n and k). */
static bool header_for(const oc_weights *w, pk_header *h, const char *fn)
{
    if (!header_of(w->data, (size_t)(w->row_bytes > 0 ? w->row_bytes : 0), fn, h)) return false;
    if (layouts[h->layout].as != w->type || h->n != w->n || h->k != w->k) {
        unsigned wl = layout_as(w->type);
        oc__raise(OC_EINVAL, "%s: the bytes hold %s weights %lld x %lld, the oc_weights says %s "
                  "%lld x %lld",
                  fn, layouts[h->layout].as_name, (long long)h->n, (long long)h->k,
                  wl ? layouts[wl].as_name : "another type", (long long)w->n, (long long)w->k);
        return false;
    }
    return true;
}

bool oc__lowp_pk_of(const oc_weights *w, oc__lowp_pk *pk, const char *fn)
{
    pk_header h;
    if (!header_for(w, &h, fn)) return false;
    const char *b = w->data;
    pk->n = h.n, pk->k = h.k, pk->kp = h.kp, pk->pbytes = pbytes_of(h.kp);
    pk->scale = (const float *)(const void *)(b + HDR);
    pk->panels = b + HDR + scales_bytes(h.n);
    return true;
}

bool oc__lowp_qx8_of(const oc_weights *w, const char **groups, int64_t *gstride, const char *fn)
{
    pk_header h;
    if (!header_for(w, &h, fn)) return false;
    *groups = oc__lowp_qx8_groups(w, gstride);
    return true;
}

bool oc__lowp_is_packed(oc_wtype t) { return layout_as(t) != 0; }

const char *oc__lowp_pk_layout(oc_wtype t) { return layouts[layout_as(t)].name; }

void oc__lowp_pk_unpack(int8_t *rows, int64_t rrb, const oc__lowp_pk *pk, int64_t j, int nc)
{
    const char *p = pk->panels + j / PANEL * pk->pbytes;
    int c0 = (int)(j % PANEL);
    for (int r = 0; r < nc; r++)
        for (int64_t q = 0; q < pk->k; q += 4) {
            int64_t left = pk->k - q;
            memcpy(rows + r * rrb + q, p + q * PANEL + (c0 + r) * 4, left < 4 ? (size_t)left : 4);
        }
}
