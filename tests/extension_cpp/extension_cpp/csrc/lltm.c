/* extension-cpp's LLTM cell (the op of its history, before muladd) in
 * opcore C: lltm_forward computes the gates with one matrix product of
 * X = [old_h, input] and the weights, lltm_backward the gradients from the
 * forward's saved results. Like the C++ original it takes float32 or
 * float64 (gradcheck needs float64) 2-D tensors of any strides; every
 * value is computed in double and stored in the tensors' dtype. */
#include <math.h>

#include <opcore/kernel.h>

/* Element (i, j) of a 2-D tensor, or element j of a 1-D one (a [3S] bias
 * broadcasts over rows like addmm's). */
static double get(const oc_tensor *t, int64_t i, int64_t j)
{
    int64_t off = t->ndim == 1 ? j * t->strides[0] : i * t->strides[0] + j * t->strides[1];
    return t->dtype == OC_FLOAT64 ? ((const double *)t->data)[off] : ((const float *)t->data)[off];
}

static void put(oc_tensor *t, int64_t i, int64_t j, double v)
{
    int64_t off = i * t->strides[0] + j * t->strides[1];
    if (t->dtype == OC_FLOAT64)
        ((double *)t->data)[off] = v;
    else
        ((float *)t->data)[off] = (float)v;
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }
static double elu(double z) { return z > 0 ? z : expm1(z); } /* alpha = 1 */
static double d_sigmoid(double z) { double s = sigmoid(z); return (1 - s) * s; }
static double d_tanh(double z) { double t = tanh(z); return 1 - t * t; }
static double d_elu(double z) { return z > 0 ? 1.0 : exp(z); } /* the original's mask, alpha = 1 */

/* The shape function has checked shapes and dtypes (shape.c). */
void lltm_forward(const oc_tensor *input, const oc_tensor *weights, const oc_tensor *bias,
                  const oc_tensor *old_h, const oc_tensor *old_cell)
{
    oc_tensor *new_h = oc_dst_tensor_at(0), *new_cell = oc_dst_tensor_at(1);
    oc_tensor *input_gate = oc_dst_tensor_at(2), *output_gate = oc_dst_tensor_at(3);
    oc_tensor *candidate_cell = oc_dst_tensor_at(4), *X = oc_dst_tensor_at(5);
    oc_tensor *gate_weights = oc_dst_tensor_at(6);
    const int64_t batch = input->sizes[0], features = input->sizes[1], state = old_h->sizes[1];
    for (int64_t b = 0; b < batch; b++) {
        /* X = cat([old_h, input], dim=1) */
        for (int64_t k = 0; k < state; k++) put(X, b, k, get(old_h, b, k));
        for (int64_t k = 0; k < features; k++) put(X, b, state + k, get(input, b, k));
        /* gate_weights = bias + X @ weights^T, summed in double from X's stored values */
        for (int64_t g = 0; g < 3 * state; g++) {
            double acc = get(bias, 0, g);
            for (int64_t k = 0; k < state + features; k++) acc += get(X, b, k) * get(weights, g, k);
            put(gate_weights, b, g, acc);
        }
        for (int64_t s = 0; s < state; s++) {
            double ig = sigmoid(get(gate_weights, b, s));
            double og = sigmoid(get(gate_weights, b, state + s));
            double cc = elu(get(gate_weights, b, 2 * state + s));
            double cell = get(old_cell, b, s) + cc * ig;
            put(input_gate, b, s, ig);
            put(output_gate, b, s, og);
            put(candidate_cell, b, s, cc);
            put(new_cell, b, s, cell);
            put(new_h, b, s, tanh(get(new_cell, b, s)) * og);
        }
    }
}

/* What gate g's gradient of row b is made from: the forward's saved results. */
typedef struct gate_inputs {
    const oc_tensor *grad_h, *grad_cell, *new_cell, *input_gate, *output_gate, *candidate_cell, *gate_weights;
    int64_t state;
} gate_inputs;

/* d(loss)/d(gate_weights[b, g]); *d_cell gets d(loss)/d(new_cell[b, s]).
 * Recomputed where needed instead of kept in a [batch, 3 * state] buffer:
 * the kernel needs no scratch memory whatever the sizes. */
static double d_gate(const gate_inputs *in, int64_t b, int64_t g, double *d_cell)
{
    const int64_t s = g % in->state, which = g / in->state;
    const double cell = get(in->new_cell, b, s), gh = get(in->grad_h, b, s);
    const double d_new_cell = d_tanh(cell) * get(in->output_gate, b, s) * gh + get(in->grad_cell, b, s);
    const double z = get(in->gate_weights, b, g);
    if (d_cell) *d_cell = d_new_cell;
    if (which == 0) return get(in->candidate_cell, b, s) * d_new_cell * d_sigmoid(z); /* input gate */
    if (which == 1) return tanh(cell) * gh * d_sigmoid(z);                             /* output gate */
    return get(in->input_gate, b, s) * d_new_cell * d_elu(z);                           /* candidate cell */
}

void lltm_backward(const oc_tensor *grad_h, const oc_tensor *grad_cell, const oc_tensor *new_cell,
                   const oc_tensor *input_gate, const oc_tensor *output_gate, const oc_tensor *candidate_cell,
                   const oc_tensor *X, const oc_tensor *gate_weights, const oc_tensor *weights)
{
    oc_tensor *d_old_h = oc_dst_tensor_at(0), *d_input = oc_dst_tensor_at(1);
    oc_tensor *d_weights = oc_dst_tensor_at(2), *d_bias = oc_dst_tensor_at(3);
    oc_tensor *d_old_cell = oc_dst_tensor_at(4);
    const int64_t batch = grad_h->sizes[0], state = grad_h->sizes[1], width = X->sizes[1];
    const gate_inputs in = {grad_h, grad_cell, new_cell, input_gate, output_gate, candidate_cell, gate_weights, state};
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t s = 0; s < state; s++) {
            double d_cell;
            d_gate(&in, b, s, &d_cell);
            put(d_old_cell, b, s, d_cell);
        }
        /* d_X = d_gates @ weights, split into d_old_h and d_input */
        for (int64_t k = 0; k < width; k++) {
            double acc = 0;
            for (int64_t g = 0; g < 3 * state; g++) acc += d_gate(&in, b, g, NULL) * get(weights, g, k);
            if (k < state)
                put(d_old_h, b, k, acc);
            else
                put(d_input, b, k - state, acc);
        }
    }
    /* d_weights = d_gates^T @ X, d_bias = d_gates summed over the batch */
    for (int64_t g = 0; g < 3 * state; g++) {
        double bias_acc = 0;
        for (int64_t b = 0; b < batch; b++) bias_acc += d_gate(&in, b, g, NULL);
        put(d_bias, 0, g, bias_acc);
        for (int64_t k = 0; k < width; k++) {
            double acc = 0;
            for (int64_t b = 0; b < batch; b++) acc += d_gate(&in, b, g, NULL) * get(X, b, k);
            put(d_weights, g, k, acc);
        }
    }
}
