/* Megatron's encoder-decoder flags in `plait train` (pretrain_t5.py's
 * arguments): --encoder-num-layers / --num-layers, --decoder-num-layers,
 * --encoder-seq-length / --seq-length, --decoder-seq-length. The option rows
 * are PL_TRAIN_ENCDEC_OPTIONS (train/args.h); this file resolves them, for
 * --model t5 and --model bart (whose decoder length follows its dataset:
 * NeMo's BART pads both sides to seq_length, MegaMolBART's decoder holds
 * seq_length + 1 tokens, [^] + SMILES or SMILES + [&]). */
#include "train/args.h"

#include <string.h>

/* One of the pair (Megatron asserts "cannot have both num-layers and
 * encoder-num-layers specified"); the T5 name marks the plain one given. */
static pl_status alias(pl_train_args *a, const char *plain, const char *t5)
{
    int i = pl_options_index(&pl_train_cmd, plain), j = pl_options_index(&pl_train_cmd, t5);
    if (i < 0 || j < 0)
        return pl_errorf(PL_ERR_INTERNAL, "%s / %s: not in the option table", plain, t5);
    if (a->given[j] && strcmp(a->model, "t5") != 0 && strcmp(a->model, "bart") != 0)
        return pl_errorf(PL_ERR_ARG, "plait train: %s is for --model t5 or bart (use %s)", t5,
                         plain);
    /* a preset or YAML may have set the plain name too: only the command line's pair clash */
    if (a->given[i] && a->given[j])
        return pl_errorf(PL_ERR_ARG, "plait train: give %s or %s, not both (Megatron's rule)",
                         plain, t5);
    if (a->given[j])
        a->given[i] = 1;
    return PL_OK;
}

pl_status pl_train_encdec_args(pl_train_args *a)
{
    pl_status st = PL_OK;
    PL_TRY(alias(a, "--num-layers", "--encoder-num-layers"));
    PL_TRY(alias(a, "--seq-length", "--encoder-seq-length"));
    const int t5 = strcmp(a->model, "t5") == 0, bart = strcmp(a->model, "bart") == 0;
    const int dl = pl_train_args_given(a, "--decoder-num-layers");
    const int ds = pl_train_args_given(a, "--decoder-seq-length");
    if (!t5 && !bart) {
        if (dl || ds)
            return pl_errorf(PL_ERR_ARG, "plait train: %s is for --model t5 or bart",
                             dl ? "--decoder-num-layers" : "--decoder-seq-length");
        return PL_OK;
    }
    if (bart && ds)
        return pl_errorf(PL_ERR_ARG, "plait train: --model bart takes no --decoder-seq-length: "
                         "the decoder's length follows the dataset (NeMo's BART: --seq-length; "
                         "MegaMolBART's SMILES: --seq-length + 1)");
    if (bart) /* MegaMolBART's when the tokenizer is the SMILES one (train/encdec_data.c) */
        a->decoder_seq_length = a->seq_length + (a->tokenizer_type &&
                                                 !strcmp(a->tokenizer_type, "SmilesTokenizer"));
    if (!ds && t5)
        return pl_errorf(PL_ERR_ARG, "plait train: --model t5 needs --decoder-seq-length (the "
                         "decoder's tokens per sample; --encoder-seq-length is the encoder's)");
    if (a->decoder_seq_length < 1)
        return pl_errorf(PL_ERR_ARG, "plait train: --decoder-seq-length must be positive, got "
                         "%lld", (long long)a->decoder_seq_length);
    if (!dl)
        a->decoder_num_layers = a->num_layers;
    if (a->decoder_num_layers < 1)
        return pl_errorf(PL_ERR_ARG, "plait train: --decoder-num-layers must be positive, got "
                         "%lld", (long long)a->decoder_num_layers);
    if (a->mock_data)
        return pl_errorf(PL_ERR_UNSUPPORTED, "plait train: --model %s trains on its dataset "
                         "(--data-path: `preprocess --split-sentences` output, or SMILES files "
                         "for bart); --mock-data has no encoder-decoder samples", a->model);
fail:
    return st;
}

pl_status pl_train_encdec_pp_args(pl_train_args *a)
{
    const int encdec = !strcmp(a->model, "t5") || !strcmp(a->model, "bart");
    const int gs = pl_train_args_given(a, "--pipeline-model-parallel-split-rank");
    const int ge = pl_train_args_given(a, "--encoder-pipeline-model-parallel-size");
    const char *flag = ge ? "--encoder-pipeline-model-parallel-size"
                          : "--pipeline-model-parallel-split-rank";
    if (!encdec) {
        if (gs || ge)
            return pl_errorf(PL_ERR_ARG, "plait train: %s is for --model t5 or bart (a decoder-"
                             "only model splits its layers evenly, or by "
                             "--decoder-first/last-pipeline-num-layers)", flag);
        return PL_OK;
    }
    if (gs && ge)
        return pl_errorf(PL_ERR_ARG, "plait train: give --pipeline-model-parallel-split-rank or "
                         "--encoder-pipeline-model-parallel-size, not both");
    if (ge) { /* Megatron core 0.9: E encoder stages, then --pipeline-model-parallel-size
               * decoder stages */
        const int64_t e = a->encoder_pipeline_model_parallel_size;
        if (e < 1 || a->pipeline_model_parallel_size < 1)
            return pl_errorf(PL_ERR_ARG, "plait train: --encoder-pipeline-model-parallel-size "
                             "%lld and --pipeline-model-parallel-size %lld (the decoder's "
                             "stages) must be at least 1", (long long)e,
                             (long long)a->pipeline_model_parallel_size);
        a->pipeline_model_parallel_split_rank = e;
        a->pipeline_model_parallel_size += e;
    }
    const int64_t pp = a->pipeline_model_parallel_size, s = a->pipeline_model_parallel_split_rank;
    if (pp > 1 && !gs && !ge)
        return pl_errorf(PL_ERR_ARG, "plait train: --model %s with --pipeline-model-parallel-size "
                         "%lld needs --pipeline-model-parallel-split-rank S (the decoder's first "
                         "stage: the encoder on stages 0..S-1) or "
                         "--encoder-pipeline-model-parallel-size", a->model, (long long)pp);
    if (!gs && !ge)
        return PL_OK;
    if (pp < 2 || s < 1 || s >= pp)
        return pl_errorf(PL_ERR_ARG, "plait train: --pipeline-model-parallel-split-rank %lld with "
                         "--pipeline-model-parallel-size %lld: expected 1 <= S < P (the encoder "
                         "on stages 0..S-1, the decoder on S..P-1)", (long long)s, (long long)pp);
    if (a->num_layers % s || a->decoder_num_layers % (pp - s))
        return pl_errorf(PL_ERR_ARG, "plait train: --encoder-num-layers %lld over %lld encoder "
                         "stages and --decoder-num-layers %lld over %lld decoder stages "
                         "(--pipeline-model-parallel-split-rank %lld of "
                         "--pipeline-model-parallel-size %lld): each must divide evenly",
                         (long long)a->num_layers, (long long)s,
                         (long long)a->decoder_num_layers, (long long)(pp - s), (long long)s,
                         (long long)pp);
    return PL_OK;
}
