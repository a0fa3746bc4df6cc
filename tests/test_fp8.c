/* test_fp8.c — the CPU reference of the FP8 formats and their scaling
 * (ops/fp8.h):
 *   - decoding: known values of both formats (1, the largest finite, the
 *     smallest subnormal and normal, E5M2's infinity, the NaN codes);
 *   - every code's value encodes back to the same code (-0 included);
 *   - rounding against a brute-force reference: for log-uniform random
 *     values over 2^-20 .. 2^20 of both signs, for every midpoint between
 *     neighbouring codes and for the floats just beside each midpoint, the
 *     encoder's code is the nearest finite code, ties to the even code,
 *     values above the largest finite saturating to it;
 *   - the special inputs: NaN -> 0x7F, +-inf and huge -> +-largest finite
 *     (E4M3 464, which round-to-even alone would send to the missing 480),
 *     -0 keeps its sign, f32 subnormals -> 0;
 *   - the scaled cast: codes of x * scale, amax = max |x| (NaN skipped, an
 *     infinity counted), and dequantization q * scale_inv;
 *   - delayed scaling: the scale follows the history's maximum as it rolls
 *     (a large amax leaves after L steps), the margin's power of two, an
 *     all-zero history keeps the old scale, a non-finite amax is reported
 *     and recorded as 0.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/fp8.h"
#include "check.h"

static const Fp8Format fmts[2] = {FP8_E4M3, FP8_E5M2};

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The largest finite positive code. */
static int max_code(Fp8Format f) { return f == FP8_E4M3 ? 0x7E : 0x7B; }

/* Brute force: the nearest finite code to x (ties to the even code), with
 * values beyond the largest finite saturating. */
static uint8_t nearest_code(float x, Fp8Format f)
{
    const int sign = signbit(x) ? 0x80 : 0;
    const double a = fabs((double)x);
    if (a >= (double)fp8_max(f)) return (uint8_t)(sign | max_code(f));
    int best = 0;
    double bd = a;
    for (int c = 1; c <= max_code(f); c++) {
        const double d = fabs((double)fp8_to_f32((uint8_t)c, f) - a);
        if (d < bd || (d == bd && (c & 1) == 0)) { best = c; bd = d; }
    }
    return (uint8_t)(sign | best);
}

static void test_decode(void)
{
    struct { Fp8Format f; uint8_t q; float v; } k[] = {
        {FP8_E4M3, 0x38, 1.0f}, {FP8_E4M3, 0x7E, 448.0f}, {FP8_E4M3, 0xFE, -448.0f},
        {FP8_E4M3, 0x01, 0x1p-9f}, {FP8_E4M3, 0x07, 7 * 0x1p-9f}, {FP8_E4M3, 0x08, 0x1p-6f},
        {FP8_E4M3, 0x3C, 1.5f}, {FP8_E4M3, 0x78, 256.0f}, {FP8_E4M3, 0x00, 0.0f},
        {FP8_E5M2, 0x3C, 1.0f}, {FP8_E5M2, 0x7B, 57344.0f}, {FP8_E5M2, 0x01, 0x1p-16f},
        {FP8_E5M2, 0x04, 0x1p-14f}, {FP8_E5M2, 0x3E, 1.5f}, {FP8_E5M2, 0x7C, INFINITY},
        {FP8_E5M2, 0xFC, -INFINITY}, {FP8_E5M2, 0xBC, -1.0f},
    };
    int bad = 0;
    char what[128] = "";
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const float got = fp8_to_f32(k[i].q, k[i].f);
        if (f32_bits(got) != f32_bits(k[i].v) && !bad++)
            snprintf(what, sizeof what, "%s 0x%02X: %g, want %g", fp8_name(k[i].f), k[i].q,
                     (double)got, (double)k[i].v);
    }
    check_true("fp8.decode.known_values", bad == 0, "%d wrong; first %s", bad, what);
    const float n1 = fp8_to_f32(0x7F, FP8_E4M3), n2 = fp8_to_f32(0xFF, FP8_E4M3);
    const float n3 = fp8_to_f32(0x7D, FP8_E5M2), n4 = fp8_to_f32(0x7F, FP8_E5M2);
    check_true("fp8.decode.nan_codes", isnan(n1) && isnan(n2) && isnan(n3) && isnan(n4),
               "%g %g %g %g", (double)n1, (double)n2, (double)n3, (double)n4);
    check_true("fp8.decode.negative_zero", f32_bits(fp8_to_f32(0x80, FP8_E4M3)) == 0x80000000u,
               "0x%08X", f32_bits(fp8_to_f32(0x80, FP8_E4M3)));
}

static void test_roundtrip(void)
{
    for (int k = 0; k < 2; k++) {
        const Fp8Format f = fmts[k];
        int bad = -1, n = 0;
        for (int c = 0; c < 256; c++) {
            const float v = fp8_to_f32((uint8_t)c, f);
            if (isnan(v) || isinf(v)) continue;
            n++;
            if (fp8_from_f32(v, f) != c && bad < 0) bad = c;
        }
        char name[64];
        snprintf(name, sizeof name, "fp8.%s.every_code_roundtrips", fp8_name(f));
        check_true(name, bad < 0 && n == (f == FP8_E4M3 ? 254 : 248),
                   "%d finite codes, first that does not round-trip 0x%02X", n, bad);
    }
}

/* Encoder against the brute-force reference on values, midpoints and the
 * floats beside the midpoints. */
static void test_rounding(void)
{
    for (int k = 0; k < 2; k++) {
        const Fp8Format f = fmts[k];
        long tried = 0, bad = 0;
        float first = 0.0f;
        uint8_t got1 = 0, want1 = 0;
#define TRY(xv)                                                                   \
        do {                                                                      \
            const float x_ = (xv);                                                \
            const uint8_t g_ = fp8_from_f32(x_, f), w_ = nearest_code(x_, f);     \
            tried++;                                                              \
            if (g_ != w_ && !bad++) { first = x_; got1 = g_; want1 = w_; }        \
        } while (0)
        check_seed(11 + (uint64_t)k);
        for (int i = 0; i < 20000; i++) {
            const float e = check_uniform(-20.0f, 20.0f), sgn = check_uniform(-1, 1);
            TRY(copysignf(exp2f(e), sgn));
        }
        for (int c = 0; c < max_code(f); c++) {
            const float lo = fp8_to_f32((uint8_t)c, f), hi = fp8_to_f32((uint8_t)(c + 1), f);
            const float mid = (float)(((double)lo + (double)hi) / 2);  /* exact in f32 */
            TRY(mid);
            TRY(-mid);
            TRY(bits_f32(f32_bits(mid) + 1));
            TRY(bits_f32(f32_bits(mid) - 1));
        }
        /* half the smallest subnormal and a hair above/below */
        const float tiny = fp8_to_f32(1, f) / 2;
        TRY(tiny);
        TRY(bits_f32(f32_bits(tiny) + 1));
        TRY(bits_f32(f32_bits(tiny) - 1));
#undef TRY
        char name[64];
        snprintf(name, sizeof name, "fp8.%s.round_nearest_even", fp8_name(f));
        check_true(name, bad == 0, "%ld of %ld wrong; first %.9g -> 0x%02X, want 0x%02X", bad,
                   tried, (double)first, got1, want1);
    }
}

static void test_specials(void)
{
    struct { Fp8Format f; float x; uint8_t want; } k[] = {
        {FP8_E4M3, NAN, 0x7F}, {FP8_E4M3, -NAN, 0x7F}, {FP8_E4M3, INFINITY, 0x7E},
        {FP8_E4M3, -INFINITY, 0xFE}, {FP8_E4M3, 1e30f, 0x7E}, {FP8_E4M3, 449.0f, 0x7E},
        {FP8_E4M3, 464.0f, 0x7E}, {FP8_E4M3, 500.0f, 0x7E}, {FP8_E4M3, -0.0f, 0x80},
        {FP8_E4M3, 0x1p-130f, 0x00}, {FP8_E4M3, -0x1p-140f, 0x80}, {FP8_E4M3, 0x1p-10f, 0x00},
        {FP8_E4M3, 0x1.8p-10f, 0x01}, {FP8_E4M3, 0x1.8p-9f, 0x02},
        {FP8_E5M2, NAN, 0x7F}, {FP8_E5M2, INFINITY, 0x7B}, {FP8_E5M2, -INFINITY, 0xFB},
        {FP8_E5M2, 60000.0f, 0x7B}, {FP8_E5M2, 61440.0f, 0x7B}, {FP8_E5M2, 0x1p-17f, 0x00},
        {FP8_E5M2, 1.125f, 0x3C}, {FP8_E5M2, 1.375f, 0x3E}, {FP8_E5M2, -0.0f, 0x80},
    };
    int bad = 0;
    char what[128] = "";
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const uint8_t got = fp8_from_f32(k[i].x, k[i].f);
        if (got != k[i].want && !bad++)
            snprintf(what, sizeof what, "%s(%g) = 0x%02X, want 0x%02X", fp8_name(k[i].f),
                     (double)k[i].x, got, k[i].want);
    }
    check_true("fp8.specials", bad == 0, "%d wrong; first %s", bad, what);
}

static void test_scaled_cast(void)
{
    enum { N = 4096 };
    static float x[N], back[N];
    static uint8_t q[N];
    check_seed(5);
    check_fill(x, N, -3.0f, 3.0f);
    x[17] = -7.25f;
    for (int k = 0; k < 2; k++) {
        const Fp8Format f = fmts[k];
        const float scale = fp8_max(f) / 7.25f, inv = 1.0f / scale;
        float amax = -1.0f;
        fp8_cast_cpu(q, &amax, x, N, scale, f);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += q[i] != fp8_from_f32(x[i] * scale, f);
        char name[64];
        snprintf(name, sizeof name, "fp8.%s.cast_codes", fp8_name(f));
        check_true(name, bad == 0, "%d codes differ from fp8(x * scale)", bad);
        snprintf(name, sizeof name, "fp8.%s.cast_amax", fp8_name(f));
        check_true(name, amax == 7.25f, "amax %g, want 7.25", (double)amax);
        /* dequantized: relative error at most half an ulp of the format
         * (2^-4 for E4M3, 2^-3 for E5M2) for normal values */
        fp8_dequant_cpu(back, q, N, inv, f);
        const double ulp_half = f == FP8_E4M3 ? 0x1p-4 : 0x1p-3;
        int worst = 0;
        double wr = 0.0;
        for (int i = 0; i < N; i++) {
            if (fabsf(x[i] * scale) < (f == FP8_E4M3 ? 0x1p-6f : 0x1p-14f)) continue;
            const double r = fabs((double)back[i] - x[i]) / fabs((double)x[i]);
            if (r > wr) { wr = r; worst = i; }
        }
        snprintf(name, sizeof name, "fp8.%s.dequant_within_half_ulp", fp8_name(f));
        check_true(name, wr <= ulp_half * (1 + 1e-6), "worst relative error %.4g at %d (%g)",
                   wr, worst, (double)x[worst]);
    }
    float y[4] = {1.0f, NAN, -2.0f, 0.5f}, amax = 0;
    uint8_t qq[4];
    fp8_cast_cpu(qq, &amax, y, 4, 1.0f, FP8_E4M3);
    check_true("fp8.cast_amax_skips_nan", amax == 2.0f && qq[1] == 0x7F, "amax %g, NaN -> 0x%02X",
               (double)amax, qq[1]);
    y[1] = -INFINITY;
    fp8_cast_cpu(qq, &amax, y, 4, 1.0f, FP8_E4M3);
    check_true("fp8.cast_amax_counts_inf", isinf(amax) && qq[1] == 0xFE, "amax %g, -inf -> 0x%02X",
               (double)amax, qq[1]);
}

static void test_scale_update(void)
{
    enum { L = 4 };
    float hist[L] = {0}, scale = 1.0f, inv = 0.0f;
    /* amaxes by step; the expected scale is 448 / max of the last L */
    const float amax[] = {2.0f, 8.0f, 1.0f, 0.5f, 0.25f, 4.0f, 0.125f, 0.125f, 0.125f, 0.125f};
    int bad = -1;
    float want_at_bad = 0, got_at_bad = 0;
    for (int t = 0; t < (int)(sizeof amax / sizeof amax[0]); t++) {
        const int ovf = fp8_scale_update_cpu(hist, L, t, amax[t], FP8_E4M3, 0, &scale, &inv);
        float m = 0;
        for (int j = t - L + 1; j <= t; j++) if (j >= 0 && amax[j] > m) m = amax[j];
        const float want = 448.0f / m;
        if ((scale != want || inv != 1.0f / want || ovf) && bad < 0) {
            bad = t; want_at_bad = want; got_at_bad = scale;
        }
    }
    check_true("fp8.scale.follows_history_max", bad < 0, "step %d: scale %g, want %g", bad,
               (double)got_at_bad, (double)want_at_bad);

    /* margin 2: a quarter of the scale */
    float h2[L] = {0}, s2 = 1.0f, i2 = 0.0f;
    fp8_scale_update_cpu(h2, L, 0, 3.5f, FP8_E4M3, 2, &s2, &i2);
    check_true("fp8.scale.margin", s2 == 448.0f / 3.5f / 4.0f && i2 == 1.0f / s2, "scale %g",
               (double)s2);
    /* E5M2's largest finite */
    fp8_scale_update_cpu(h2, L, 1, 3.5f, FP8_E5M2, 0, &s2, &i2);
    check_true("fp8.scale.e5m2", s2 == 57344.0f / 3.5f, "scale %g", (double)s2);

    /* an all-zero history keeps the scale it had */
    float h3[L] = {0}, s3 = 0.75f, i3 = 0.0f;
    int o = fp8_scale_update_cpu(h3, L, 0, 0.0f, FP8_E4M3, 0, &s3, &i3);
    check_true("fp8.scale.zero_keeps", s3 == 0.75f && i3 == 1.0f / 0.75f && o == 0, "scale %g",
               (double)s3);

    /* overflow: reported, recorded as 0, the others still rule */
    float h4[L] = {0}, s4 = 1.0f, i4 = 0.0f;
    fp8_scale_update_cpu(h4, L, 0, 2.0f, FP8_E4M3, 0, &s4, &i4);
    o = fp8_scale_update_cpu(h4, L, 1, INFINITY, FP8_E4M3, 0, &s4, &i4);
    const int o2 = fp8_scale_update_cpu(h4, L, 2, NAN, FP8_E4M3, 0, &s4, &i4);
    check_true("fp8.scale.overflow", o == 1 && o2 == 1 && h4[1] == 0.0f && h4[2] == 0.0f &&
               s4 == 224.0f, "flags %d %d, history %g %g, scale %g", o, o2, (double)h4[1],
               (double)h4[2], (double)s4);
}

int main(void)
{
    test_decode();
    test_roundtrip();
    test_rounding();
    test_specials();
    test_scaled_cast();
    test_scale_update();
    return check_summary();
}
