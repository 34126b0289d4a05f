/* Kernels of tests/python/native_kernels/shape.c. */
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <opcore/kernel.h>

void kitchen(const oc_tensor *x, const oc_tensor *w, oc_int_list dims, oc_int_list pair, oc_float_list fs,
             const char *mode, oc_dtype dt, const int64_t *maybe_i, const double *maybe_f, bool flag,
             const oc_dtype *maybe_dt, const char *maybe_s)
{
    OC_CHECK(oc_copy_(oc_dst_tensor_at(0), x) != NULL, "copy into a %s result", oc_dtype_name(dt));
    oc_tensor *info = oc_dst_tensor_at(1);
    double *v = info->data;
    memset(v, 0, 32 * sizeof *v);
    if (w) {
        const oc_tensor *w32 = oc_to_dtype(w, OC_FLOAT64);
        v[0] = 1;
        for (int64_t i = 0; i < oc_numel(w32); i++) v[0] += ((const double *)w32->data)[i];
    }
    v[1] = (double)dims.count;
    for (int64_t i = 0; i < dims.count && i < 4; i++) v[2 + i] = (double)dims.values[i];
    v[6] = (double)pair.values[0];
    v[7] = (double)pair.values[1];
    v[8] = (double)fs.count;
    for (int64_t i = 0; i < fs.count && i < 3; i++) v[9 + i] = fs.values[i];
    v[12] = (double)strlen(mode);
    v[13] = mode[0];
    v[14] = dt;
    if (maybe_i) v[15] = 1, v[16] = (double)*maybe_i;
    if (maybe_f) v[17] = 1, v[18] = *maybe_f;
    v[19] = flag;
    if (maybe_dt) v[20] = 1, v[21] = *maybe_dt;
    if (maybe_s) v[22] = 1, v[23] = (double)strlen(maybe_s);
}

void scale_(oc_tensor *x, double s)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && oc_is_contiguous(x), "scale_ takes a contiguous float32 tensor");
    float *p = x->data;
    for (int64_t i = 0; i < oc_numel(x); i++) p[i] *= (float)s;
}

void fill_all_(oc_tensor_list_mut xs, double v)
{
    for (int64_t i = 0; i < xs.count; i++) oc_fill_(&xs.items[i], v);
}

oc_tensor *cat(oc_tensor_list xs)
{
    oc_tensor *out = oc_dst_tensor();
    float *d = out->data;
    for (int64_t i = 0; i < xs.count; i++) {
        const oc_tensor *t = oc_to_dtype(&xs.items[i], OC_FLOAT32);
        for (int64_t k = 0; k < oc_numel(t); k++) *d++ = *(const float *)oc_flat_ptr(t, k);
    }
    return out;
}

oc_tensor *check(const oc_tensor *x, bool fail_in_shape, bool fail_in_kernel)
{
    (void)fail_in_shape;
    OC_CHECK(!fail_in_kernel, "asked to fail in the kernel (x has %lld elements)", (long long)oc_numel(x));
    return oc_copy_(oc_dst_tensor(), x);
}

oc_tensor *sum_mc(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && oc_is_contiguous(x), "sum_mc takes a contiguous float32 tensor");
    int64_t lo, hi;
    oc_core_range(oc_numel(x), 16, &lo, &hi);
    double s = 0;
    for (int64_t i = lo; i < hi; i++) s += ((const float *)x->data)[i];
    s = oc_all_sum(s);
    oc_tensor *out = oc_dst_tensor();
    if (oc_cpu_id() == 0) {
        ((double *)out->data)[0] = s;
        ((double *)out->data)[1] = oc_cpu_count();
    }
    return out;
}

/* Where each share of a multicore launch ran, into out[share] (16 int64s,
 * -1 past the shares): 0 the caller (thread id caller_tid), 1 an opcore
 * worker ("opcore-core N"), 2 another thread (one the host lent). x only
 * makes the launch big enough to split. */
oc_tensor *where_mc(const oc_tensor *x, int64_t caller_tid)
{
    (void)x;
    /* each share runs 2 ms, so the launch's other threads claim theirs */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 2000000L);
    char name[16] = "";
    prctl(PR_GET_NAME, name);
    int64_t *v = oc_dst_tensor()->data;
    v[oc_cpu_id()] = (int64_t)syscall(SYS_gettid) == caller_tid ? 0 : strncmp(name, "opcore-core", 11) == 0 ? 1 : 2;
    if (oc_cpu_id() == 0)
        for (int i = oc_cpu_count(); i < 16; i++) v[i] = -1;
    return oc_dst_tensor();
}

oc_tensor *add_scalar(const oc_tensor *x, oc_scalar s)
{
    oc_tensor *out = oc_copy_(oc_dst_tensor(), x);
    OC_CHECK(out != NULL, "copy");
    const oc_tensor *c = oc_full_like(x, oc_scalar_to_double(s));
    return oc_add_out(out, out, c, 1.0);
}

/* out = sign * (a * x + y + b), sign -1 when neg; refuses a NaN in x[0]
 * (an error raised by a call that runs through a prepared call). float32. */
oc_tensor *affine(const oc_tensor *x, const oc_tensor *y, double a, int64_t b, bool neg)
{
    const float *xs = x->data, *ys = y->data;
    float *d = oc_dst_tensor()->data;
    int64_t n = oc_numel(x);
    OC_CHECK(n == 0 || xs[0] == xs[0], "x[0] is NaN");
    for (int64_t i = 0; i < n; i++) d[i] = (float)((neg ? -1 : 1) * (a * xs[i] + ys[i] + (double)b));
    return oc_dst_tensor();
}

/* y += a * x, in place (float32). */
void axpy_(oc_tensor *y, const oc_tensor *x, double a)
{
    float *d = y->data;
    const float *s = x->data;
    for (int64_t i = 0, n = oc_numel(y); i < n; i++) d[i] += (float)(a * s[i]);
}
