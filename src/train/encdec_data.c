/* The encoder-decoder datasets in plait train (--model t5 | bart), each sample
 * a pl_encdec_sample (data/encdec_sample.h):
 *   t5:   Megatron core's T5 span corruption over `preprocess --split-sentences`
 *         output (bert_data.c, data/t5_dataset.h);
 *   bart: with a WordPiece tokenizer, NeMo's BART denoising over the same data
 *         (bert_data.c, data/bart_dataset.h); with --tokenizer-type
 *         SmilesTokenizer, MegaMolBART v0.2's objective (data/mmb_dataset.h) on
 *         SMILES files: --data-path FILE... (.csv: MegaMolBART's "zinc_id,SMILES"
 *         with one header line, the SMILES in column 1; any other extension:
 *         the SMILES in column 0, no header, as RDKit's .smi files), every file's
 *         molecules in order, then split into train / validation / test by
 *         --split over the molecules (contiguous ranges, Megatron's rounding of
 *         the cumulative fractions). A split's sample i is molecule i mod n with
 *         its augmentation and masking a function of (--seed, i): any layout and a
 *         resume see the same samples. --mask-prob (MegaMolBART's mask_prob,
 *         default 0.1 here), --span-lambda (3) and the switches
 *         --encoder-augment ... --decoder-mask (v0.2's defaults: both sides
 *         augmented, the encoder masked; train/mmb_args.c), saved in the
 *         checkpoint's manifest and checked on resume. Not MegaMolBART's directory layout (dataset_path/train/,
 *         val/, test/ with x[000..146] ranges): the splits come from --split.
 * Part of the trainer (trainer_internal.h). */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "base/log.h"
#include "data/encdec_sample.h"
#include "ckpt/checkpoint.h"
#include "data/mmb_dataset.h"

#include <math.h>
#include <string.h>

typedef struct pl_train_mmb {
    pl_mmb_molecules mols;          /* every file's molecules */
    pl_mmb_molecules part[PL_N_SPLITS]; /* views of each split's range (not owned) */
    pl_mmb_dataset *ds[PL_N_SPLITS];
    pl_mmb_config cfg; /* the flags' values (train/mmb_args.c), saved in checkpoints */
    int64_t len[PL_N_SPLITS];
} pl_train_mmb;

static int is_csv(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && strcmp(path + n - 4, ".csv") == 0;
}

static pl_status mmb_setup(pl_trainer *t, const int64_t sizes[PL_N_SPLITS])
{
    pl_status st = PL_OK;
    const pl_train_args *a = t->a;
    const int csv = is_csv(a->data_path.items[0]);
    for (int i = 1; i < a->data_path.n; i++)
        if (is_csv(a->data_path.items[i]) != csv)
            return pl_errorf(PL_ERR_ARG, "--data-path: %s and %s: give SMILES files of one "
                             "kind (.csv as MegaMolBART's, or .smi)", a->data_path.items[0],
                             a->data_path.items[i]);
    pl_train_mmb *d = pl_calloc(1, sizeof *d);
    if (!d)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    t->mmb = d;
    PL_TRY(pl_mmb_molecules_load(&d->mols, (const char *const *)a->data_path.items,
                                 (int32_t)a->data_path.n, csv ? 1 : 0, csv ? 1 : 0));
    pl_mmb_config c;
    pl_mmb_config_default(&c);
    c.seq_length = t->cfg.seq_length;
    c.seed = (uint32_t)a->seed;
    pl_train_mmb_config(a, &c);
    d->cfg = c;
    pl_split_matrix sm;
    PL_TRY(pl_split_parse(a->split, &sm));
    const int64_t n = d->mols.n;
    for (int s = 0; s < PL_N_SPLITS; s++) {
        const int64_t lo = sm.present[s] ? (int64_t)llround(sm.lo[s] * (double)n) : 0;
        const int64_t hi = sm.present[s] ? (int64_t)llround(sm.hi[s] * (double)n) : 0;
        if (hi <= lo || sizes[s] <= 0)
            continue;
        d->part[s] = (pl_mmb_molecules){d->mols.text, d->mols.offset + lo, d->mols.line + lo,
                                        d->mols.file + lo, d->mols.paths, hi - lo,
                                        d->mols.n_files};
        PL_TRY(pl_mmb_dataset_init(&d->ds[s], &c, t->tok, &d->part[s]));
        int64_t Te, Td;
        pl_mmb_dataset_dims(d->ds[s], &Te, &Td);
        if (Te != t->cfg.seq_length || Td != t->cfg.dec_seq_length)
            return pl_errorf(PL_ERR_INTERNAL, "MegaMolBART samples of %lld + %lld tokens for a "
                             "model of %lld + %lld", (long long)Te, (long long)Td,
                             (long long)t->cfg.seq_length, (long long)t->cfg.dec_seq_length);
        /* every molecule parses and tokenizes, before the first step (errors name file
         * and line); molecule i mod n for sample i, so the split serves any count */
        PL_TRY(pl_mmb_dataset_validate(d->ds[s]));
        d->len[s] = sizes[s];
        if (pl_train_is_root(t))
            pl_log_info("MegaMolBART %s split: molecules [%lld, %lld) of %lld, %lld samples",
                        pl_split_name((pl_split)s), (long long)lo, (long long)hi, (long long)n,
                        (long long)sizes[s]);
    }
fail:
    return st;
}

static int smiles(const pl_trainer *t)
{
    return t->cfg.family == PL_FAMILY_BART && t->tok && !strcmp(t->tok->type, "SmilesTokenizer");
}

pl_status pl_train_encdec_data_setup(pl_trainer *t, const int64_t sizes[PL_N_SPLITS])
{
    return smiles(t) ? mmb_setup(t, sizes) : pl_train_bert_data_setup(t, sizes);
}

int64_t pl_train_encdec_data_len(const pl_trainer *t, pl_split s)
{
    if (t->mmb)
        return t->mmb->ds[s] ? t->mmb->len[s] : 0;
    return pl_train_bert_data_len(t, s);
}

pl_status pl_train_encdec_sample(pl_trainer *t, pl_split s, int64_t idx, pl_encdec_sample *x)
{
    if (!t->mmb)
        return pl_train_bert_data_encdec(t, s, idx, x);
    if (!t->mmb->ds[s])
        return pl_errorf(PL_ERR_INTERNAL, "the %s split has no molecules", pl_split_name(s));
    return pl_mmb_dataset_sample(t->mmb->ds[s], idx, x, NULL);
}

void pl_train_encdec_data_free(pl_trainer *t)
{
    pl_train_mmb *d = t->mmb;
    if (!d)
        return;
    for (int s = 0; s < PL_N_SPLITS; s++)
        pl_mmb_dataset_free(d->ds[s]);
    pl_mmb_molecules_free(&d->mols);
    pl_free(d);
    t->mmb = NULL;
}

void pl_train_mmb_meta(const pl_trainer *t, pl_ckpt_meta *m)
{
    if (t->mmb)
        pl_train_mmb_config_meta(&t->mmb->cfg, m);
}

pl_status pl_train_mmb_loaded(const pl_trainer *t, const pl_ckpt_meta *m)
{
    return t->mmb ? pl_train_mmb_check_loaded(t->a, &t->mmb->cfg, m, pl_train_is_root(t))
                  : PL_OK;
}
