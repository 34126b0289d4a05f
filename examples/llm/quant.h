/* GGML's Q8_0 and Q4_0 blocks (32 weights each), as llama.cpp lays them out:
 *   Q8_0: float16 scale d, then 32 int8 q;          w = d * q          (34 bytes)
 *   Q4_0: float16 scale d, then 16 bytes of nibbles: byte i holds weight i
 *         (low nibble) and weight i + 16 (high);    w = d * (q - 8)    (18 bytes) */
#ifndef LLM_QUANT_H
#define LLM_QUANT_H
#include <stdint.h>
#include <string.h>

#include <opcore/dtype.h>

#define LLM_QK 32
#define LLM_Q8_0_BYTES 34
#define LLM_Q4_0_BYTES 18

static inline float llm_block_scale(const uint8_t *b)
{
    oc_half h;
    memcpy(&h, b, sizeof h);
    return oc_half_to_f32(h);
}

/* k weights (a multiple of 32) of one Q8_0 row into float32. */
static inline void llm_dequant_q8_0(float *dst, const uint8_t *row, int64_t k)
{
    for (int64_t b = 0; b < k / LLM_QK; b++, row += LLM_Q8_0_BYTES, dst += LLM_QK) {
        float d = llm_block_scale(row);
        const int8_t *q = (const int8_t *)(row + 2);
        for (int i = 0; i < LLM_QK; i++) dst[i] = d * (float)q[i];
    }
}

/* k weights (a multiple of 32) of one Q4_0 row into float32. */
static inline void llm_dequant_q4_0(float *dst, const uint8_t *row, int64_t k)
{
    for (int64_t b = 0; b < k / LLM_QK; b++, row += LLM_Q4_0_BYTES, dst += LLM_QK) {
        float d = llm_block_scale(row);
        const uint8_t *q = row + 2;
        for (int i = 0; i < LLM_QK / 2; i++) {
            dst[i] = d * (float)((int)(q[i] & 15) - 8);
            dst[i + LLM_QK / 2] = d * (float)((int)(q[i] >> 4) - 8);
        }
    }
}
#endif
