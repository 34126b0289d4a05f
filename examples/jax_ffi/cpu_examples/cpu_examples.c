/* JAX's cpu_examples (examples/ffi/src/jax_ffi_example/cpu_examples.cc
 * upstream) as opcore kernels: an array attribute, a dictionary of
 * attributes, and input-output aliasing. (Its counter is ../counter.) */
#include <opcore/kernel.h>

/* The sum of an int[] attribute (upstream: an int32 span), as an int32. */
oc_tensor *array_attr(oc_int_list array)
{
    oc_tensor *out = oc_dst_tensor();
    int64_t total = 0;
    for (int64_t i = 0; i < array.count; i++) total += array.values[i];
    OC_CHECK(total >= INT32_MIN && total <= INT32_MAX, "array_attr: the sum %lld does not fit int32",
             (long long)total);
    *(int32_t *)out->data = (int32_t)total;
    return out;
}

/* dictionary_attr(Dict attrs) -> (Tensor secret, Tensor count): the int
 * "secret" and how many attributes there are, as int32 scalars. A missing
 * or non-int "secret" fails the call with the lookup's message (op,
 * argument, key, expected and given kind). */
void dictionary_attr(const oc_dict *attrs)
{
    int64_t secret;
    OC_CHECK_OK(oc_dict_get_int(attrs, "secret", &secret));
    OC_CHECK(secret >= INT32_MIN && secret <= INT32_MAX, "dictionary_attr: secret %lld does not fit int32",
             (long long)secret);
    *(int32_t *)oc_dst_tensor_at(0)->data = (int32_t)secret;
    *(int32_t *)oc_dst_tensor_at(1)->data = (int32_t)oc_dict_size(attrs);
}

/* aliasing(Tensor(a!) x) -> Tensor(a!): updated in place, so the result is
 * x's own buffer. Nothing to compute: upstream's handler only checks that
 * XLA passed one buffer as both input and output; here the runtime hands
 * the kernel the result buffer itself, and opcore.jax.alias_copies() counts
 * the calls where XLA did not alias the two. */
void aliasing(oc_tensor *x)
{
    (void)x;
}
