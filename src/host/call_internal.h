/* src/host/call_internal.h — the call path's pieces, shared by call.c and
 * the dynamic-shape tracer (trace.c). Internal. */
#ifndef OPCORE_HOST_CALL_INTERNAL_H
#define OPCORE_HOST_CALL_INTERNAL_H

#include "core/internal.h"
#include "engine/core.h"
#include "library/registry.h"
#include "opcore/host.h"

/* Argument storage for one call: the kernel and shape function get
 * pointers into it (libffi slots). Tensors are copies of the caller's
 * structs (flags adjusted: inputs read-only), so the shape pass can hide
 * their data and the caller's structs are never touched. */
typedef union call_value {
    double f;
    int64_t i;
    uint8_t b;
    int dtype;
    oc_scalar s;
    const char *str;
    oc_tensor_list tensors;
    oc_int_list ints;
    oc_float_list floats;
    oc_dict dict;
} call_value;

/* A written tensor the kernel got a dense copy of (layout.c): `slot` is
 * the frame's struct (now the copy), `orig` the caller's view, written
 * back after the kernel. */
typedef struct oc__dense_rec {
    oc_tensor *slot;
    oc_tensor orig;
} oc__dense_rec;

typedef struct call_frame {
    int nargs;
    oc_tensor tensors[OC_MAX_ARGS];          /* Tensor, Tensor?, Tensor(a!) */
    const oc_tensor *tensor_ptrs[OC_MAX_ARGS];
    call_value values[OC_MAX_ARGS];          /* by-value arguments */
    call_value optional[OC_MAX_ARGS];        /* what a T? argument points at */
    const void *optional_ptrs[OC_MAX_ARGS];  /* NULL for None */
    void *slots[OC_MAX_ARGS];                /* libffi: one pointer per argument */
    void **saved_data[OC_MAX_ARGS];          /* Tensor[]: items' data while hidden */
    void *heap[OC_MAX_ARGS + 1];             /* list storage, dense copies: to free */
    int nheap;
    oc_grid grid;                            /* set by the shape function (oc_set_grid); ndim 0: none */
    oc__dense_rec *dense;                    /* written tensors to copy back (layout.c) */
    int ndense;
    bool plain;                              /* every tensor contiguous, none written (bind) */
    const oc_direct_regs *regs;              /* the kernel's argument registers, loaded once (a
                                                prepared call); NULL: from the slots per call */
    uintptr_t lo, hi;                        /* the hull of the contiguous tensors' bytes (bind; lo >= hi: none) */
    /* Each tensor's bytes (bind), so that a call writing in place can see
     * in a few compares that its written tensors meet nothing else
     * (oc__args_clear); spans_dense: every tensor contiguous and all
     * spans recorded. */
    struct { uintptr_t lo, hi; bool written; } spans[OC_MAX_ARGS];
    int nspans;
    bool spans_dense;
} call_frame;

/* Element sizes, here rather than through oc_dtype_size (an exported
 * function, called through the PLT): spans are taken on every call. */
#define OC__ELEM_BYTES_(name, str, code, bytes, ...) [code] = bytes,
static const uint8_t oc__elem_bytes[OC_NUM_DTYPES] = {OC_DTYPE_MAP(OC__ELEM_BYTES_)};
#undef OC__ELEM_BYTES_

/* A result buffer's bytes [*l, *h), false where it is not contiguous. */
static inline bool oc__out_bytes(const oc_tensor *t, uintptr_t *l, uintptr_t *h)
{
    int64_t n = 1;
    for (int d = t->ndim - 1; d >= 0 && n; d--) {
        if (t->sizes[d] != 1 && t->sizes[d] != 0 && t->strides[d] != n) return false;
        n *= t->sizes[d];
    }
    *l = (uintptr_t)t->data, *h = *l + (uintptr_t)n * oc__elem_bytes[t->dtype];
    return true;
}

/* A result's bytes [l, h) meet no input's span (every one recorded:
 * spans_dense) and none of the nr results before it. */
static inline bool oc__out_apart(const call_frame *f, const uintptr_t *rl, const uintptr_t *rh,
                                 int nr, uintptr_t l, uintptr_t h)
{
    if (!f->spans_dense) return false;
    for (int s = 0; s < f->nspans; s++)
        if (l < f->spans[s].hi && f->spans[s].lo < h) return false;
    for (int k = 0; k < nr; k++)
        if (l < rh[k] && rl[k] < h) return false;
    return true;
}

/* The usual oc_op_call (caller's result buffers) in a few compares: true
 * when every result buffer not aliasing an argument is contiguous and its
 * bytes miss the bound tensors' hull (f->lo, f->hi) and each other, so the
 * overlap check has nothing to find; a result inside the hull (a fresh one
 * the allocator placed between two inputs: an op of several inputs, often)
 * is checked against each input's span and each other result exactly.
 * False only means the full check runs (oc__frame_layout). */
static inline bool oc__outs_clear(const struct oc_op *op, const call_frame *f, const oc_tensor *outs)
{
    uintptr_t lo = f->lo, hi = f->hi, l, h, rl[OC_MAX_RESULTS], rh[OC_MAX_RESULTS];
    int nr = 0;
    for (int r = 0; r < op->num_results; r++) {
        if (op->def.schema.results[r].alias_arg >= 0) continue;
        if (!oc__out_bytes(&outs[r], &l, &h)) return false;
        if (l == h) continue;
        if (l < hi && lo < h && !oc__out_apart(f, rl, rh, nr, l, h)) return false;
        lo = l < lo ? l : lo;
        hi = h > hi ? h : hi;
        rl[nr] = l, rh[nr++] = h;
    }
    return true;
}

/* True when oc__frame_layout has nothing to copy and nothing to refuse in
 * the arguments: every tensor contiguous and none written (f->plain), or
 * each written one's bytes meeting no other tensor's (an in-place call's
 * usual case). False only means it runs. */
static inline bool oc__args_clear(const call_frame *f)
{
    if (f->plain) return true;
    if (!f->spans_dense) return false;
    for (int w = 0; w < f->nspans; w++) {
        if (!f->spans[w].written) continue;
        for (int s = 0; s < f->nspans; s++)
            if (s != w && f->spans[w].lo < f->spans[s].hi && f->spans[s].lo < f->spans[w].hi) return false;
    }
    return true;
}

/* Argument i's tensor as bound (a Tensor or Tensor? given one), else NULL. */
static inline oc_tensor *oc__frame_tensor(const struct oc_op *op, call_frame *f, int i)
{
    return op->def.schema.args[i].type == OC_ARG_TENSOR && f->slots[i] == &f->tensor_ptrs[i] ? &f->tensors[i]
                                                                                             : NULL;
}

/* Fill the frame from `args` in schema order, applying defaults and
 * checking types. `need_data`: tensors must have data (a call) or may be
 * meta (shape inference). Release with oc__frame_release even on failure. */
oc_status oc__frame_bind(const struct oc_op *op, const oc_value *args, int nargs, bool need_data,
                         call_frame *f);
void oc__frame_release(call_frame *f);

/* Run the shape function on the bound frame: out_meta[i] for each of the
 * op's results (aliased ones from their arguments). `log`: where oc_dim_*
 * record (NULL: nowhere). */
oc_status oc__frame_infer(const struct oc_op *op, call_frame *f, oc_tensor *out_meta, oc_dim_log *log);

/* The shape function's earlier answer for this call's arguments on this
 * thread (infer_memo.c): true, with out_meta and f->grid filled, or false
 * (run it, then oc__infer_memo_put its answer under the same key). The
 * key is made once, by the lookup, before the shape function runs. */
#define OC__MEMO_KEY_WORDS 64
typedef struct oc__memo_key {
    bool usable; /* a call whose answer may be remembered */
    int n;
    uint64_t words[OC__MEMO_KEY_WORDS];
} oc__memo_key;
bool oc__infer_memo_get(const struct oc_op *op, call_frame *f, oc_tensor *out_meta, const oc_dim_log *log,
                        oc__memo_key *key);
void oc__infer_memo_put(const struct oc_op *op, const call_frame *f, const oc_tensor *out_meta,
                        const oc__memo_key *key);

/* Debug builds (debug_inputs.c): hash the call's read-only tensor
 * arguments before the kernel runs (*sums, freed by the check), and after
 * it returned fail a successful `status` if one changed, naming the op and
 * the argument. */
oc_status oc__debug_inputs_sum(const struct oc_op *op, call_frame *f, uint64_t **sums);
oc_status oc__debug_inputs_check(const struct oc_op *op, call_frame *f, uint64_t *sums, oc_status status);
/* Before the kernel (layout.c): every tensor of the bound frame (and the
 * result buffers `outs`, if given) dense and row-major unless the op is
 * `.strided`, written ones copied back by oc__frame_write_back; written
 * tensors with internal overlap, or sharing memory with another tensor
 * (other than an input that is the very same view, which is then read
 * from a copy), refused. `check_outs`: the caller gave the result buffers
 * (else they are fresh from its allocator and cannot overlap anything). */
oc_status oc__frame_layout(const struct oc_op *op, call_frame *f, oc_tensor *outs, bool check_outs);

/* `out`, the buffer given for result i, against its inferred `meta`
 * (dtype and shape; data too if `need_data`); `who` names where it came
 * from in the message. */
oc_status oc__check_out(const struct oc_op *op, int i, const oc_tensor *meta, const oc_tensor *out, bool need_data,
                        const char *who);

/* Run the kernel on the bound, inferred and laid-out frame, writing into
 * `outs` (aliased results: set to their arguments); `grid` NULL: the
 * shape function's or the op's. */
oc_status oc__frame_execute(const struct oc_op *op, call_frame *f, oc_tensor *outs, const oc_grid *grid);

/* A kernel launch planned once, for a prepared call (prepared.c): its frame
 * never moves and its shapes never change, so the engine's record of the
 * run, which oc__frame_execute builds on every call, is built here once.
 * `ready`: a plain single-core run (no multicore op, no grid of several
 * instances, no --debug library, no write-backs, no aliased results),
 * which oc__launch_run repeats; else the caller runs oc__frame_execute. */
typedef struct oc__launch {
    bool ready;
    oc_exec exec;
    oc_tensor dsts[OC_MAX_RESULTS]; /* the kernel's copies of the result structs (exec.dsts) */
} oc__launch;

/* Plan the launch of the bound and inferred frame `f` (after its regs are
 * set); `grid` as for oc__frame_execute. Never fails: not ready instead. */
void oc__launch_plan(const struct oc_op *op, call_frame *f, const oc_grid *grid, oc__launch *l);

/* Run a ready launch on the frame's current data, writing into `outs`
 * (their data of the moment); the caller holds the op (oc__op_enter). */
oc_status oc__launch_run(const struct oc_op *op, oc__launch *l, const oc_tensor *outs);

/* OC_EINVAL naming `fn` when the op has fresh results and `outs` is NULL. */
oc_status oc__need_outs(const struct oc_op *op, const oc_tensor *outs, const char *fn);

/* Load the registers of a direct kernel call from the bound frame's
 * slots into `regs`; false when the kernel is called through libffi. */
bool oc__frame_regs(const struct oc_op *op, call_frame *f, oc_direct_regs *regs);

/* After the kernel: copy dense copies of written tensors back into the
 * caller's (if `st` is OC_OK) and restore the caller's views; returns the
 * call's status. */
oc_status oc__frame_write_back(call_frame *f, oc_status st);

#endif /* OPCORE_HOST_CALL_INTERNAL_H */
