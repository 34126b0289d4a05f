/* The shape function's answers, remembered per thread.
 *
 * A shape function is a function of its arguments' metadata (dtypes,
 * sizes, strides, flags: the data is hidden from it) and of its non-tensor
 * arguments. A loop calling one op on same-shaped tensors asks it the same
 * question each time, and running it (entering an engine core, a fault
 * guard, a stack switch, meta tensors) was half of a 1x1 oc_op_call's
 * instructions. So each thread remembers the last few answers: the key is
 * the op, the registry's generation (any load, reload or unload starts
 * afresh) and the bound arguments' metadata and values; the answer is the
 * result metas and the launch grid the shape function set.
 *
 * Not remembered: ops with a str, list, dict or Scalar argument (their
 * values live behind pointers), tensors of more than MEMO_DIMS dims, calls
 * that trace symbolic sizes, libraries built with --debug, and any call
 * while the profiler records (its trace shows every shape function run).
 * OC_INFER_MEMO=0 turns it off. */
#include <stdatomic.h>
#include <string.h>

#include "host/call_internal.h"
#include "profiler/hooks.h"

enum { MEMO_ENTRIES = 4, MEMO_KEY_WORDS = OC__MEMO_KEY_WORDS, MEMO_DIMS = 8, MEMO_RESULTS = 4 };

typedef struct memo_meta {
    oc_dtype dtype;
    int32_t ndim;
    uint32_t flags;
    oc_coherence coherence;
    int64_t sizes[MEMO_DIMS], strides[MEMO_DIMS];
} memo_meta;

typedef struct memo_entry {
    const struct oc_op *op; /* NULL: empty */
    uint64_t generation;
    int nkey;
    uint64_t key[MEMO_KEY_WORDS];
    memo_meta metas[MEMO_RESULTS];
    oc_grid grid;
} memo_entry;

typedef struct oc__memo_key memo_key;

typedef struct memo {
    memo_entry entries[MEMO_ENTRIES];
    unsigned next; /* the entry the next miss replaces */
} memo;

static _Thread_local memo thread_memo;

/* This thread's memo, its address computed once per use: GCC would
 * otherwise recompute it (a call to __tls_get_addr, in a shared library)
 * at each reference across a call, three times per lookup. */
static inline memo *my_memo(void)
{
    memo *m = &thread_memo;
    __asm__("" : "+r"(m)); /* opaque: kept in a register, not recomputed */
    return m;
}

static bool memo_enabled(void)
{
    static atomic_int enabled = -1; /* read once */
    int e = atomic_load_explicit(&enabled, memory_order_relaxed);
    if (e < 0) {
        e = !oc__env_off("OC_INFER_MEMO");
        atomic_store_explicit(&enabled, e, memory_order_relaxed);
    }
    return e;
}

static bool push(uint64_t *key, int *n, uint64_t w)
{
    if (*n >= MEMO_KEY_WORDS) return false;
    key[(*n)++] = w;
    return true;
}

/* The call's key; false: not one to remember. */
static bool make_key(const struct oc_op *op, const call_frame *f, uint64_t *key, int *nkey)
{
    int n = 0;
    for (int i = 0; i < f->nargs; i++) {
        const oc_schema_arg *a = &op->def.schema.args[i];
        const bool none = a->type == OC_ARG_TENSOR ? f->slots[i] != &f->tensor_ptrs[i]
                                                   : a->optional && f->optional_ptrs[i] == NULL;
        if (none) {
            if (!push(key, &n, UINT64_MAX)) return false;
            continue;
        }
        const call_value *v = a->optional ? &f->optional[i] : &f->values[i];
        uint64_t w;
        switch (a->type) {
        case OC_ARG_TENSOR: {
            const oc_tensor *t = &f->tensors[i];
            if (t->ndim > MEMO_DIMS || n + 2 + 2 * t->ndim > MEMO_KEY_WORDS) return false;
            key[n++] = (uint64_t)(uint32_t)t->dtype | (uint64_t)(uint32_t)t->ndim << 32;
            /* the shape function sees every tensor as a meta tensor */
            key[n++] = (uint64_t)(t->flags | OC_TENSOR_META) | (uint64_t)(uint32_t)t->coherence << 32;
            memcpy(&key[n], t->sizes, (size_t)t->ndim * sizeof(int64_t));
            memcpy(&key[n + t->ndim], t->strides, (size_t)t->ndim * sizeof(int64_t));
            n += 2 * t->ndim;
            continue;
        }
        case OC_ARG_INT: w = (uint64_t)v->i; break;
        case OC_ARG_FLOAT: memcpy(&w, &v->f, sizeof w); break;
        case OC_ARG_BOOL: w = v->b; break;
        case OC_ARG_DTYPE: w = (uint64_t)(uint32_t)v->dtype; break;
        default: return false; /* its value lives behind a pointer */
        }
        if (!push(key, &n, w)) return false;
    }
    *nkey = n;
    return true;
}

static bool memo_usable(const struct oc_op *op, const oc_dim_log *log)
{
    return !log && op->num_results <= MEMO_RESULTS && !(op->lib && op->lib->debug) && !oc__prof_on() &&
           memo_enabled();
}

bool oc__infer_memo_get(const struct oc_op *op, call_frame *f, oc_tensor *metas, const oc_dim_log *log,
                        memo_key *k)
{
    k->usable = memo_usable(op, log) && make_key(op, f, k->words, &k->n);
    if (!k->usable) return false;
    uint64_t gen = oc_registry_generation();
    memo *m = my_memo();
    for (int j = 0; j < MEMO_ENTRIES; j++) {
        const memo_entry *e = &m->entries[j];
        if (e->op != op || e->generation != gen || e->nkey != k->n ||
            memcmp(e->key, k->words, (size_t)k->n * sizeof *k->words) != 0)
            continue;
        for (int r = 0; r < op->num_results; r++) {
            if (op->def.schema.results[r].alias_arg >= 0) continue;
            const memo_meta *mm = &e->metas[r];
            oc_tensor *t = &metas[r];
            t->data = NULL;
            t->dtype = mm->dtype;
            t->ndim = mm->ndim;
            memcpy(t->sizes, mm->sizes, (size_t)mm->ndim * sizeof *t->sizes);
            memcpy(t->strides, mm->strides, (size_t)mm->ndim * sizeof *t->strides);
            t->flags = mm->flags;
            t->coherence = mm->coherence;
        }
        f->grid = e->grid;
        return true;
    }
    return false;
}

void oc__infer_memo_put(const struct oc_op *op, const call_frame *f, const oc_tensor *metas, const memo_key *k)
{
    if (!k->usable) return;
    for (int r = 0; r < op->num_results; r++)
        if (op->def.schema.results[r].alias_arg < 0 && metas[r].ndim > MEMO_DIMS) return;
    memo *m = my_memo();
    memo_entry *e = &m->entries[m->next++ % MEMO_ENTRIES];
    e->op = op;
    e->generation = oc_registry_generation();
    e->nkey = k->n;
    memcpy(e->key, k->words, (size_t)k->n * sizeof *k->words);
    for (int r = 0; r < op->num_results; r++) {
        if (op->def.schema.results[r].alias_arg >= 0) continue;
        const oc_tensor *t = &metas[r];
        memo_meta *mm = &e->metas[r];
        mm->dtype = t->dtype;
        mm->ndim = t->ndim;
        mm->flags = t->flags;
        mm->coherence = t->coherence;
        memcpy(mm->sizes, t->sizes, (size_t)t->ndim * sizeof *t->sizes);
        memcpy(mm->strides, t->strides, (size_t)t->ndim * sizeof *t->strides);
    }
    e->grid = f->grid;
}
