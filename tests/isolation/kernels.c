/* tests/isolation/kernels.c — the kernel side (cases how < 100). */
#include <opcore/kernel.h>

#include "misbehave.h"

oc_tensor *misbehave(const oc_tensor *x, int64_t how, int64_t arg)
{
    if (how == ISO_TCM_RANGE) { /* a range past the tensor's end: an opcore-raised failure */
        float *buf = oc_tcm_malloc(64 * sizeof *buf);
        oc_tensor_to_tcm(x, buf, oc_numel(x) - 8, 16);
    }
    if (how < 100) iso_misbehave(how, arg, iso_kernel_buf, iso_shape_buf);
    /* the work when nothing went wrong: y = 2x on this core's range */
    oc_tensor *out = oc_dst_tensor();
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 1, &lo, &hi);
    const float *in = x->data;
    float *o = out->data;
    for (int64_t i = lo; i < hi; i++) o[i] = 2 * in[i];
    return out;
}

/* Writes `arg` floats past the end of its output (caught in a debug build). */
oc_tensor *overrun(const oc_tensor *x, int64_t arg)
{
    oc_tensor *out = oc_dst_tensor();
    float *o = out->data;
    int64_t n = oc_numel(x);
    if (oc_cpu_id() == 0)
        for (int64_t i = 0; i < n + arg; i++) o[i] = (float)i;
    return out;
}

/* Two results; writes `arg` floats past the end of result 1 (debug builds
 * catch it per output). */
void overrun2(const oc_tensor *x, int64_t arg)
{
    float *a = oc_dst_tensor_at(0)->data, *b = oc_dst_tensor_at(1)->data;
    int64_t n = oc_numel(x);
    for (int64_t i = 0; i < n; i++) a[i] = 1;
    for (int64_t i = 0; i < n + arg; i++) b[i] = (float)i;
}

/* In place: x *= 2 (an aliased result is not shadowed). */
void double_(oc_tensor *x)
{
    float *p = x->data;
    for (int64_t i = 0; i < oc_numel(x); i++) p[i] *= 2;
}
