/* Test ops for tests/python/test_torch_native.py (library oc_native_test):
 * one op per kind of argument and result the op language has, so the
 * native torch kernel is checked against the Python one for each. */
#include <opcore/check.h>
#include <opcore/library.h>

/* out: x converted to dt; info: every other argument, as float64 */
static void kitchen_shape(const oc_tensor *x, const oc_tensor *w, oc_int_list dims, oc_int_list pair,
                          oc_float_list fs, const char *mode, oc_dtype dt, const int64_t *maybe_i,
                          const double *maybe_f, bool flag, const oc_dtype *maybe_dt, const char *maybe_s)
{
    (void)w, (void)dims, (void)pair, (void)fs, (void)mode, (void)maybe_i, (void)maybe_f, (void)flag,
        (void)maybe_dt, (void)maybe_s;
    oc_tensor meta;
    oc_tensor_init(&meta, NULL, dt, x->ndim, x->sizes);
    oc_set_result(0, &meta);
    oc_tensor_init(&meta, NULL, OC_FLOAT64, 1, (int64_t[]){32});
    oc_set_result(1, &meta);
}

static oc_tensor *cat_shape(oc_tensor_list xs)
{
    int64_t n = 0; /* oc_dim_add: the size stays symbolic under dynamic shapes */
    for (int64_t i = 0; i < xs.count; i++) n = oc_dim_add(n, oc_numel(&xs.items[i]));
    return oc_empty(OC_FLOAT32, 1, (int64_t[]){n});
}

/* [sum of x, oc_cpu_count() of the run] */
static oc_tensor *sum_shape(const oc_tensor *x)
{
    (void)x;
    return oc_empty(OC_FLOAT64, 1, (int64_t[]){2});
}

static oc_tensor *where_shape(const oc_tensor *x, int64_t caller_tid)
{
    (void)x, (void)caller_tid;
    return oc_empty(OC_INT64, 1, (int64_t[]){16});
}

static oc_tensor *check_shape(const oc_tensor *x, bool fail_in_shape, bool fail_in_kernel)
{
    (void)fail_in_kernel;
    OC_CHECK(!fail_in_shape, "asked to fail in the shape function (x has %d dims)", (int)x->ndim);
    return oc_empty_like(x);
}

static oc_tensor *same(const oc_tensor *x, oc_scalar s)
{
    (void)s;
    return oc_empty_like(x);
}

static oc_tensor *affine_shape(const oc_tensor *x, const oc_tensor *y, double a, int64_t b, bool neg)
{
    (void)a, (void)b, (void)neg;
    OC_CHECK(x->dtype == OC_FLOAT32 && y->dtype == OC_FLOAT32, "affine takes float32 tensors");
    OC_CHECK(oc_same_shape(x, y), "x and y must have one shape");
    return oc_empty_like(x);
}

static void axpy_shape(oc_tensor *y, const oc_tensor *x, double a)
{
    (void)a;
    OC_CHECK(y->dtype == OC_FLOAT32 && x->dtype == OC_FLOAT32, "axpy_ takes float32 tensors");
    OC_CHECK(oc_same_shape(x, y), "x and y must have one shape");
}

OC_LIBRARY(oc_native_test, m)
{
    oc_def(m, "kitchen(Tensor x, Tensor? w, int[] dims, int[2] pair, float[] fs, str mode, ScalarType dt, "
              "int? maybe_i=None, float? maybe_f=None, bool flag=False, ScalarType? maybe_dt=None, "
              "str? maybe_s=None) -> (Tensor out, Tensor info)",
           kitchen_shape, "kitchen");
    oc_def(m, "scale_(Tensor(a!) x, float s) -> Tensor(a!)", NULL, "scale_");
    oc_def(m, "fill_all_(Tensor(a!)[] xs, float v) -> ()", NULL, "fill_all_");
    oc_def(m, "cat(Tensor[] xs) -> Tensor", cat_shape, "cat");
    oc_def(m, "check(Tensor x, bool fail_in_shape=False, bool fail_in_kernel=False) -> Tensor", check_shape, "check");
    /* Scalar has no encoding in torch's stable C ABI: this op keeps the Python kernel */
    oc_def(m, "add_scalar(Tensor x, Scalar s) -> Tensor", same, "add_scalar");
    oc_def(m, "sum_mc(Tensor x) -> Tensor", sum_shape, "sum_mc", .multicore = true);
    oc_def(m, "affine(Tensor x, Tensor y, float a, int b, bool neg) -> Tensor", affine_shape, "affine");
    oc_def(m, "axpy_(Tensor(a!) y, Tensor x, float a) -> ()", axpy_shape, "axpy_");
    oc_def(m, "where_mc(Tensor x, int caller_tid) -> Tensor", where_shape, "where_mc", .multicore = true);
}
