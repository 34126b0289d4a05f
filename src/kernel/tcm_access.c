/* The TCM accessor: bulk copies between tensors and this core's TCM,
 * range-checked on every call (as the seeds' tensor_to_tcm/tcm_to_tensor). */
#include "core/internal.h"
#include "kernel/kernel_internal.h"
#include "opcore/kernel.h"

static bool check(oc_core *c, const oc_tensor *t, const void *tcm, int64_t start, int64_t count,
                  const char *fn)
{
    char shape[128];
    int64_t n = oc_numel(t);
    if (!t->data && n > 0) {
        oc__raise(OC_EMETA, "%s: tensor %s has no data (a meta tensor)", fn, oc_shape_str(t, shape, sizeof shape));
        return false;
    }
    if (start < 0 || count < 0 || start > n || count > n - start) {
        oc__raise(OC_EINVAL, "%s: elements [%lld, %lld) are out of range for a tensor of %lld elements %s", fn,
                  (long long)start, (long long)(start + count), (long long)n, oc_shape_str(t, shape, sizeof shape));
        return false;
    }
    size_t bytes = (size_t)count * oc_dtype_size(t->dtype);
    if (count > 0 && !oc__tcm_contains(c, tcm, bytes)) {
        oc__raise(OC_EINVAL, "%s: the buffer %p (+%zu bytes) is not inside core %u's TCM (use oc_tcm_malloc)",
                  fn, tcm, bytes, c->id);
        return false;
    }
    c->counters.tcm_bytes += bytes;
    return true;
}

void oc_tensor_to_tcm(const oc_tensor *t, void *tcm, int64_t start, int64_t count)
{
    oc_core *c = oc__kernel_core("oc_tensor_to_tcm");
    if (!c || !check(c, t, tcm, start, count, "oc_tensor_to_tcm")) return;
    if (c->streams) oc__coherence_check(c, t, false, NULL, "oc_tensor_to_tcm");
    oc__flat_copy(t, start, count, tcm, false);
}

void oc_tcm_to_tensor(oc_tensor *t, const void *tcm, int64_t start, int64_t count)
{
    oc_core *c = oc__kernel_core("oc_tcm_to_tensor");
    if (!c || !check(c, t, tcm, start, count, "oc_tcm_to_tensor")) return;
    if (t->flags & OC_TENSOR_READONLY) {
        oc__raise(OC_EINVAL, "oc_tcm_to_tensor: the tensor is a read-only input (write to oc_dst_tensor())");
        return;
    }
    if (c->streams) oc__coherence_check(c, t, true, NULL, "oc_tcm_to_tensor");
    oc__flat_copy(t, start, count, (void *)tcm, true);
}
