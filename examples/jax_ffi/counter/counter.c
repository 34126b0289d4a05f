/* The counter of JAX's FFI examples (examples/ffi/src/jax_ffi_example/
 * counter.cc) as an opcore kernel: state kept between calls.
 *
 * counter(index) returns how many times it ran before with this index:
 * 0, 1, 2, ... The state is static in this file: it lives as long as the
 * library is loaded, across jit cache hits and cleared caches, shared by
 * every call site. XLA may run calls from several threads, so the table is
 * guarded by a spin lock (the critical section is a few loads and stores).
 *
 * Called from JAX, the op must be marked opcore.jax.op(...,
 * has_side_effect=True): its calls matter beyond their results, and XLA
 * would otherwise drop a call whose result is unused or merge two equal
 * calls into one (docs/jax.md, "Stateful ops"). */
#include <stdatomic.h>

#include <opcore/kernel.h>

#define COUNTERS 256 /* distinct indices kept */

static struct {
    int64_t index;
    int32_t count;
    bool used;
} counters[COUNTERS];
static atomic_flag lock = ATOMIC_FLAG_INIT;

oc_tensor *counter(int64_t index)
{
    oc_tensor *out = oc_dst_tensor();
    OC_CHECK(out->dtype == OC_INT32 && out->ndim == 0, "the result must be an int32 scalar");
    while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
    }
    /* open addressing: the first slot holding `index`, or the first free one */
    size_t slot = (size_t)((uint64_t)index * 0x9E3779B97F4A7C15ull >> 56) % COUNTERS;
    size_t probes = 0;
    while (counters[slot].used && counters[slot].index != index && probes < COUNTERS) {
        slot = (slot + 1) % COUNTERS;
        probes++;
    }
    bool full = probes == COUNTERS;
    int32_t value = 0;
    if (!full) {
        if (counters[slot].used) value = ++counters[slot].count;
        else counters[slot].used = true, counters[slot].index = index, counters[slot].count = 0;
    }
    atomic_flag_clear_explicit(&lock, memory_order_release);
    OC_CHECK(!full, "counter: all %d counters are in use; index %lld is new", COUNTERS, (long long)index);
    *(int32_t *)out->data = value;
    return out;
}
