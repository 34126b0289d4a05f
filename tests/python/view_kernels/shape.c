/* Test ops for tests/python/test_direct_calls.py (library oc_views). */
#include <opcore/library.h>

static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }

OC_LIBRARY(oc_views, m)
{
    oc_def(m, "copy(Tensor x) -> Tensor", same, "copy");
    oc_def(m, "bump_(Tensor(a!) x) -> Tensor(a!)", NULL, "bump_");
    oc_def(m, "bump_void_(Tensor(a!) x) -> ()", NULL, "bump_");
    oc_def(m, "bump_all_(Tensor(a!)[] xs) -> ()", NULL, "bump_all_");
}
