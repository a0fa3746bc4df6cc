/* test_dtype.c — host dtype conversions (round to nearest even, edge cases)
 * and the Philox 4x32-10 generator against its published known answers. */
#include <string.h>
#include "check.h"
#include "engine/dtype.h"
#include "engine/philox.h"

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_f16(void)
{
    struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000},
        {65504.0f, 0x7bff},                 /* largest finite */
        {65519.0f, 0x7bff},                 /* just below the halfway point */
        {65520.0f, 0x7c00},                 /* halfway rounds to even: infinity */
        {1e6f, 0x7c00}, {-1e6f, 0xfc00},
        {5.9604645e-8f, 0x0001},            /* smallest subnormal 2^-24 */
        {2.9802322e-8f, 0x0000},            /* 2^-25: tie, rounds to even 0 */
        {4.4703484e-8f, 0x0001},            /* 1.5 * 2^-25 rounds up to 2^-24 */
        {6.1035156e-5f, 0x0400},            /* smallest normal 2^-14 */
        {1.0009765625f, 0x3c01},            /* 1 + 2^-10: exact */
        {1.00048828125f, 0x3c00},           /* 1 + 2^-11: tie, to even (down) */
        {1.00146484375f, 0x3c02},           /* 1 + 3*2^-11: tie, to even (up) */
        {0.333333343f, 0x3555},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = f32_to_f16(cases[i].f);
        if (h != cases[i].h) {
            printf("  f32_to_f16(%.9g) = 0x%04x, want 0x%04x\n", (double)cases[i].f, h, cases[i].h);
            ok = 0;
        }
    }
    check_true("f16.round_to_nearest_even", ok, "see lines above");
    check_true("f16.nan", isnan(f16_to_f32(f32_to_f16(NAN))), "NaN did not survive");
    /* every f16 value round-trips exactly through f32 */
    int rt = 1;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        if (f32_to_f16(f16_to_f32((uint16_t)h)) != h) { rt = 0; break; }
    }
    check_true("f16.roundtrip_all", rt, "an f16 value did not round-trip");
}

static void test_bf16(void)
{
    struct { uint32_t f; uint16_t b; } cases[] = {
        {0x3f800000u, 0x3f80},   /* 1.0 */
        {0x3f808000u, 0x3f80},   /* halfway, even below: down */
        {0x3f818000u, 0x3f82},   /* halfway, odd below: up */
        {0x3f808001u, 0x3f81},   /* above halfway: up */
        {0x7f7fffffu, 0x7f80},   /* max float rounds to infinity */
        {0xff800000u, 0xff80},   /* -inf */
        {0x00000001u, 0x0000},   /* tiny subnormal rounds to 0 */
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t b = f32_to_bf16(bits_f(cases[i].f));
        if (b != cases[i].b) {
            printf("  f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x\n", cases[i].f, b, cases[i].b);
            ok = 0;
        }
    }
    check_true("bf16.round_to_nearest_even", ok, "see lines above");
    check_true("bf16.nan", isnan(bf16_to_f32(f32_to_bf16(NAN))), "NaN did not survive");
    check_true("bf16.widen", bf16_to_f32(0x4049) == bits_f(0x40490000u), "widening is a shift");
}

static void test_convert(void)
{
    float src[5] = {1.5f, -3.25f, 100.0f, 0.1f, -0.0f}, back[5];
    uint16_t h[5];
    int32_t i32[5];
    dtype_convert(h, DT_BF16, src, DT_F32, 5);
    dtype_convert(back, DT_F32, h, DT_BF16, 5);
    check_true("convert.bf16", back[0] == 1.5f && back[1] == -3.25f && back[2] == 100.0f &&
               fabsf(back[3] - 0.1f) < 1e-3f, "bf16 round trip of simple values");
    dtype_convert(i32, DT_I32, src, DT_F32, 5);
    check_true("convert.i32", i32[0] == 1 && i32[1] == -3 && i32[2] == 100, "f32 -> i32 truncates");
    check_true("dtype.parse", dtype_parse("bf16") == DT_BF16 && dtype_parse("x") == -1, "names");
    check_true("dtype.size", dtype_size(DT_F16) == 2 && dtype_size(DT_I64) == 8, "sizes");
}

static void test_philox(void)
{
    /* Known answers for Philox4x32-10 (Salmon et al. 2011, Random123 kat_vectors) */
    uint32_t o[4];
    philox4x32_10(o, 0, 0, 0, 0, 0, 0);
    check_true("philox.kat_zero", o[0] == 0x6627e8d5u && o[1] == 0xe169c58du &&
               o[2] == 0xbc57ac4cu && o[3] == 0x9b00dbd8u,
               "got %08x %08x %08x %08x", o[0], o[1], o[2], o[3]);
    philox4x32_10(o, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
    check_true("philox.kat_ones", o[0] == 0x408f276du && o[1] == 0x41c83b0eu &&
               o[2] == 0xa20bc7c6u && o[3] == 0x6d5451fdu,
               "got %08x %08x %08x %08x", o[0], o[1], o[2], o[3]);
    philox4x32_10(o, 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
    check_true("philox.kat_pi", o[0] == 0xd16cfe09u && o[1] == 0x94fdccebu &&
               o[2] == 0x5001e420u && o[3] == 0x24126ea1u,
               "got %08x %08x %08x %08x", o[0], o[1], o[2], o[3]);
    /* seven rounds (attention's mask): the ten-round answers are seven rounds,
     * then three more with the key bumped seven times */
    {
        const uint32_t k0 = 0xa4093822u, k1 = 0x299f31d0u;
        uint32_t s7[4], s10[4];
        philox4x32_7(s7, 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, k0, k1);
        philox4x32_rounds(s10, s7[0], s7[1], s7[2], s7[3], k0 + 7u * PHILOX_W0,
                          k1 + 7u * PHILOX_W1, 3);
        check_true("philox.seven_then_three_is_ten",
                   s10[0] == 0xd16cfe09u && s10[1] == 0x94fdccebu && s10[2] == 0x5001e420u &&
                       s10[3] == 0x24126ea1u && s7[0] != s10[0],
                   "got %08x %08x %08x %08x", s10[0], s10[1], s10[2], s10[3]);
    }
    /* addressing: element i at offset k equals element i + 4 at offset k - 1 */
    check_true("philox.offset", philox_u32(7, 5, 3) == philox_u32(7, 4, 7), "stream addressing");
    check_true("philox.seed", philox_u32(7, 0, 0) != philox_u32(8, 0, 0), "seeds differ");
    double mean = 0;
    for (int i = 0; i < 100000; i++) {
        float u = philox_uniform(1, 0, (uint64_t)i);
        if (u < 0.0f || u >= 1.0f) { mean = -1; break; }
        mean += u / 100000.0;
    }
    check_true("philox.uniform", fabs(mean - 0.5) < 0.005, "mean of 1e5 uniforms %g", mean);
}

int main(void)
{
    test_f16();
    test_bf16();
    test_convert();
    test_philox();
    return check_summary();
}
