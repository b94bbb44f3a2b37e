/* MegaMolBART's training samples (src/data/mmb_dataset.h): the sample
 * layout, cuts, determinism, split paths and errors on small files written
 * here. RDKit's view of the molecules and the mask statistics are
 * tests/scripts/mmb_dataset.sh. */
#include "base/alloc.h"
#include "data/mmb_dataset.h"
#include "data/tokenizer/smiles.h"
#include "test.h"

enum { SEQ = 64 };

static const char *VOCAB[] = {"<PAD>", "?", "^",      "&",     "<MASK>", "<SEP>", "C",
                              "c",     "O", "N",      "1",     "2",      "3",     "(",
                              ")",     "=", "[C@@H]", "[C@H]", "Cl"};
enum { N_VOCAB = sizeof VOCAB / sizeof VOCAB[0] };

static void tmp_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/mmb_unit_%s", test_tmpdir(), name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static pl_tokenizer *open_vocab(void)
{
    char path[512];
    tmp_path(path, sizeof path, "v.vocab");
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < N_VOCAB; i++)
        fprintf(f, "%s\n", VOCAB[i]);
    if (f)
        fclose(f);
    pl_tokenizer *t = NULL;
    CHECK_OK(pl_smiles_tokenizer_open_ex(&t, path, -1));
    return t;
}

static int32_t id_of(const char *tok)
{
    for (int i = 0; i < N_VOCAB; i++)
        if (!strcmp(VOCAB[i], tok))
            return i;
    return -1;
}

/* Loads one CSV ("zinc_id,smiles" header) holding text. */
static pl_status load_csv(pl_mmb_molecules *m, const char *name, const char *text)
{
    char path[512];
    tmp_path(path, sizeof path, name);
    write_file(path, text);
    const char *paths[] = {path};
    return pl_mmb_molecules_load(m, paths, 1, 1, 1);
}

typedef struct bufs {
    int32_t enc[SEQ], dec[SEQ + 1], lab[SEQ + 1];
    pl_encdec_sample s;
} bufs;

static void bufs_init(bufs *b)
{
    b->s = (pl_encdec_sample){.enc_tokens = b->enc, .dec_tokens = b->dec, .labels = b->lab};
}

static pl_mmb_config plain_config(void)
{
    pl_mmb_config c;
    pl_mmb_config_default(&c);
    c.seq_length = SEQ;
    c.encoder_augment = c.encoder_mask = c.decoder_augment = c.decoder_mask = 0;
    return c;
}

TEST(defaults_are_megamolbart_v02_config)
{
    pl_mmb_config c;
    pl_mmb_config_default(&c);
    CHECK(c.seq_length == 512 && c.encoder_augment && c.encoder_mask && c.decoder_augment &&
              !c.decoder_mask && c.mask_prob == 0.1 && c.span_lambda == 3.0 && !c.map_unknown,
          "defaults differ from megamolbart_pretrain_base.yaml");
}

TEST(unaugmented_unmasked_sample_is_tokens_then_bos_eos_and_padding)
{
    pl_tokenizer *t = open_vocab();
    pl_mmb_molecules m;
    CHECK_OK(load_csv(&m, "plain.csv", "zinc_id,smiles\nz1,CC(=O)N\nz2,c1ccccc1Cl\n"));
    pl_mmb_config c = plain_config();
    pl_mmb_dataset *d = NULL;
    CHECK_OK(pl_mmb_dataset_init(&d, &c, t, &m));
    int64_t Te, Td;
    pl_mmb_dataset_dims(d, &Te, &Td);
    CHECK(Te == SEQ && Td == SEQ + 1, "dims %lld %lld", (long long)Te, (long long)Td);
    bufs b;
    bufs_init(&b);
    pl_mmb_sample_info info;
    CHECK_OK(pl_mmb_dataset_sample(d, 1, &b.s, &info));
    const char *want[] = {"c", "1", "c", "c", "c", "c", "c", "1", "Cl"};
    const int n = 9;
    CHECK(info.molecule == 1 && !strcmp(info.enc_smiles, "c1ccccc1Cl") &&
              !strcmp(info.dec_smiles, info.enc_smiles),
          "molecule %lld enc %s dec %s", (long long)info.molecule, info.enc_smiles,
          info.dec_smiles);
    CHECK(b.s.enc_length == n && b.s.dec_length == n + 1, "lengths %lld %lld",
          (long long)b.s.enc_length, (long long)b.s.dec_length);
    for (int i = 0; i < n; i++) {
        CHECK(b.enc[i] == id_of(want[i]), "enc[%d] = %d", i, b.enc[i]);
        CHECK(b.dec[i + 1] == id_of(want[i]) && b.lab[i] == id_of(want[i]), "dec/labels %d", i);
    }
    CHECK(b.dec[0] == PL_SMILES_BEGIN && b.lab[n] == PL_SMILES_END, "^ first, & last");
    for (int64_t i = n; i < SEQ; i++)
        CHECK(b.enc[i] == PL_SMILES_PAD, "enc pad %lld", (long long)i);
    for (int64_t i = n + 1; i < SEQ + 1; i++)
        CHECK(b.dec[i] == PL_SMILES_PAD && b.lab[i] == -1, "dec pad %lld", (long long)i);
    CHECK(m.line[0] == 2 && m.line[1] == 3 && m.n == 2, "lines %lld %lld", (long long)m.line[0],
          (long long)m.line[1]);
    pl_mmb_dataset_free(d);
    pl_mmb_molecules_free(&m);
    pl_tokenizer_free(t);
}

TEST(long_molecule_cut_to_seq_length_before_bos_eos)
{
    pl_tokenizer *t = open_vocab();
    pl_mmb_molecules m;
    CHECK_OK(load_csv(&m, "long.csv", "zinc_id,smiles\nz1,CCCCCCCCCCCC\n"));
    pl_mmb_config c = plain_config();
    c.seq_length = 5;
    pl_mmb_dataset *d = NULL;
    CHECK_OK(pl_mmb_dataset_init(&d, &c, t, &m));
    int32_t enc[5], dec[6], lab[6];
    pl_encdec_sample s = {.enc_tokens = enc, .dec_tokens = dec, .labels = lab};
    pl_mmb_sample_info info;
    CHECK_OK(pl_mmb_dataset_sample(d, 0, &s, &info));
    CHECK(s.enc_length == 5 && s.dec_length == 6 && info.enc_truncated && info.dec_truncated,
          "lengths %lld %lld", (long long)s.enc_length, (long long)s.dec_length);
    CHECK(dec[0] == PL_SMILES_BEGIN && lab[5] == PL_SMILES_END && lab[4] == id_of("C"),
          "MegaMolBART cuts the tokens, then adds ^ and &");
    pl_mmb_dataset_free(d);
    pl_mmb_molecules_free(&m);
    pl_tokenizer_free(t);
}

TEST(sample_depends_only_on_seed_and_index)
{
    pl_tokenizer *t = open_vocab();
    pl_mmb_molecules m;
    CHECK_OK(load_csv(&m, "det.csv",
                      "zinc_id,smiles\nz1,C[C@@H](O)CC(=O)N\nz2,c1ccc2ccccc2c1\nz3,OCC(Cl)N\n"));
    pl_mmb_config c;
    pl_mmb_config_default(&c);
    c.seq_length = SEQ;
    c.mask_prob = 0.3;
    pl_mmb_dataset *d1 = NULL, *d2 = NULL;
    CHECK_OK(pl_mmb_dataset_init(&d1, &c, t, &m));
    CHECK_OK(pl_mmb_dataset_init(&d2, &c, t, &m));
    bufs a, b;
    bufs_init(&a);
    bufs_init(&b);
    int differ_from_other_index = 0;
    for (int64_t i = 0; i < 30; i++) {
        CHECK_OK(pl_mmb_dataset_sample(d1, i, &a.s, NULL));
        /* d2 visits indices in another order first: no state carries over. */
        CHECK_OK(pl_mmb_dataset_sample(d2, 29 - i, &b.s, NULL));
        CHECK_OK(pl_mmb_dataset_sample(d2, i, &b.s, NULL));
        CHECK(!memcmp(&a.enc, &b.enc, sizeof a.enc) && !memcmp(&a.dec, &b.dec, sizeof a.dec) &&
                  !memcmp(&a.lab, &b.lab, sizeof a.lab) && a.s.enc_length == b.s.enc_length,
              "index %lld differs between datasets", (long long)i);
        if (i >= 3) { /* the same molecule three indices earlier */
            CHECK_OK(pl_mmb_dataset_sample(d2, i - 3, &b.s, NULL));
            differ_from_other_index += memcmp(&a.enc, &b.enc, sizeof a.enc) != 0;
        }
    }
    CHECK(differ_from_other_index > 20, "only %d of 27 re-visits augmented anew",
          differ_from_other_index);
    pl_mmb_dataset_free(d1);
    pl_mmb_dataset_free(d2);
    pl_mmb_molecules_free(&m);
    pl_tokenizer_free(t);
}

TEST(bad_smiles_and_unknown_token_name_file_and_line)
{
    pl_tokenizer *t = open_vocab();
    pl_mmb_molecules m;
    CHECK_OK(load_csv(&m, "bad.csv", "zinc_id,smiles\nz1,CCO\n\nz2,CC(C\nz3,CBr\n"));
    pl_mmb_config c = plain_config();
    pl_mmb_dataset *d = NULL;
    CHECK_OK(pl_mmb_dataset_init(&d, &c, t, &m));
    bufs b;
    bufs_init(&b);
    CHECK(pl_mmb_dataset_sample(d, 1, &b.s, NULL) == PL_ERR_FORMAT &&
              strstr(pl_error_msg(), "mmb_unit_bad.csv:4: SMILES"),
          "%s", pl_error_msg());
    CHECK(pl_mmb_dataset_validate(d) == PL_ERR_FORMAT &&
              strstr(pl_error_msg(), "mmb_unit_bad.csv:4: SMILES"),
          "%s", pl_error_msg());
    CHECK(pl_mmb_dataset_sample(d, 2, &b.s, NULL) == PL_ERR_FORMAT &&
              strstr(pl_error_msg(), "mmb_unit_bad.csv:5: token 'Br' of the encoder SMILES CBr"),
          "%s", pl_error_msg());
    pl_mmb_dataset_free(d);
    c.map_unknown = 1;
    CHECK_OK(pl_mmb_dataset_init(&d, &c, t, &m));
    pl_mmb_sample_info info;
    CHECK_OK(pl_mmb_dataset_sample(d, 2, &b.s, &info));
    CHECK(info.unknown == 2 && b.enc[1] == PL_SMILES_UNK, "unknown %lld, enc[1] %d",
          (long long)info.unknown, b.enc[1]);
    pl_mmb_dataset_free(d);
    pl_mmb_molecules_free(&m);
    CHECK(load_csv(&m, "nocol.csv", "zinc_id,smiles\nz1,CCO\nz2\n") == PL_ERR_FORMAT &&
              strstr(pl_error_msg(), "mmb_unit_nocol.csv:3"),
          "%s", pl_error_msg());
    pl_tokenizer_free(t);
}

TEST(config_ranges_and_tokenizer_checked)
{
    pl_tokenizer *t = open_vocab();
    pl_mmb_molecules m;
    CHECK_OK(load_csv(&m, "cfg.csv", "zinc_id,smiles\nz1,CCO\n"));
    pl_mmb_dataset *d = NULL;
    pl_mmb_config c = plain_config();
    c.mask_prob = 1.5;
    CHECK(pl_mmb_dataset_init(&d, &c, t, &m) == PL_ERR_ARG && strstr(pl_error_msg(), "mask_prob"),
          "%s", pl_error_msg());
    c = plain_config();
    c.span_lambda = 0;
    CHECK(pl_mmb_dataset_init(&d, &c, t, &m) == PL_ERR_ARG, "lambda 0 accepted");
    c = plain_config();
    c.seq_length = 0;
    CHECK(pl_mmb_dataset_init(&d, &c, t, &m) == PL_ERR_ARG, "seq_length 0 accepted");
    pl_tokenizer *bert = NULL;
    char vocab[512];
    tmp_path(vocab, sizeof vocab, "bert.txt");
    write_file(vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nc\n");
    CHECK_OK(pl_bert_tokenizer_open(&bert, vocab, 1));
    c = plain_config();
    CHECK(bert && pl_mmb_dataset_init(&d, &c, bert, &m) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "SmilesTokenizer"),
          "%s", pl_error_msg());
    pl_tokenizer_free(bert);
    pl_mmb_molecules empty = {0};
    c = plain_config();
    CHECK(pl_mmb_dataset_init(&d, &c, t, &empty) == PL_ERR_ARG, "no molecules accepted");
    CHECK(d == NULL, "dataset returned on error");
    pl_mmb_molecules_free(&m);
    pl_tokenizer_free(t);
}

TEST(split_paths_expand_megamolbart_ranges)
{
    char **p = NULL;
    int32_t n = 0;
    CHECK_OK(pl_mmb_split_paths("/data/zinc", "train", "x[008..011]", &p, &n));
    CHECK(n == 4 && !strcmp(p[0], "/data/zinc/train/x008.csv") &&
              !strcmp(p[3], "/data/zinc/train/x011.csv"),
          "n %d, %s", n, n ? p[0] : "");
    pl_mmb_paths_free(p, n);
    CHECK_OK(pl_mmb_split_paths("d", "val", "x000", &p, &n));
    CHECK(n == 1 && !strcmp(p[0], "d/val/x000.csv"), "%s", n ? p[0] : "");
    pl_mmb_paths_free(p, n);
    const char *bad[] = {"x[3..1]", "x[000..]", "x[0..2]y", "x[a..b]", "x[000..001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(pl_mmb_split_paths("d", "test", bad[i], &p, &n) == PL_ERR_ARG && p == NULL &&
                  strstr(pl_error_msg(), "dataset.test"),
              "'%s' accepted", bad[i]);
}

TEST(allocation_failures_come_back_clean)
{
    pl_tokenizer *t = open_vocab();
    char path[512];
    tmp_path(path, sizeof path, "alloc.csv");
    write_file(path, "zinc_id,smiles\nz1,C[C@@H](O)CC(=O)N\nz2,c1ccc2ccccc2c1\n");
    const char *paths[] = {path};
    pl_mmb_config c;
    pl_mmb_config_default(&c);
    c.seq_length = SEQ;
    c.decoder_mask = 1;
    int done = 0;
    for (int64_t k = 0; k < 400 && !done; k++) {
        int64_t live = pl_alloc_live();
        pl_mmb_molecules m = {0};
        pl_mmb_dataset *d = NULL;
        bufs b;
        bufs_init(&b);
        pl_alloc_fail_after(k);
        pl_status st = pl_mmb_molecules_load(&m, paths, 1, 1, 1);
        if (st == PL_OK)
            st = pl_mmb_dataset_init(&d, &c, t, &m);
        for (int64_t i = 0; i < 4 && st == PL_OK; i++)
            st = pl_mmb_dataset_sample(d, i, &b.s, NULL);
        pl_alloc_fail_after(-1);
        CHECK(st == PL_OK || st == PL_ERR_NOMEM, "k=%lld: status %d", (long long)k, (int)st);
        done = st == PL_OK;
        pl_mmb_dataset_free(d);
        pl_mmb_molecules_free(&m);
        CHECK(pl_alloc_live() == live, "k=%lld: %lld blocks leaked", (long long)k,
              (long long)(pl_alloc_live() - live));
    }
    CHECK(done, "never succeeded within 400 allocations");
    pl_tokenizer_free(t);
}

int main(void)
{
    RUN(defaults_are_megamolbart_v02_config);
    RUN(unaugmented_unmasked_sample_is_tokens_then_bos_eos_and_padding);
    RUN(long_molecule_cut_to_seq_length_before_bos_eos);
    RUN(sample_depends_only_on_seed_and_index);
    RUN(bad_smiles_and_unknown_token_name_file_and_line);
    RUN(config_ranges_and_tokenizer_checked);
    RUN(split_paths_expand_megamolbart_ranges);
    RUN(allocation_failures_come_back_clean);
    const char *files[] = {"v.vocab",   "plain.csv", "long.csv", "det.csv",  "bad.csv",
                           "nocol.csv", "cfg.csv",   "bert.txt", "alloc.csv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        tmp_path(path, sizeof path, files[i]);
        remove(path);
    }
    return test_summary("mmb_dataset");
}
