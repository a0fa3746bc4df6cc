/* peaks.c — the table of dense peak TFLOP/s, and matching a device name to it.
 *
 * Figures are NVIDIA's published ones at boost clock: the datasheet where it
 * prints dense numbers, else half the datasheet's sparse ("*") number, and
 * the architecture whitepapers' per-product tables for the GeForce and
 * professional cards (which give fp16 with fp16 and with fp32 accumulate
 * separately). See peaks.h for what each column means.
 */
#include "peaks.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <strings.h>

#define NA NAN

/* Most specific first: a rule is taken when all its words match. */
static const PeakEntry PEAKS[] = {
    /* Hopper. H100 whitepaper: SXM5 66.9 / 494.7 / 989.4 / FP8 1978.9; H200 and
     * GH200 use the same GH100 at the same clocks (datasheets: 67, 989*, 1979*,
     * FP8 3958*). */
    {"GH200", {"GH200"}, {NULL}, {67.0, 494.7, 989.4, 989.4, 1978.9},
     "NVIDIA GH200 Grace Hopper Superchip datasheet (dense = sparse / 2)"},
    {"H200 NVL", {"H200", "NVL"}, {NULL}, {60.0, 417.5, 835.5, 835.5, 1670.5},
     "NVIDIA H200 datasheet, H200 NVL column: FP32 60, TF32 835*, FP16/BF16 1671*, FP8 3341*"},
    {"H200 SXM", {"H200"}, {NULL}, {67.0, 494.7, 989.4, 989.4, 1978.9},
     "NVIDIA H200 datasheet, H200 SXM column: FP32 67, TF32 989*, FP16/BF16 1979*, FP8 3958*"},
    {"H100 NVL", {"H100", "NVL"}, {NULL}, {60.0, 417.5, 835.5, 835.5, 1670.5},
     "NVIDIA H100 datasheet, H100 NVL column (per GPU): FP32 60, TF32 835*, FP16/BF16 1671*, "
     "FP8 3341*"},
    {"H100 PCIe", {"H100", "PCIe"}, {NULL}, {51.2, 378.0, 756.0, 756.0, 1513.0},
     "NVIDIA H100 datasheet, H100 PCIe column: FP32 51, TF32 756*, FP16/BF16 1513*, FP8 3026*"},
    {"H100 SXM5", {"H100"}, {NULL}, {66.9, 494.7, 989.4, 989.4, 1978.9},
     "NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5): FP32 66.9, TF32 494.7, "
     "FP16/BF16 989.4, FP8 1978.9 dense"},
    /* Ampere data centre. A100 datasheet: the same peaks for SXM4 and PCIe,
     * 40 GB and 80 GB (the PCIe card sustains less at 250-300 W). */
    {"A100 PCIe", {"A100", "PCIe"}, {NULL}, {19.5, 156.0, 312.0, 312.0, NA},
     "NVIDIA A100 datasheet: FP32 19.5, TF32 156, FP16/BF16 312 dense"},
    {"A100 SXM4", {"A100"}, {NULL}, {19.5, 156.0, 312.0, 312.0, NA},
     "NVIDIA A100 datasheet: FP32 19.5, TF32 156, FP16/BF16 312 dense"},
    {"A30", {"A30"}, {NULL}, {10.3, 82.0, 165.0, 165.0, NA},
     "NVIDIA A30 datasheet: FP32 10.3, TF32 82, FP16/BF16 165 dense"},
    {"A10", {"A10"}, {NULL}, {31.2, 62.5, 125.0, 125.0, NA},
     "NVIDIA A10 datasheet: FP32 31.2, TF32 62.5, FP16/BF16 125 dense"},
    {"A40", {"A40"}, {NULL}, {37.4, 74.8, 149.7, 149.7, NA},
     "NVIDIA A40 datasheet: FP32 37.4, TF32 74.8, FP16/BF16 149.7 dense"},
    {"RTX A6000", {"A6000"}, {NULL}, {38.7, 77.4, 154.8, 154.8, NA},
     "NVIDIA Ampere GA102 whitepaper v2, appendix C (RTX A6000): FP32 38.7, TF32 77.4, "
     "FP16 (FP32 acc.) 154.8, BF16 154.8"},
    /* GeForce: fp16 with fp32 accumulate is half the fp16-accumulate rate. */
    {"GeForce RTX 3090", {"RTX", "3090"}, {"Ti", "Laptop", "Mobile"},
     {35.6, 35.6, 71.0, 71.0, NA},
     "NVIDIA Ampere GA102 whitepaper, appendix A (RTX 3090): FP32 35.6, TF32 35.6, FP16 142 "
     "with FP16 acc. / 71 with FP32 acc., BF16 71"},
    /* Ada. */
    {"L40S", {"L40S"}, {NULL}, {91.6, 183.0, 362.05, 362.05, 733.0},
     "NVIDIA L40S datasheet: FP32 91.6, TF32 183, FP16/BF16 362.05 dense, FP8 1466*"},
    {"L40", {"L40"}, {NULL}, {90.5, 90.5, 181.05, 181.05, 362.0},
     "NVIDIA L40 datasheet: FP32 90.5, TF32 90.5, FP16/BF16 181.05 dense, FP8 724*"},
    {"L4", {"L4"}, {NULL}, {30.3, 60.0, 121.0, 121.0, 242.5},
     "NVIDIA L4 datasheet: FP32 30.3, TF32 120*, FP16/BF16 242*, FP8 485*"},
    {"GeForce RTX 4090", {"RTX", "4090"}, {"D", "Laptop", "Mobile"},
     {82.6, 82.6, 165.2, 165.2, 330.3},
     "NVIDIA Ada Lovelace architecture whitepaper, appendix (RTX 4090): FP32 82.6, TF32 82.6, "
     "FP16 330.3 with FP16 acc. / 165.2 with FP32 acc., BF16 165.2, FP8 660.6 with FP16 acc. / "
     "330.3 with FP32 acc."},
    /* Volta and Turing: fp16 tensor cores only (mixed precision, fp32 acc.). */
    {"V100S PCIe", {"V100S"}, {NULL}, {16.4, NA, 130.0, NA, NA},
     "NVIDIA V100 datasheet (V100S PCIe): FP32 16.4, tensor 130"},
    {"V100 PCIe", {"V100", "PCIe"}, {NULL}, {14.0, NA, 112.0, NA, NA},
     "NVIDIA V100 datasheet (PCIe): FP32 14, tensor 112"},
    {"V100 SXM2", {"V100"}, {NULL}, {15.7, NA, 125.0, NA, NA},
     "NVIDIA V100 datasheet (SXM2): FP32 15.7, tensor 125"},
    {"T4", {"T4"}, {NULL}, {8.1, NA, 65.0, NA, NA},
     "NVIDIA T4 datasheet: FP32 8.1, mixed precision (FP16/FP32) 65"},
};

static int is_word_char(char c) { return isalnum((unsigned char)c); }

/* `word` occurs in `s` (case-insensitive) with a non-alphanumeric (or the
 * string's end) on both sides. */
static int has_word(const char *s, const char *word)
{
    size_t n = 0;
    while (word[n]) n++;
    for (const char *p = s; *p; p++) {
        if (strncasecmp(p, word, n)) continue;
        if (p > s && is_word_char(p[-1])) continue;
        if (is_word_char(p[n])) continue;
        return 1;
    }
    return 0;
}

const PeakEntry *peaks_lookup(const char *device_name)
{
    if (!device_name || !*device_name) return NULL;
    for (size_t i = 0; i < sizeof PEAKS / sizeof PEAKS[0]; i++) {
        const PeakEntry *e = &PEAKS[i];
        int ok = 1;
        for (int w = 0; w < 3 && e->words[w] && ok; w++) ok = has_word(device_name, e->words[w]);
        for (int w = 0; w < 3 && e->unless[w] && ok; w++)
            ok = !has_word(device_name, e->unless[w]);
        if (ok) return e;
    }
    return NULL;
}

int peaks_precision_parse(const char *s)
{
    if (!s) return -1;
    char low[8];   /* card names match in any case; so do the precisions */
    size_t n = 0;
    for (; s[n] && n < sizeof low - 1; n++) low[n] = (char)tolower((unsigned char)s[n]);
    if (s[n]) return -1;   /* longer than any name */
    low[n] = 0;
    return precision_parse(low);
}

double peaks_tflops(const char *device_name, const char *precision)
{
    const PeakEntry *e = peaks_lookup(device_name);
    int p = peaks_precision_parse(precision);
    if (!e || p < 0) return NAN;
    double t = e->tflops[p];
    if (p == PEAK_TF32 && isnan(t)) t = e->tflops[PEAK_FP32]; /* no TF32: fp32 math */
    return t;
}

const PeakEntry *peaks_table(int *count)
{
    if (count) *count = (int)(sizeof PEAKS / sizeof PEAKS[0]);
    return PEAKS;
}

double mfu(double flops_per_sample, double samples_per_s, double peak_tflops)
{
    if (!isfinite(flops_per_sample) || !isfinite(samples_per_s) || !isfinite(peak_tflops) ||
        peak_tflops <= 0)
        return NAN;
    return flops_per_sample * samples_per_s / (peak_tflops * 1e12);
}
