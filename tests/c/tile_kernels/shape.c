/* The tile test library: one op whose kernel runs tile case `which` on x
 * and y and writes the result into `out` (see kernels.c). */
#include <opcore/library.h>

static void tcase_shape(oc_tensor *out, const oc_tensor *x, const oc_tensor *y, int64_t which)
{
    (void)out, (void)x, (void)y, (void)which;
}

OC_LIBRARY(tiletest, m)
{
    oc_def(m, "tcase(Tensor(a!) out, Tensor x, Tensor y, int which) -> ()", tcase_shape, "tcase");
}
