/* The group-wise low-precision test library: one multicore op running
 * case `which` of kernels.c on its tensors. */
#include <opcore/library.h>

static void gcase_shape(oc_tensor *y, oc_tensor *s, oc_tensor *z, const oc_tensor *x,
                        const oc_tensor *w, int64_t which, int64_t type, int64_t group)
{
    (void)y, (void)s, (void)z, (void)x, (void)w, (void)which, (void)type, (void)group;
}

OC_LIBRARY(lowpgtest, m)
{
    oc_def(m,
           "gcase(Tensor(a!) y, Tensor(b!) s, Tensor(c!) z, Tensor x, Tensor w, int which, "
           "int type, int group) -> ()",
           gcase_shape, "gcase", .multicore = true);
}
