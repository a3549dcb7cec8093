/* bfloat16 <-> float on the host. bf16 is the top half of an IEEE float (1 sign,
 * 8 exponent, 7 mantissa bits), so widening is a shift and narrowing is a rounding of
 * the low 16 bits. These match CUDA's __bfloat162float and __float2bfloat16_rn bit for
 * bit, NaN included, so the CPU and CUDA twins round identically. */
#ifndef KERNELS_BF16_H
#define KERNELS_BF16_H

#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

static inline float kernels_bf16_to_f32(kernels_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest, ties to even. Adding 0x7fff plus the lowest kept bit rounds up
 * exactly when the dropped half is above 0x8000, or equal to it with an odd kept half;
 * a carry out of the mantissa bumps the exponent, which is right (and turns the
 * largest finite values into Inf, as IEEE rounding does). NaN would be rounded into
 * Inf by the same carry, so it is caught first. */
static inline kernels_bf16 kernels_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fff;  /* canonical quiet NaN, as CUDA returns */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (kernels_bf16)(u >> 16);
}

#endif /* KERNELS_BF16_H */
