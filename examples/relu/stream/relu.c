/* ReLU with streaming accessors: sequential reads and writes buffered in
 * the core's TCM; any shape and strides. */
#include <opcore/kernel.h>

oc_tensor *relu_forward(const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32, "relu_forward takes float32, got %s", oc_dtype_name(x->dtype));
    oc_tensor *out = oc_dst_tensor();
    oc_stream *in = oc_read_stream(x);
    oc_stream *o = oc_write_stream(out);
    for (int64_t n = oc_numel(x); n > 0; n--) {
        float v = OC_STREAM_READ(in, float);
        OC_STREAM_WRITE(o, float, v > 0.0f ? v : 0.0f);
    }
    oc_stream_close(in);
    oc_stream_close(o);
    return out;
}

oc_tensor *relu_backward(const oc_tensor *grad, const oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32 && grad->dtype == OC_FLOAT32, "relu_backward takes float32");
    OC_CHECK(oc_same_shape(grad, x), "relu_backward: grad and x must have one shape");
    oc_tensor *out = oc_dst_tensor();
    oc_stream *in = oc_read_stream(x);
    oc_stream *g = oc_read_stream(grad);
    oc_stream *o = oc_write_stream(out);
    for (int64_t n = oc_numel(x); n > 0; n--) {
        float v = OC_STREAM_READ(in, float), d = OC_STREAM_READ(g, float);
        OC_STREAM_WRITE(o, float, v > 0.0f ? d : 0.0f);
    }
    oc_stream_close(in);
    oc_stream_close(g);
    oc_stream_close(o);
    return out;
}
