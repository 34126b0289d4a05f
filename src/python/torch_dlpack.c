/* src/python/torch_dlpack.c — torch tensors in and out of a direct op call
 * (op(x) on the Op object) through DLPack's C exchange API.
 *
 * torch (2.10 and later) publishes `torch.Tensor.__dlpack_c_exchange_api__`,
 * a capsule of C functions (DLPackExchangeAPI, dlpack.h 1.2): one fills a
 * DLTensor view of a tensor object, one allocates a tensor, one turns it into
 * a torch.Tensor object. Through them a direct call reads its inputs and
 * makes its outputs without Python attribute lookups or a torch.empty call
 * from Python. Everything that does not fit (another tensor type, a device
 * or dtype opcore does not take, no such API) returns "not handled" and the
 * caller takes its general path, which also writes the error messages.
 *
 * The exchange structs are declared here from the DLPack 1.x ABI (the
 * system's dlpack.h may predate them); only major version 1 is used.
 * DLTensor <-> oc_tensor is libopcore's (opcore/dlpack.h).
 */
#include "pyopcore.h"

#include "opcore/dlpack.h"
#include "torch_native.h"

typedef struct dl_version {
    uint32_t major, minor;
} dl_version;

typedef struct dl_managed {
    dl_version version;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
    uint64_t flags;
    DLTensor dl_tensor;
} dl_managed;

typedef struct dl_exchange_api {
    struct {
        dl_version version;
        void *prev_api;
    } header;
    int (*managed_tensor_allocator)(DLTensor *prototype, dl_managed **out, void *error_ctx,
                                    void (*set_error)(void *error_ctx, const char *kind, const char *message));
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, dl_managed **out);
    int (*managed_tensor_to_py_object_no_sync)(dl_managed *tensor, void **out_py_object);
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out);
    int (*current_work_stream)(int device_type, int32_t device_id, void **out_stream);
} dl_exchange_api;

static const dl_exchange_api *api;  /* torch's, once found */
static PyObject *api_type;          /* the type it was found on */

/* torch.Tensor's exchange API (looked up once per registered type). */
static const dl_exchange_api *exchange_api(void)
{
    if (api_type == ocpy_tensor_type) return api;
    api = NULL;
    api_type = ocpy_tensor_type;
    if (!ocpy_tensor_type) return NULL;
    PyObject *cap = PyObject_GetAttrString(ocpy_tensor_type, "__dlpack_c_exchange_api__");
    if (!cap) {
        PyErr_Clear();
        return NULL;
    }
    const dl_exchange_api *a = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
    Py_DECREF(cap);
    if (!a) {
        PyErr_Clear();
        return NULL;
    }
    /* the table stays alive for the process (DLPack's rule) */
    if (a->header.version.major == 1 && a->managed_tensor_allocator && a->managed_tensor_to_py_object_no_sync &&
        a->dltensor_from_py_object_no_sync)
        api = a;
    return api;
}

int ocpy_dlpack_view(PyObject *obj, oc_tensor *t)
{
    if ((PyObject *)Py_TYPE(obj) != ocpy_tensor_type || !exchange_api()) return 0;
    DLTensor dl;
    if (api->dltensor_from_py_object_no_sync(obj, &dl) != 0) {
        PyErr_Clear(); /* e.g. requires_grad: the general path takes it */
        return 0;
    }
    /* a device or dtype opcore does not take: the general path says so */
    if (oc_tensor_from_dlpack(&dl, t) != OC_OK) return 0;
    t->flags &= ~(uint32_t)OC_TENSOR_META; /* an empty tensor's NULL data is still data */
    return 1;
}

static void ignore_error(void *ctx, const char *kind, const char *message)
{
    (void)ctx, (void)kind, (void)message; /* the general path reports it */
}

void *ocpy_dlpack_alloc(const oc_tensor *meta, oc_tensor *out)
{
    /* no Python here: only a table already found (under the GIL) is used */
    if (!api || api_type != ocpy_tensor_type) return NULL;
    DLTensor proto;
    int64_t shape[OC_MAX_DIMS], strides[OC_MAX_DIMS];
    if (oc_tensor_to_dlpack(meta, &proto, shape, strides) != OC_OK) return NULL;
    proto.strides = NULL; /* a fresh row-major tensor */
    dl_managed *m = NULL;
    if (api->managed_tensor_allocator(&proto, &m, NULL, ignore_error) != 0 || !m) return NULL;
    if (oc_tensor_init(out, (char *)m->dl_tensor.data + m->dl_tensor.byte_offset, meta->dtype, meta->ndim,
                       meta->sizes) != OC_OK) {
        ocpy_dlpack_free(m);
        return NULL;
    }
    return m;
}

PyObject *ocpy_dlpack_to_tensor(void *managed)
{
    void *py = NULL;
    if (api->managed_tensor_to_py_object_no_sync(managed, &py) != 0) return NULL; /* it raised */
    return py;
}

void ocpy_dlpack_free(void *managed)
{
    dl_managed *m = managed;
    if (m && m->deleter) m->deleter(m);
}
