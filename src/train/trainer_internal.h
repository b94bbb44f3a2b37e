/* The trainer's state, shared by the files of src/train/ that implement
 * `plait train` (trainer.c: set-up, the step, checkpoints, the loop; report.c:
 * the banner, memory plan, progress lines, metrics and plait bench's report;
 * tensorboard.c: --tensorboard-dir's scalars). Not a public interface. */
#ifndef PL_TRAIN_TRAINER_INTERNAL_H
#define PL_TRAIN_TRAINER_INTERNAL_H

#include "base/tfevents.h"
#include "data/blended.h"
#include "data/sampler.h"
#include "data/tokenizer/tokenizer.h"
#include "model/model.h"
#include "optim/adamw.h"
#include "optim/loss_scale.h"
#include "optim/schedule.h"
#include "parallel/commq.h"
#include "parallel/dist.h"
#include "parallel/dp/buckets.h"
#include "parallel/grid.h"
#include "parallel/pp/schedule.h"
#include "parallel/zero/zero.h"
#include "train/args.h"

#include <stdio.h>

/* ZeRO 2-3: the fetch hook's context of one model chunk, whose layers are the rank's
 * layers [base, base + nl) (the regions' order: chunk after chunk). */
struct pl_trainer;
typedef struct pl_zero_chunk {
    struct pl_trainer *t;
    int64_t base, nl;
} pl_zero_chunk;

typedef struct pl_trainer {
    const pl_train_args *a;
    pl_dist dist;
    pl_grid grid;
    int grid_up;
    pl_tokenizer *tok;
    pl_model_config cfg;
    pl_registry reg;
    float *mem;                              /* one block: params, grads, m, v */
    float *params, *grads, *exp_avg, *exp_avg_sq;
    pl_gemm *gemm;
    pl_model model;                          /* this rank's model (interleaved: chunk 0) */
    int model_up;
    pl_model *chunk_more;                    /* interleaved: chunks 1..nchunks-1 */
    pl_zero_chunk *zchunk;                   /* ZeRO 2-3: [nchunks] the hooks' contexts */
    int nchunks, chunks_up;                  /* model chunks (1 unless interleaved) */
    pl_dp_buckets *buckets;                  /* stage 0 */
    /* ZeRO (stage >= 1): see the memory plan in setup_zero_memory */
    int zero_stage;
    pl_zero zero;
    float *gshard;                           /* stages 2-3: reduced gradients of the shard */
    float *pshard;                           /* stage 3: the shard's fp32 parameters */
    float *pnl, *gnl;                        /* stage 3 / 2-3: embeddings + final norm
                                              * (pipelined: the gradients accumulate over
                                              * the step, reduced once) */
    float *pwork, *gwork;                    /* stage 3 / 2-3: one layer's working buffer */
    float *gtmp;                             /* stages 2-3: one region's reduced part */
    int64_t nl_count, work_count;
    int64_t nl_emb;                          /* floats of pnl / gnl before the final norm's */
    int zr_emb, zr_l0, zr_tail;              /* stages 2-3: the regions of the embeddings
                                              * (-1: not on this stage), of the stage's first
                                              * layer, of the final norm + output layer (-1) */
    /* stages 2-3: the DP collectives run on a queue (parallel/commq.h), in a fixed order */
    pl_commq *zq;
    pl_commq_op zq_gather[2];                /* per parameter slot (layer parity) */
    pl_commq_op zq_rs[4];                    /* reduce-scatters: 2 layer slots, norm, embeddings */
    pl_commq_op zq_nl;                       /* stage 3: embeddings / final norm gathers */
    int64_t zq_gather_layer[2];              /* layer whose gather is in flight, or -1 */
    int64_t zq_slot_layer[2];                /* pipelined: the layer a slot holds this step */
    int zq_rs_posted[4];
    double zq_compute_end;                   /* end of the last backward (INFINITY: computing) */
    pl_commq_overlap zq_overlap;             /* this step's queued operations */
    pl_dp_step_stats comm_step, comm_total;  /* DP communication of the last step, and summed */
    size_t state_bytes[3], work_bytes;       /* planned: params, grads, optimizer; working */
    pl_comm_stats step_comm;                 /* DP bytes of the last step (this rank) */
    pl_comm_stats step_tp_comm;              /* TP bytes of the last step (this rank) */
    pl_comm_stats tp_total;                  /* TP counters summed since the bench window began */
    pl_commq *tpq;                           /* --tp-comm-overlap: the TP queue */
    /* pipelining (PP > 1): the schedule, and each slot's sends in flight */
    pl_pp_schedule pp;
    int pp_tied;                             /* tied embeddings on two stages (embd group) */
    pl_comm_req *pp_send_act, *pp_send_grad; /* [nchunks x pp_slots]: chunk k's slot j at
                                              * k pp_slots + j */
    int64_t pp_slots;                        /* the chunks' largest in-flight bound */
    pl_comm_stats step_pp_comm;              /* PP bytes of the last step (this rank) */
    double pp_wait_step, pp_compute_step;    /* the last step's seconds blocked on the
                                              * neighbouring stages / in FWD and BWD */
    int64_t wire_sum[3];                     /* the same summed over DP ranks */
    int64_t *pp_dp_wire;                     /* pipelined, [3 P]: wire_sum of every stage
                                              * (its TP rank 0's DP group) */
    int64_t early_all_ranks;                 /* comm_step.early summed over DP ranks */
    int64_t lnf_offset, lnf_count, emb_count; /* flat ranges outside the layers */
    pl_lr_schedule sched;
    pl_blend_data data;
    struct pl_train_bert_data *bert; /* --model bert or t5 on a --data-path (bert_data.c) */
    struct pl_train_encdec *ed;      /* --model t5 | bart: the decoder beside t->model, the
                                      * encoder (encdec_train.c) */
    struct pl_train_encdec_pp *edpp; /* --model t5 | bart pipelined: this stage's side of
                                      * the transfers (encdec_pipe.c) */
    struct pl_train_mmb *mmb;        /* --model bart on SMILES (encdec_data.c) */
    struct pl_train_ft *ft;          /* plait finetune's task and data (finetune.c) */
    int data_up;
    int64_t mbs, gbs, dp, num_micro, train_iters, train_samples;
    int64_t iteration, consumed_train, consumed_valid, opt_steps;
    double *lamb_sums;                       /* Lamb: [2 x reg.n] per-tensor squared norms */
    int32_t *sample;                         /* S + 1 tokens */
    int64_t *batch_idx;                      /* mbs global indices */
    FILE *metrics;
    pl_tfevents tb;                          /* --tensorboard-dir, the last rank's (f: NULL
                                              * elsewhere; train/tensorboard.c) */
    int64_t skipped_in_row, skipped_total;   /* skipped iterations (non-finite, overflow) */
    pl_loss_scaler scaler;                   /* --fp16 loss scale; static 1 otherwise */
    struct { /* seconds per phase, for plait bench (from the bench window's start) */
        double data, compute, comm, optim, total;
        double pp_wait; /* pipelined: blocked in the stage's receives and final sends */
        double pp_op[4];     /* pipelined: seconds in FWD, BWD, BWD_INPUT, BWD_WEIGHT */
        int64_t pp_op_n[4];  /* and how many of each (chunk actions) */
        int64_t steps;
    } prof;
    int64_t fault_nan_iter, fault_nan_rank;  /* PLAIT_FAULT_NAN_ITER / _RANK (tests) */
    double start_time;
    double gemm_peak;                        /* the stable peak MFU is against (peak.c) */
    struct {
        double measured;                     /* this start's GEMM rate */
        char path[1024], key[256];           /* the cache, "" when none */
    } peak;
    struct {                                 /* the progress line's window (progress.c) */
        double loss_sum, sop_sum;            /* over the advanced iterations (sop: BERT's) */
        int64_t advanced, skipped, nan;
    } win;
    double ds_timed;                         /* DeepSpeed's timed seconds (steps 3..) */
    int64_t ds_steps;                        /* and its steps since this start */
    double flops_per_token;
    struct pl_train_async *async;            /* --async-save's pending save (async_save.c) */
    double pp_sim_idle;                      /* plait bench, pipelined: stage 0's idle share
                                              * of the step the schedule simulated with every
                                              * stage's measured costs gives */
} pl_trainer;

typedef struct step_result {
    double loss, grad_norm, lr;
    double sop_loss;                         /* BERT's binary head (NaN without it) */
    double loss_scale;                       /* the scale this iteration ran with */
    int64_t num_zeros;                       /* --log-num-zeros-in-grad: zero gradients */
    int skipped;
} step_result;

enum { PL_BENCH_WARMUP = 2 }; /* iterations plait bench leaves out of its figures */

static inline int pl_train_is_root(const pl_trainer *t) { return t->grid.rank == 0; }

/* Model chunk k of this rank (0: t->model). */
static inline pl_model *pl_train_chunk(pl_trainer *t, int k)
{
    return k ? &t->chunk_more[k - 1] : &t->model;
}
/* An encoder-decoder's decoder (encdec_train.c). */
pl_model *pl_train_encdec_decoder(pl_trainer *t);
/* The chunk that holds the final norm and LM head on the last stage: the last one
 * (an encoder-decoder: the decoder). */
static inline pl_model *pl_train_head(pl_trainer *t)
{
    return t->ed && !t->edpp ? pl_train_encdec_decoder(t) : pl_train_chunk(t, t->nchunks - 1);
}

/* The model configuration of the flags: the --model family's row, then the
 * architecture flags given (sizes, norms, positions, MLP, biases, tying,
 * dropout); the vocabulary is left to the caller. */
pl_status pl_train_model_config(const pl_train_args *a, pl_model_config *c);
/* --transformer-block-type (train/block_type.c): post_ln makes c (--model bert,
 * bart) transformers' BERT or BART: post-norm layers, a norm of the embeddings, no
 * final norm, exact GELU. Refuses it for other families and with
 * --apply-residual-connection-post-layernorm or --swiglu, naming the flag. */
pl_status pl_train_block_type(const pl_train_args *a, pl_model_config *c);

/* trainer.c, for the step's parts in other files: micro-batch idx (mbs global
 * sample indices) of split s into the model's current slot, with d loss scaled by
 * scale (returns the loss tokens); the current micro-batch's mean loss; the DP
 * buckets' grad-ready hook (ZeRO stage 0). */
pl_status pl_train_load_micro_batch(pl_trainer *t, pl_split s, const int64_t *idx, double scale,
                                    int64_t *n_loss);
/* The current micro-batch's losses, from the d loss the load wrote (scaled by
 * scale): out[0] the LM loss (MLM for BERT), its mean over the loss tokens;
 * out[1] BERT's binary-head (sentence-order) loss, its mean over the samples (0
 * without the head). */
void pl_train_micro_batch_losses(const pl_model *m, double scale, double out[2]);
/* Interleaved: the batch of from's current slot (tokens, targets, token types,
 * lengths, labels, d loss, samples) into to's, another model chunk's. */
void pl_train_copy_batch(const pl_model *from, pl_model *to);
pl_status pl_train_grad_ready(void *ctx, int64_t offset, int64_t count);

/* bert_data.c: Megatron's BERT dataset for --model bert --data-path PREFIX (the
 * sentences of `preprocess --split-sentences`): each split's mapping of sizes[s]
 * samples, built by rank 0 and cached, loaded by the others; its length; sample
 * idx of split s into caller's arrays of T (types NULL: the model has none). */
pl_status pl_train_bert_data_setup(pl_trainer *t, const int64_t sizes[PL_N_SPLITS]);
void pl_train_bert_data_free(pl_trainer *t);
int64_t pl_train_bert_data_len(const pl_trainer *t, pl_split s);
pl_status pl_train_bert_data_get(pl_trainer *t, pl_split s, int64_t idx, int32_t *tokens,
                                 int32_t *types, int32_t *labels, int64_t *length,
                                 int32_t *is_random);
/* T5: sample idx of split s (data/t5_dataset.h) into out's arrays. */
struct pl_encdec_sample;
pl_status pl_train_bert_data_encdec(pl_trainer *t, pl_split s, int64_t idx,
                                    struct pl_encdec_sample *out);
/* The samples split s holds (GPT's blend or BERT's dataset). */
int64_t pl_train_data_len(const pl_trainer *t, pl_split s);

/* encdec_train.c, --model t5 (t->model is the encoder, t->ed holds the decoder):
 * _config sets the decoder's sizes from the flags (nothing for other families);
 * _layer_lo is the flat offset of the whole model's layer l (the encoder's, then
 * the decoder's: ZeRO's regions; pipelined, of the stage's l-th layer); _setup, after t->model and ZeRO's hooks, builds
 * the decoder on the same buffers and wires the two; _load is a micro-batch of
 * T5 samples. pl_train_forward / pl_train_backward run model chunk m (t->model:
 * with an encoder-decoder, both stacks), backward telling ready each layer. */
pl_status pl_train_encdec_config(const pl_train_args *a, pl_model_config *c);
/* PL_TRAIN_T5_OPTIONS (train/args.h) applied to c, after the family's row and the
 * other architecture flags (train/t5_args.c); errors name the flag and the value. */
pl_status pl_train_t5_config(const pl_train_args *a, pl_model_config *c);
pl_status pl_train_encdec_layer_lo(const pl_trainer *t, int64_t l, int64_t *lo);
pl_status pl_train_encdec_setup(pl_trainer *t);
void pl_train_encdec_free(pl_trainer *t);
pl_status pl_train_encdec_load(pl_trainer *t, pl_split s, const int64_t *idx, double scale,
                               int64_t *n_loss);
pl_status pl_train_forward(pl_trainer *t, pl_model *m);
/* encdec_data.c: the encoder-decoder's dataset (T5's, NeMo's BART's, MegaMolBART's):
 * each split's samples for sizes[s] requested, their count, sample idx of split s. */
pl_status pl_train_encdec_data_setup(pl_trainer *t, const int64_t sizes[PL_N_SPLITS]);
int64_t pl_train_encdec_data_len(const pl_trainer *t, pl_split s);
pl_status pl_train_encdec_sample(pl_trainer *t, pl_split s, int64_t idx,
                                 struct pl_encdec_sample *x);
void pl_train_encdec_data_free(pl_trainer *t);
/* MegaMolBART's data switches: into a checkpoint's meta (nothing when the run
 * is not MegaMolBART's), and a resume's check of the checkpoint's against this
 * run's (train/mmb_args.c). */
struct pl_ckpt_meta;
void pl_train_mmb_meta(const pl_trainer *t, struct pl_ckpt_meta *m);
pl_status pl_train_mmb_loaded(const pl_trainer *t, const struct pl_ckpt_meta *m);
struct pl_mmb_config;
void pl_train_mmb_config(const pl_train_args *a, struct pl_mmb_config *c);
void pl_train_mmb_config_meta(const struct pl_mmb_config *c, struct pl_ckpt_meta *m);
pl_status pl_train_mmb_check_loaded(const pl_train_args *a, const struct pl_mmb_config *c,
                                    const struct pl_ckpt_meta *m, int root);
pl_status pl_train_backward(pl_trainer *t, pl_model *m, pl_grad_ready_fn ready, void *ctx);
/* encdec_pipe.c, a pipelined encoder-decoder (t->model: this stage's part of one
 * stack): _setup after the schedule and t->model (its per-slot encoder output and
 * gradient buffers, the embedding groups; t->edpp from then on); _bytes what it
 * allocated; _bind points decoder model m's cross-attention at slot k's encoder
 * output, gradient and lengths; _load a micro-batch into this stage's stack;
 * _backward_begin before m's backward of its current micro-batch (the last stage
 * zeroes the encoder output's gradient), _backward_end after it (the split stage
 * sums that over TP); _tensors the buffers (at most 2) and floats of transfer op of
 * slot k, in the order both sides post them; _tied_grads the embedding copies'
 * gradients summed over Megatron's embedding and position-embedding groups. */
pl_status pl_train_encdec_pp_setup(pl_trainer *t);
void pl_train_encdec_pp_free(pl_trainer *t);
size_t pl_train_encdec_pp_bytes(const pl_trainer *t);
void pl_train_encdec_pp_bind(pl_trainer *t, pl_model *m, int64_t k);
pl_status pl_train_encdec_pp_load(pl_trainer *t, pl_split s, const int64_t *idx, double scale,
                                  int64_t *n_loss);
void pl_train_encdec_pp_backward_begin(pl_trainer *t, pl_model *m);
pl_status pl_train_encdec_pp_backward_end(pl_trainer *t, pl_model *m);
int pl_train_encdec_pp_tensors(pl_trainer *t, pl_model *m, int64_t k, pl_pp_op op,
                               float *buf[2], int64_t n[2]);
pl_status pl_train_encdec_pp_tied_grads(pl_trainer *t);
/* pipeline.c: the same for any model (one tensor a transfer unless t5 / bart). */
int pl_train_pp_tensors(pl_trainer *t, pl_model *m, int64_t k, pl_pp_op op, float *buf[2],
                        int64_t n[2]);
/* Evaluation's forward of m's slot 0 on a pipelined rank: received from the previous
 * stage, run, sent to the next (tag: the transfer's MPI tag). */
pl_status pl_train_pp_eval_forward(pl_trainer *t, pl_model *m, int tag);
/* The model that computes a loss: the last stage's, not an encoder's last stage. */
static inline int pl_train_loss_stage(const pl_model *m)
{
    return m->stage.last && m->cfg.part != PL_PART_ENCODER;
}

/* batch.c: the loss weights of m's micro-batch (targets set): d loss[n] =
 * scale / (loss tokens) where a target is; the number of loss tokens. */
void pl_train_loss_weights(pl_model *m, double scale, int64_t *n_loss);

/* pipeline.c: this rank's stage (its layers and, pipelined, the schedule and the
 * slots it keeps in flight), and one pipelined step's forwards and backwards. */
pl_status pl_train_setup_pipeline(pl_trainer *t, pl_model_stage *stage);
/* Interleaved: model chunks 1..v-1 beside t->model, on the same flat buffers. */
pl_status pl_train_setup_chunks(pl_trainer *t);
void pl_train_free_chunks(pl_trainer *t);
pl_status pl_train_run_pipeline(pl_trainer *t, pl_sampler *sampler, double scale, double ls,
                                double loss_sum[2]);

/* plait finetune (train/finetune*.c) runs its own loop on the trainer's set-up and step
 * (trainer.c): the model (with t->ft's task head: pl_train_ft_apply_task), the LR
 * schedule, one training step over the sampler, the release of everything. The task's
 * micro-batches come through pl_train_load_micro_batch (pl_train_ft_fill). */
pl_status pl_train_setup_grid(pl_trainer *t); /* the TP x PP x DP grid, ZeRO, batch sizes */
pl_status pl_train_setup_model(pl_trainer *t);
pl_status pl_train_setup_schedule(pl_trainer *t);
pl_status pl_train_step(pl_trainer *t, pl_sampler *sampler, step_result *r);
void pl_train_free(pl_trainer *t);
void pl_train_ft_apply_task(const pl_trainer *t, pl_model_config *c);
/* The current micro-batch's tokens, token types, lengths, labels and targets from the
 * fine-tuning rows of idx (mbs global sample indices of split s). */
pl_status pl_train_ft_fill(pl_trainer *t, pl_split s, const int64_t *idx);

/* exit.c: --exit-signal-handler's handlers (SIGTERM, SIGUSR1), and whether to stop
 * after this iteration (a signal on any rank, --exit-duration-in-mins; collective). */
void pl_train_exit_signals_install(void);
pl_status pl_train_should_stop(pl_trainer *t, int *stop);

/* checkpoints.c: save to --save; resume (or fine-tune) from --load. With --async-save
 * the save returns once its files are being written (async_save.c). */
pl_status pl_train_save(pl_trainer *t);
pl_status pl_train_save_to(pl_trainer *t, const char *dir); /* the same into another directory */
pl_status pl_train_load(pl_trainer *t);
/* --keep-last-n: on the rank that publishes, after a publication (ckpt/publish.h). */
pl_status pl_train_keep_last(const char *dir, int64_t keep);
/* async_save.c: begin a save whose files a background thread writes from a snapshot of
 * buf (collective); poll after each step (collective while a save is pending: publishes
 * it once every rank's files are written; wait: until then); free joins a writer left
 * running by a failed run. */
struct pl_ckpt_meta;
struct pl_ckpt_buffers;
pl_status pl_train_async_begin(pl_trainer *t, const char *dir, const struct pl_ckpt_meta *meta,
                               const struct pl_ckpt_buffers *buf);
pl_status pl_train_async_poll(pl_trainer *t, int wait);
/* The snapshot buffer for a save of buf's sizes, allocated and faulted in ahead (setup). */
pl_status pl_train_async_reserve(pl_trainer *t, const struct pl_ckpt_buffers *buf);
/* checkpoints.c: that, for this run's checkpoints (--async-save). */
pl_status pl_train_async_prepare(pl_trainer *t);
void pl_train_async_free(pl_trainer *t);
/* What the trainer takes from a loaded checkpoint's state (train/resume.c):
 * Megatron's load_checkpoint (megatron/training/checkpointing.py). --finetune:
 * the weights only, at iteration 0 with no samples consumed; --no-load-optim:
 * the iteration and consumed samples, but neither the optimizer (Adam's moments
 * and step, the loss scaler) nor the learning-rate scheduler, which starts
 * again at step 0 (Megatron loads the scheduler with the optimizer). The
 * schedule's fields must equal the checkpoint's unless
 * --override-opt_param-scheduler (this run's) or
 * --use-checkpoint-opt_param-scheduler (the checkpoint's) says which wins; a
 * log line names every field that changed and what the schedule does next. */
pl_status pl_train_apply_loaded(pl_trainer *t, const struct pl_ckpt_meta *meta);

/* report.c: --metrics-file (default SAVE/metrics.jsonl), opened by rank 0 for appending. */
pl_status pl_train_open_metrics(pl_trainer *t);
void pl_train_print_banner(const pl_trainer *t);
void pl_train_print_memory_plan(const pl_trainer *t);
/* One progress line (and metrics object) for the window of iterations just run. */
/* Rank 0 logs and appends to the metrics file; a failed write is an error naming it. */
pl_status pl_train_log_iteration(pl_trainer *t, const step_result *r, double ms,
                                 int64_t iters_in_window);
pl_status pl_train_log_eval(pl_trainer *t, double loss);
/* The end-of-training evaluation of split ("validation" or "test"), as Megatron's
 * evaluate_and_print_results block, and in the metrics (final_valid_lm_loss, test_lm_loss). */
pl_status pl_train_log_eval_final(pl_trainer *t, const char *split, double loss);
/* Peak resident memory of every rank (collective over the world). */
pl_status pl_train_log_peak_memory(pl_trainer *t);
void pl_train_bench_reset(pl_trainer *t);
/* Activation and scratch bytes of this rank's model chunks, as planned or (kept) with
 * every activation kept. */
size_t pl_train_act_bytes(const pl_trainer *t, int kept);
/* The squared norm of n values at flat offset lo of this rank's model-parallel slice
 * (a gradient, or parameters): summed over TP (x PP), replicated tensors once. */
pl_status pl_train_grad_sumsq(pl_trainer *t, const float *g, int64_t lo, int64_t n, double *out);

/* The optimizer (train/optimizer.c): AdamW, or Lamb when the DeepSpeed config
 * asks for it. _init plans Lamb's per-tensor sums (after the registry); _step is
 * one step over this rank's parameters or (ZeRO) shard, with the betas hp gives
 * and the squared global gradient norm sumsq of the held gradients (ZeRO: of the
 * shard, before the 1/dp average); *norm is the norm before clipping. */
/* The GEMM peak (train/peak.c): _init from this start's measurement and the
 * cache; _mfu is flops_per_rank / peak, raising the peak (warned, cached) when
 * the rate exceeds it, so never above 1. */
pl_status pl_train_peak_init(pl_trainer *t, double measured);
/* Test hook: 1 and *measured set when PLAIT_TEST_GEMM_PEAK (FLOP/s) stands in for
 * this start's measurement, else 0. */
int pl_train_peak_preset(double *measured);
double pl_train_peak_mfu(pl_trainer *t, double flops_per_rank);

/* The progress line (train/progress.c): _step adds an iteration (of `seconds`) to the window;
 * _line prints Megatron's line (and DeepSpeed's throughput line with a DeepSpeed
 * config) on rank 0 and starts a new window. */
void pl_train_progress_step(pl_trainer *t, const step_result *r, double seconds);
void pl_train_progress_line(pl_trainer *t, const step_result *r, double ms_iter, double tokens_s,
                            double mfu);

pl_status pl_train_optimizer_init(pl_trainer *t);
void pl_train_optimizer_free(pl_trainer *t);
pl_status pl_train_optimizer_step(pl_trainer *t, const pl_adamw_hparams *hp, double lr,
                                  double sumsq, double *norm);

/* tensorboard.c (--tensorboard-dir): open the event file on the last rank; an
 * iteration's scalars (every rank calls it: --log-params-norm is collective); at the end
 * of a --log-interval window, iteration-time and a flush; an evaluation's scalars; close.
 * Errors name the file. */
pl_status pl_train_tb_open(pl_trainer *t);
pl_status pl_train_tb_iteration(pl_trainer *t, const step_result *r);
pl_status pl_train_tb_window(pl_trainer *t, double seconds_per_iter);
pl_status pl_train_tb_eval(pl_trainer *t, double loss);
pl_status pl_train_tb_close(pl_trainer *t);
/* --log-num-zeros-in-grad: the zeros among this rank's n reduced gradients at flat offset
 * lo, summed over the model-parallel group and (ZeRO) the DP shards: every value once. */
pl_status pl_train_count_zeros(pl_trainer *t, const float *g, int64_t lo, int64_t n, int64_t *out);
/* ZeRO stages 2-3 (zero_hooks.c): the model's view locator and fetch hook, what
 * precedes one micro-batch's forward (not pipelined), and one micro-batch's backward
 * (reduce-scatters queued as layers finish; with last = 1 every queued reduce-scatter
 * has completed on return, so the shard holds the step's sums). */
float *pl_train_zero_locate(void *ctx, int64_t off, int grad);
pl_status pl_train_zero_fetch(void *ctx, int64_t layer, int backward);
pl_status pl_train_zero_forward_begin(pl_trainer *t);
pl_status pl_train_zero_backward(pl_trainer *t, int last);
/* At the start of a step or an evaluation (the parameters have moved),
 * pl_train_zero_begin finishes any gather still in flight and forgets which layer each
 * parameter slot holds; pipelined (docs/pipeline.md), it also zeroes the gradients
 * outside the layers and, at stage 3, gathers the embeddings / final norm + output
 * layer this stage holds, once for every micro-batch. pl_train_zero_pp_backward is one
 * micro-batch's backward in a pipelined step (each layer's gradients reduce-scattered
 * as it ends); pl_train_zero_pp_finish, after the embedding group's sum,
 * reduce-scatters the regions outside the layers and waits for every queued operation. */
pl_status pl_train_zero_begin(pl_trainer *t);
pl_status pl_train_zero_pp_backward(pl_trainer *t, pl_model *m);
pl_status pl_train_zero_pp_backward_weight(pl_trainer *t, pl_model *m); /* ZB-H1's weight half */
pl_status pl_train_zero_pp_finish(pl_trainer *t);
/* After a step's DP communication: fills t->comm_step (from the buckets, or the ZeRO
 * queue's operations) and adds it to t->comm_total. */
void pl_train_comm_step_done(pl_trainer *t);
void pl_train_bench_report(pl_trainer *t);
/* Pipelined plait bench (collective over the PP group): every stage's mean FWD, BWD,
 * BWD_INPUT and BWD_WEIGHT seconds, and the schedule simulated with them. */
pl_status pl_train_pp_simulate(pl_trainer *t);

#endif
