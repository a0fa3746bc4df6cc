/* gpu_grad_fresh.c — CTRAIN_GRAD_FRESH on the GPU (engine/params.h
 * params_grad_fresh): each parameter's first gradient contribution of a step
 * writes (cuBLASLt's and cuDNN's beta 0, the kernels' accumulate flag off)
 * instead of adding into a buffer the update zeroed. With the switch on and
 * off (tests/grad_fresh_case.h): BERT-tiny bf16 (joined q/k/v, tied
 * embedding and decoder, the bias in the weight gradient's epilogue) eager
 * and as a CUDA graph, with recompute, in fp8 (the FP8 Linears' colsum
 * bias gradients; sm_89 and later), and with accumulation, where the
 * switch stays out of the step: the same bits, with the GEMM search off (a
 * written gradient's GEMM is a plan of its own, which a timed search could
 * give another algorithm; the heuristic gives both the same). ResNet-18
 * bf16 and tf32 (cuDNN's batch norm and convolutions, the stem's own
 * kernels, searched by timing): the same bits too, the written gradients'
 * convolution plans taking their adding twins' choices (ops/conv2d_cudnn.c;
 * the two runs share a context). Not a tolerance: this ResNet-18 at batch
 * 8 is chaotic, 3e-6 apart after one step grew to 2e-2 after four when the
 * twins were searched apart (tf32, lr 0.05). The CPU side:
 * tests/test_grad_fresh.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "gpu_util.h"
#include "grad_fresh_case.h"
#include "ops/fp8_recipe.h"

int main(void)
{
    gpu_require();
    check_seed(20261206);
    setenv("CTRAIN_GEMM_SEARCH", "0", 1);   /* BERT's cases: the heuristic's algorithms */
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    const char *bert = "--model bert-tiny --data synthetic --batch 8 --seq 64 --steps 4 "
                       "--optim adamw --lr 1e-3 --warmup 2 --wd 0.01 --precision bf16";
    char a[400];
    grad_fresh_same_run(&c, DEV_CUDA, "bert-tiny bf16 eager", bert, 1);
    snprintf(a, sizeof a, "%s --graph", bert);
    grad_fresh_same_run(&c, DEV_CUDA, "bert-tiny bf16 graph", a, 1);
    snprintf(a, sizeof a, "%s --recompute all --graph", bert);
    grad_fresh_same_run(&c, DEV_CUDA, "bert-tiny bf16 recompute all, graph", a, 1);
    snprintf(a, sizeof a, "%s --accum 2 --graph", bert);
    grad_fresh_same_run(&c, DEV_CUDA, "bert-tiny bf16 accum 2, graph", a, 0);
    if (fp8_supported(&c)) {
        grad_fresh_same_run(&c, DEV_CUDA, "bert-tiny fp8 graph",
                            "--model bert-tiny --data synthetic --batch 8 --seq 64 --steps 4 "
                            "--optim adamw --lr 1e-3 --warmup 2 --precision fp8 --graph", 1);
    } else {
        printf("SKIP fp8: the device has no FP8 GEMMs (sm_89 or later)\n");
    }
    unsetenv("CTRAIN_GEMM_SEARCH");
    const char *rn = "--model resnet18 --data synthetic --batch 8 --image-size 64 --classes 10 "
                     "--steps 4 --optim sgd --lr 0.05 --momentum 0.9 --nesterov --wd 1e-4";
    snprintf(a, sizeof a, "%s --precision bf16 --graph", rn);
    grad_fresh_same_run(&c, DEV_CUDA, "resnet18 bf16 graph", a, 1);
    snprintf(a, sizeof a, "%s --precision tf32", rn);
    grad_fresh_same_run(&c, DEV_CUDA, "resnet18 tf32 eager", a, 1);
    ctx_free(&c);
    return check_summary();
}
