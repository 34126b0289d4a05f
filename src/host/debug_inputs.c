/* Debug builds: catching a kernel that writes into one of its input
 * tensors.
 *
 * A kernel gets its inputs as `const oc_tensor *`, but C lets it cast the
 * const away and write. In a library built with --debug, the call hashes
 * the elements of every read-only tensor argument (Tensor, Tensor?, each
 * item of a Tensor[]; not the Tensor(a!) ones) before the kernel runs and
 * again after it returned, and a changed hash fails the call naming the op
 * and the argument.
 *
 * Why a checksum and not read-only memory: the caller's tensors share
 * pages with other live data (another tensor, the framework's own
 * structures, what other threads write), so mprotect on them would fault
 * innocent writes; protecting private page-aligned copies instead would
 * mean copying every input twice per call and moving the kernel's view of
 * them. The hash reads each input once more before and after, never
 * raises a false alarm, and names the argument; it does not name the
 * instruction (a write that restores the old bytes goes unseen -- it did
 * no harm). Only the elements are hashed, not the gaps of a strided view
 * (another tensor may live there).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "core/alloc.h"
#include "host/call_internal.h"
#include "opcore/tensor_ops.h"

/* Feed the elements of dims [d, ndim) at `p` into `h`, innermost runs
 * whole when they are contiguous. */
static void hash_dims(XXH64_state_t *h, const oc_tensor *t, const char *p, int d, size_t elem)
{
    if (d == t->ndim) {
        XXH64_update(h, p, elem);
        return;
    }
    if (d == t->ndim - 1 && t->strides[d] == 1) {
        XXH64_update(h, p, (size_t)t->sizes[d] * elem);
        return;
    }
    for (int64_t i = 0; i < t->sizes[d]; i++) hash_dims(h, t, p + i * t->strides[d] * (int64_t)elem, d + 1, elem);
}

static uint64_t hash_tensor(const oc_tensor *t)
{
    XXH64_state_t h;
    XXH64_reset(&h, 0);
    if (t->data && oc_numel(t) > 0) hash_dims(&h, t, t->data, 0, oc_dtype_size(t->dtype));
    return XXH64_digest(&h);
}

/* Hash every read-only tensor argument of the bound frame in a fixed order
 * (arguments, then list items): into sums[] (`check` false), or compare
 * with sums[] and return -1 at the first changed one, naming it in
 * *bad_arg and *bad_item (-1: not a list). Returns how many were hashed. */
static int each_input(const struct oc_op *op, call_frame *f, uint64_t *sums, bool check, int *bad_arg,
                      int *bad_item)
{
    int n = 0;
    for (int i = 0; i < f->nargs; i++) {
        const oc_schema_arg *a = &op->def.schema.args[i];
        if (a->is_mutable) continue;
        const oc_tensor *x = oc__frame_tensor(op, f, i);
        int64_t count = x ? 1 : a->type == OC_ARG_TENSOR_LIST ? f->values[i].tensors.count : 0;
        for (int64_t k = 0; k < count; k++, n++) {
            const oc_tensor *t = x ? x : &f->values[i].tensors.items[k];
            uint64_t s = hash_tensor(t);
            if (!check) {
                sums[n] = s;
            } else if (s != sums[n]) {
                *bad_arg = i;
                *bad_item = x ? -1 : (int)k;
                return -1;
            }
        }
    }
    return n;
}

oc_status oc__debug_inputs_sum(const struct oc_op *op, call_frame *f, uint64_t **sums)
{
    int n = 0;
    for (int i = 0; i < f->nargs; i++)
        if (!op->def.schema.args[i].is_mutable)
            n += oc__frame_tensor(op, f, i) ? 1
                 : op->def.schema.args[i].type == OC_ARG_TENSOR_LIST ? (int)f->values[i].tensors.count : 0;
    *sums = oc__malloc((size_t)(n ? n : 1) * sizeof **sums);
    if (!*sums) return oc_set_error(OC_ENOMEM, "op '%s': out of memory for the debug build's input checksums",
                                    op->qualname);
    each_input(op, f, *sums, false, NULL, NULL);
    return OC_OK;
}

oc_status oc__debug_inputs_check(const struct oc_op *op, call_frame *f, uint64_t *sums, oc_status status)
{
    int arg = -1, item = -1;
    if (status == OC_OK && each_input(op, f, sums, true, &arg, &item) < 0) {
        const oc_tensor *t = item < 0 ? oc__frame_tensor(op, f, arg) : &f->values[arg].tensors.items[item];
        char where[32] = "", shape[96];
        if (item >= 0) snprintf(where, sizeof where, " item %d", item);
        status = oc_set_error(OC_EFAULT, "op '%s': kernel '%s' wrote into its input '%s'%s (argument %d, %s %s), "
                              "which it gets read-only (const oc_tensor *): declare the argument %s in the "
                              "schema to write it in place, or write a copy (found by the debug build's input "
                              "checksums)", op->qualname, op->def.kernel_name, op->def.schema.args[arg].name,
                              where, arg + 1, oc_dtype_name(t->dtype), oc_shape_str(t, shape, sizeof shape),
                              op->def.schema.args[arg].type == OC_ARG_TENSOR_LIST ? "Tensor(a!)[]" : "Tensor(a!)");
    }
    oc__free(sums);
    return status;
}
