/* Test ops for tests/python/test_torch_parity.py (library oc_parity): an
 * in-place op of extension-cpp's `myadd_out` schema, and an LLTM-style cell
 * (several inputs, several unnamed results, a backward that needs a
 * result) with backwards bound in different ways. */
#include <opcore/check.h>
#include <opcore/library.h>

static void add_out_shape(const oc_tensor *a, const oc_tensor *b, oc_tensor *out)
{
    OC_CHECK(oc_same_shape(a, b) && oc_same_shape(a, out), "myadd_out: a, b and out differ in shape");
}

static void cell_check(const oc_tensor *x, const oc_tensor *h, const oc_tensor *c)
{
    OC_CHECK(oc_same_shape(x, h) && oc_same_shape(x, c), "cell: x, h and c differ in shape");
}

/* (new_h, new_cell), both of x's shape */
static void cell_shape(const oc_tensor *x, const oc_tensor *h, const oc_tensor *c)
{
    cell_check(x, h, c);
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty_like(x));
}

/* (grad_x, grad_h, grad_c), each of x's shape */
static void grads_like_x(const oc_tensor *x)
{
    for (int i = 0; i < 3; i++) oc_set_result(i, oc_empty_like(x));
}

static void cell_backward_shape(const oc_tensor *grad0, const oc_tensor *grad1, const oc_tensor *result0,
                                const oc_tensor *x, const oc_tensor *h)
{
    (void)grad0, (void)grad1, (void)result0, (void)h;
    grads_like_x(x);
}

static void cell_backward_seeds_shape(const oc_tensor *dh, const oc_tensor *dc, const oc_tensor *x,
                                      const oc_tensor *h, const oc_tensor *c)
{
    (void)dh, (void)dc;
    cell_check(x, h, c);
    grads_like_x(x);
}

OC_LIBRARY(oc_parity, m)
{
    oc_def(m, "myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()", add_out_shape, "myadd_out");
    oc_def(m, "cell(Tensor x, Tensor h, Tensor c) -> (Tensor, Tensor)", cell_shape, "cell");
    /* bound by name: the incoming gradients, the saved new_h, two inputs */
    oc_def(m, "cell_backward(Tensor grad0, Tensor grad1, Tensor result0, Tensor x, Tensor h) "
              "-> (Tensor grad_x, Tensor grad_h, Tensor grad_c)",
           cell_backward_shape, "cell_backward");
    /* the seeds' order (gradients, then the inputs), names of its own */
    oc_def(m, "cell_backward_seeds(Tensor dh, Tensor dc, Tensor x, Tensor h, Tensor c) -> (Tensor, Tensor, Tensor)",
           cell_backward_seeds_shape, "cell_backward_seeds");
}
