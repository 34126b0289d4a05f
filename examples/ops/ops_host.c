/* A C host program calling every op of the nn_ops example library through
 * the host API: several results, Tensor[], an optional None, int[2], an
 * in-place update of a tensor list, and the cross-core sum. Exits non-zero
 * on any wrong result.  Usage: ops_host path/to/libnn_ops.so */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <opcore/host.h>

static int failures;

static void expect(int ok, const char *what)
{
    printf("%-48s %s\n", what, ok ? "ok" : "WRONG");
    failures += !ok;
}

static const oc_op *find(const char *name)
{
    const oc_op *op = oc_op_find(name);
    if (!op) {
        fprintf(stderr, "%s\n", oc_errmsg());
        exit(1);
    }
    return op;
}

static void run(const char *name, const oc_value *args, int nargs, oc_tensor **results)
{
    if (oc_op_invoke(find(name), args, nargs, results) != OC_OK) {
        fprintf(stderr, "%s\n", oc_errmsg());
        exit(1);
    }
}

int main(int argc, char **argv)
{
    oc_library *lib;
    if (argc != 2 || oc_library_load(argv[1], &lib) != OC_OK) {
        fprintf(stderr, "usage: ops_host libnn_ops.so (%s)\n", oc_errmsg());
        return 2;
    }
    float x[8] = {1, 2, 3, 4, -1, 0, 1, 2};
    oc_tensor xt;
    oc_tensor_init(&xt, x, OC_FLOAT32, 2, (int64_t[]){2, 4});

    /* layer_norm: int[], Tensor? weight and bias left out (None), three results */
    int64_t norm[] = {4};
    oc_value ln[] = {oc_value_tensor(&xt), oc_value_ints(norm, 1)};
    oc_tensor *r[3];
    run("nn_ops::layer_norm", ln, 2, r);
    float *mean = r[1]->data, *out = r[0]->data;
    expect(fabsf(mean[0] - 2.5f) < 1e-6f && fabsf(mean[1] - 0.5f) < 1e-6f, "layer_norm: mean per row");
    expect(fabsf(out[0] + out[3]) < 1e-5f && out[0] < 0, "layer_norm: normalized rows");
    for (int i = 0; i < 3; i++) oc_tensor_free(r[i]);

    /* concat: Tensor[] */
    oc_tensor parts[2] = {xt, xt};
    oc_value cat[] = {oc_value_tensors(parts, 2), oc_value_int(1)};
    run("nn_ops::concat", cat, 2, r);
    expect(r[0]->sizes[1] == 8 && ((float *)r[0]->data)[4] == 1 && ((float *)r[0]->data)[8] == -1, "concat: [2, 8]");
    oc_tensor_free(r[0]);

    /* avg_pool2d: int[2] as one int (both dims), defaults for the rest */
    oc_tensor img;
    oc_tensor_init(&img, x, OC_FLOAT32, 4, (int64_t[]){1, 1, 2, 4});
    oc_value pool[] = {oc_value_tensor(&img), oc_value_int(2), oc_value_int(2)};
    run("nn_ops::avg_pool2d", pool, 3, r);
    expect(r[0]->sizes[3] == 2 && ((float *)r[0]->data)[0] == 0.5f, "avg_pool2d: 2x2 windows");
    oc_tensor_free(r[0]);

    /* linear with bias = None */
    float w[4] = {1, 1, 1, 1};
    oc_tensor wt;
    oc_tensor_init(&wt, w, OC_FLOAT32, 2, (int64_t[]){1, 4});
    oc_value lin[] = {oc_value_tensor(&xt), oc_value_tensor(&wt), oc_value_none()};
    run("nn_ops::linear", lin, 3, r);
    expect(((float *)r[0]->data)[0] == 10 && ((float *)r[0]->data)[1] == 2, "linear: row sums, no bias");
    oc_tensor_free(r[0]);

    /* sgd_momentum_: two parameters updated in place, no results */
    float p[2] = {1, 1}, b[2] = {0, 0}, g[2] = {1, -1};
    oc_tensor pt, bt, gt;
    oc_tensor_init(&pt, p, OC_FLOAT32, 1, (int64_t[]){2});
    oc_tensor_init(&bt, b, OC_FLOAT32, 1, (int64_t[]){2});
    oc_tensor_init(&gt, g, OC_FLOAT32, 1, (int64_t[]){2});
    oc_value sgd[] = {oc_value_tensors(&pt, 1), oc_value_tensors(&bt, 1), oc_value_tensors(&gt, 1),
                      oc_value_float(0.5), oc_value_float(0.9)};
    if (oc_op_call(find("nn_ops::sgd_momentum_"), sgd, 5, NULL) != OC_OK) {
        fprintf(stderr, "%s\n", oc_errmsg());
        return 1;
    }
    expect(p[0] == 0.5f && p[1] == 1.5f && b[0] == 1.0f, "sgd_momentum_: in place");

    /* global_sum: a reduction across every core */
    oc_value gs[] = {oc_value_tensor(&xt)};
    run("nn_ops::global_sum", gs, 1, r);
    expect(*(float *)r[0]->data == 12.0f, "global_sum: across cores");
    oc_tensor_free(r[0]);

    oc_library_unload(lib);
    return failures ? 1 : 0;
}
