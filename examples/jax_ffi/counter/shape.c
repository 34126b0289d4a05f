/* Shape function and registration of the counter example (counter.c). */
#include <opcore/library.h>

/* An int32 scalar. */
static oc_tensor *counter_shape(int64_t index)
{
    (void)index;
    return oc_empty(OC_INT32, 0, NULL);
}

OC_LIBRARY(jax_ffi_counter, m)
{
    oc_def(m, "counter(int index) -> Tensor", counter_shape, "counter");
}
