/* Recursion that overflows a small kernel stack for a large depth. */
#include <opcore/kernel.h>
#include <string.h>

static int64_t deep(int64_t depth)
{
    volatile char pad[512];
    memset((char *)pad, (int)(depth & 0x7f), sizeof pad);
    if (depth <= 0) return pad[3];
    return deep(depth - 1) + pad[depth % 512];
}

oc_tensor *recurse(const oc_tensor *x, int64_t depth)
{
    oc_tensor *out = oc_dst_tensor();
    oc_copy_(out, x);
    float extra = (float)(deep(depth) * 0);
    int64_t n = oc_numel(out);
    for (int64_t i = 0; i < n; i++) *(float *)oc_flat_ptr(out, i) += extra;
    return out;
}
