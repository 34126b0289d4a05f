/* oc_dim_*: size arithmetic that records itself while a shape function is
 * traced for dynamic shapes (see dim.h and host/trace.c). Outside a trace
 * they are plain arithmetic. Division by a non-positive size, and a result
 * that overflows int64, fail the running function. */
#include "core/internal.h"
#include "engine/core.h"
#include "opcore/dim.h"
#include "opcore/host.h"

/* The log of the shape function being traced, or NULL (not traced). */
static oc_dim_log *active_log(void)
{
    oc_core *c = oc__core_current();
    return c && c->ctx.mode == OC_MODE_SHAPE ? c->dim_log : NULL;
}

static int64_t record(oc_dim_op op, int64_t a, int64_t b, int64_t r)
{
    oc_dim_log *log = active_log();
    if (log) {
        if (log->n < OC_DIM_LOG_MAX) log->e[log->n++] = (oc_dim_entry){op, a, b, r};
        else log->overflow = true;
    }
    return r;
}

/* While a shape function is traced for dynamic shapes it runs with large
 * probe sizes (host/trace.c, opcore.jax); an overflow there is the probes',
 * not the program's: the wrapped value is recorded and the symbolic replay
 * decides. Outside a trace an overflow fails the shape function. */
static bool tracing(void) { return active_log() != NULL; }

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

/* Checked arithmetic: a size that overflows int64 fails the running shape
 * function (the message names the op) instead of wrapping to a size that
 * looks valid, e.g. 0 or a small positive number. */
static int64_t overflowed(const char *fn, const char *sym, int64_t a, int64_t b)
{
    oc__raise(OC_ESHAPE, "%s: %lld %s %lld overflows int64", fn, (long long)a, sym, (long long)b);
    return 0;
}

int64_t oc_dim_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r) && !tracing()) return overflowed("oc_dim_add", "+", a, b);
    return record(OC_DIM_ADD, a, b, r);
}

int64_t oc_dim_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r) && !tracing()) return overflowed("oc_dim_sub", "-", a, b);
    return record(OC_DIM_SUB, a, b, r);
}

int64_t oc_dim_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) && !tracing()) return overflowed("oc_dim_mul", "*", a, b);
    return record(OC_DIM_MUL, a, b, r);
}

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
    int64_t q = a / b; /* C truncates: up for a < 0, so only a > 0 with a remainder adds 1 */
    return record(OC_DIM_CEIL_DIV, a, b, (a % b != 0 && a > 0) ? q + 1 : q);
}

int64_t oc_dim_mod(int64_t a, int64_t b)
{
    if (!divisor_ok("oc_dim_mod", b)) return 0;
    int64_t r = a % b; /* never overflows, unlike a - floor_div(a, b) * b */
    return record(OC_DIM_MOD, a, b, r < 0 ? r + b : r);
}

/* Recorded step by step, so the tracer rebuilds the same expression. */
int64_t oc_dim_if_gt(int64_t a, int64_t b, int64_t x, int64_t y)
{
    int64_t above = oc_dim_min(oc_dim_max(oc_dim_sub(a, b), 0), 1); /* 1 if a > b, else 0 */
    return oc_dim_add(y, oc_dim_mul(oc_dim_sub(x, y), above));
}
