/* Shape functions and registration of the cpu_examples port (cpu_examples.c). */
#include <opcore/library.h>

static oc_tensor *array_attr_shape(oc_int_list array)
{
    (void)array;
    return oc_empty(OC_INT32, 0, NULL);
}

/* Two int32 scalars; the values are read by the kernel (a missing key
 * fails there, with the same message a shape-time lookup would give). */
static void dictionary_attr_shape(const oc_dict *attrs)
{
    (void)attrs;
    oc_set_result(0, oc_empty(OC_INT32, 0, NULL));
    oc_set_result(1, oc_empty(OC_INT32, 0, NULL));
}

OC_LIBRARY(jax_ffi_cpu_examples, m)
{
    oc_def(m, "array_attr(int[] array) -> Tensor", array_attr_shape, "array_attr");
    oc_def(m, "dictionary_attr(Dict attrs) -> (Tensor secret, Tensor count)", dictionary_attr_shape,
           "dictionary_attr");
    oc_def(m, "aliasing(Tensor(a!) x) -> Tensor(a!)", NULL, "aliasing");
}
