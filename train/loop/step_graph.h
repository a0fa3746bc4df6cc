/* step_graph.h — the training step captured once as CUDA graphs, then replayed.
 *
 * Why: an eager step launches hundreds to thousands of kernels (ResNet50:
 * ~1500; BERT-large: ~2500), each costing the host a few microseconds to
 * queue. For small batches the GPU finishes a kernel faster than the host can
 * queue the next one, and the step becomes launch-bound. A CUDA graph records
 * the whole sequence once; a replay is one launch, and the GPU runs the
 * kernels back to back.
 *
 * What a graph cannot do is look at the host: every value a captured kernel
 * reads is frozen at capture time unless it lives in device memory. So
 * before capture the trainer moves the three things that change per step
 * onto the device:
 *   - the learning rate: the whole schedule is tabulated (lr_table[s], the
 *     same floats the eager step computes) and a kernel at the start of the
 *     update graph copies lr_table[*step] into the optimizer's lr word;
 *   - the step counter (*step), incremented by the update graph's last
 *     kernel (AdamW's bias corrections already live on the device);
 *   - the Philox offset for dropout: ops take offsets relative to the
 *     micro-batch's start and add the device word *rng_base (ctx.h), which
 *     the micro graph advances by what one micro-batch draws.
 * The host mirrors the counters (Trainer.step, Ctx.rng_offset) so progress
 * lines, --trace and checkpoints see the same numbers as in eager mode.
 *
 * Two graphs, because gradient accumulation feeds K micro-batches per step
 * through the same static input tensors:
 *   micro:  forward, backward (gradients += into the one buffer), the loss
 *           copied into a static tensor, rng_base += draws
 *   update: lr fetch, unscale + inf check, clip, optimizer (skips itself on
 *           the device flag), scaler update, zero gradients, step += 1
 * A step is: K x (feed copies the batch into the static inputs; replay
 * micro), then replay update. With K = 1 that is two launches per step.
 *
 * Memory: tensors allocated inside the captured step come from the graph's
 * own memory (stream-ordered allocation nodes). Before capture the pool's
 * cached blocks are trimmed so the graph can take them; the step's
 * footprint is the same as eager. Warm-up steps run eager first, so the
 * cuDNN algorithm search, workspace growth and first allocations happen
 * outside the graph.
 *
 * When the step cannot be captured (CPU device, capture or instantiation
 * refused), the capture says why and the trainer stays eager.
 */
#ifndef CTRAIN_TRAIN_STEP_GRAPH_H
#define CTRAIN_TRAIN_STEP_GRAPH_H

#include "trainer.h"

/* Called by trainer_step / trainer_free (step.c): capture after the warm-up
 * steps (t->graph.state becomes GRAPH_ON, or GRAPH_FAILED with a logged
 * reason); one replayed step; the loss of the last replayed micro-batch;
 * release. The graphs hold the pieces of trainer.h; the state they keep is
 * t->graph (StepGraph, trainer.h). */
void trainer_graph_capture(Trainer *t);
void trainer_graph_step(Trainer *t);
float trainer_graph_loss(Trainer *t);
void trainer_graph_free(Trainer *t);

#endif
