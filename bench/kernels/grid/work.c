/* bench/kernels/grid/work.c — a grid kernel of known, uneven cost.
 *
 * work(units): instance `id` (row-major over its grid) does units[id]
 * units of work: one unit is a 64 x 64 float32 tile product accumulated in
 * the core's TCM (about what one key/value block costs a query block in
 * flash attention), so a causal [b, h, q-blocks] grid can give block q
 * q + 1 units. Writes its checksum to out[id]. */
#include <opcore/kernel.h>

#define T 64

oc_tensor *work(const oc_tensor *units)
{
    oc_tensor *out = oc_dst_tensor();
    const int64_t id = oc_cpu_id(); /* the instance's linear id */
    OC_CHECK(id < oc_numel(units), "work: instance %lld but only %lld costs", (long long)id,
             (long long)oc_numel(units));
    const int64_t n = ((const int64_t *)units->data)[id];
    float *a = oc_tcm_malloc(3 * T * T * sizeof *a), *b = a + T * T, *c = b + T * T;
    for (int i = 0; i < T * T; i++) a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f, c[i] = 0;
    for (int64_t u = 0; u < n; u++)
        for (int i = 0; i < T; i++)
            for (int k = 0; k < T; k++) {
                const float aik = a[i * T + k];
                for (int j = 0; j < T; j++) c[i * T + j] += aik * b[k * T + j];
            }
    double s = 0;
    for (int i = 0; i < T * T; i++) s += c[i];
    ((double *)out->data)[id] = s;
    oc_tcm_free(a);
    return out;
}
