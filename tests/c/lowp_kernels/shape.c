/* The low-precision tile test library: one multicore op running case
 * `which` of kernels.c on its tensors. */
#include <opcore/library.h>

static void lcase_shape(oc_tensor *y, oc_tensor *z, const oc_tensor *x, const oc_tensor *w,
                        const oc_tensor *ws, int64_t which, int64_t type)
{
    (void)y, (void)z, (void)x, (void)w, (void)ws, (void)which, (void)type;
}

OC_LIBRARY(lowptest, m)
{
    oc_def(m,
           "lcase(Tensor(a!) y, Tensor(b!) z, Tensor x, Tensor w, Tensor ws, int which, int type) "
           "-> ()",
           lcase_shape, "lcase", .multicore = true);
}
