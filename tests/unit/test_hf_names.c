/* model/hf_names: the Hugging Face name maps of the families (and, for a post-LN
 * BERT and BART, model/hf_bert_names.c and hf_bart_names.c).
 *
 * The expected state dicts are written here from transformers' model classes
 * (models/gpt2/modeling_gpt2.py: GPT2LMHeadModel, Conv1D(nf, nx) holding a
 * (nx, nf) weight, c_attn = Conv1D(3 n_embd, n_embd) whose output splits into
 * q, k, v of n_embd each, heads of head_dim inside each; the tied lm_head not
 * stored; models/llama/modeling_llama.py: LlamaForCausalLM, q_proj
 * (heads x head_dim, hidden), k_proj and v_proj (kv_heads x head_dim, hidden),
 * gate_proj and up_proj (intermediate, hidden), untied lm_head), not from
 * plait's map. Then the transforms: every element of every Hugging Face tensor
 * comes from a distinct element of its plait tensor, all of them used except
 * Megatron's vocab padding, and spot elements land where Megatron's QKV and
 * fc1 layouts (per group: q heads, k, v; fc1 = [gate; up]) put them. */
#include "base/alloc.h"
#include "model/hf_names.h"
#include "model/spec.h"
#include "test.h"

#include <stdio.h>

enum { L = 2, C = 64, NH = 4, V = 1000, P = 32 };

typedef struct want {
    char name[PL_PARAM_NAME_MAX];
    int64_t rows, cols; /* cols 0: 1-D */
    int seen;
} want;

static int add(want *w, int n, const char *name, int64_t rows, int64_t cols)
{
    snprintf(w[n].name, sizeof w[n].name, "%s", name);
    w[n].rows = rows, w[n].cols = cols, w[n].seen = 0;
    return n + 1;
}

static pl_model_config config(pl_family f, int64_t groups, int64_t ffn)
{
    pl_model_config c = {.num_layers = L, .hidden = C, .heads = NH, .query_groups = groups,
                         .ffn_hidden = ffn, .seq_length = P, .max_positions = P,
                         .vocab_size = V, .divisible_by = 128, .init_std = 0.02};
    pl_family_apply(&c, f);
    c.padded_vocab = pl_model_padded_vocab(V, 128, 1);
    return c;
}

/* Maps every parameter of c's registry; each Hugging Face tensor must be one
 * of want's (name and shape), none twice, all of them in the end. */
static void check_state_dict(const char *what, const pl_model_config *c, want *w, int nw)
{
    pl_registry r;
    pl_registry_init(&r, 1, 0, 0);
    CHECK_OK(pl_model_register(&r, c, 1));
    for (int i = 0; i < r.n; i++) {
        pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
        const int n = pl_hf_map(c, &r.params[i], t);
        CHECK(n >= 0, "%s: %s has no Hugging Face name", what, r.params[i].name);
        for (int k = 0; k < n; k++) {
            int j = 0;
            while (j < nw && strcmp(w[j].name, t[k].name) != 0)
                j++;
            CHECK(j < nw, "%s: %s -> %s is not in the state dict", what, r.params[i].name,
                  t[k].name);
            if (j == nw)
                continue;
            const int64_t cols = t[k].ndim == 2 ? t[k].shape[1] : 0;
            CHECK(t[k].shape[0] == w[j].rows && cols == w[j].cols,
                  "%s: %s is (%lld, %lld), transformers has (%lld, %lld)", what, t[k].name,
                  (long long)t[k].shape[0], (long long)cols, (long long)w[j].rows,
                  (long long)w[j].cols);
            CHECK(!w[j].seen, "%s: %s made twice", what, t[k].name);
            w[j].seen = 1;
        }
    }
    for (int j = 0; j < nw; j++)
        CHECK(w[j].seen, "%s: %s is never made", what, w[j].name);
    pl_registry_free(&r);
}

TEST(gpt2_maps_onto_gpt2lmheadmodel_state_dict)
{
    want w[64];
    int n = 0;
    char s[PL_PARAM_NAME_MAX];
    n = add(w, n, "transformer.wte.weight", V, C);
    n = add(w, n, "transformer.wpe.weight", P, C);
    for (int l = 0; l < L; l++) {
        const struct {
            const char *suffix;
            int64_t rows, cols;
        } t[] = {{"ln_1.weight", C, 0}, {"ln_1.bias", C, 0},
                 {"attn.c_attn.weight", C, 3 * C}, {"attn.c_attn.bias", 3 * C, 0},
                 {"attn.c_proj.weight", C, C}, {"attn.c_proj.bias", C, 0},
                 {"ln_2.weight", C, 0}, {"ln_2.bias", C, 0},
                 {"mlp.c_fc.weight", C, 4 * C}, {"mlp.c_fc.bias", 4 * C, 0},
                 {"mlp.c_proj.weight", 4 * C, C}, {"mlp.c_proj.bias", C, 0}};
        for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
            snprintf(s, sizeof s, "transformer.h.%d.%s", l, t[k].suffix);
            n = add(w, n, s, t[k].rows, t[k].cols);
        }
    }
    n = add(w, n, "transformer.ln_f.weight", C, 0);
    n = add(w, n, "transformer.ln_f.bias", C, 0);
    pl_model_config c = config(PL_FAMILY_GPT, NH, 4 * C);
    check_state_dict("gpt", &c, w, n);
}

TEST(untied_gpt2_has_its_own_lm_head)
{
    int n = 0;
    pl_model_config c = config(PL_FAMILY_GPT, NH, 4 * C);
    c.untie = 1;
    pl_registry r;
    pl_registry_init(&r, 1, 0, 0);
    CHECK_OK(pl_model_register(&r, &c, 1));
    const pl_param *p = pl_registry_find(&r, "output_layer.weight");
    CHECK(p != NULL, "an untied GPT registers output_layer.weight");
    if (p) {
        pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
        n = pl_hf_map(&c, p, t);
        CHECK(n == 1 && strcmp(t[0].name, "lm_head.weight") == 0 && t[0].shape[0] == V &&
                  t[0].shape[1] == C,
              "output_layer.weight -> lm_head.weight (%d tensors)", n);
    }
    pl_registry_free(&r);
}

TEST(llama_maps_onto_llamaforcausallm_state_dict)
{
    enum { G = 2, HS = C / NH, F = 96 };
    want w[64];
    int n = 0;
    char s[PL_PARAM_NAME_MAX];
    n = add(w, n, "model.embed_tokens.weight", V, C);
    for (int l = 0; l < L; l++) {
        const struct {
            const char *suffix;
            int64_t rows, cols;
        } t[] = {{"input_layernorm.weight", C, 0}, {"self_attn.q_proj.weight", NH * HS, C},
                 {"self_attn.k_proj.weight", G * HS, C}, {"self_attn.v_proj.weight", G * HS, C},
                 {"self_attn.o_proj.weight", C, NH * HS}, {"post_attention_layernorm.weight", C, 0},
                 {"mlp.gate_proj.weight", F, C}, {"mlp.up_proj.weight", F, C},
                 {"mlp.down_proj.weight", C, F}};
        for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
            snprintf(s, sizeof s, "model.layers.%d.%s", l, t[k].suffix);
            n = add(w, n, s, t[k].rows, t[k].cols);
        }
    }
    n = add(w, n, "model.norm.weight", C, 0);
    n = add(w, n, "lm_head.weight", V, C);
    pl_model_config c = config(PL_FAMILY_LLAMA, G, F);
    check_state_dict("llama", &c, w, n);
}

/* Over all Hugging Face tensors of each parameter: every source index in range
 * and used once; all used but the vocab padding rows. */
static void check_bijection(const char *what, const pl_model_config *c)
{
    pl_registry r;
    pl_registry_init(&r, 1, 0, 0);
    CHECK_OK(pl_model_register(&r, c, 1));
    for (int i = 0; i < r.n; i++) {
        const pl_param *p = &r.params[i];
        pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
        const int n = pl_hf_map(c, p, t);
        if (n <= 0)
            continue;
        const int64_t numel = p->shape[0] * (p->ndim == 2 ? p->shape[1] : 1);
        int64_t expect = numel;
        if (p->split == PL_TP_VOCAB)
            expect = c->vocab_size * p->shape[1];
        unsigned char *used = pl_calloc((size_t)numel, 1);
        int64_t total = 0, bad = 0;
        for (int k = 0; k < n; k++) {
            const int64_t m = t[k].shape[0] * (t[k].ndim == 2 ? t[k].shape[1] : 1);
            for (int64_t e = 0; e < m; e++, total++) {
                const int64_t src = pl_hf_source_index(c, p, &t[k], e);
                if (src < 0 || src >= numel || used[src]++)
                    bad++;
            }
        }
        CHECK(bad == 0 && total == expect, "%s: %s: %lld bad or repeated sources, %lld of %lld "
              "elements", what, p->name, (long long)bad, (long long)total, (long long)expect);
        pl_free(used);
    }
    pl_registry_free(&r);
}

TEST(every_element_comes_from_one_distinct_plait_element)
{
    pl_model_config g = config(PL_FAMILY_GPT, NH, 4 * C);
    check_bijection("gpt", &g);
    for (int64_t groups = 1; groups <= NH; groups *= 2) {
        pl_model_config l = config(PL_FAMILY_LLAMA, groups, 96);
        check_bijection("llama", &l);
    }
}

static const pl_param *mapped(pl_registry *r, const pl_model_config *c, const char *name,
                              pl_hf_tensor t[PL_HF_MAX_PER_PARAM], int *n);

/* A post-LN BERT (--transformer-block-type post_ln) or BART: the family's row with
 * the block's post_norm and the exact GELU. */
static pl_model_config post_ln(pl_family f)
{
    pl_model_config c = config(f, NH, 4 * C);
    c.block.post_norm = 1;
    c.block.act = PL_ACT_GELU_ERF;
    if (f == PL_FAMILY_BART)
        c.dec_layers = L, c.dec_seq_length = P;
    return c;
}

/* transformers' BertForPreTraining (models/bert/modeling_bert.py): bert.embeddings
 * (word, position, token type, LayerNorm), per layer attention.self.{query,key,value},
 * attention.output.{dense,LayerNorm}, intermediate.dense, output.{dense,LayerNorm};
 * bert.pooler.dense, cls.predictions.{transform.dense,transform.LayerNorm,bias},
 * cls.seq_relationship; the decoder tied, not stored. */
TEST(post_ln_bert_maps_onto_bertforpretraining_state_dict)
{
    want w[64];
    int n = 0;
    char s[PL_PARAM_NAME_MAX];
    n = add(w, n, "bert.embeddings.word_embeddings.weight", V, C);
    n = add(w, n, "bert.embeddings.position_embeddings.weight", P, C);
    n = add(w, n, "bert.embeddings.token_type_embeddings.weight", 2, C);
    n = add(w, n, "bert.embeddings.LayerNorm.weight", C, 0);
    n = add(w, n, "bert.embeddings.LayerNorm.bias", C, 0);
    for (int l = 0; l < L; l++) {
        const struct {
            const char *suffix;
            int64_t rows, cols;
        } t[] = {{"attention.self.query", C, C}, {"attention.self.key", C, C},
                 {"attention.self.value", C, C}, {"attention.output.dense", C, C},
                 {"attention.output.LayerNorm", C, 0}, {"intermediate.dense", 4 * C, C},
                 {"output.dense", C, 4 * C}, {"output.LayerNorm", C, 0}};
        for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
            snprintf(s, sizeof s, "bert.encoder.layer.%d.%s.weight", l, t[k].suffix);
            n = add(w, n, s, t[k].rows, t[k].cols);
            snprintf(s, sizeof s, "bert.encoder.layer.%d.%s.bias", l, t[k].suffix);
            n = add(w, n, s, t[k].rows, 0);
        }
    }
    n = add(w, n, "bert.pooler.dense.weight", C, C);
    n = add(w, n, "bert.pooler.dense.bias", C, 0);
    n = add(w, n, "cls.predictions.transform.dense.weight", C, C);
    n = add(w, n, "cls.predictions.transform.dense.bias", C, 0);
    n = add(w, n, "cls.predictions.transform.LayerNorm.weight", C, 0);
    n = add(w, n, "cls.predictions.transform.LayerNorm.bias", C, 0);
    n = add(w, n, "cls.predictions.bias", V, 0);
    n = add(w, n, "cls.seq_relationship.weight", 2, C);
    n = add(w, n, "cls.seq_relationship.bias", 2, 0);
    pl_model_config c = post_ln(PL_FAMILY_BERT);
    check_state_dict("bert", &c, w, n);
}

/* transformers' BartForConditionalGeneration (models/bart/modeling_bart.py):
 * model.shared, per stack embed_positions (max_position_embeddings + 2 rows) and
 * layernorm_embedding, per layer self_attn.{q,k,v,out}_proj, self_attn_layer_norm,
 * (decoder) encoder_attn.{q,k,v,out}_proj, encoder_attn_layer_norm, fc1, fc2,
 * final_layer_norm; final_logits_bias (1, vocab); lm_head tied, not stored. */
TEST(post_ln_bart_maps_onto_bartforconditionalgeneration_state_dict)
{
    want w[160];
    int n = 0;
    char s[PL_PARAM_NAME_MAX];
    n = add(w, n, "model.shared.weight", V, C);
    n = add(w, n, "final_logits_bias", 1, V);
    for (int d = 0; d < 2; d++) {
        const char *stack = d ? "decoder" : "encoder";
        snprintf(s, sizeof s, "model.%s.embed_positions.weight", stack);
        n = add(w, n, s, P + 2, C);
        snprintf(s, sizeof s, "model.%s.layernorm_embedding.weight", stack);
        n = add(w, n, s, C, 0);
        snprintf(s, sizeof s, "model.%s.layernorm_embedding.bias", stack);
        n = add(w, n, s, C, 0);
        for (int l = 0; l < L; l++) {
            const struct {
                const char *suffix;
                int64_t rows, cols;
                int decoder_only;
            } t[] = {{"self_attn.q_proj", C, C, 0}, {"self_attn.k_proj", C, C, 0},
                     {"self_attn.v_proj", C, C, 0}, {"self_attn.out_proj", C, C, 0},
                     {"self_attn_layer_norm", C, 0, 0}, {"encoder_attn.q_proj", C, C, 1},
                     {"encoder_attn.k_proj", C, C, 1}, {"encoder_attn.v_proj", C, C, 1},
                     {"encoder_attn.out_proj", C, C, 1}, {"encoder_attn_layer_norm", C, 0, 1},
                     {"fc1", 4 * C, C, 0}, {"fc2", C, 4 * C, 0}, {"final_layer_norm", C, 0, 0}};
            for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
                if (t[k].decoder_only && !d)
                    continue;
                snprintf(s, sizeof s, "model.%s.layers.%d.%s.weight", stack, l, t[k].suffix);
                n = add(w, n, s, t[k].rows, t[k].cols);
                snprintf(s, sizeof s, "model.%s.layers.%d.%s.bias", stack, l, t[k].suffix);
                n = add(w, n, s, t[k].rows, 0);
            }
        }
    }
    pl_model_config c = post_ln(PL_FAMILY_BART);
    check_state_dict("bart", &c, w, n);
}

/* BERT's and BART's maps: every element from a distinct plait element, all of them
 * used (but the vocabulary padding), except the zeros the formats have where plait
 * has nothing: BART's two position rows before its offset, and the token types of a
 * BERT without them (--bert-no-binary-head). */
TEST(post_ln_bert_and_bart_elements_come_from_distinct_plait_elements)
{
    pl_model_config b = post_ln(PL_FAMILY_BERT);
    check_bijection("bert", &b);
    pl_model_config m = post_ln(PL_FAMILY_BART);
    pl_registry r;
    pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
    int n;
    const pl_param *p = mapped(&r, &m, "decoder_embedding.position_embeddings.weight", t, &n);
    CHECK(p && n == 1 && t[0].tf == PL_HF_POS2 && t[0].shape[0] == P + 2, "decoder positions");
    for (int64_t e = 0; p && n == 1 && e < (P + 2) * C; e++)
        if (pl_hf_source_index(&m, p, &t[0], e) != (e < 2 * C ? -1 : e - 2 * C)) {
            CHECK(0, "embed_positions element %lld", (long long)e);
            break;
        }
    pl_registry_free(&r);
    /* encoder_attn.v_proj row h HS + e: linear_kv row (2 h + 1) HS + e */
    enum { HS = C / NH };
    p = mapped(&r, &m, "decoder.layers.1.cross_attention.linear_kv.weight", t, &n);
    CHECK(p && n == 2 && strcmp(t[1].name, "model.decoder.layers.1.encoder_attn.v_proj.weight") == 0 &&
              pl_hf_source_index(&m, p, &t[1], (2 * HS + 3) * C + 4) == ((2 * 2 + 1) * HS + 3) * C + 4,
          "encoder_attn.v_proj of head 2");
    pl_registry_free(&r);
    b.head.binary_head = b.head.tokentypes = 0; /* BertForMaskedLM */
    p = mapped(&r, &b, "embedding.position_embeddings.weight", t, &n);
    CHECK(p && n == 2 && t[1].tf == PL_HF_TYPES0 && t[1].shape[0] == 2 &&
              pl_hf_source_index(&b, p, &t[1], 5) == -1,
          "a BERT without token types writes zero token_type_embeddings");
    pl_registry_free(&r);
}

/* Find the map of one named parameter. */
static const pl_param *mapped(pl_registry *r, const pl_model_config *c, const char *name,
                              pl_hf_tensor t[PL_HF_MAX_PER_PARAM], int *n)
{
    pl_registry_init(r, 1, 0, 0);
    CHECK_OK(pl_model_register(r, c, 1));
    const pl_param *p = pl_registry_find(r, name);
    *n = p ? pl_hf_map(c, p, t) : -1;
    return p;
}

TEST(elements_land_where_megatrons_layouts_put_them)
{
    enum { HS = C / NH };
    pl_registry r;
    pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
    int n;
    /* GPT-2 c_attn.weight[i][j], j = part C + h HS + e: Megatron qkv row (3h + part) HS + e, col i */
    pl_model_config g = config(PL_FAMILY_GPT, NH, 4 * C);
    const pl_param *p = mapped(&r, &g, "decoder.layers.1.self_attention.linear_qkv.weight", t, &n);
    CHECK(p && n == 1 && strcmp(t[0].name, "transformer.h.1.attn.c_attn.weight") == 0, "c_attn");
    if (p && n == 1) {
        const int64_t i = 5, part = 1, h = 2, e = 3, j = part * C + h * HS + e;
        CHECK(pl_hf_source_index(&g, p, &t[0], i * 3 * C + j) == ((3 * h + part) * HS + e) * C + i,
              "the key of head 2 in c_attn");
    }
    pl_registry_free(&r);
    /* GPT-2 mlp.c_fc.weight (C, 4C) [i][j] = linear_fc1 [j][i] */
    p = mapped(&r, &g, "decoder.layers.0.mlp.linear_fc1.weight", t, &n);
    CHECK(p && n == 1 && pl_hf_source_index(&g, p, &t[0], 7 * 4 * C + 100) == 100 * C + 7,
          "c_fc transposed");
    pl_registry_free(&r);
    /* Llama with 2 groups of 2 query heads: k_proj row g HS + e is Megatron row
     * (4 g + 2) HS + e; q_proj row of head 3 (group 1, second) is (4 + 1) HS + e;
     * up_proj row f is fc1 row F + f. */
    pl_model_config l = config(PL_FAMILY_LLAMA, 2, 96);
    p = mapped(&r, &l, "decoder.layers.0.self_attention.linear_qkv.weight", t, &n);
    CHECK(p && n == 3 && t[1].tf == PL_HF_K, "q, k, v");
    if (p && n == 3) {
        CHECK(pl_hf_source_index(&l, p, &t[1], (1 * HS + 2) * C + 9) == ((4 + 2) * HS + 2) * C + 9,
              "k_proj of group 1");
        CHECK(pl_hf_source_index(&l, p, &t[0], (3 * HS + 1) * C) == ((4 + 1) * HS + 1) * C,
              "q_proj of head 3");
        CHECK(pl_hf_source_index(&l, p, &t[2], 0) == (2 + 1) * HS * C, "v_proj of group 0");
    }
    pl_registry_free(&r);
    p = mapped(&r, &l, "decoder.layers.0.mlp.linear_fc1.weight", t, &n);
    CHECK(p && n == 2 && pl_hf_source_index(&l, p, &t[1], 5 * C + 1) == (96 + 5) * C + 1,
          "up_proj is fc1's second half");
    pl_registry_free(&r);
}

/* transformers' T5ForConditionalGeneration (models/t5/modeling_t5.py): shared; per
 * stack block.N.layer.0 = T5LayerSelfAttention (q, k, v, o of inner x d_model, the
 * relative_attention_bias (buckets, heads) in block 0 only), the decoder's layer.1 =
 * EncDecAttention, then T5LayerFF (DenseReluDense wi, or wi_0 and wi_1, and wo), each
 * with its layer_norm; final_layer_norm; lm_head when untied. */
static pl_model_config t5_config(int geglu, int tied)
{
    pl_model_config c = config(PL_FAMILY_T5, NH, 96);
    c.dec_layers = 3;
    c.dec_seq_length = 16;
    c.block.norm = PL_NORM_RMSNORM;
    c.block.norm_bias = c.block.bias = 0;
    c.block.pos = PL_POS_RELATIVE;
    c.block.act = geglu ? PL_ACT_GEGLU : PL_ACT_RELU;
    c.head.output_bias = 0;
    c.rel_buckets = 32;
    c.rel_max_distance = 128;
    c.softmax_scale = 1.0f;
    c.untie = !tied;
    return c;
}

TEST(t5_maps_onto_t5forconditionalgeneration_state_dict)
{
    for (int v = 0; v < 4; v++) {
        const int geglu = v & 1, tied = v >> 1;
        pl_model_config c = t5_config(geglu, tied);
        static want w[128];
        int n = 0;
        char name[PL_PARAM_NAME_MAX];
        n = add(w, n, "shared.weight", V, C);
        if (!tied)
            n = add(w, n, "lm_head.weight", V, C);
        static const char *const stacks[2] = {"encoder", "decoder"};
        for (int s = 0; s < 2; s++) {
            const int layers = s ? 3 : L, mlp = s ? 2 : 1;
            snprintf(name, sizeof name, "%s.final_layer_norm.weight", stacks[s]);
            n = add(w, n, name, C, 0);
            snprintf(name, sizeof name,
                     "%s.block.0.layer.0.SelfAttention.relative_attention_bias.weight", stacks[s]);
            n = add(w, n, name, 32, NH);
            for (int l = 0; l < layers; l++) {
                static const char *const qkvo = "qkvo";
                for (int k = 0; k < 4; k++) {
                    snprintf(name, sizeof name, "%s.block.%d.layer.0.SelfAttention.%c.weight",
                             stacks[s], l, qkvo[k]);
                    n = add(w, n, name, C, C);
                    if (s) {
                        snprintf(name, sizeof name, "%s.block.%d.layer.1.EncDecAttention.%c.weight",
                                 stacks[s], l, qkvo[k]);
                        n = add(w, n, name, C, C);
                    }
                }
                for (int k = 0; k <= mlp; k++) {
                    snprintf(name, sizeof name, "%s.block.%d.layer.%d.layer_norm.weight", stacks[s],
                             l, k);
                    n = add(w, n, name, C, 0);
                }
                static const char *const wi[3] = {"wi", "wi_0", "wi_1"};
                for (int k = geglu; k < (geglu ? 3 : 1); k++) {
                    snprintf(name, sizeof name, "%s.block.%d.layer.%d.DenseReluDense.%s.weight",
                             stacks[s], l, mlp, wi[k]);
                    n = add(w, n, name, 96, C);
                }
                snprintf(name, sizeof name, "%s.block.%d.layer.%d.DenseReluDense.wo.weight",
                         stacks[s], l, mlp);
                n = add(w, n, name, C, 96);
            }
        }
        check_state_dict(geglu ? (tied ? "t5 geglu tied" : "t5 geglu") : (tied ? "t5 relu tied"
                                                                                : "t5 relu"),
                         &c, w, n);
        check_bijection("t5", &c);
    }
    /* EncDecAttention.v row h HS + e is linear_kv row (2h + 1) HS + e (Megatron core's
     * per-head [k; v]); wi_1 is fc1's second half */
    enum { HS = C / NH };
    pl_model_config c = t5_config(1, 0);
    pl_registry r;
    pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
    int n;
    const pl_param *p = mapped(&r, &c, "decoder.layers.2.cross_attention.linear_kv.weight", t, &n);
    CHECK(p && n == 2 && strcmp(t[1].name, "decoder.block.2.layer.1.EncDecAttention.v.weight") == 0,
          "EncDecAttention k and v");
    if (p && n == 2)
        CHECK(pl_hf_source_index(&c, p, &t[1], (3 * HS + 4) * C + 7) ==
                  ((2 * 3 + 1) * HS + 4) * C + 7, "the value of head 3");
    pl_registry_free(&r);
    p = mapped(&r, &c, "encoder.layers.1.mlp.linear_fc1.weight", t, &n);
    CHECK(p && n == 2 && strcmp(t[1].name, "encoder.block.1.layer.1.DenseReluDense.wi_1.weight") == 0 &&
              pl_hf_source_index(&c, p, &t[1], 5 * C + 1) == (96 + 5) * C + 1,
          "wi_1 is fc1's second half");
    pl_registry_free(&r);
}

TEST(a_parameter_the_family_does_not_map_is_reported)
{
    pl_model_config g = config(PL_FAMILY_GPT, NH, 4 * C);
    g.block.cross_attention = 1; /* a decoder layer: no GPT-2 name */
    pl_registry r;
    pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
    int n;
    const pl_param *p = mapped(&r, &g, "decoder.layers.0.cross_attention.linear_q.weight", t, &n);
    CHECK(p && n == -1, "cross-attention in a GPT-2 export: %d", n);
    pl_registry_free(&r);
}

int main(void)
{
    RUN(gpt2_maps_onto_gpt2lmheadmodel_state_dict);
    RUN(untied_gpt2_has_its_own_lm_head);
    RUN(llama_maps_onto_llamaforcausallm_state_dict);
    RUN(every_element_comes_from_one_distinct_plait_element);
    RUN(elements_land_where_megatrons_layouts_put_them);
    RUN(t5_maps_onto_t5forconditionalgeneration_state_dict);
    RUN(a_parameter_the_family_does_not_map_is_reported);
    RUN(post_ln_bert_maps_onto_bertforpretraining_state_dict);
    RUN(post_ln_bart_maps_onto_bartforconditionalgeneration_state_dict);
    RUN(post_ln_bert_and_bart_elements_come_from_distinct_plait_elements);
    return test_summary("hf_names");
}
