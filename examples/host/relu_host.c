/* The smallest host program: load a built op library and call an op.
 * Build against an installed opcore:
 *   cc relu_host.c $(pkg-config --cflags --libs opcore) -o relu_host */
#include <stdio.h>

#include <opcore/host.h>

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "out/librelu.so";
    oc_library *lib;
    if (oc_library_load(path, &lib) != OC_OK) {
        fprintf(stderr, "%s\n", oc_errmsg());
        return 1;
    }
    float data[4] = {-1, 2, -3, 4};
    oc_tensor x, *y;
    oc_tensor_init(&x, data, OC_FLOAT32, 2, (int64_t[]){2, 2});
    oc_value args[] = {oc_value_tensor(&x)};
    if (oc_op_invoke(oc_op_find("my_ops::relu_forward"), args, 1, &y) != OC_OK) {
        fprintf(stderr, "%s\n", oc_errmsg());
        return 1;
    }
    const float *out = y->data;
    printf("relu([-1, 2, -3, 4]) = [%g, %g, %g, %g]\n", out[0], out[1], out[2], out[3]);
    oc_tensor_free(y);
    oc_library_unload(lib);
    return 0;
}
