/* src/ops/elementwise.c — argument checks and dispatch shared by every
 * element-wise op. The ops themselves (unary.c, binary.c) only supply
 * typed row kernels; everything a user can get wrong is checked here, once,
 * with messages naming the op, the argument, expected and got.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

const char *oc__argname(char *buf, size_t len, const char *fn, bool is_out, const char *arg)
{
    snprintf(buf, len, "%s%s: argument '%s'", fn, is_out ? "_out" : "", arg);
    return buf;
}

/* oc__require_data with the "_out" spelling for out variants; the name is
 * only formatted when the check fails (this runs on every call). */
static bool require_data(const oc_tensor *t, const char *fn, bool is_out, const char *arg)
{
    char what[64];
    if (t && (t->data || oc_numel(t) == 0 || oc__in_shape_fn())) return true;
    snprintf(what, sizeof what, "%s%s", fn, is_out ? "_out" : "");
    return oc__require_data(t, what, arg);
}

bool oc__check_tensor_arg(const oc_tensor *t, const char *fn, bool is_out, const char *arg,
                          bool writable)
{
    char what[64];
    if (!t) {
        oc__raise(OC_EINVAL, "%s is NULL, expected a tensor",
                  oc__argname(what, sizeof what, fn, is_out, arg));
        return false;
    }
    if (!oc_dtype_is_valid(t->dtype)) {
        oc__raise(OC_EINVAL, "%s has dtype %d, expected a valid oc_dtype",
                  oc__argname(what, sizeof what, fn, is_out, arg), (int)t->dtype);
        return false;
    }
    if (writable && (t->flags & OC_TENSOR_READONLY)) {
        oc__raise(OC_EINVAL, "%s is read-only (a kernel input), expected a writable tensor",
                  oc__argname(what, sizeof what, fn, is_out, arg));
        return false;
    }
    return true;
}

/* "float32, float64, float16, bfloat16": the dtypes op supports. */
static const char *oc__supported_list(const oc__ew_op *op, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < OC_NUM_DTYPES; d++) {
        if (!op->tbl[d])
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                         oc_dtype_name((oc_dtype)d));
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
    return buf;
}

/* t must have ref's dtype and shape (no promotion, no broadcasting). */
static bool oc__check_like(const oc_tensor *t, const oc_tensor *ref, const char *fn,
                           bool is_out, const char *arg)
{
    char what[64], got[400], want[400];
    if (t->dtype != ref->dtype) {
        oc__raise(OC_EINVAL, "%s has dtype %s, expected %s (no type promotion)",
                  oc__argname(what, sizeof what, fn, is_out, arg), oc_dtype_name(t->dtype),
                  oc_dtype_name(ref->dtype));
        return false;
    }
    if (!oc_same_shape(t, ref)) {
        oc__raise(OC_EINVAL, "%s has shape %s, expected %s (no broadcasting)",
                  oc__argname(what, sizeof what, fn, is_out, arg),
                  oc_shape_str(t, got, sizeof got), oc_shape_str(ref, want, sizeof want));
        return false;
    }
    return true;
}

/* Checks on the inputs alone: present, supported dtype, matching b. */
static bool oc__check_inputs(const oc__ew_op *op, bool is_out, const oc_tensor *a,
                             const oc_tensor *b, double p0)
{
    char what[64], list[200];
    const char *fn = op->name;
    if (!oc__check_tensor_arg(a, fn, is_out, "a", false))
        return false;
    if (!op->tbl[a->dtype]) {
        const bool why = op->no_complex && oc_dtype_is_complex(a->dtype);
        oc__raise(OC_EINVAL, "%s has dtype %s, expected one of %s%s%s%s",
                  oc__argname(what, sizeof what, fn, is_out, "a"), oc_dtype_name(a->dtype),
                  oc__supported_list(op, list, sizeof list), why ? " (" : "",
                  why ? op->no_complex : "", why ? ")" : "");
        return false;
    }
    if (op->arity == 2 && (!oc__check_tensor_arg(b, fn, is_out, "b", false) ||
                           !oc__check_like(b, a, fn, is_out, "b")))
        return false;
    if (op->int_p0 && oc_dtype_is_integral(a->dtype) && p0 != trunc(p0)) {
        oc__raise(OC_EINVAL, "%s%s: argument '%s' is %g, expected an integer for %s tensors",
                  fn, is_out ? "_out" : "", op->int_p0, p0, oc_dtype_name(a->dtype));
        return false;
    }
    if (!require_data(a, fn, is_out, "a"))
        return false;
    return op->arity == 1 || require_data(b, fn, is_out, "b");
}

oc_tensor *oc__ew_apply(const oc__ew_op *op, bool is_out, oc_tensor *out, const oc_tensor *a,
                        const oc_tensor *b, double p0, double p1)
{

    if (!oc__check_inputs(op, is_out, a, b, p0))
        return NULL;
    if (is_out) {
        if (!oc__check_tensor_arg(out, op->name, true, "out", true) ||
            !oc__check_like(out, a, op->name, true, "out") ||
            !require_data(out, op->name, true, "out"))
            return NULL;
    } else {
        out = oc__tensor_new(a->dtype, a->ndim, a->sizes);
        if (!out)
            return NULL;
    }
    /* shape functions get the checked (meta) result; no data is touched */
    if (oc__in_shape_fn() || oc_is_meta(out))
        return out;
    const oc_tensor *ts[3] = {out, a, op->arity == 2 ? b : NULL};
    oc__params prm = {p0, p1, NULL};
    oc__foreach_row(op->arity + 1, ts, op->tbl[a->dtype], &prm);
    return out;
}
