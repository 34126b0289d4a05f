/* Check a built ReLU library against a plain C reference, from the host
 * API: forward and backward on several shapes, contiguous and strided.
 * Usage: check_relu LIB.so */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <opcore/host.h>

static int check(const oc_op *fwd, const oc_op *bwd, int64_t rows, int64_t cols, int transposed)
{
    int64_t n = rows * cols;
    float *x = malloc((size_t)n * sizeof *x), *g = malloc((size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) {
        x[i] = sinf((float)i * 0.37f) * 3.0f;
        g[i] = cosf((float)i * 0.11f);
    }
    oc_tensor xt, gt, *y = NULL, *dx = NULL;
    if (transposed) { /* a (cols x rows) view of row-major (rows x cols) data */
        oc_tensor_init_strided(&xt, x, OC_FLOAT32, 2, (int64_t[]){cols, rows}, (int64_t[]){1, cols});
        oc_tensor_init_strided(&gt, g, OC_FLOAT32, 2, (int64_t[]){cols, rows}, (int64_t[]){1, cols});
    } else {
        oc_tensor_init(&xt, x, OC_FLOAT32, 2, (int64_t[]){rows, cols});
        oc_tensor_init(&gt, g, OC_FLOAT32, 2, (int64_t[]){rows, cols});
    }
    oc_value fa[] = {oc_value_tensor(&xt)}, ba[] = {oc_value_tensor(&gt), oc_value_tensor(&xt)};
    int bad = 0;
    if (oc_op_invoke(fwd, fa, 1, &y) != OC_OK || oc_op_invoke(bwd, ba, 2, &dx) != OC_OK) {
        fprintf(stderr, "check_relu: %s\n", oc_errmsg());
        bad = 1;
    } else {
        for (int64_t i = 0; i < n; i++) { /* outputs are row-major in the view's shape */
            const float xv = *(float *)oc_flat_ptr(&xt, i), gv = *(float *)oc_flat_ptr(&gt, i);
            float want_y = xv > 0 ? xv : 0, want_dx = xv > 0 ? gv : 0;
            if (((float *)y->data)[i] != want_y || ((float *)dx->data)[i] != want_dx) bad++;
        }
    }
    oc_tensor_free(y);
    oc_tensor_free(dx);
    free(x);
    free(g);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: check_relu LIB.so\n");
        return 2;
    }
    oc_library *lib;
    if (oc_library_load(argv[1], &lib) != OC_OK) {
        fprintf(stderr, "check_relu: %s\n", oc_errmsg());
        return 1;
    }
    const oc_op *fwd = oc_op_find("my_ops::relu_forward"), *bwd = oc_op_find("my_ops::relu_backward");
    if (!fwd || !bwd) {
        fprintf(stderr, "check_relu: %s\n", oc_errmsg());
        return 1;
    }
    const int64_t shapes[][2] = {{1, 1}, {32, 120}, {32, 4096}, {257, 1031}};
    int bad = 0;
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 2; t++) bad += check(fwd, bwd, shapes[s][0], shapes[s][1], t);
    printf("%s: %s (%s)\n", argv[1], bad ? "MISMATCH" : "matches the reference",
           oc_library_multicore(lib) ? "multicore" : "single-core");
    oc_library_unload(lib);
    return bad ? 1 : 0;
}
