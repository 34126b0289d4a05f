/* Shape functions and registration of the cpu_examples port (cpu_examples.c). */
#include <opcore/library.h>

static oc_tensor *array_attr_shape(oc_int_list array)
{
    (void)array;
    return oc_empty(OC_INT32, 0, NULL);
}

OC_LIBRARY(jax_ffi_cpu_examples, m)
{
    oc_def(m, "array_attr(int[] array) -> Tensor", array_attr_shape, "array_attr");
    oc_def(m, "aliasing(Tensor(a!) x) -> Tensor(a!)", NULL, "aliasing");
}
