/* oc_dim_*: size arithmetic that records itself while a shape function is
 * traced for dynamic shapes (see dim.h and host/trace.c). Outside a trace
 * they are plain arithmetic. Division by a non-positive size fails the
 * running function rather than dividing by zero. */
#include "core/internal.h"
#include "engine/core.h"
#include "opcore/dim.h"
#include "opcore/host.h"

static int64_t record(oc_dim_op op, int64_t a, int64_t b, int64_t r)
{
    oc_core *c = oc__core_current();
    oc_dim_log *log = c && c->ctx.mode == OC_MODE_SHAPE ? c->dim_log : NULL;
    if (log) {
        if (log->n < OC_DIM_LOG_MAX) log->e[log->n++] = (oc_dim_entry){op, a, b, r};
        else log->overflow = true;
    }
    return r;
}

static bool divisor_ok(const char *fn, int64_t b)
{
    if (b > 0) return true;
    oc__raise(OC_ESHAPE, "%s: the divisor must be positive, got %lld", fn, (long long)b);
    return false;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Wrapping (unsigned) arithmetic: sizes never overflow in practice, and a
 * wrong program must not be undefined behaviour on top. */
#define WRAP(a, op, b) ((int64_t)((uint64_t)(a) op (uint64_t)(b)))

int64_t oc_dim_add(int64_t a, int64_t b) { return record(OC_DIM_ADD, a, b, WRAP(a, +, b)); }
int64_t oc_dim_sub(int64_t a, int64_t b) { return record(OC_DIM_SUB, a, b, WRAP(a, -, b)); }
int64_t oc_dim_mul(int64_t a, int64_t b) { return record(OC_DIM_MUL, a, b, WRAP(a, *, b)); }
int64_t oc_dim_min(int64_t a, int64_t b) { return record(OC_DIM_MIN, a, b, a < b ? a : b); }
int64_t oc_dim_max(int64_t a, int64_t b) { return record(OC_DIM_MAX, a, b, a > b ? a : b); }

int64_t oc_dim_div(int64_t a, int64_t b)
{
    if (!divisor_ok("oc_dim_div", b)) return 0;
    return record(OC_DIM_DIV, a, b, floor_div(a, b));
}

int64_t oc_dim_ceil_div(int64_t a, int64_t b)
{
    if (!divisor_ok("oc_dim_ceil_div", b)) return 0;
    return record(OC_DIM_CEIL_DIV, a, b, -floor_div(-a, b));
}

int64_t oc_dim_mod(int64_t a, int64_t b)
{
    if (!divisor_ok("oc_dim_mod", b)) return 0;
    return record(OC_DIM_MOD, a, b, a - floor_div(a, b) * b);
}
