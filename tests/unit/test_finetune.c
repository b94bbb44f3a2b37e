/* Fine-tuning data formats (src/finetune/): label maps, TSV / JSON-lines
 * classification data and its BERT encoding, CoNLL reading and WordPiece
 * label alignment, SQuAD reading, windows and span decoding, and the
 * metrics' documented reference values. Agreement of the metrics with
 * Python transcriptions of seqeval / evaluate-v1.1.py / scikit-learn on
 * hundreds of cases is tests/scripts/finetune_metrics.sh. */
#include "base/alloc.h"
#include "base/vec.h"
#include "finetune/cls_metrics.h"
#include "finetune/tokcls.h"
#include "finetune/labels.h"
#include "finetune/reg_metrics.h"
#include "finetune/seqeval.h"
#include "finetune/squad.h"
#include "finetune/squad_eval.h"
#include "finetune/textcls.h"
#include "test.h"

static pl_tokenizer *bert(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/bert/vocab.txt", test_datadir());
    pl_tokenizer *t = NULL;
    pl_status st = pl_bert_tokenizer_open(&t, path, 1);
    if (st != PL_OK)
        fprintf(stderr, "cannot open %s: %s\n", path, pl_error_msg());
    return t;
}

static int32_t id_of(pl_tokenizer *t, const char *tok) { return pl_tokenizer_token_id(t, tok); }

/* Number of WordPiece tokens of text. */
static int64_t n_tokens(pl_tokenizer *t, const char *text)
{
    pl_ids ids = {0};
    pl_tokenizer_encode(t, text, strlen(text), &ids);
    int64_t n = ids.n;
    pl_ids_free(&ids);
    return n;
}

static const char *tmp_file(const char *name, const char *content)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    fputs(content, f);
    fclose(f);
    return path;
}

TEST(labels_are_sorted_distinct_with_optional_first_and_round_trip)
{
    const char *l[] = {"pos", "neg", "pos", "neutral", "B-PER", "O"};
    pl_ft_labels m, back;
    CHECK_OK(pl_ft_labels_build(&m, l, 6, NULL));
    CHECK(m.n == 5 && strcmp(m.names[0], "B-PER") == 0 && strcmp(m.names[1], "O") == 0 &&
              strcmp(m.names[2], "neg") == 0 && strcmp(m.names[4], "pos") == 0,
          "n=%lld first=%s", (long long)m.n, m.names[0]);
    CHECK(pl_ft_labels_find(&m, "neutral") == 3 && pl_ft_labels_find(&m, "x") == -1, "find");
    pl_ft_labels_free(&m);
    CHECK_OK(pl_ft_labels_build(&m, l, 6, "O"));
    CHECK(m.n == 5 && strcmp(m.names[0], "O") == 0 && strcmp(m.names[1], "B-PER") == 0, "O first: %s", m.names[0]);
    char path[1024];
    snprintf(path, sizeof path, "%s/labels.txt", test_tmpdir());
    CHECK_OK(pl_ft_labels_write(&m, path));
    CHECK_OK(pl_ft_labels_read(&back, path));
    CHECK(back.n == m.n, "n %lld vs %lld", (long long)back.n, (long long)m.n);
    for (int64_t i = 0; i < m.n && i < back.n; i++)
        CHECK(strcmp(back.names[i], m.names[i]) == 0, "label %lld", (long long)i);
    pl_ft_labels_free(&m);
    pl_ft_labels_free(&back);
    const char *dup = tmp_file("dup.txt", "a\nb\na\n");
    CHECK(pl_ft_labels_read(&back, dup) == PL_ERR_FORMAT && strstr(pl_error_msg(), "dup.txt:3"), "%s", pl_error_msg());
}

TEST(tsv_reads_chosen_columns_skips_header_and_names_bad_lines)
{
    const char *path = tmp_file("mrpc.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                            "1\t11\t12\tHe said.\tShe said.\r\n"
                                            "\n"
                                            "0\t13\t14\tA dog.\tA cat.\n");
    pl_textcls_spec sp = pl_textcls_spec_default();
    sp.header = 1, sp.col_a = 3, sp.col_b = 4, sp.col_label = 0;
    pl_textcls_set s;
    CHECK_OK(pl_textcls_read(&s, path, &sp));
    CHECK(s.n == 2, "n=%lld", (long long)s.n);
    if (s.n == 2) {
        CHECK(strcmp(s.ex[0].a, "He said.") == 0 && strcmp(s.ex[0].b, "She said.") == 0 &&
                  strcmp(s.ex[0].label, "1") == 0 && s.ex[0].line == 2,
              "ex0 '%s' '%s' '%s' line %lld", s.ex[0].a, s.ex[0].b, s.ex[0].label, (long long)s.ex[0].line);
        CHECK(s.ex[1].line == 4 && strcmp(s.ex[1].label, "0") == 0, "ex1 line %lld", (long long)s.ex[1].line);
        pl_ft_labels m;
        CHECK_OK(pl_textcls_labels(&s, &m));
        CHECK(m.n == 2 && strcmp(m.names[0], "0") == 0, "labels");
        pl_ft_labels_free(&m);
    }
    pl_textcls_set_free(&s);
    const char *sst = tmp_file("sst.tsv", "sentence\tlabel\ngood film\t1\nbad\n");
    sp = pl_textcls_spec_default();
    sp.header = 1;
    CHECK(pl_textcls_read(&s, sst, &sp) == PL_ERR_FORMAT &&
              strstr(pl_error_msg(), "sst.tsv:3: 1 tab-separated field(s); expected text in column 0"),
          "a line without a label column must not read its text as the label: %s", pl_error_msg());
    sp.col_label = 1;
    CHECK(pl_textcls_read(&s, sst, &sp) == PL_ERR_FORMAT && strstr(pl_error_msg(), "sst.tsv:3: label is column 1"),
          "%s", pl_error_msg());
}

TEST(jsonl_reads_text_pairs_and_integer_labels_and_names_bad_lines)
{
    const char *path = tmp_file("cls.jsonl", "{\"text\": \"a\", \"label\": 1}\n"
                                             "{\"text\": \"b\", \"text_b\": \"c\", \"label\": \"neg\"}\n"
                                             "{\"text\": \"d\", \"text_b\": null, \"label\": 0}\n");
    pl_textcls_spec sp = pl_textcls_spec_default();
    sp.jsonl = 1;
    pl_textcls_set s;
    CHECK_OK(pl_textcls_read(&s, path, &sp));
    CHECK(s.n == 3 && strcmp(s.ex[0].label, "1") == 0 && !s.ex[0].b && strcmp(s.ex[1].b, "c") == 0 &&
              strcmp(s.ex[1].label, "neg") == 0 && !s.ex[2].b,
          "parsed");
    pl_textcls_set_free(&s);
    const char *bad = tmp_file("bad.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"txt\": \"b\", \"label\": 1}\n");
    CHECK(pl_textcls_read(&s, bad, &sp) == PL_ERR_FORMAT && strstr(pl_error_msg(), "bad.jsonl:2: no \"text\""),
          "%s", pl_error_msg());
    const char *bad2 = tmp_file("bad2.jsonl", "{\"text\": \"a\", \"label\": 1.5}\n");
    CHECK(pl_textcls_read(&s, bad2, &sp) == PL_ERR_FORMAT && strstr(pl_error_msg(), "bad2.jsonl:1"), "%s",
          pl_error_msg());
}

TEST(pair_encoding_truncates_longer_segment_first_then_pads)
{
    pl_tokenizer *t = bert();
    if (!t)
        { CHECK(0, "no vocab"); return; }
    pl_bert_specials sp;
    CHECK_OK(pl_bert_tokenizer_specials(t, &sp));
    CHECK(n_tokens(t, "one two three four five six") == 6 && n_tokens(t, "seven eight") == 2, "word counts");
    pl_ids xa = {0}, xb = {0};
    int32_t ids[12], types[12], mask[12];
    int cut = 0;
    /* 6 + 2 tokens into 8 - 3 = 5 places: a loses 3 (the longer), b keeps 2. */
    CHECK_OK(pl_textcls_encode(t, &sp, "one two three four five six", "seven eight", 8, &xa, &xb, ids, types,
                               mask, &cut));
    const char *want[] = {"[CLS]", "one", "two", "three", "[SEP]", "seven", "eight", "[SEP]"};
    int want_ty[] = {0, 0, 0, 0, 0, 1, 1, 1};
    for (int i = 0; i < 8; i++)
        CHECK(ids[i] == id_of(t, want[i]) && types[i] == want_ty[i] && mask[i] == 1, "pos %d: %d type %d", i,
              ids[i], types[i]);
    CHECK(cut == 1, "truncated flag");
    /* Equal lengths: b loses first (run_classifier's _truncate_seq_pair). */
    CHECK_OK(pl_textcls_encode(t, &sp, "one two", "three four", 6, &xa, &xb, ids, types, mask, &cut));
    const char *want2[] = {"[CLS]", "one", "two", "[SEP]", "three", "[SEP]"};
    for (int i = 0; i < 6; i++)
        CHECK(ids[i] == id_of(t, want2[i]), "tie pos %d", i);
    /* A single text: [CLS] a [SEP] then padding, types 0, mask 0. */
    CHECK_OK(pl_textcls_encode(t, &sp, "one", NULL, 6, &xa, &xb, ids, types, mask, &cut));
    CHECK(ids[0] == sp.cls && ids[1] == id_of(t, "one") && ids[2] == sp.sep && ids[3] == sp.pad && ids[5] == sp.pad &&
              mask[2] == 1 && mask[3] == 0 && types[4] == 0 && cut == 0,
          "single");
    CHECK(pl_textcls_encode(t, &sp, "one", "two", 2, &xa, &xb, ids, types, mask, &cut) == PL_ERR_ARG, "too short");
    pl_ids_free(&xa);
    pl_ids_free(&xb);
    pl_tokenizer_free(t);
}

TEST(encode_set_maps_labels_and_names_unknown_label)
{
    pl_tokenizer *t = bert();
    if (!t)
        { CHECK(0, "no vocab"); return; }
    const char *path = tmp_file("enc.tsv", "good\tpos\nbad\tneg\nmeh\tmeh\n");
    pl_textcls_spec sp = pl_textcls_spec_default();
    pl_textcls_set s;
    CHECK_OK(pl_textcls_read(&s, path, &sp));
    const char *names[] = {"neg", "pos"};
    pl_ft_labels m;
    CHECK_OK(pl_ft_labels_build(&m, names, 2, NULL));
    int32_t ids[3 * 8], ty[3 * 8], mk[3 * 8], lab[3];
    CHECK(pl_textcls_encode_set(t, &s, &m, 8, ids, ty, mk, lab, NULL) == PL_ERR_FORMAT &&
              strstr(pl_error_msg(), "enc.tsv:3: label 'meh'"),
          "%s", pl_error_msg());
    s.n = 2;
    CHECK_OK(pl_textcls_encode_set(t, &s, &m, 8, ids, ty, mk, lab, NULL));
    CHECK(lab[0] == 1 && lab[1] == 0 && ids[8 + 1] == id_of(t, "bad"), "labels %d %d", lab[0], lab[1]);
    pl_ft_labels_free(&m);
    pl_textcls_set_free(&s);
    pl_tokenizer_free(t);
}

TEST(classification_metrics_match_sklearn_documented_example_and_report)
{
    /* sklearn's f1_score docstring: macro F1 of this is 0.26666... */
    int32_t y[] = {0, 1, 2, 0, 1, 2}, p[] = {0, 2, 1, 0, 0, 1};
    pl_cls_metrics m;
    CHECK_OK(pl_cls_metrics_compute(&m, y, p, 6, 4)); /* class 3 absent: not averaged */
    CHECK(fabs(m.macro_f1 - 0.8 / 3) < 1e-15 && m.n_present == 3, "macro F1 %.17g over %lld", m.macro_f1,
          (long long)m.n_present);
    CHECK(fabs(m.accuracy - 2.0 / 6) < 1e-15 && m.confusion[0 * 4 + 0] == 2 && m.confusion[1 * 4 + 0] == 1 &&
              m.confusion[2 * 4 + 1] == 2,
          "accuracy / confusion");
    CHECK(fabs(m.precision[0] - 2.0 / 3) < 1e-15 && m.recall[0] == 1.0 && m.f1[1] == 0.0, "per class");
    const char *names[] = {"a", "b", "c", "d"};
    pl_ft_labels l;
    CHECK_OK(pl_ft_labels_build(&l, names, 4, NULL));
    pl_bytes md = {0};
    CHECK_OK(pl_cls_metrics_format(&m, &l, 1, &md));
    CHECK(md.data && strstr(md.data, "| a | 0.666667 | 1.000000 | 0.800000 | 2 | 3 |") &&
              strstr(md.data, "| macro F1 | 0.266667 |") && strstr(md.data, "| c | 0 | 2 | 0 | 0 |"),
          "markdown:\n%s", md.data);
    pl_bytes_free(&md);
    pl_ft_labels_free(&l);
    pl_cls_metrics_free(&m);
    CHECK(pl_cls_metrics_compute(&m, y, p, 6, 2) == PL_ERR_ARG && strstr(pl_error_msg(), "example 1"), "%s",
          pl_error_msg());
}

TEST(regression_targets_parse_and_metrics_match_sklearn_docstring)
{
    const char *path = tmp_file("tpsa.tsv", "smiles\ttpsa\nCCO\t20.23\nc1ccccc1\t0.00\nCC(=O)O\tabc\n");
    pl_textcls_spec sp = pl_textcls_spec_default();
    sp.header = 1;
    pl_textcls_set s;
    double v[3];
    CHECK_OK(pl_textcls_read(&s, path, &sp));
    CHECK(pl_reg_targets(&s, v) == PL_ERR_FORMAT && strstr(pl_error_msg(), "tpsa.tsv:4: target 'abc'"), "%s",
          pl_error_msg());
    s.n = 2;
    CHECK_OK(pl_reg_targets(&s, v));
    CHECK(v[0] == 20.23 && v[1] == 0.0, "targets %g %g", v[0], v[1]);
    pl_textcls_set_free(&s);
    /* r2_score's docstring: 0.948..., and mean_squared_error's: 0.375. */
    double t[] = {3, -0.5, 2, 7}, p[] = {2.5, 0.0, 2, 8};
    pl_reg_metrics m;
    CHECK_OK(pl_reg_metrics_compute(&m, t, p, 4));
    CHECK(fabs(m.r2 - 0.9486081370449679) < 1e-15 && m.mse == 0.375 && m.mae == 0.5, "r2 %.17g mse %g mae %g", m.r2,
          m.mse, m.mae);
    double c[] = {1, 1, 1};
    CHECK_OK(pl_reg_metrics_compute(&m, c, c, 3));
    CHECK(m.r2 == 1.0 && m.pearson == 0.0, "constant truth, exact: r2 %g r %g", m.r2, m.pearson);
    p[0] = NAN;
    CHECK(pl_reg_metrics_compute(&m, t, p, 4) == PL_ERR_ARG && strstr(pl_error_msg(), "example 0"), "%s",
          pl_error_msg());
}

TEST(seqeval_entities_match_its_docstrings_and_conlleval_rules)
{
    const char *seq[] = {"B-PER", "I-PER", "O", "B-LOC"};
    int64_t len[] = {4};
    pl_seqeval_entity *e;
    int64_t n;
    CHECK_OK(pl_seqeval_entities(seq, len, 1, &e, &n));
    CHECK(n == 2 && e[0].start == 0 && e[0].end == 1 && e[1].start == 3 && e[1].end == 3 &&
              e[1].type_len == 3 && memcmp(e[1].type, "LOC", 3) == 0,
          "get_entities docstring: n=%lld", (long long)n);
    pl_free(e);
    /* I- without B- opens an entity; a type change closes one; a sentence end closes one. */
    const char *tricky[] = {"I-PER", "I-LOC", "B-ORG", "O", "I-ORG"};
    int64_t len2[] = {3, 2};
    CHECK_OK(pl_seqeval_entities(tricky, len2, 2, &e, &n));
    CHECK(n == 4 && e[0].start == 0 && e[0].end == 0 && e[1].start == 1 && e[1].end == 1 && e[2].start == 2 &&
              e[2].end == 2 && e[3].start == 5 && e[3].end == 5,
          "n=%lld", (long long)n);
    pl_free(e);
    /* f1_score docstring: 0.50. */
    const char *t[] = {"O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O", "B-PER", "I-PER", "O"};
    const char *p[] = {"O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O", "B-PER", "I-PER", "O"};
    int64_t len3[] = {7, 3};
    pl_seqeval_result r;
    CHECK_OK(pl_seqeval_score(&r, t, p, len3, 2));
    CHECK(r.f1 == 0.5 && r.n_types == 2 && strcmp(r.types[0], "MISC") == 0 && r.tp[1] == 1, "f1 %.17g", r.f1);
    /* classification_report's docstring: MISC 0.00 0.00 0.00 1, PER 1.00 1.00 1.00 1,
     * micro / macro / weighted avg 0.50 0.50 0.50 2. */
    pl_bytes md = {0};
    CHECK_OK(pl_seqeval_format(&r, 1, &md));
    CHECK(md.data && strstr(md.data, "| MISC | 0.000000 | 0.000000 | 0.000000 | 1 | 1 |") &&
              strstr(md.data, "| PER | 1.000000 | 1.000000 | 1.000000 | 1 | 1 |") &&
              strstr(md.data, "| micro avg | 0.500000 | 0.500000 | 0.500000 | 2 | 2 |") &&
              strstr(md.data, "| macro avg | 0.500000 | 0.500000 | 0.500000 | 2 | 2 |") &&
              strstr(md.data, "| weighted avg | 0.500000 | 0.500000 | 0.500000 | 2 | 2 |"),
          "report:\n%s", md.data);
    pl_bytes_free(&md);
    pl_seqeval_result_free(&r);
}

TEST(conll_reads_sentences_skips_docstart_and_names_bad_lines)
{
    const char *path = tmp_file("ner.txt", "-DOCSTART- -X- -X- O\n\n"
                                           "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n\n"
                                           "Peter NNP B-NP B-PER\tx\n");
    pl_conll_spec sp = pl_conll_spec_default();
    pl_conll_set s;
    CHECK_OK(pl_conll_read(&s, path, &sp));
    CHECK(s.n_sent == 2 && s.sent[0].n == 2 && s.sent[0].line == 3 && s.sent[1].line == 7 &&
              strcmp(s.words[0], "EU") == 0 && strcmp(s.tags[0], "B-ORG") == 0 && strcmp(s.tags[2], "x") == 0,
          "n_sent %lld", (long long)s.n_sent);
    pl_conll_set_free(&s);
    sp.tag_col = 3;
    CHECK_OK(pl_conll_read(&s, path, &sp));
    CHECK(s.n_words == 3 && strcmp(s.tags[2], "B-PER") == 0, "tag column 3");
    pl_conll_set_free(&s);
    const char *bad = tmp_file("bad.conll", "EU B-ORG\n\nlonely\n");
    sp = pl_conll_spec_default();
    CHECK(pl_conll_read(&s, bad, &sp) == PL_ERR_FORMAT && strstr(pl_error_msg(), "bad.conll:3"), "%s",
          pl_error_msg());
    sp.tags = 0;
    CHECK_OK(pl_conll_read(&s, bad, &sp));
    CHECK(s.n_words == 2 && !s.tags, "words only");
    pl_conll_set_free(&s);
}

TEST(nemo_text_and_labels_files_read_as_sentences)
{
    char tp[1024];
    snprintf(tp, sizeof tp, "%s", tmp_file("text_train.txt", "EU rejects German call\n\nPeter Blackburn\n"));
    const char *lp = tmp_file("labels_train.txt", "B-ORG O B-MISC O\n\nB-PER I-PER\n");
    pl_conll_set s;
    CHECK_OK(pl_conll_read_nemo(&s, tp, lp));
    CHECK(s.n_sent == 2 && s.n_words == 6 && s.sent[1].line == 3 && strcmp(s.words[4], "Peter") == 0 &&
              strcmp(s.tags[5], "I-PER") == 0,
          "n_sent %lld", (long long)s.n_sent);
    pl_conll_set_free(&s);
    CHECK_OK(pl_conll_read_nemo(&s, tp, NULL));
    CHECK(s.n_words == 6 && !s.tags, "words only");
    pl_conll_set_free(&s);
    const char *bad = tmp_file("labels_bad.txt", "B-ORG O B-MISC O\nB-PER\n");
    CHECK(pl_conll_read_nemo(&s, tp, bad) == PL_ERR_FORMAT && strstr(pl_error_msg(), "text_train.txt:3 has 2 words") &&
              strstr(pl_error_msg(), "labels_bad.txt:2 has 1 labels"),
          "%s", pl_error_msg());
    const char *short_l = tmp_file("labels_short.txt", "B-ORG O B-MISC O\n");
    CHECK(pl_conll_read_nemo(&s, tp, short_l) == PL_ERR_FORMAT && strstr(pl_error_msg(), "text_train.txt:3: no line"),
          "%s", pl_error_msg());
}

TEST(token_labels_go_on_first_subtoken_and_long_sentences_split)
{
    pl_tokenizer *t = bert();
    if (!t)
        { CHECK(0, "no vocab"); return; }
    int64_t nu = n_tokens(t, "unaffable");
    CHECK(nu >= 2, "unaffable is %lld pieces", (long long)nu);
    const char *path = tmp_file("align.txt", "the O\nunaffable B-X\nman I-X\n");
    pl_conll_spec sp = pl_conll_spec_default();
    pl_conll_set s;
    pl_ft_labels m;
    pl_tokcls_rows r;
    CHECK_OK(pl_conll_read(&s, path, &sp));
    CHECK_OK(pl_conll_labels(&s, &m));
    CHECK(m.n == 3 && strcmp(m.names[0], "O") == 0 && strcmp(m.names[1], "B-X") == 0, "map");
    CHECK_OK(pl_tokcls_encode(&r, t, &s, &m, 16));
    CHECK(r.n == 1 && r.n_split == 0, "rows %lld", (long long)r.n);
    if (r.n == 1) {
        CHECK(r.labels[0] == PL_TOKCLS_IGNORE && r.labels[1] == 0 && r.labels[2] == 1, "first labels");
        for (int64_t k = 3; k < 2 + nu; k++)
            CHECK(r.labels[k] == PL_TOKCLS_IGNORE && r.word_pos[k] == -1, "continuation %lld", (long long)k);
        CHECK(r.labels[2 + nu] == 2 && r.word_pos[2 + nu] == 2 && r.ids[3 + nu] == id_of(t, "[SEP]") &&
                  r.labels[3 + nu] == PL_TOKCLS_IGNORE && r.mask[3 + nu] == 1 && r.mask[4 + nu] == 0,
              "last word / sep / pad");
    }
    pl_tokcls_rows_free(&r);
    /* seq_len 2 + nu: "the unaffable" does not fit, so three windows, every word once. */
    CHECK_OK(pl_tokcls_encode(&r, t, &s, &m, 2 + nu));
    CHECK(r.n == 3 && r.n_split == 1 && r.n_cut_words == 0, "rows %lld split %lld", (long long)r.n,
          (long long)r.n_split);
    int32_t pos_pred[64], wp[3];
    for (int64_t i = 0; i < r.n * r.seq_len && i < 64; i++)
        pos_pred[i] = r.labels[i];
    pl_tokcls_word_preds(&r, pos_pred, 3, wp);
    CHECK(wp[0] == 0 && wp[1] == 1 && wp[2] == 2, "word predictions %d %d %d", wp[0], wp[1], wp[2]);
    pl_tokcls_rows_free(&r);
    /* A word longer than a window keeps its first pieces. */
    CHECK_OK(pl_tokcls_encode(&r, t, &s, &m, 3));
    CHECK(r.n == 3 && r.n_cut_words == 1, "rows %lld cut %lld", (long long)r.n, (long long)r.n_cut_words);
    pl_tokcls_rows_free(&r);
    pl_ft_labels_free(&m);
    pl_conll_set_free(&s);
    pl_tokenizer_free(t);
}

static const char squad_json[] =
    "{\"version\": \"1.1\", \"data\": [{\"title\": \"SB\", \"paragraphs\": [{\"context\": "
    "\"Super Bowl 50 was won by the Denver Broncos, who defeated the Carolina Panthers 24\\u201310. "
    "The game was played at Levi's Stadium in Santa Clara, California.\", \"qas\": ["
    "{\"id\": \"q1\", \"question\": \"Who won Super Bowl 50?\", \"answers\": "
    "[{\"text\": \"Denver Broncos\", \"answer_start\": 29}, {\"text\": \"the Denver Broncos\", \"answer_start\": 25}]},"
    "{\"id\": \"q2\", \"question\": \"Where was the game played?\", \"answers\": "
    "[{\"text\": \"Levi's Stadium\", \"answer_start\": 110}]}]}]}]}";

/* Row position of doc token k in feature f, or -1. */
static int64_t row_pos(const pl_squad_feature *f, int64_t k)
{
    return k >= f->doc_start && k < f->doc_start + f->doc_len ? k - f->doc_start + f->doc_offset : -1;
}

TEST(squad_windows_stride_and_answer_positions)
{
    pl_tokenizer *t = bert();
    if (!t)
        { CHECK(0, "no vocab"); return; }
    pl_squad_set s;
    CHECK_OK(pl_squad_parse(&s, squad_json, sizeof squad_json - 1, "sb.json"));
    CHECK(s.n_q == 2 && s.q[0].n_answers == 2 && s.q[1].answers[0].start == 110, "parsed");
    pl_squad_doc doc;
    CHECK_OK(pl_squad_doc_init(&doc, t, s.contexts[0]));
    /* "Denver" is word 7; its first token starts the answer. */
    CHECK(strncmp(s.contexts[0] + doc.word_start[7], "Denver", 6) == 0 && doc.cp_to_word[29] == 7, "words");
    pl_squad_config cfg = {.max_seq_len = 24, .doc_stride = 5, .max_query_len = 6};
    pl_squad_features fs = {0};
    CHECK_OK(pl_squad_features_add(&fs, t, &s, 0, &doc, &cfg));
    int64_t q_len = n_tokens(t, "Who won Super Bowl 50?");
    q_len = q_len < 6 ? q_len : 6;
    int64_t room = 24 - q_len - 3, want_windows = 1;
    for (int64_t off = 0; off + room < doc.tok.n; off += room < 5 ? room : 5)
        want_windows++;
    CHECK(fs.n == want_windows && fs.n > 2, "windows %lld, expected %lld", (long long)fs.n, (long long)want_windows);
    int64_t ans_s = doc.word_to_tok[7], ans_e = doc.word_to_tok[9] - 2; /* "Denver Broncos," minus the comma */
    CHECK(doc.tok.data[ans_e + 1] == id_of(t, ","), "the comma is the last token of 'Broncos,'");
    int inside = 0;
    for (int64_t i = 0; i < fs.n; i++) {
        const pl_squad_feature *f = &fs.f[i];
        CHECK(f->doc_start == (i == 0 ? 0 : fs.f[i - 1].doc_start + 5), "stride at window %lld", (long long)i);
        CHECK(fs.ids[i * 24] == id_of(t, "[CLS]") && fs.ids[i * 24 + q_len + 1] == id_of(t, "[SEP]") &&
                  fs.types[i * 24 + q_len + 1] == 0 && fs.types[i * 24 + q_len + 2] == 1,
              "layout of window %lld", (long long)i);
        int64_t ps = row_pos(f, ans_s), pe = row_pos(f, ans_e);
        if (ps >= 0 && pe >= 0) {
            inside++;
            CHECK(f->start == ps && f->end == pe, "window %lld: %lld..%lld, expected %lld..%lld", (long long)i,
                  (long long)f->start, (long long)f->end, (long long)ps, (long long)pe);
        } else {
            CHECK(f->start == 0 && f->end == 0, "window %lld without the answer points at [CLS]", (long long)i);
        }
    }
    CHECK(inside >= 1 && fs.n_skipped_answers == 0, "some window holds the answer");
    /* Each context token is max-context in exactly one window. */
    for (int64_t k = 0; k < doc.tok.n; k++) {
        int owners = 0;
        for (int64_t i = 0; i < fs.n; i++) {
            int64_t p = row_pos(&fs.f[i], k);
            owners += p >= 0 && fs.max_context[i * 24 + p];
        }
        CHECK(owners == 1, "token %lld has %d max-context windows", (long long)k, owners);
    }
    /* An answer_start that does not point at the answer is skipped, as run_squad.py skips it. */
    pl_squad_answer moved = s.q[0].answers[0];
    s.q[0].answers[0].start = 5;
    int64_t before = fs.n;
    CHECK_OK(pl_squad_features_add(&fs, t, &s, 0, &doc, &cfg));
    CHECK(fs.n_skipped_answers == 1 && fs.f[before].start == 0 && fs.f[fs.n - 1].end == 0, "skipped");
    cfg.training = 1;
    before = fs.n;
    CHECK_OK(pl_squad_features_add(&fs, t, &s, 0, &doc, &cfg));
    CHECK(fs.n == before && fs.n_skipped_answers == 2, "training drops the question: %lld features added",
          (long long)(fs.n - before));
    cfg.training = 0;
    s.q[0].answers[0] = moved;
    pl_squad_features_free(&fs);
    pl_squad_doc_free(&doc);
    pl_squad_set_free(&s);
    pl_tokenizer_free(t);
}

TEST(squad_decoding_returns_original_text_of_best_span_over_windows)
{
    pl_tokenizer *t = bert();
    if (!t)
        { CHECK(0, "no vocab"); return; }
    pl_squad_set s;
    CHECK_OK(pl_squad_parse(&s, squad_json, sizeof squad_json - 1, "sb.json"));
    pl_squad_doc doc;
    CHECK_OK(pl_squad_doc_init(&doc, t, s.contexts[0]));
    pl_squad_config cfg = {.max_seq_len = 24, .doc_stride = 5, .max_query_len = 6};
    pl_squad_features fs = {0};
    CHECK_OK(pl_squad_features_add(&fs, t, &s, 1, &doc, &cfg));
    CHECK(fs.n_skipped_answers == 0, "the answer matches its context");
    int64_t nf = fs.n, L = 24;
    float *sl = malloc((size_t)(nf * L) * sizeof *sl), *el = malloc((size_t)(nf * L) * sizeof *el);
    int64_t *feats = malloc((size_t)nf * sizeof *feats);
    /* Levi's Stadium: words 20 and 21 ("Levi's" is levi ' s). Peak on its first
     * and last token in every window holding them, with a decoy span with a
     * higher start logit but an end before its start. */
    int64_t ts = doc.word_to_tok[20], te = doc.word_to_tok[22] - 1;
    for (int64_t i = 0; i < nf; i++) {
        feats[i] = i;
        for (int64_t p = 0; p < L; p++)
            sl[i * L + p] = (float)(-1.0 - 0.01 * (double)p), el[i * L + p] = (float)(-1.0 - 0.02 * (double)p);
        int64_t ps = row_pos(&fs.f[i], ts), pe = row_pos(&fs.f[i], te);
        if (ps >= 0 && pe >= 0)
            sl[i * L + ps] = 5.0f + (float)i * 0.1f, el[i * L + pe] = 5.0f;
        if (pe >= 1)
            sl[i * L + fs.f[i].doc_offset + fs.f[i].doc_len - 1] = 9.0f;
    }
    pl_squad_decode_config dc = {.n_best = 20, .max_answer_len = 30};
    pl_bytes out = {0};
    float score;
    CHECK_OK(pl_squad_decode(t, &fs, &doc, feats, nf, sl, el, &dc, &out, &score));
    CHECK(out.data && strcmp(out.data, "Levi's Stadium") == 0, "decoded '%s'", out.data ? out.data : "");
    /* max_answer_len below the span's length: something shorter wins. */
    dc.max_answer_len = 1;
    out.n = 0;
    CHECK_OK(pl_squad_decode(t, &fs, &doc, feats, nf, sl, el, &dc, &out, &score));
    CHECK(out.data && strcmp(out.data, "Levi's Stadium") != 0, "length limit");
    pl_bytes_free(&out);
    free(sl), free(el), free(feats);
    pl_squad_features_free(&fs);
    /* The comma after "Broncos" is trimmed by get_final_text's alignment. */
    CHECK_OK(pl_squad_features_add(&fs, t, &s, 0, &doc, &cfg));
    nf = fs.n;
    sl = calloc((size_t)(nf * L), sizeof *sl), el = calloc((size_t)(nf * L), sizeof *el);
    feats = malloc((size_t)nf * sizeof *feats);
    ts = doc.word_to_tok[7], te = doc.word_to_tok[9] - 2;
    for (int64_t i = 0; i < nf; i++) {
        feats[i] = i;
        int64_t ps = row_pos(&fs.f[i], ts), pe = row_pos(&fs.f[i], te);
        if (ps >= 0 && pe >= 0)
            sl[i * L + ps] = 3.0f, el[i * L + pe] = 3.0f;
    }
    dc.max_answer_len = 30;
    CHECK_OK(pl_squad_decode(t, &fs, &doc, feats, nf, sl, el, &dc, &out, &score));
    CHECK(out.data && strcmp(out.data, "Denver Broncos") == 0 && score == 6.0f, "decoded '%s' %g",
          out.data ? out.data : "", (double)score);
    const char *pred[2] = {out.data, NULL};
    pl_squad_eval_result er;
    CHECK_OK(pl_squad_evaluate(&s, pred, &er));
    CHECK(er.exact_match == 50.0 && er.f1 == 50.0 && er.answered == 1, "EM %g F1 %g", er.exact_match, er.f1);
    /* The predictions file round-trips: q1 answered, q2 absent. */
    char ppath[1024];
    snprintf(ppath, sizeof ppath, "%s/predictions.json", test_tmpdir());
    CHECK_OK(pl_squad_predictions_write(&s, pred, ppath));
    const char **back = NULL;
    char *arena = NULL;
    CHECK_OK(pl_squad_predictions_read(&s, ppath, &back, &arena));
    CHECK(back && back[0] && strcmp(back[0], "Denver Broncos") == 0 && !back[1], "read back");
    pl_free(back);
    pl_free(arena);
    pl_bytes_free(&out);
    free(sl), free(el), free(feats);
    pl_squad_features_free(&fs);
    pl_squad_doc_free(&doc);
    pl_squad_set_free(&s);
    pl_tokenizer_free(t);
}

TEST(squad_nbest_is_ranked_distinct_softmaxed_and_fails_cleanly)
{
    pl_tokenizer *t = bert();
    if (!t)
        { CHECK(0, "no vocab"); return; }
    pl_squad_set s;
    CHECK_OK(pl_squad_parse(&s, squad_json, sizeof squad_json - 1, "sb.json"));
    pl_squad_doc doc;
    CHECK_OK(pl_squad_doc_init(&doc, t, s.contexts[0]));
    pl_squad_config cfg = {.max_seq_len = 24, .doc_stride = 5, .max_query_len = 6};
    pl_squad_features fs = {0};
    CHECK_OK(pl_squad_features_add(&fs, t, &s, 0, &doc, &cfg));
    const int64_t nf = fs.n, L = 24;
    float *sl = malloc((size_t)(nf * L) * sizeof *sl), *el = malloc((size_t)(nf * L) * sizeof *el);
    int64_t *feats = malloc((size_t)nf * sizeof *feats);
    for (int64_t i = 0; i < nf * L; i++) /* distinct, not sorted by position */
        sl[i] = (float)((i * 37) % 101) * 0.05f, el[i] = (float)((i * 53) % 97) * 0.05f;
    for (int64_t i = 0; i < nf; i++)
        feats[i] = i;
    pl_squad_decode_config dc = {.n_best = 5, .max_answer_len = 4};
    pl_squad_nbest nb = {0};
    CHECK_OK(pl_squad_decode_nbest(t, &fs, &doc, feats, nf, sl, el, &dc, &nb));
    CHECK(nb.n == 5 && !nb.empty, "5 entries, got %lld", (long long)nb.n);
    double sum = 0;
    for (int64_t i = 0; i < nb.n; i++) {
        double v = (double)nb.e[i].start_logit + (double)nb.e[i].end_logit;
        sum += nb.e[i].probability;
        if (i > 0) {
            double u = (double)nb.e[i - 1].start_logit + (double)nb.e[i - 1].end_logit;
            CHECK(u >= v && nb.e[i - 1].probability >= nb.e[i].probability, "entry %lld out of order", (long long)i);
            /* softmax: the ratio of two probabilities is exp of the logit difference */
            CHECK(fabs(nb.e[i].probability / nb.e[0].probability - exp(v - ((double)nb.e[0].start_logit +
                                                                          (double)nb.e[0].end_logit))) < 1e-12,
                  "entry %lld probability", (long long)i);
        }
        for (int64_t j = 0; j < i; j++)
            CHECK(strcmp(pl_squad_nbest_text(&nb, i), pl_squad_nbest_text(&nb, j)) != 0, "entries %lld and %lld repeat",
                  (long long)j, (long long)i);
    }
    CHECK(fabs(sum - 1.0) < 1e-12, "probabilities sum to %.17g", sum);
    pl_bytes out = {0};
    CHECK_OK(pl_squad_decode(t, &fs, &doc, feats, nf, sl, el, &dc, &out, NULL));
    CHECK(out.data && strcmp(out.data, pl_squad_nbest_text(&nb, 0)) == 0, "the answer is the first entry");
    pl_bytes_free(&out);
    /* No window: run_squad.py's nonce entry. */
    CHECK_OK(pl_squad_decode_nbest(t, &fs, &doc, feats, 0, sl, el, &dc, &nb));
    CHECK(nb.n == 1 && nb.empty && strcmp(pl_squad_nbest_text(&nb, 0), "empty") == 0 && nb.e[0].probability == 1.0 &&
              nb.e[0].start_logit == 0.0f,
          "empty entry");
    pl_bytes j = {0};
    CHECK_OK(pl_squad_nbest_json(&nb, "q\"1\\", &j));
    CHECK(j.data && strcmp(j.data, "\"q\\\"1\\\\\": [{\"text\": \"empty\", \"probability\": 1, \"start_logit\": 0, "
                                   "\"end_logit\": 0}]") == 0,
          "JSON '%s'", j.data ? j.data : "");
    pl_bytes_free(&j);
    pl_squad_nbest_free(&nb);
    int64_t live0 = pl_alloc_live();
    for (int n = 0; n < 200; n++) {
        pl_alloc_fail_after(n);
        pl_status st = pl_squad_decode_nbest(t, &fs, &doc, feats, nf, sl, el, &dc, &nb);
        pl_alloc_fail_after(-1);
        pl_squad_nbest_free(&nb);
        CHECK(pl_alloc_live() == live0, "n=%d: %lld blocks leaked", n, (long long)(pl_alloc_live() - live0));
        if (st == PL_OK)
            break;
        CHECK(st == PL_ERR_NOMEM, "n=%d: %s", n, pl_status_str(st));
        if (st != PL_ERR_NOMEM)
            break;
    }
    free(sl), free(el), free(feats);
    pl_squad_features_free(&fs);
    pl_squad_doc_free(&doc);
    pl_squad_set_free(&s);
    pl_tokenizer_free(t);
}

TEST(squad_v2_is_impossible_is_read_and_a_bad_flag_named)
{
    static const char v2[] = "{\"data\": [{\"paragraphs\": [{\"context\": \"Alpha beta.\", \"qas\": ["
                             "{\"id\": \"a\", \"question\": \"Which?\", \"answers\": [{\"text\": \"beta\", "
                             "\"answer_start\": 6}], \"is_impossible\": false},"
                             "{\"id\": \"n\", \"question\": \"Who?\", \"answers\": [], \"plausible_answers\": "
                             "[{\"text\": \"Alpha\", \"answer_start\": 0}], \"is_impossible\": true}]}]}]}";
    static const char bad[] = "{\"data\": [{\"paragraphs\": [{\"context\": \"x\", \"qas\": [{\"id\": \"a\", "
                              "\"question\": \"q\", \"answers\": [], \"is_impossible\": \"yes\"}]}]}]}";
    pl_squad_set s;
    CHECK_OK(pl_squad_parse(&s, v2, sizeof v2 - 1, "v2.json"));
    CHECK(s.n_q == 2 && s.n_impossible == 1 && !s.q[0].impossible && s.q[1].impossible && s.q[0].n_answers == 1 &&
              s.q[1].n_answers == 0,
          "questions %lld impossible %lld", (long long)s.n_q, (long long)s.n_impossible);
    pl_squad_set_free(&s);
    CHECK(pl_squad_parse(&s, bad, sizeof bad - 1, "bad.json") == PL_ERR_FORMAT &&
              strstr(pl_error_msg(), "bad.json") && strstr(pl_error_msg(), "is_impossible"),
          "%s", pl_error_msg());
}

TEST(squad_em_f1_follow_the_official_definitions)
{
    int em;
    double f1;
    CHECK_OK(pl_squad_em_f1("The  Denver Broncos!", "denver broncos", &em, &f1));
    CHECK(em == 1 && f1 == 1.0, "em %d f1 %g", em, f1);
    CHECK_OK(pl_squad_em_f1("Broncos", "Denver Broncos", &em, &f1));
    CHECK(em == 0 && fabs(f1 - 2.0 / 3) < 1e-15, "f1 %.17g", f1); /* P 1, R 1/2 */
    CHECK_OK(pl_squad_em_f1("cat cat cat", "cat dog", &em, &f1));
    CHECK(fabs(f1 - 0.4) < 1e-15, "Counter overlap: P 1/3 R 1/2 -> %.17g", f1);
    CHECK_OK(pl_squad_em_f1("the", "a", &em, &f1));
    CHECK(em == 1 && f1 == 0.0, "both empty after normalization: EM 1, F1 0 (em %d f1 %g)", em, f1);
    pl_bytes b = {0};
    CHECK_OK(pl_squad_normalize("\xe2\x80\x9cThe\xe2\x80\x9d Theatre", strlen("\xe2\x80\x9cThe\xe2\x80\x9d Theatre"), &b));
    CHECK(strcmp(b.data, "\xe2\x80\x9c \xe2\x80\x9d theatre") == 0, "curly quotes stay, 'the' between them goes: '%s'",
          b.data);
    pl_bytes_free(&b);
}

TEST(parsers_fail_cleanly_on_every_allocation)
{
    static const char tsv[] = "text\tlabel\na b\tx\nc\ty\n";
    static const char conll[] = "-DOCSTART- O\n\nEU B-ORG\nsays O\n\nok O\n";
    char tp[1024], lp[1024];
    snprintf(tp, sizeof tp, "%s", tmp_file("nemo_text.txt", "EU rejects\nPeter Blackburn\n"));
    snprintf(lp, sizeof lp, "%s", tmp_file("nemo_labels.txt", "B-ORG O\nB-PER I-PER\n"));
    int64_t live0 = pl_alloc_live();
    for (int which = 0; which < 4; which++) {
        for (int n = 0; n < 500; n++) {
            pl_textcls_set a;
            pl_conll_set b;
            pl_squad_set c;
            pl_textcls_spec ts = pl_textcls_spec_default();
            ts.header = 1;
            pl_conll_spec cs = pl_conll_spec_default();
            pl_alloc_fail_after(n);
            pl_status st = which == 0   ? pl_textcls_parse(&a, tsv, sizeof tsv - 1, "t", &ts)
                           : which == 1 ? pl_conll_parse(&b, conll, sizeof conll - 1, "c", &cs)
                           : which == 2 ? pl_squad_parse(&c, squad_json, sizeof squad_json - 1, "s")
                                        : pl_conll_read_nemo(&b, tp, lp);
            pl_alloc_fail_after(-1);
            if (st == PL_OK) {
                if (which == 0)
                    pl_textcls_set_free(&a);
                else if (which == 1 || which == 3)
                    pl_conll_set_free(&b);
                else
                    pl_squad_set_free(&c);
            }
            CHECK(pl_alloc_live() == live0, "parser %d n=%d: %lld blocks leaked", which, n,
                  (long long)(pl_alloc_live() - live0));
            if (st == PL_OK)
                break;
            CHECK(st == PL_ERR_NOMEM, "parser %d n=%d: %s: %s", which, n, pl_status_str(st), pl_error_msg());
            if (st != PL_ERR_NOMEM)
                break;
        }
    }
}

int main(void)
{
    RUN(labels_are_sorted_distinct_with_optional_first_and_round_trip);
    RUN(tsv_reads_chosen_columns_skips_header_and_names_bad_lines);
    RUN(jsonl_reads_text_pairs_and_integer_labels_and_names_bad_lines);
    RUN(pair_encoding_truncates_longer_segment_first_then_pads);
    RUN(encode_set_maps_labels_and_names_unknown_label);
    RUN(classification_metrics_match_sklearn_documented_example_and_report);
    RUN(regression_targets_parse_and_metrics_match_sklearn_docstring);
    RUN(seqeval_entities_match_its_docstrings_and_conlleval_rules);
    RUN(conll_reads_sentences_skips_docstart_and_names_bad_lines);
    RUN(nemo_text_and_labels_files_read_as_sentences);
    RUN(token_labels_go_on_first_subtoken_and_long_sentences_split);
    RUN(squad_windows_stride_and_answer_positions);
    RUN(squad_decoding_returns_original_text_of_best_span_over_windows);
    RUN(squad_nbest_is_ranked_distinct_softmaxed_and_fails_cleanly);
    RUN(squad_v2_is_impossible_is_read_and_a_bad_flag_named);
    RUN(squad_em_f1_follow_the_official_definitions);
    RUN(parsers_fail_cleanly_on_every_allocation);
    return test_summary("finetune");
}
