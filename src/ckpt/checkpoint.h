/* Checkpoints in Megatron's directory layout:
 *
 *   DIR/latest_checkpointed_iteration.txt      "100"
 *   DIR/iter_0000100/manifest.json             config, iteration, consumed samples,
 *                                              scheduler, optimizer, seed, data hashes,
 *                                              every tensor's global shape and slice,
 *                                              each file's xxh64
 *   DIR/iter_0000100/manifest.json.xxh64       the manifest's own xxh64
 *   DIR/iter_0000100/tokenizer/...             copies of the tokenizer's files
 *   DIR/iter_0000100/mp_rank_00/model_optim.safetensors        (pp = 1)
 *   DIR/iter_0000100/mp_rank_00_000/model_optim.safetensors    (pp > 1)
 *
 * Each safetensors file holds one (tp, pp) rank's shards: the parameters under
 * their registry names and the Adam moments as "optimizer.exp_avg.NAME" and
 * "optimizer.exp_avg_sq.NAME". DP rank 0 of each model-parallel slice writes
 * its file. Everything is written under iter_XXXXXXX.tmp/ and published in
 * two phases (ckpt/publish.h): a half-written checkpoint is never taken as
 * the latest, and re-saving an iteration never removes the old copy before
 * the new one is durable. Loading validates the manifest before anything is
 * sized from it (ckpt/manifest.h) and opens only regular files inside the
 * iteration directory, never through a symbolic link (ckpt/files.h).
 *
 * Under ZeRO (stage >= 1) the model file holds the parameters only, and every DP
 * rank writes its optimizer shard (flat ranges of the padded buffer) to
 *   DIR/iter_0000100/mp_rank_00/optim_dp_003.safetensors   ("exp_avg", "exp_avg_sq")
 * with the manifest's "zero" object recording the stage, the DP size, the padded
 * length and each shard's file, offset and count; stage 0's format is unchanged.
 *
 * Any checkpoint loads into any layout: another TP size, PP size or model-chunk
 * split, DP size, ZeRO stage (0-3), weights and optimizer state alike; each rank
 * reads just the slices it holds (ckpt/source.h). */
#ifndef PL_CKPT_CHECKPOINT_H
#define PL_CKPT_CHECKPOINT_H

#include "model/config.h"
#include "optim/schedule.h"
#include "parallel/comm.h"

typedef struct pl_ckpt_meta {
    int64_t iteration;
    int64_t consumed_train_samples, consumed_valid_samples;
    int64_t optimizer_steps; /* Adam's (or Lamb's) t */
    int lamb;                /* the moments are Lamb's ("type": "lamb"), not AdamW's */
    pl_lr_schedule schedule;
    double beta1, beta2, eps, weight_decay;
    uint64_t seed;
    int tp, pp, dp;
    int pp_split; /* a pipelined t5 or bart: the decoder's first stage (Megatron's
                   * pipeline_model_parallel_split_rank); 0: none */
    /* The tokenizer, for generate; strings may be NULL. Manifests written before
     * tokenizer_model existed lack it and the two numbers: they read as NULL / 0. */
    const char *tokenizer_type, *vocab_file, *merge_file, *tokenizer_model;
    int64_t vocab_extra_ids;
    int legacy_tokenizer;
    const char *data_hash; /* identity of the training data, may be NULL */
    /* MegaMolBART's data switches ("data": {"megamolbart": ...}; mmb 0: none
     * saved): encoder_augment, encoder_mask, decoder_augment, decoder_mask,
     * canonicalize_input as 0/1, then mask_prob and span_lambda */
    int mmb;
    int mmb_switch[5];
    double mmb_mask_prob, mmb_span_lambda;
    /* fp16 loss scaler (Megatron's grad_scaler state); has_loss_scaler 0: none saved */
    int has_loss_scaler;
    double loss_scale;
    int64_t growth_tracker, hysteresis_tracker;
    int64_t padded_vocab; /* on load: the checkpoint's padded vocabulary (not written) */
} pl_ckpt_meta;

/* A DP rank's ZeRO optimizer shard: flat elements [lo, lo + count) of the buffer
 * padded to `padded` (= dp * count). */
typedef struct pl_ckpt_zero {
    int stage, dp, dp_rank;
    int64_t lo, count, padded;
    float *exp_avg, *exp_avg_sq; /* count each; NULL to load weights only */
} pl_ckpt_zero;

/* What a rank saves or loads: its registry and flat buffers. m/v may be NULL
 * (weights only, or ZeRO: then zero holds the moments). params is the whole
 * flat buffer (ZeRO-3 gathers it for saving). */
typedef struct pl_ckpt_buffers {
    const pl_registry *reg;
    float *params, *exp_avg, *exp_avg_sq;
    pl_ckpt_zero *zero; /* NULL: stage 0 */
    int bf16;           /* saving: the parameters as BF16 (plait ckpt convert --bf16) */
} pl_ckpt_buffers;

/* The iteration number of Megatron's `release` directory: DIR/release/ with
 * "release" in latest_checkpointed_iteration.txt, a weights-only checkpoint
 * (plait ckpt convert) that loads as --finetune does, at iteration 0. */
enum { PL_CKPT_RELEASE = -2 };

/* Collective over world. dp_rank/tp_rank/pp_rank place this rank. */
pl_status pl_ckpt_save(const char *dir, pl_comm *world, int dp_rank, const pl_model_config *cfg,
                       const pl_ckpt_meta *meta, const pl_ckpt_buffers *buf);

/* pl_ckpt_save in steps, so that the files, and rank 0's manifest and publication, can
 * be written off the training thread (--async-save, train/async_save.c):
 *   begin    collective: prepares dir and creates the temporary iteration directory;
 *   write    this rank's files only (its model file on DP rank 0 of its model-parallel
 *            slice, its ZeRO shard) and each file's checksum; no communication, so it may
 *            run on another thread; the outcome and its message are kept in p;
 *   agree    collective: every rank's write outcome agreed; the files and checksums
 *            gathered into p;
 *   publish  rank 0 only, no communication: the manifest from the gathered checksums
 *            (no other rank's file is read) and the publication (ckpt/publish.h); the
 *            outcome kept in p;
 *   publish_agree  collective: rank 0's publish outcome agreed.
 * end is agree, publish on rank 0 and publish_agree in a row; pl_ckpt_pending_free
 * releases what agree gathered (end does it). The buffers given to write, agree and
 * publish must describe the same state (agree and publish read only the registry and
 * the ZeRO ranges). */
typedef struct pl_ckpt_pending {
    char tmp[4096];                 /* DIR/iter_XXXXXXX.tmp */
    pl_status st;                   /* write's (then publish's) outcome */
    char err[1024];                 /* and its message (the thread's that ran it) */
    uint64_t model_hash, zero_hash; /* xxh64 of the files this rank wrote */
    int64_t *rows;                  /* agree: what every rank wrote */
    int nranks;
} pl_ckpt_pending;
pl_status pl_ckpt_save_begin(const char *dir, pl_comm *world, int64_t iteration,
                             pl_ckpt_pending *p);
pl_status pl_ckpt_save_write(pl_ckpt_pending *p, int dp_rank, int pp, const pl_ckpt_buffers *buf);
pl_status pl_ckpt_save_agree(pl_comm *world, int dp_rank, const pl_ckpt_buffers *buf,
                             pl_ckpt_pending *p);
pl_status pl_ckpt_save_publish(const char *dir, const pl_model_config *cfg,
                               const pl_ckpt_meta *meta, const pl_ckpt_buffers *buf,
                               pl_ckpt_pending *p);
pl_status pl_ckpt_publish_agree(pl_comm *world, const pl_ckpt_pending *p);
pl_status pl_ckpt_save_end(const char *dir, pl_comm *world, int dp_rank, const pl_model_config *cfg,
                           const pl_ckpt_meta *meta, const pl_ckpt_buffers *buf,
                           pl_ckpt_pending *p);
void pl_ckpt_pending_free(pl_ckpt_pending *p);

/* Reads DIR/latest_checkpointed_iteration.txt: *iteration = -1 when absent
 * (or DIR is). It must be a regular file holding a number >= 0, or "release"
 * (*iteration = PL_CKPT_RELEASE). */
pl_status pl_ckpt_latest(const char *dir, int64_t *iteration);

/* Loads iteration `iteration` of DIR into buf (this rank's shards, in any
 * layout), checking checksums and that the checkpoint's model config equals
 * cfg but for the vocabulary's padding (an error names the first field that
 * differs; padding rows are handled as ckpt/source.h says). The moments load
 * when buf asks for them (exp_avg, or zero->exp_avg: this rank's ZeRO range).
 * meta receives the saved state (meta->padded_vocab the checkpoint's); its
 * string fields point into storage owned by *strings (free with pl_free). */
pl_status pl_ckpt_load(const char *dir, int64_t iteration, const pl_model_config *cfg,
                       const pl_ckpt_buffers *buf, pl_ckpt_meta *meta, char **strings);

/* Reads only the manifest's model config (for plait generate), validated as
 * pl_ckpt_load does; meta's tokenizer paths point into the checkpoint. */
pl_status pl_ckpt_read_config(const char *dir, int64_t iteration, pl_model_config *cfg,
                              pl_ckpt_meta *meta, char **strings);

/* Writing a checkpoint from one process (plait ckpt reshard and convert): begin
 * (prepares dir as a save does and creates its temporary iteration directory,
 * named in tmp), one write_rank per (TP, PP) rank of the layout (buf->reg
 * places it; pp is the layout's PP size), then finish (the manifest, with
 * every file's checksum, and the two-phase publication of ckpt/publish.h).
 * meta->tp and meta->pp are the layout's; reg is any rank's registry;
 * publish_it names the directory (PL_CKPT_RELEASE: release/). */
pl_status pl_ckpt_write_begin(const char *dir, int64_t iteration, char *tmp, size_t n);
pl_status pl_ckpt_write_rank(const char *tmp, int pp, const pl_ckpt_buffers *buf);
pl_status pl_ckpt_write_finish(const char *dir, const char *tmp, const pl_model_config *cfg,
                               const pl_ckpt_meta *meta, const pl_registry *reg, int64_t publish_it);

/* An exclusive lock on a save directory: DIR/.plait.lock, flock(LOCK_EX |
 * LOCK_NB), holding "host H pid P". A second taker fails at once with an error
 * naming the holder's host and pid; the kernel drops the lock when its holder
 * exits, however it exits, so a stale file never blocks. The file stays after
 * release (removing it would race with the next taker). One process per job
 * takes it (global rank 0). */
typedef struct pl_ckpt_lock {
    int fd; /* -1: not held */
} pl_ckpt_lock;
pl_status pl_ckpt_lock_take(pl_ckpt_lock *l, const char *dir);
void pl_ckpt_lock_release(pl_ckpt_lock *l);

#endif
