/* MegaMolBART's model.data switches in `plait train` (PL_TRAIN_MMB_OPTIONS):
 * --encoder-augment, --encoder-mask, --decoder-augment, --decoder-mask,
 * --canonicalize-input (true|false, as the keys of MegaMolBART v0.2.0's
 * examples/chem/conf/megamolbart_pretrain_base.yaml), --span-lambda, and
 * --mask-prob (BERT's flag; MegaMolBART's mask_prob, 0.1 when not given).
 * Their meaning is nemo_chem/data/augment.py's (data/mmb_dataset.h).
 *
 * The values are saved in the checkpoint's manifest ("data": {"megamolbart":
 * ...}). A resume compares them: a flag given on the command line wins (a
 * note says the objective changes); a flag not given must equal the
 * checkpoint's, or --use-checkpoint-args takes the checkpoint's (as
 * Megatron's _set_arg fills a flag not given). `plait seq2seq --mmb` takes the
 * checkpoint's unless its own flags say otherwise (tools/cmd_seq2seq.c). */
#include "train/trainer_internal.h"

#include "base/log.h"
#include "ckpt/checkpoint.h"
#include "data/mmb_dataset.h"

#include <stdio.h>
#include <string.h>

static const char *const switch_flags[5] = {"--encoder-augment", "--encoder-mask",
                                            "--decoder-augment", "--decoder-mask",
                                            "--canonicalize-input"};

static int *switch_field(pl_mmb_config *c, int i)
{
    int *f[5] = {&c->encoder_augment, &c->encoder_mask, &c->decoder_augment, &c->decoder_mask,
                 &c->canonicalize_input};
    return f[i];
}

static int switch_value(const pl_mmb_config *c, int i)
{
    const int v[5] = {c->encoder_augment, c->encoder_mask, c->decoder_augment, c->decoder_mask,
                      c->canonicalize_input};
    return v[i];
}

pl_status pl_train_mmb_args(const pl_train_args *a)
{
    const int mmb = !strcmp(a->model, "bart") && a->tokenizer_type &&
                    !strcmp(a->tokenizer_type, "SmilesTokenizer");
    for (int i = 0; i < 6; i++) {
        const char *flag = i < 5 ? switch_flags[i] : "--span-lambda";
        if (!mmb && pl_train_args_given(a, flag))
            return pl_errorf(PL_ERR_ARG, "plait train: %s is MegaMolBART's (--model bart with "
                             "--tokenizer-type SmilesTokenizer), not --model %s with "
                             "--tokenizer-type %s", flag, a->model,
                             a->tokenizer_type ? a->tokenizer_type : "(none)");
    }
    if (mmb && pl_train_args_given(a, "--span-lambda") &&
        !(a->span_lambda > 0.0 && a->span_lambda <= 30.0))
        return pl_errorf(PL_ERR_ARG, "plait train: --span-lambda %g: expected (0, 30]",
                         a->span_lambda);
    if (mmb && pl_train_args_given(a, "--mask-prob") &&
        !(a->mask_prob >= 0.0 && a->mask_prob <= 1.0))
        return pl_errorf(PL_ERR_ARG, "plait train: --mask-prob %g: expected [0, 1]", a->mask_prob);
    return PL_OK;
}

void pl_train_mmb_config(const pl_train_args *a, pl_mmb_config *c)
{
    for (int i = 0; i < 5; i++)
        if (a->mmb_switch[i])
            *switch_field(c, i) = strcmp(a->mmb_switch[i], "true") == 0;
    if (pl_train_args_given(a, "--mask-prob"))
        c->mask_prob = a->mask_prob;
    if (pl_train_args_given(a, "--span-lambda"))
        c->span_lambda = a->span_lambda;
}

void pl_train_mmb_config_meta(const pl_mmb_config *c, pl_ckpt_meta *m)
{
    m->mmb = 1;
    for (int i = 0; i < 5; i++)
        m->mmb_switch[i] = switch_value(c, i);
    m->mmb_mask_prob = c->mask_prob;
    m->mmb_span_lambda = c->span_lambda;
}

/* --use-checkpoint-args: the checkpoint's values for the flags not given. */
pl_status pl_train_mmb_args_from_meta(pl_train_args *a, const pl_ckpt_meta *m)
{
    if (!m->mmb || strcmp(a->model, "bart") != 0 || !a->tokenizer_type ||
        strcmp(a->tokenizer_type, "SmilesTokenizer") != 0)
        return PL_OK;
    pl_status st = PL_OK;
    const char *flags[7] = {switch_flags[0], switch_flags[1], switch_flags[2], switch_flags[3],
                            switch_flags[4], "--mask-prob", "--span-lambda"};
    for (int i = 0; i < 7 && !st; i++) {
        if (pl_train_args_given(a, flags[i]))
            continue;
        char buf[40]; /* a number is parsed at once; a switch keeps a literal */
        if (i >= 5)
            snprintf(buf, sizeof buf, "%.17g", i == 5 ? m->mmb_mask_prob : m->mmb_span_lambda);
        const char *vals[1] = {i < 5 ? (m->mmb_switch[i] ? "true" : "false") : buf};
        st = pl_options_set(&pl_train_cmd, a, flags[i], vals, 1, a->given);
        if (!st)
            st = pl_train_args_note(a, "--use-checkpoint-args: %s %s from the checkpoint",
                                    flags[i], vals[0]);
    }
    return st;
}

/* A resume: this run's values (c) against the checkpoint's (m). */
pl_status pl_train_mmb_check_loaded(const pl_train_args *a, const pl_mmb_config *c,
                                    const pl_ckpt_meta *m, int root)
{
    if (!m->mmb)
        return PL_OK; /* a checkpoint from before the switches were saved: nothing to compare */
    for (int i = 0; i < 7; i++) {
        const char *flag = i < 5 ? switch_flags[i] : i == 5 ? "--mask-prob" : "--span-lambda";
        const double r = i < 5 ? switch_value(c, i) : i == 5 ? c->mask_prob : c->span_lambda;
        const double k = i < 5 ? m->mmb_switch[i] : i == 5 ? m->mmb_mask_prob : m->mmb_span_lambda;
        if (r == k)
            continue;
        char vr[40], vk[40];
        if (i < 5) {
            snprintf(vr, sizeof vr, "%s", r ? "true" : "false");
            snprintf(vk, sizeof vk, "%s", k ? "true" : "false");
        } else {
            snprintf(vr, sizeof vr, "%.9g", r);
            snprintf(vk, sizeof vk, "%.9g", k);
        }
        if (!pl_train_args_given(a, flag))
            return pl_errorf(PL_ERR_ARG, "--load %s: MegaMolBART's %s is %s in the checkpoint "
                             "and %s (the default) in this run: give %s %s, or "
                             "--use-checkpoint-args to take the checkpoint's, or %s %s to change "
                             "the objective from here", a->load, flag, vk, vr, flag, vk, flag, vr);
        if (root)
            pl_log_info("%s %s: the checkpoint's was %s; samples from iteration %lld on are "
                        "made with this run's", flag, vr, vk, (long long)m->iteration);
    }
    return PL_OK;
}
