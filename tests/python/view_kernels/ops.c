/* Kernels of the test library oc_views: they read and write the memory
 * they are given, as any kernel does (so a lazy view handed over
 * unresolved would show in their results). */
#include <opcore/kernel.h>

oc_tensor *copy(const oc_tensor *x) { return oc_copy_(oc_dst_tensor(), x); }

/* x += 1 in place (complex64: x += 1j, which a conjugate view sees as
 * -1j), float32 or complex64, any strides. */
static void add_one(oc_tensor *x)
{
    OC_CHECK(x->dtype == OC_FLOAT32 || x->dtype == OC_COMPLEX64, "bump_ takes float32 or complex64, got %s",
             oc_dtype_name(x->dtype));
    int part = x->dtype == OC_COMPLEX64 ? 1 : 0;
    for (int64_t i = 0; i < oc_numel(x); i++) ((float *)oc_flat_ptr(x, i))[part] += 1;
}

void bump_(oc_tensor *x) { add_one(x); }

void bump_all_(oc_tensor_list_mut xs)
{
    for (int64_t i = 0; i < xs.count; i++) add_one(&xs.items[i]);
}
