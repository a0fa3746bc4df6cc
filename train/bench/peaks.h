/* peaks.h — datasheet peak TFLOP/s per card and precision, and MFU.
 *
 * MFU (model FLOPs utilization) = model FLOPs per sample x samples/s divided
 * by the card's peak FLOP/s for the precision the run used:
 *
 *   mfu = flops_per_sample * samples_per_s / (peak_tflops * 1e12)   (0..1)
 *
 * The peaks are DENSE figures (no 2:4 structured sparsity; datasheets print
 * the sparse figure, twice the dense one, marked with an asterisk):
 *   fp32  the non-tensor FP32 FMA rate (2 FLOP per FMA)
 *   tf32  TF32 tensor-core rate
 *   fp16  FP16 tensor-core rate with FP32 ACCUMULATE (what training uses:
 *         cuBLAS/cuDNN compute type 32F). GeForce cards (RTX 3090, 4090) run
 *         fp16 with fp32 accumulate at HALF their fp16-accumulate rate, and
 *         the figure here is the halved one; data-centre and professional
 *         cards run both at the same rate.
 *   bf16  BF16 tensor-core rate (always FP32 accumulate)
 *   fp8   FP8 tensor-core rate with FP32 accumulate (Hopper, Ada; the GeForce
 *         RTX 4090 at half its FP16-accumulate figure, as for fp16). A
 *         --precision fp8 run's MFU is against it, though only its encoder
 *         Linear layers run in FP8 (the rest in bf16)
 * A precision the card has no tensor-core path for is NaN ("no peak"), except
 * tf32 on a card without TF32 (Volta, Turing): there "tf32" runs FP32 math,
 * so peaks_tflops() answers with the fp32 figure.
 *
 * Cards are matched by the CUDA device name (cudaDeviceProp.name, e.g.
 * "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090", "NVIDIA H200"):
 * each rule lists words that must all appear as whole words (case-insensitive,
 * bounded by non-alphanumerics, so "A10" does not match "A100" and "H200" does
 * not match "GH200") and words that must not; the most specific rules come
 * first. An unknown card has no peak: MFU is then reported against the matmul
 * ceiling measured in the same run only.
 */
#ifndef CTRAIN_TRAIN_PEAKS_H
#define CTRAIN_TRAIN_PEAKS_H

#include "train/loop/precision.h"

/* The table's columns: one per precision (train/loop/precision.h), in its order. */
enum {
    PEAK_FP32 = PREC_FP32, PEAK_TF32 = PREC_TF32, PEAK_FP16 = PREC_FP16, PEAK_BF16 = PREC_BF16,
    PEAK_FP8 = PREC_FP8, PEAK_COUNT = PREC_COUNT
};

typedef struct PeakEntry {
    const char *card;              /* a readable name: "H100 SXM5" */
    const char *words[3];          /* all must appear (NULL-terminated) */
    const char *unless[3];         /* none may appear */
    double tflops[PEAK_COUNT];     /* dense TFLOP/s; NaN = no such path */
    const char *source;            /* the datasheet or whitepaper figures are from */
} PeakEntry;

/* A precision name in any case ("BF16" as "bf16", through precision_parse)
 * -> the column; -1 when it names none. */
int peaks_precision_parse(const char *s);

/* The entry for a CUDA device name; NULL when the card is unknown. */
const PeakEntry *peaks_lookup(const char *device_name);
/* Dense peak TFLOP/s for a device name and precision name; NaN when the card
 * or the precision is unknown or the card has no such path. */
double peaks_tflops(const char *device_name, const char *precision);

/* The whole table (for listing it, docs and tests). */
const PeakEntry *peaks_table(int *count);

/* flops_per_sample * samples_per_s / (peak_tflops * 1e12), a fraction;
 * NaN when any input is not finite or the peak is <= 0. */
double mfu(double flops_per_sample, double samples_per_s, double peak_tflops);

#endif
