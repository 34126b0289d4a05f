/* Dynamic shapes: explaining result sizes in terms of input sizes.
 *
 * The shape function runs once per "run": the same arguments with
 * different concrete values for the dynamic sizes (the framework's real
 * values and distinct probe values). A result size is then
 *   - a constant, if it is the same in every run;
 *   - an input size, if it equals that input size in every run;
 *   - an input's element count, likewise (oc_numel);
 *   - an oc_dim_* operation (recorded in the run's log at the same place
 *     in every run) whose operands are explained the same way.
 * Anything else was computed by C arithmetic the tracer cannot see, and is
 * an error rather than a constant that would be wrong at other sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "host/call_internal.h"

#define MAX_RUNS 8

typedef struct trace_run {
    call_frame frame;
    oc_tensor metas[OC_MAX_RESULTS];
    oc_dim_log log;
} trace_run;

typedef struct tracer {
    const struct oc_op *op;
    trace_run *runs;
    int nruns;
    bool log_usable;       /* every run recorded the same oc_dim_* sequence */
    int entry_node[OC_DIM_LOG_MAX]; /* memo: node explaining log entry k (-1 unknown, -2 none) */
    oc_shape_trace *out;
} tracer;

static int add_node(tracer *t, oc_dim_node n)
{
    if (t->out->num_nodes == OC_MAX_DIM_NODES) return -1;
    t->out->nodes[t->out->num_nodes] = n;
    return t->out->num_nodes++;
}

/* Each tensor input (argument, list item) as seen in run r; NULL for None
 * or past the end. */
static const oc_tensor *input(const tracer *t, int r, int arg, int item)
{
    call_frame *f = &t->runs[r].frame;
    oc_arg_type type = t->op->def.schema.args[arg].type;
    if (type == OC_ARG_TENSOR) return item == 0 ? oc__frame_tensor(t->op, f, arg) : NULL;
    if (type == OC_ARG_TENSOR_LIST && item < f->values[arg].tensors.count) return &f->values[arg].tensors.items[item];
    return NULL;
}

/* The value of int argument `arg` (or item `item` of an int list) in run r;
 * false if it has none (None, or past the end). */
static bool int_value(const tracer *t, int r, int arg, int item, int64_t *out)
{
    const call_frame *f = &t->runs[r].frame;
    const oc_schema_arg *a = &t->op->def.schema.args[arg];
    const call_value *v = a->optional ? f->optional_ptrs[arg] : &f->values[arg];
    if (!v) return false;
    if (a->type == OC_ARG_INT && item == 0) *out = v->i;
    else if (a->type == OC_ARG_INT_LIST && item < v->ints.count) *out = v->ints.values[item];
    else return false;
    return true;
}

static int leaf(tracer *t, const int64_t *vals)
{
    const oc_schema *s = &t->op->def.schema;
    /* an int argument (SymInt, SymInt[] items): dim -1 */
    for (int a = 0; a < s->num_args; a++) {
        int64_t v0;
        for (int item = 0; int_value(t, 0, a, item, &v0); item++) {
            bool match = true;
            for (int r = 0; r < t->nruns && match; r++) {
                int64_t v;
                match = int_value(t, r, a, item, &v) && v == vals[r];
            }
            if (match) return add_node(t, (oc_dim_node){.op = OC_DIM_INPUT, .arg = a, .item = item, .dim = -1});
        }
    }
    for (int a = 0; a < s->num_args; a++)
        for (int item = 0; input(t, 0, a, item); item++) {
            const oc_tensor *x0 = input(t, 0, a, item);
            for (int d = 0; d < x0->ndim; d++) {
                bool match = true;
                for (int r = 0; r < t->nruns && match; r++) {
                    const oc_tensor *x = input(t, r, a, item);
                    match = x && x->ndim == x0->ndim && x->sizes[d] == vals[r];
                }
                if (match)
                    return add_node(t, (oc_dim_node){.op = OC_DIM_INPUT, .arg = a, .item = item, .dim = d});
            }
            /* its element count: a product of its sizes */
            bool match = x0->ndim > 1;
            for (int r = 0; r < t->nruns && match; r++) {
                const oc_tensor *x = input(t, r, a, item);
                match = x && x->ndim == x0->ndim && oc_numel(x) == vals[r];
            }
            if (!match) continue;
            int acc = add_node(t, (oc_dim_node){.op = OC_DIM_INPUT, .arg = a, .item = item, .dim = 0});
            for (int d = 1; d < x0->ndim && acc >= 0; d++) {
                int dn = add_node(t, (oc_dim_node){.op = OC_DIM_INPUT, .arg = a, .item = item, .dim = d});
                acc = dn < 0 ? -1 : add_node(t, (oc_dim_node){.op = OC_DIM_MUL, .lhs = acc, .rhs = dn});
            }
            return acc;
        }
    return -2;
}

static int explain(tracer *t, const int64_t *vals, int limit);

/* The latest log entry before `limit` whose results are `vals` and whose
 * operands are explained; -2 if none, -1 if out of nodes. */
static int from_log(tracer *t, const int64_t *vals, int limit)
{
    for (int k = limit - 1; k >= 0; k--) {
        bool match = true;
        for (int r = 0; r < t->nruns && match; r++) match = t->runs[r].log.e[k].r == vals[r];
        if (!match) continue;
        if (t->entry_node[k] != -1) {
            if (t->entry_node[k] >= 0) return t->entry_node[k];
            continue;
        }
        int64_t a[MAX_RUNS], b[MAX_RUNS];
        for (int r = 0; r < t->nruns; r++) {
            a[r] = t->runs[r].log.e[k].a;
            b[r] = t->runs[r].log.e[k].b;
        }
        int lhs = explain(t, a, k), rhs = lhs >= 0 ? explain(t, b, k) : lhs;
        if (lhs == -1 || rhs == -1) return -1;
        t->entry_node[k] = lhs >= 0 && rhs >= 0
                               ? add_node(t, (oc_dim_node){.op = (oc_dim_op)t->runs[0].log.e[k].op, .lhs = lhs, .rhs = rhs})
                               : -2;
        if (t->entry_node[k] >= 0 || t->entry_node[k] == -1) return t->entry_node[k];
    }
    return -2;
}

/* A node for the values `vals` (one per run), using log entries before
 * `limit`; -2 if unexplained, -1 if out of nodes. An oc_dim_* result comes
 * before an input size: it says how the size was made, where an input size
 * equal to it in every run may differ at other sizes (oc_dim_min(n, 30000)
 * is n at every probe size). */
static int explain(tracer *t, const int64_t *vals, int limit)
{
    bool constant = true;
    for (int r = 1; r < t->nruns; r++) constant = constant && vals[r] == vals[0];
    if (constant) return add_node(t, (oc_dim_node){.op = OC_DIM_CONST, .value = vals[0]});
    int n = t->log_usable ? from_log(t, vals, limit) : -2;
    return n != -2 ? n : leaf(t, vals);
}

static bool same_log(const tracer *t)
{
    const oc_dim_log *l0 = &t->runs[0].log;
    if (l0->overflow) return false;
    for (int r = 1; r < t->nruns; r++) {
        const oc_dim_log *l = &t->runs[r].log;
        if (l->overflow || l->n != l0->n) return false;
        for (int k = 0; k < l0->n; k++)
            if (l->e[k].op != l0->e[k].op) return false;
    }
    return true;
}

/* The tensor inputs' sizes in run r, for messages: "x [10007, 4], w [4, 3]". */
static void describe_run(const tracer *t, int r, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    const oc_schema *s = &t->op->def.schema;
    for (int a = 0; a < s->num_args && n < len; a++)
        for (int item = 0; input(t, r, a, item) && n < len; item++) {
            const oc_tensor *x = input(t, r, a, item);
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", s->args[a].name);
            if (s->args[a].type == OC_ARG_TENSOR_LIST && n < len) n += (size_t)snprintf(buf + n, len - n, "[%d]", item);
            char shape[256];
            if (n < len) n += (size_t)snprintf(buf + n, len - n, " %s", oc_shape_str(x, shape, sizeof shape));
        }
}

oc_status oc_op_trace_shapes(const oc_op *op, const oc_value *const *runs, int nruns, int nargs,
                             oc_shape_trace *out)
{
    if (!op || !runs || !out || nruns < 2 || nruns > MAX_RUNS)
        return oc_set_error(OC_EINVAL, "oc_op_trace_shapes: op, out and 2 to %d runs are required", MAX_RUNS);
    tracer t = {.op = op, .nruns = nruns, .out = out};
    oc_status st = oc__op_enter(op); /* runs its shape function */
    if (st) return st;
    t.runs = oc__calloc((size_t)nruns, sizeof *t.runs);
    if (!t.runs) {
        oc__op_leave(op);
        return oc_set_error(OC_ENOMEM, "oc_op_trace_shapes: out of memory");
    }
    memset(out, 0, sizeof *out);
    out->num_results = op->num_results;
    int bound = 0;
    for (int r = 0; r < nruns && !st; r++, bound++) {
        st = oc__frame_bind(op, runs[r], nargs, false, &t.runs[r].frame);
        if (!st) st = oc__frame_infer(op, &t.runs[r].frame, t.runs[r].metas, &t.runs[r].log);
        if (st && r > 0) {
            char why[2048], sizes[512];
            snprintf(why, sizeof why, "%s", oc_errmsg());
            describe_run(&t, r, sizes, sizeof sizes);
            st = oc_set_error(st, "op '%s': the shape function fails when the dynamic sizes take other "
                              "values (inputs %s): %s -- opcore runs shape functions with probe sizes "
                              "to keep dynamic sizes symbolic; a check that holds only for particular "
                              "sizes needs those sizes to be static", op->qualname, sizes, why);
        }
    }
    t.log_usable = !st && same_log(&t);
    for (int k = 0; k < OC_DIM_LOG_MAX; k++) t.entry_node[k] = -1;
    for (int i = 0; !st && i < op->num_results; i++) {
        const oc_tensor *m0 = &t.runs[0].metas[i];
        for (int r = 1; r < nruns && !st; r++)
            if (t.runs[r].metas[i].ndim != m0->ndim || t.runs[r].metas[i].dtype != m0->dtype)
                st = oc_set_error(OC_ESHAPE, "op '%s': result %d's rank or dtype depends on a dynamic "
                                  "size; that cannot be traced", op->qualname, i);
        out->dtypes[i] = m0->dtype;
        out->ndims[i] = m0->ndim;
        for (int d = 0; !st && d < m0->ndim; d++) {
            int64_t vals[MAX_RUNS];
            for (int r = 0; r < nruns; r++) vals[r] = t.runs[r].metas[i].sizes[d];
            int node = explain(&t, vals, t.log_usable ? t.runs[0].log.n : 0);
            if (node == -1)
                st = oc_set_error(OC_ESHAPE, "op '%s': result %d: its sizes take more than %d steps to "
                                  "explain", op->qualname, i, OC_MAX_DIM_NODES);
            else if (node < 0) {
                char first[512], last[512];
                describe_run(&t, 0, first, sizeof first);
                describe_run(&t, nruns - 1, last, sizeof last);
                st = oc_set_error(OC_ESHAPE,
                                  "op '%s': result %d size %d (%lld for inputs %s, %lld for inputs %s) is "
                                  "computed from a dynamic size with C arithmetic opcore cannot follow; "
                                  "compute it with the oc_dim_* helpers of <opcore/dim.h> "
                                  "(oc_dim_mul(x->sizes[0], 2), oc_dim_div(oc_numel(x), n), ...; a branch "
                                  "or a plain C min/max on a size: oc_dim_min(n, 6), oc_dim_max, "
                                  "oc_dim_if_gt(n, 4, a, b) for n > 4 ? a : b) so that it stays symbolic "
                                  "under torch.compile(dynamic=True), torch.export and jax.export",
                                  op->qualname, i, d, (long long)vals[0], first, (long long)vals[nruns - 1], last);
            } else
                out->sizes[i][d] = node;
        }
    }
    for (int r = 0; r < bound; r++) oc__frame_release(&t.runs[r].frame);
    oc__free(t.runs);
    oc__op_leave(op);
    return st;
}
