/* extension-cpp's three CPU ops in opcore C: mymuladd (a * b + c), mymul
 * (a * b, mymuladd's backward) and myadd_out (a + b written into out).
 * Like the C++ original they take float32 tensors of one shape, of any
 * strides: a flat loop when all are contiguous, else an offset per element. */
#include <opcore/kernel.h>

/* The flat offset (in elements) of element `i` of a row-major walk of t. */
static int64_t offset_of(const oc_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->sizes[d]) * t->strides[d];
        i /= t->sizes[d];
    }
    return off;
}

static void check_pair(const char *op, const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(a->dtype == OC_FLOAT32 && b->dtype == OC_FLOAT32, "%s takes float32 tensors, got %s and %s", op,
             oc_dtype_name(a->dtype), oc_dtype_name(b->dtype));
    OC_CHECK(oc_same_shape(a, b), "%s: a and b differ in shape", op);
}

/* out[i] = a[i] * b[i] (+ c when `add`) over this core's share (every
 * element when single-core). */
static void muladd_into(oc_tensor *out, const oc_tensor *a, const oc_tensor *b, float c, int add)
{
    const float *ad = a->data, *bd = b->data;
    float *od = out->data;
    int64_t lo, hi;
    oc_core_range(oc_numel(out), 16, &lo, &hi);
    if (oc_is_contiguous(a) && oc_is_contiguous(b) && oc_is_contiguous(out)) {
        for (int64_t i = lo; i < hi; i++) od[i] = add ? ad[i] * bd[i] + c : ad[i] * bd[i];
        return;
    }
    for (int64_t i = lo; i < hi; i++) {
        float v = ad[offset_of(a, i)] * bd[offset_of(b, i)];
        od[offset_of(out, i)] = add ? v + c : v;
    }
}

oc_tensor *mymuladd(const oc_tensor *a, const oc_tensor *b, double c)
{
    check_pair("mymuladd", a, b);
    oc_tensor *out = oc_dst_tensor();
    muladd_into(out, a, b, (float)c, 1);
    return out;
}

oc_tensor *mymul(const oc_tensor *a, const oc_tensor *b)
{
    check_pair("mymul", a, b);
    oc_tensor *out = oc_dst_tensor();
    muladd_into(out, a, b, 0.0f, 0);
    return out;
}

void myadd_out(const oc_tensor *a, const oc_tensor *b, oc_tensor *out)
{
    check_pair("myadd_out", a, b);
    OC_CHECK(out->dtype == OC_FLOAT32 && oc_same_shape(a, out), "myadd_out: out must be float32 of a's shape");
    const float *ad = a->data, *bd = b->data;
    float *od = out->data;
    int64_t lo, hi;
    oc_core_range(oc_numel(out), 16, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) od[offset_of(out, i)] = ad[offset_of(a, i)] + bd[offset_of(b, i)];
}
