/* Prepared calls for torch's native kernels: see torch_prepared.h. */
#include "torch_prepared.h"

#include <stdlib.h>
#include <string.h>

#include <opcore/profiler.h>

/* OC_INFER_MEMO=0 ("0" is opcore's one spelling of off): every call asks
 * the shape function. Read once. */
static bool memo_off(void)
{
    static atomic_int off = -1;
    int v = atomic_load_explicit(&off, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("OC_INFER_MEMO");
        v = e && !strcmp(e, "0");
        atomic_store_explicit(&off, v, memory_order_relaxed);
    }
    return v;
}

/* Prepared calls made (tests read it: _torch_native_prepared). */
static _Atomic uint64_t g_made;

uint64_t ocpy_prepared_made(void) { return atomic_load_explicit(&g_made, memory_order_relaxed); }

void ocpy_prepared_site_init(ocpy_prepared_site *s, const oc_op *op)
{
    atomic_init(&s->ready, NULL);
    pthread_mutex_init(&s->lock, NULL);
    s->missed = NULL;
    s->nargs = oc_op_num_args(op);
    s->eligible = !memo_off() && !oc_library_debug(oc_op_library(op)) && s->nargs <= OCPY_TORCH_MAX_ARGS;
    for (int i = 0; s->eligible && i < s->nargs; i++) {
        oc_arg_type t = oc_op_arg_type(op, i);
        s->tensor[i] = t == OC_ARG_TENSOR;
        s->eligible = !oc_op_arg_optional(op, i) && (t == OC_ARG_TENSOR || t == OC_ARG_INT ||
                                                      t == OC_ARG_FLOAT || t == OC_ARG_BOOL || t == OC_ARG_DTYPE);
    }
}

static void prepared_free(ocpy_prepared *p)
{
    if (!p) return;
    oc_call_free(p->call);
    free(p);
}

void ocpy_prepared_site_clear(ocpy_prepared_site *s)
{
    prepared_free(atomic_exchange(&s->ready, NULL)); /* one a running call holds comes back later: kept */
    pthread_mutex_lock(&s->lock);
    prepared_free(s->missed);
    s->missed = NULL;
    pthread_mutex_unlock(&s->lock);
}

int ocpy_prepared_key(const ocpy_prepared_site *s, const uint64_t *stack, const ocpy_torch_view *views,
                      int64_t *key)
{
    if (!s->eligible || !views || oc_profiler_enabled()) return -1;
    int n = 0;
    for (int i = 0; i < s->nargs; i++) {
        if (!s->tensor[i]) {
            if (n + 1 > OCPY_PREPARED_KEY_MAX) return -1;
            key[n++] = (int64_t)stack[i];
            continue;
        }
        const ocpy_torch_view *v = &views[i];
        if (!v->ok || v->ndim < 0 || v->ndim > OC_MAX_DIMS || n + 1 + 2 * v->ndim > OCPY_PREPARED_KEY_MAX)
            return -1;
        key[n++] = (int64_t)((uint64_t)(uint32_t)v->dtype << 40 | (uint64_t)(uint32_t)v->device << 8 |
                             (uint64_t)v->ndim);
        for (int64_t d = 0; d < v->ndim; d++) {
            key[n++] = v->sizes[d];
            key[n++] = v->strides[d];
        }
    }
    return n;
}

static bool same_key(const ocpy_prepared *p, const int64_t *key, int nkey)
{
    return p->nkey == nkey && !memcmp(p->key, key, (size_t)nkey * sizeof *key);
}

ocpy_prepared *ocpy_prepared_take(ocpy_prepared_site *s, const int64_t *key, int nkey)
{
    if (!atomic_load_explicit(&s->ready, memory_order_relaxed)) return NULL;
    ocpy_prepared *p = atomic_exchange_explicit(&s->ready, NULL, memory_order_acquire);
    if (!p) return NULL;
    if (same_key(p, key, nkey)) return p;
    ocpy_prepared_put(s, p);
    return NULL;
}

void ocpy_prepared_put(ocpy_prepared_site *s, ocpy_prepared *p)
{
    ocpy_prepared *none = NULL;
    /* another call may have installed a newer one meanwhile: that one stays */
    if (!atomic_compare_exchange_strong_explicit(&s->ready, &none, p, memory_order_release, memory_order_relaxed))
        prepared_free(p);
}

void ocpy_prepared_learn(ocpy_prepared_site *s, const oc_op *op, const int64_t *key, int nkey,
                         const oc_value *args, const oc_tensor *outs)
{
    pthread_mutex_lock(&s->lock);
    ocpy_prepared *m = s->missed;
    if (!m || !same_key(m, key, nkey)) {
        if (!m) m = s->missed = malloc(sizeof *m);
        if (m) {
            m->call = NULL;
            m->nkey = nkey;
            memcpy(m->key, key, (size_t)nkey * sizeof *key);
        }
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->missed = NULL; /* becomes the prepared call */
    pthread_mutex_unlock(&s->lock);
    int nres = oc_op_num_results(op);
    for (int r = 0; r < nres; r++) m->metas[r] = outs[r];
    if (oc_call_prepare(op, args, oc_op_num_args(op), nres ? outs : NULL, NULL, &m->call) != OC_OK) {
        oc_clear_error(); /* nothing lost: calls take the usual path */
        free(m);
        return;
    }
    atomic_fetch_add_explicit(&g_made, 1, memory_order_relaxed);
    prepared_free(atomic_exchange_explicit(&s->ready, m, memory_order_acq_rel));
}
