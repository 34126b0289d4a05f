/* Moving runs of flattened elements between a tensor and a dense buffer:
 * the one copy loop behind the TCM accessor and the streams. */
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/internal.h"
#include "kernel/kernel_internal.h"

void oc__tensor_extent(const oc_tensor *t, const char **lo, const char **hi)
{
    int64_t min = 0, max = 0, elem = (int64_t)oc_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0) { *lo = *hi = t->data; return; }
        int64_t span = (t->sizes[d] - 1) * t->strides[d];
        if (span < 0) min += span; else max += span;
    }
    *lo = (const char *)t->data + min * elem;
    *hi = (const char *)t->data + (max + 1) * elem;
}

/* Tensors larger than this are written with non-temporal stores: they
 * will not fit in cache anyway, and skipping the read-for-ownership of the
 * destination saves a third of the memory traffic (as glibc's memcpy does
 * for large copies). */
#define OC_NT_THRESHOLD ((int64_t)4 << 20)

static void copy_to_memory(char *dst, const char *src, size_t bytes, bool stream)
{
#if defined(__SSE2__)
    if (stream && bytes >= 256) {
        size_t head = (size_t)(-(uintptr_t)dst & 15);
        memcpy(dst, src, head);
        dst += head, src += head, bytes -= head;
        size_t body = bytes & ~(size_t)63;
        for (size_t i = 0; i < body; i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
            __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
            _mm_stream_si128((__m128i *)(dst + i), a);
            _mm_stream_si128((__m128i *)(dst + i + 16), b);
            _mm_stream_si128((__m128i *)(dst + i + 32), c);
            _mm_stream_si128((__m128i *)(dst + i + 48), d);
        }
        memcpy(dst + body, src + body, bytes - body);
        _mm_sfence(); /* streamed stores are visible before the call returns */
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, bytes);
}

void oc__flat_copy(const oc_tensor *t, int64_t start, int64_t n, void *buf, bool to_tensor)
{
    size_t elem = oc_dtype_size(t->dtype);
    if (n <= 0) return;
    if (oc_is_contiguous(t)) {
        char *p = (char *)t->data + start * (int64_t)elem;
        if (to_tensor) copy_to_memory(p, buf, (size_t)n * elem, oc_nbytes(t) >= OC_NT_THRESHOLD);
        else memcpy(buf, p, (size_t)n * elem);
        return;
    }
    /* Odometer over the multi-index: unravel once, then step. */
    int64_t idx[OC_MAX_DIMS], rem = start, off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = rem % t->sizes[d];
        rem /= t->sizes[d];
        off += idx[d] * t->strides[d];
    }
    char *b = buf, *base = t->data;
    int last = t->ndim - 1;
    for (int64_t k = 0; k < n; k++, b += elem) {
        char *p = base + off * (int64_t)elem;
        if (to_tensor) memcpy(p, b, elem);
        else memcpy(b, p, elem);
        if (last < 0) continue;
        int d = last;
        idx[d]++;
        off += t->strides[d];
        while (idx[d] == t->sizes[d] && d > 0) {
            off -= idx[d] * t->strides[d];
            idx[d] = 0;
            d--;
            idx[d]++;
            off += t->strides[d];
        }
    }
}

