/* The ops' schemas (extension-cpp's TORCH_LIBRARY blocks, in opcore) and
 * their shape functions: muladd's results have a's shape and dtype; LLTM's
 * follow the sizes its checks below name. */
#include <opcore/library.h>

static oc_tensor *like_a(const oc_tensor *a, const oc_tensor *b)
{
    OC_CHECK(oc_same_shape(a, b), "a and b differ in shape");
    return oc_empty_like(a);
}

static oc_tensor *muladd_shape(const oc_tensor *a, const oc_tensor *b, double c)
{
    (void)c;
    return like_a(a, b);
}

static void add_out_shape(const oc_tensor *a, const oc_tensor *b, oc_tensor *out)
{
    OC_CHECK(oc_same_shape(a, b) && oc_same_shape(a, out), "a, b and out differ in shape");
}

/* LLTM: input [B, F], weights [3S, S + F], bias [1, 3S] (or [3S]),
 * old_h and old_cell [B, S], all float32 or all float64. */
static void lltm_check(const char *op, int n, const oc_tensor *const *t, const char *const *names)
{
    for (int i = 0; i < n; i++) {
        OC_CHECK(t[i]->dtype == OC_FLOAT32 || t[i]->dtype == OC_FLOAT64, "%s: %s must be float32 or float64, got %s",
                 op, names[i], oc_dtype_name(t[i]->dtype));
        OC_CHECK(t[i]->dtype == t[0]->dtype, "%s: %s is %s but %s is %s", op, names[i],
                 oc_dtype_name(t[i]->dtype), names[0], oc_dtype_name(t[0]->dtype));
    }
}

static void expect_2d(const char *op, const char *name, const oc_tensor *t, int64_t rows, int64_t cols)
{
    OC_CHECK(t->ndim == 2 && t->sizes[0] == rows && t->sizes[1] == cols,
             "%s: %s must be [%lld, %lld], got %d-D [%lld, %lld]", op, name, (long long)rows, (long long)cols,
             t->ndim, (long long)(t->ndim > 0 ? t->sizes[0] : 0), (long long)(t->ndim > 1 ? t->sizes[1] : 0));
}

static void lltm_forward_shape(const oc_tensor *input, const oc_tensor *weights, const oc_tensor *bias,
                               const oc_tensor *old_h, const oc_tensor *old_cell)
{
    const char *op = "lltm_forward";
    lltm_check(op, OC_TENSORS(input, weights, bias, old_h, old_cell),
               (const char *const[]){"input", "weights", "bias", "old_h", "old_cell"});
    OC_CHECK(input->ndim == 2 && old_h->ndim == 2, "%s: input and old_h must be 2-D [batch, ...], got %d-D and %d-D",
             op, input->ndim, old_h->ndim);
    const int64_t batch = input->sizes[0], state = old_h->sizes[1], gates = oc_dim_mul(3, state);
    const int64_t width = oc_dim_add(state, input->sizes[1]);
    expect_2d(op, "old_h", old_h, batch, state);
    expect_2d(op, "old_cell", old_cell, batch, state);
    expect_2d(op, "weights", weights, gates, width);
    OC_CHECK((bias->ndim == 1 && bias->sizes[0] == gates) ||
             (bias->ndim == 2 && bias->sizes[0] == 1 && bias->sizes[1] == gates),
             "%s: bias must be [1, %lld] or [%lld]", op, (long long)gates, (long long)gates);
    oc_dtype dt = input->dtype;
    for (int i = 0; i < 5; i++) oc_set_result(i, oc_empty(dt, OC_SHAPE(batch, state))); /* new_h .. candidate_cell */
    oc_set_result(5, oc_empty(dt, OC_SHAPE(batch, width)));                          /* X */
    oc_set_result(6, oc_empty(dt, OC_SHAPE(batch, gates)));                          /* gate_weights */
}

static void lltm_backward_shape(const oc_tensor *grad_h, const oc_tensor *grad_cell, const oc_tensor *new_cell,
                                const oc_tensor *input_gate, const oc_tensor *output_gate,
                                const oc_tensor *candidate_cell, const oc_tensor *X, const oc_tensor *gate_weights,
                                const oc_tensor *weights)
{
    const char *op = "lltm_backward";
    lltm_check(op, OC_TENSORS(grad_h, grad_cell, new_cell, input_gate, output_gate, candidate_cell, X, gate_weights, weights),
               (const char *const[]){"grad_h", "grad_cell", "new_cell", "input_gate", "output_gate",
                                     "candidate_cell", "X", "gate_weights", "weights"});
    OC_CHECK(grad_h->ndim == 2 && X->ndim == 2, "%s: grad_h and X must be 2-D, got %d-D and %d-D", op, grad_h->ndim,
             X->ndim);
    const int64_t batch = grad_h->sizes[0], state = grad_h->sizes[1], gates = oc_dim_mul(3, state);
    const int64_t width = X->sizes[1];
    OC_CHECK(width >= state, "%s: X [%lld, %lld] is narrower than the state size %lld", op, (long long)batch,
             (long long)width, (long long)state);
    const oc_tensor *per_state[] = {grad_cell, new_cell, input_gate, output_gate, candidate_cell};
    const char *per_state_names[] = {"grad_cell", "new_cell", "input_gate", "output_gate", "candidate_cell"};
    for (int i = 0; i < 5; i++) expect_2d(op, per_state_names[i], per_state[i], batch, state);
    expect_2d(op, "X", X, batch, width);
    expect_2d(op, "gate_weights", gate_weights, batch, gates);
    expect_2d(op, "weights", weights, gates, width);
    oc_dtype dt = grad_h->dtype;
    oc_set_result(0, oc_empty(dt, OC_SHAPE(batch, state)));                     /* d_old_h */
    oc_set_result(1, oc_empty(dt, OC_SHAPE(batch, oc_dim_sub(width, state)))); /* d_input */
    oc_set_result(2, oc_empty(dt, OC_SHAPE(gates, width)));                     /* d_weights */
    oc_set_result(3, oc_empty(dt, OC_SHAPE(1, gates)));                         /* d_bias */
    oc_set_result(4, oc_empty(dt, OC_SHAPE(batch, state)));                     /* d_old_cell */
}

OC_LIBRARY(extension_cpp, m)
{
    oc_def(m, "mymuladd(Tensor a, Tensor b, float c) -> Tensor", muladd_shape, "mymuladd");
    oc_def(m, "mymul(Tensor a, Tensor b) -> Tensor", like_a, "mymul");
    oc_def(m, "myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()", add_out_shape, "myadd_out");
    oc_def(m,
           "lltm_forward(Tensor input, Tensor weights, Tensor bias, Tensor old_h, Tensor old_cell)"
           " -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
           lltm_forward_shape, "lltm_forward");
    oc_def(m,
           "lltm_backward(Tensor grad_h, Tensor grad_cell, Tensor new_cell, Tensor input_gate,"
           " Tensor output_gate, Tensor candidate_cell, Tensor X, Tensor gate_weights, Tensor weights)"
           " -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
           lltm_backward_shape, "lltm_backward");
}
