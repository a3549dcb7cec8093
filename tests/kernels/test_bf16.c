/* bf16 conversion: exact round trips, ties to even, NaN / Inf / overflow / subnormals. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tests/kernels/kt.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Every one of the 65536 bf16 patterns survives bf16 -> f32 -> bf16, except NaNs,
 * which come back as the canonical NaN. */
START_TEST(round_trip_all_patterns) {
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = kernels_bf16_to_f32((kernels_bf16)h);
        kernels_bf16 back = kernels_f32_to_bf16(f);
        int nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
        if (nan) {
            ck_assert(isnan(f));
            ck_assert_uint_eq(back, 0x7fff);
        } else {
            ck_assert_msg(back == h, "0x%04x -> %g -> 0x%04x", h, f, back);
            ck_assert_uint_eq(memcmp(&f, &(uint32_t){h << 16}, 4), 0);
        }
    }
}
END_TEST

START_TEST(ties_go_to_even) {
    /* Exactly halfway: the kept half's lowest bit decides. */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x3f808000)), 0x3f80); /* even stays */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x3f818000)), 0x3f82); /* odd goes up */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0xbf808000)), 0xbf80); /* sign alike */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0xbf818000)), 0xbf82);
    /* Just off halfway: nearest wins. */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x3f808001)), 0x3f81);
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x3f807fff)), 0x3f80);
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x3f81ffff)), 0x3f82);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to 1. */
    ck_assert_uint_eq(kernels_f32_to_bf16(1.00390625f), 0x3f80);
    ck_assert_float_eq(kernels_bf16_to_f32(kernels_f32_to_bf16(1.01171875f)), 1.015625f);
    /* A carry out of the mantissa moves the exponent: 1.99999 -> 2. */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x3fffffff)), 0x4000);
}
END_TEST

START_TEST(specials) {
    ck_assert_uint_eq(kernels_f32_to_bf16(INFINITY), 0x7f80);
    ck_assert_uint_eq(kernels_f32_to_bf16(-INFINITY), 0xff80);
    ck_assert_uint_eq(kernels_f32_to_bf16(0.0f), 0x0000);
    ck_assert_uint_eq(kernels_f32_to_bf16(-0.0f), 0x8000);
    /* NaNs, quiet or signalling, any sign or payload (even one the rounding carry would
     * turn into Inf), stay NaN. */
    uint32_t nans[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0x7fffffff, 0xff800001, 0x7f80ffff};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        kernels_bf16 h = kernels_f32_to_bf16(from_bits(nans[i]));
        ck_assert_msg(isnan(kernels_bf16_to_f32(h)), "0x%08x -> 0x%04x", nans[i], h);
    }
    ck_assert(isinf(kernels_bf16_to_f32(0x7f80)) && kernels_bf16_to_f32(0xff80) < 0);
    /* Largest finite float rounds up to Inf; the largest bf16 stays finite. */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x7f7fffff)), 0x7f80);
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x7f7f0000)), 0x7f7f);
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x7f7f7fff)), 0x7f7f);
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x7f7f8000)), 0x7f80); /* tie, odd: up to Inf */
    /* Subnormals keep their bits and round the same way. */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x00010000)), 0x0001);
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x00008000)), 0x0000); /* tie, even: down */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x00018000)), 0x0002); /* tie, odd: up */
    ck_assert_uint_eq(kernels_f32_to_bf16(from_bits(0x007fffff)), 0x0080); /* up to the smallest normal */
}
END_TEST

/* Against an independent reference: round the float in double arithmetic. */
START_TEST(matches_reference_rounding) {
    kt_seed(7);
    for (int i = 0; i < 200000; i++) {
        /* Half the draws end exactly on a tie, to exercise it as often as the rest. */
        uint32_t u = kt_bits32();
        if (i & 1)
            u = (u & 0xffff0000u) | 0x8000u;
        float f = from_bits(u);
        if (isnan(f) || isinf(f))
            continue;
        /* Candidates: truncation and the next bf16 up (in magnitude). */
        uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
        double dl = fabs((double)f - from_bits(lo));
        double dh = isinf(from_bits(hi)) ? INFINITY : fabs((double)f - from_bits(hi));
        uint32_t want;
        if (u == lo)
            want = lo;
        else if ((hi & 0x7fffffffu) == 0x7f800000u) /* next up is Inf: IEEE overflow rule */
            want = (u & 0xffffu) >= 0x8000u ? hi : lo;
        else if (dl < dh)
            want = lo;
        else if (dh < dl)
            want = hi;
        else
            want = (lo >> 16) & 1 ? hi : lo;
        ck_assert_msg(kernels_f32_to_bf16(f) == (want >> 16), "0x%08x", u);
    }
}
END_TEST

START_TEST(array_casts) {
    kernels_ctx ctx;
    const kernels_ops *k = kernels_cpu();
    ck_assert_int_eq(k->init(&ctx, NULL), 0);
    float in[] = {1.0f, -2.5f, 1.00390625f, from_bits(0x3f818000), INFINITY, NAN, 3.0e38f, 1e-40f};
    size_t n = sizeof in / sizeof in[0];
    kernels_bf16 h[8];
    float back[8];
    k->cast_f32_to_bf16(&ctx, h, in, n);
    k->cast_bf16_to_f32(&ctx, back, h, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(h[i], kernels_f32_to_bf16(in[i]));
    ck_assert_float_eq(back[0], 1.0f);
    ck_assert_float_eq(back[1], -2.5f);
    ck_assert_float_eq(back[2], 1.0f);
    ck_assert_uint_eq(h[3], 0x3f82);
    ck_assert(isinf(back[4]));
    ck_assert(isnan(back[5]));
    ck_assert(isfinite(back[6]));
    ck_assert(back[7] > 0.0f && back[7] < 1.2e-38f);
    k->destroy(&ctx);
}
END_TEST

Suite *kt_suite_bf16(void) {
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("convert");
    tcase_add_test(tc, round_trip_all_patterns);
    tcase_add_test(tc, ties_go_to_even);
    tcase_add_test(tc, specials);
    tcase_add_test(tc, matches_reference_rounding);
    tcase_add_test(tc, array_casts);
    suite_add_tcase(s, tc);
    return s;
}
