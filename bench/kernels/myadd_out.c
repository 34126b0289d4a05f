/* extension-cpp's myadd_out (out = a + b, float32, written in place), the
 * loop of its muladd.cpp, for bench/inplace_bench.py. */
#include <opcore/kernel.h>

void myadd_out(const oc_tensor *a, const oc_tensor *b, oc_tensor *out)
{
    OC_CHECK(a->dtype == OC_FLOAT32 && b->dtype == OC_FLOAT32 && out->dtype == OC_FLOAT32, "float32 only");
    const float *ad = a->data, *bd = b->data;
    float *od = out->data;
    for (int64_t i = 0, n = oc_numel(out); i < n; i++) od[i] = ad[i] + bd[i];
}
