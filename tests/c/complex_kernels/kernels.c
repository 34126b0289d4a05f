/* Complex tensors through each way a kernel reads memory: the element-wise
 * accessor, a stream, the iterator (with a dtype mix and broadcasting), and
 * a kernel written for float32 that is handed complex64. */
#include <complex.h>

#include <opcore/iter.h>
#include <opcore/kernel.h>

/* conj(x) of a 1-D complex64, through accessors */
oc_tensor *conj_acc(const oc_tensor *x)
{
    oc_cacc in = oc_accessor(x, OC_COMPLEX64, 1);
    oc_acc out = oc_accessor(oc_dst_tensor(), OC_COMPLEX64, 1);
    for (int64_t i = 0; i < x->sizes[0]; i++) OC_AT(out, float complex, i) = conjf(OC_AT(in, float complex, i));
    return oc_dst_tensor();
}

/* conj(x) of a complex128 of any shape, through streams */
oc_tensor *conj_stream(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_COMPLEX128, "x must be complex128, got %s", oc_dtype_name(x->dtype));
    oc_stream *in = oc_read_stream(x), *out = oc_write_stream(oc_dst_tensor());
    for (int64_t n = oc_stream_remaining(in); n > 0; n--)
        OC_STREAM_WRITE(out, double complex, conj(OC_STREAM_READ(in, double complex)));
    oc_stream_close(out);
    oc_stream_close(in);
    return oc_dst_tensor();
}

/* a * b with a complex64 and b float32, broadcast, through the iterator */
oc_tensor *mul_iter(const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(a->dtype == OC_COMPLEX64 && b->dtype == OC_FLOAT32, "takes complex64 a and float32 b, got %s and %s",
             oc_dtype_name(a->dtype), oc_dtype_name(b->dtype));
    oc_iter it;
    oc_iter_init(&it, 1, OC_TENSORS(oc_dst_tensor(), a, b), 0);
    while (oc_iter_next(&it)) {
        float complex *o = it.ptr[0];
        const float complex *x = it.ptr[1];
        const float *y = it.ptr[2];
        for (int64_t i = 0; i < it.len; i++)
            o[i * it.stride[0]] = x[i * it.stride[1]] * y[i * it.stride[2]];
    }
    return oc_dst_tensor();
}

/* written for float32: a complex input stops at the accessor */
oc_tensor *twice_f32(const oc_tensor *x)
{
    oc_cacc in = oc_accessor(x, OC_FLOAT32, 1);
    oc_acc out = oc_accessor(oc_dst_tensor(), OC_FLOAT32, 1);
    for (int64_t i = 0; i < x->sizes[0]; i++) OC_AT(out, float, i) = 2 * OC_AT(in, float, i);
    return oc_dst_tensor();
}
