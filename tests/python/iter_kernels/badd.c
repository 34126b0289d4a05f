/* out = x + alpha * y for any dtype mix the tests use, written with the
 * iterator (opcore/iter.h) and the run conversions (opcore/vec.h): the
 * kernel of tests/python/test_iter.py. */
#include <opcore/kernel.h>
#include <opcore/vec.h>

#define BLOCK 256

/* Per element, any strides: typed loads, float math for 16-bit floats. */
#define STRIDED(T, CT, LD, ST)                                                   \
    do {                                                                         \
        T *o = it.ptr[0];                                                        \
        const T *p = it.ptr[1], *q = it.ptr[2];                                  \
        for (int64_t i = 0; i < it.len; i++)                                     \
            o[i * it.stride[0]] = ST((CT)LD(p[i * it.stride[1]]) + a * (CT)LD(q[i * it.stride[2]])); \
    } while (0)
#define ID(v) (v)

oc_tensor *badd(const oc_tensor *x, const oc_tensor *y, double alpha)
{
    OC_CHECK(x->dtype == y->dtype, "x is %s, y is %s", oc_dtype_name(x->dtype), oc_dtype_name(y->dtype));
    oc_tensor *out = oc_dst_tensor();
    oc_iter it;
    oc_iter_init(&it, 1, OC_TENSORS(out, x, y), 0);
    oc_iter_share(&it);
    const oc_dtype dt = x->dtype;
    float *xf = oc_tcm_malloc(2 * BLOCK * sizeof(float)), *yf = xf + BLOCK;
    OC_CHECK(xf != NULL, "no TCM");
    while (oc_iter_next(&it)) {
        const double a = alpha;
        if ((dt == OC_BFLOAT16 || dt == OC_FLOAT16) && oc_iter_contiguous(&it)) {
            /* runs of 16-bit floats: convert blocks to float32, add, convert back */
            const size_t es = oc_dtype_size(dt);
            for (int64_t s = 0; s < it.len; s += BLOCK) {
                int64_t n = it.len - s < BLOCK ? it.len - s : BLOCK;
                oc_load_f32_n(xf, (const char *)it.ptr[1] + s * (int64_t)es, dt, n);
                oc_load_f32_n(yf, (const char *)it.ptr[2] + s * (int64_t)es, dt, n);
                const float af = (float)alpha;
                for (int64_t i = 0; i < n; i++) xf[i] = xf[i] + af * yf[i];
                oc_store_f32_n((char *)it.ptr[0] + s * (int64_t)es, dt, xf, n);
            }
            continue;
        }
        switch (dt) {
        case OC_FLOAT32: {
            const float af = (float)alpha;
            float *o = it.ptr[0];
            const float *p = it.ptr[1], *q = it.ptr[2];
            if (oc_iter_contiguous(&it))
                for (int64_t i = 0; i < it.len; i++) o[i] = p[i] + af * q[i];
            else
                for (int64_t i = 0; i < it.len; i++)
                    o[i * it.stride[0]] = p[i * it.stride[1]] + af * q[i * it.stride[2]];
            break;
        }
        case OC_FLOAT64: STRIDED(double, double, ID, ID); break;
        case OC_INT32: STRIDED(int32_t, int64_t, ID, (int32_t)); break;
        case OC_INT64: STRIDED(int64_t, int64_t, ID, ID); break;
        case OC_BFLOAT16: STRIDED(oc_bfloat16, float, oc_bf16_to_f32, oc_f32_to_bf16); break;
        case OC_FLOAT16: STRIDED(oc_half, float, oc_half_to_f32, oc_f32_to_half); break;
        default: OC_CHECK(0, "dtype %s is not supported", oc_dtype_name(dt));
        }
    }
    oc_tcm_free(xf);
    return out;
}
