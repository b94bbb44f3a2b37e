/* The GPT data pipeline on cases small enough to check by hand: --split,
 * samples per split, the epoch and 0.80 rules, sample boundaries across
 * documents, the DP sampler and resume, blending, caches, errors, and
 * allocation failures. The element-for-element comparison against numpy
 * lives in tests/scripts/gpt_index_vs_numpy.sh. */
#include "base/alloc.h"
#include "base/fileio.h"
#include "base/md5.h"
#include "data/blended.h"
#include "data/gpt_dataset.h"
#include "data/indexed.h"
#include "data/sampler.h"
#include "test.h"

#include <unistd.h>

#define N_OF(a) (sizeof(a) / sizeof *(a))

/* Writes PREFIX with one sequence per document; document d, token k = 100 d + k. */
static void write_corpus(const char *prefix, const int *lengths, int n)
{
    pl_indexed_builder *b = NULL;
    CHECK_OK(pl_indexed_builder_open(&b, prefix, PL_DT_INT32));
    for (int d = 0; d < n && b; d++) {
        int32_t tok[4096];
        for (int k = 0; k < lengths[d]; k++)
            tok[k] = 100 * d + k;
        CHECK_OK(pl_indexed_builder_add_item(b, tok, lengths[d]));
        CHECK_OK(pl_indexed_builder_end_document(b));
    }
    if (b)
        CHECK_OK(pl_indexed_builder_finish(b));
}

static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/gptds_%s", test_tmpdir(), name);
}

static void rm_rf(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
}

TEST(split_examples_from_the_fact_sheet)
{
    struct {
        const char *split;
        int64_t n;
        int64_t want[3][2]; /* -1: absent */
    } cases[] = {
        {"900,50,50", 1000, {{0, 900}, {900, 950}, {950, 1000}}},
        {"969, 30, 1", 1000, {{0, 969}, {969, 999}, {999, 1000}}},
        {"98,2,0", 1000, {{0, 980}, {980, 1000}, {-1, -1}}},
        {"98/2/0", 1000, {{0, 980}, {980, 1000}, {-1, -1}}},
        {"1", 37, {{0, 37}, {-1, -1}, {-1, -1}}},
        {"0,50,50", 10, {{-1, -1}, {0, 5}, {5, 10}}},
        /* Python's round: 2.5 -> 2 and 7.5 -> 8 (ties to even). */
        {"25,50,25", 10, {{0, 2}, {2, 8}, {8, 10}}},
    };
    for (size_t c = 0; c < N_OF(cases); c++) {
        pl_split_matrix m;
        CHECK_OK(pl_split_parse(cases[c].split, &m));
        for (int s = 0; s < 3; s++) {
            if (cases[c].want[s][0] < 0) {
                CHECK(!m.present[s], "'%s' split %d should be absent", cases[c].split, s);
                continue;
            }
            int64_t beg, end;
            pl_split_range(&m, (pl_split)s, cases[c].n, &beg, &end);
            CHECK(m.present[s] && beg == cases[c].want[s][0] && end == cases[c].want[s][1],
                  "'%s' over %lld, split %d: [%lld, %lld)", cases[c].split, (long long)cases[c].n,
                  s, (long long)beg, (long long)end);
        }
    }
}

TEST(bad_split_strings_name_the_flag)
{
    const char *bad[] = {"", "a,b", "1,2,3,4", "0,0,0", "-1,2", "1.2.3", "90;10"};
    for (size_t c = 0; c < N_OF(bad); c++) {
        pl_split_matrix m;
        pl_status st = pl_split_parse(bad[c], &m);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--split"), "'%s': %d %s", bad[c], st,
              pl_error_msg());
    }
}

TEST(samples_per_split_follow_training_py)
{
    int64_t n[3];
    pl_sample_request r = {100, 0, 8, 50, 2};
    CHECK_OK(pl_gpt_num_samples(&r, n));
    /* train 100 x 8; valid (100 // 50 + 1) x 2 x 8; test 2 x 8 */
    CHECK(n[0] == 800 && n[1] == 48 && n[2] == 16, "%lld %lld %lld", (long long)n[0],
          (long long)n[1], (long long)n[2]);
    pl_sample_request by_samples = {0, 1000, 8, 50, 2}; /* train_iters = 1000 // 8 = 125 */
    CHECK_OK(pl_gpt_num_samples(&by_samples, n));
    CHECK(n[0] == 1000 && n[1] == 48 && n[2] == 16, "%lld %lld %lld", (long long)n[0],
          (long long)n[1], (long long)n[2]);
    struct {
        pl_sample_request r;
        const char *needle;
    } bad[] = {
        {{10, 0, 0, 50, 2}, "--global-batch-size"},
        {{0, 0, 8, 50, 2}, "request no training samples"},
        {{10, 100, 8, 50, 2}, "exclusive"},
        {{10, 0, 8, 0, 2}, "--eval-interval"},
        {{10, 0, 8, 5, -1}, "--eval-iters"},
    };
    for (size_t c = 0; c < N_OF(bad); c++) {
        pl_status st = pl_gpt_num_samples(&bad[c].r, n);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), bad[c].needle), "case %zu: %s", c,
              pl_error_msg());
    }
}

TEST(epochs_cover_n_times_s_plus_one_tokens)
{
    /* T = 100, S = 10: 9 samples need 91 tokens (1 epoch), 10 need 101 (2). */
    CHECK(pl_gpt_num_epochs(100, 9, 10, 1) == 1, "9 samples");
    CHECK(pl_gpt_num_epochs(100, 10, 10, 1) == 2, "10 samples");
    CHECK(pl_gpt_num_epochs(100, 0, 10, 1) == 1, "0 samples still build one epoch");
    CHECK(pl_gpt_num_epochs(100, -1, 10, 1) == 1, "None: one epoch");
    CHECK(pl_gpt_num_epochs(100, 1000, 10, 1) == 101, "1000 samples need 10001 tokens");
}

TEST(final_epoch_is_separate_below_080_of_an_epoch)
{
    /* T = 1001, S = 10: per epoch (1001 - 1) // 10 = 100, line int(0.8 * 100) = 80;
     * two epochs, n_sans = (1001 - 1) // 10 = 100. */
    int64_t sans;
    CHECK(pl_gpt_num_epochs(1001, 179, 10, 1) == 2 && pl_gpt_num_epochs(1001, 180, 10, 1) == 2,
          "both need two epochs");
    CHECK(pl_gpt_separate_final_epoch(1001, 2, 179, 10, 1, &sans) == 1 && sans == 100,
          "79 samples from the last epoch < 80: separate (sans %lld)", (long long)sans);
    CHECK(pl_gpt_separate_final_epoch(1001, 2, 180, 10, 1, &sans) == 0,
          "80 samples from the last epoch: not separate");
    CHECK(pl_gpt_separate_final_epoch(1001, 1, 50, 10, 1, &sans) == 0 && sans == 0,
          "one epoch is never separate");
}

/* A dataset over an unshuffled document index, to read windows by hand. */
TEST(samples_cross_documents_and_overlap_by_one_token)
{
    char prefix[512];
    tmp_path(prefix, sizeof prefix, "hand");
    int lengths[] = {5, 0, 3, 7};
    write_corpus(prefix, lengths, 4);
    pl_indexed low;
    CHECK_OK(pl_indexed_open(&low, prefix));
    pl_gpt_dataset g;
    memset(&g, 0, sizeof g);
    g.low = &low;
    g.seq_length = 4;
    g.x = 1;
    g.path = prefix;
    CHECK_OK(pl_npy_alloc(&g.document_index, PL_NPY_I32, 1, 4, 1));
    for (int i = 0; i < 4; i++)
        ((int32_t *)g.document_index.owned)[i] = i;
    /* T = 15 tokens: (15 - 1) // 4 = 3 samples of 5 tokens. */
    CHECK_OK(pl_gpt_build_sample_index(low.h.lengths, &g.document_index, 4, 1, 15, 1, 1,
                                       &g.sample_index));
    int64_t want[4][2] = {{0, 0}, {0, 4}, {3, 0}, {3, 4}};
    CHECK(g.sample_index.shape[0] == 4 && g.sample_index.dtype == PL_NPY_I32, "rows %lld",
          (long long)g.sample_index.shape[0]);
    for (int r = 0; r < 4 && g.sample_index.shape[0] == 4; r++)
        CHECK(pl_npy_get(&g.sample_index, 2 * r) == want[r][0] &&
                  pl_npy_get(&g.sample_index, 2 * r + 1) == want[r][1],
              "row %d: (%lld, %lld)", r, (long long)pl_npy_get(&g.sample_index, 2 * r),
              (long long)pl_npy_get(&g.sample_index, 2 * r + 1));
    CHECK_OK(pl_npy_alloc(&g.shuffle_index, PL_NPY_U32, 1, 3, 1));
    for (int i = 0; i < 3; i++)
        ((uint32_t *)g.shuffle_index.owned)[i] = (uint32_t)i;
    int32_t want_tok[3][5] = {{0, 1, 2, 3, 4}, {4, 200, 201, 202, 300}, {300, 301, 302, 303, 304}};
    for (int s = 0; s < 3; s++) {
        int32_t tok[5];
        int64_t n_real = 0;
        CHECK_OK(pl_gpt_dataset_get(&g, s, tok, &n_real));
        CHECK(n_real == 5 && memcmp(tok, want_tok[s], sizeof tok) == 0,
              "sample %d: %d %d %d %d %d", s, tok[0], tok[1], tok[2], tok[3], tok[4]);
    }
    pl_status st = pl_gpt_dataset_get(&g, 3, (int32_t[5]){0}, NULL);
    CHECK(st == PL_ERR_ARG, "sample 3 is out of range");
    /* A kept partial sample (drop_last false): ceil((15 - 1) / 4) = 4 samples,
     * the last one ending at the end of the data. */
    pl_npy partial = {0};
    CHECK_OK(pl_gpt_build_sample_index(low.h.lengths, &g.document_index, 4, 1, 15, 0, 1, &partial));
    CHECK(partial.shape[0] == 5 && pl_npy_get(&partial, 8) == 3 && pl_npy_get(&partial, 9) == 6,
          "partial: %lld rows, last (%lld, %lld)", (long long)partial.shape[0],
          (long long)pl_npy_get(&partial, 8), (long long)pl_npy_get(&partial, 9));
    pl_npy_free(&partial);
    pl_npy_free(&g.document_index);
    pl_npy_free(&g.sample_index);
    pl_npy_free(&g.shuffle_index);
    pl_indexed_close(&low);
}

TEST(sampler_gives_each_rank_its_slice_and_drops_the_last_chunk)
{
    /* 23 samples, micro batch 2, 3 ranks: chunks [0,6) [6,12) [12,18); 18..22 dropped. */
    int64_t want[3][3][2] = {{{0, 1}, {6, 7}, {12, 13}},
                             {{2, 3}, {8, 9}, {14, 15}},
                             {{4, 5}, {10, 11}, {16, 17}}};
    for (int r = 0; r < 3; r++) {
        pl_sampler s;
        CHECK_OK(pl_sampler_init(&s, 23, 0, 2, r, 3));
        int64_t idx[2];
        int k = 0;
        while (pl_sampler_next(&s, idx)) {
            CHECK(k < 3 && idx[0] == want[r][k][0] && idx[1] == want[r][k][1],
                  "rank %d batch %d: %lld %lld", r, k, (long long)idx[0], (long long)idx[1]);
            k++;
        }
        CHECK(k == 3 && pl_sampler_consumed(&s) == 18, "rank %d: %d batches, consumed %lld", r, k,
              (long long)pl_sampler_consumed(&s));
    }
}

TEST(sampler_resumed_from_consumed_samples_continues_the_run)
{
    for (int64_t consumed = 0; consumed <= 60; consumed += 12) {
        for (int r = 0; r < 2; r++) {
            pl_sampler full, resumed;
            CHECK_OK(pl_sampler_init(&full, 101, 0, 3, r, 2));
            CHECK_OK(pl_sampler_init(&resumed, 101, consumed, 3, r, 2));
            int64_t a[3], b[3];
            while (pl_sampler_consumed(&full) < consumed)
                CHECK(pl_sampler_next(&full, a), "full run ended early");
            int more_a, more_b, steps = 0;
            do {
                more_a = pl_sampler_next(&full, a);
                more_b = pl_sampler_next(&resumed, b);
                CHECK(more_a == more_b && (!more_a || memcmp(a, b, sizeof a) == 0),
                      "consumed %lld rank %d step %d", (long long)consumed, r, steps);
                steps++;
            } while (more_a && more_b);
        }
    }
    pl_sampler s;
    CHECK(pl_sampler_init(&s, 10, 10, 1, 0, 1) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "--consumed-samples"),
          "%s", pl_error_msg());
    CHECK(pl_sampler_init(&s, 10, 0, 1, 2, 2) == PL_ERR_ARG, "rank 2 of 2");
    CHECK(pl_sampler_init(&s, 0, 0, 1, 0, 1) == PL_ERR_ARG, "empty dataset");
}

TEST(blending_picks_the_largest_deficit_first_wins)
{
    /* Worked by hand from helpers.cpp build_blending_indices (ties go to the
     * lowest dataset): see the error table in docs/gpt-sampling.md. */
    double w[3] = {0.5, 0.25, 0.25};
    int16_t di[8];
    int64_t si[8];
    CHECK_OK(pl_blend_indices(w, 3, 8, di, si));
    int16_t want_d[8] = {0, 1, 2, 0, 0, 1, 2, 0};
    int64_t want_s[8] = {0, 0, 0, 1, 2, 1, 1, 3};
    for (int i = 0; i < 8; i++)
        CHECK(di[i] == want_d[i] && si[i] == want_s[i], "sample %d: dataset %d sample %lld", i,
              di[i], (long long)si[i]);
    /* ceil(ceil(1000 * 0.25) * 1.005) = ceil(251.25) = 252; the target itself is 250. */
    CHECK(pl_blend_request(1000, 0.25, 0.005) == 252, "%lld",
          (long long)pl_blend_request(1000, 0.25, 0.005));
    CHECK(pl_blend_request(1000, 0.25, 0.0) == 250, "target");
    double n[2];
    pl_blend_normalize((double[]){30, 70}, 2, n);
    CHECK(n[0] == 0.3 && n[1] == 0.7, "%a %a", n[0], n[1]);
}

TEST(data_path_forms_and_errors)
{
    pl_blend_spec b;
    const char *one[] = {" corpus "};
    CHECK_OK(pl_blend_spec_parse(&b, one, 1));
    CHECK(b.n == 1 && !b.weights && strcmp(b.prefixes[0], "corpus") == 0, "stripped prefix");
    pl_blend_spec_free(&b);
    const char *pairs[] = {"0.3", "A", "0.7", "B"};
    CHECK_OK(pl_blend_spec_parse(&b, pairs, 4));
    CHECK(b.n == 2 && b.weights && b.weights[1] == 0.7 && strcmp(b.prefixes[1], "B") == 0, "pairs");
    pl_blend_spec_free(&b);
    const char *names[] = {"A", "B", "C", "D"};
    CHECK_OK(pl_blend_spec_parse(&b, names, 4));
    CHECK(b.n == 4 && !b.weights, "prefixes only");
    pl_blend_spec_free(&b);
    struct {
        const char *items[4];
        int n;
        const char *needle;
    } bad[] = {
        {{"0.3", "A", "0.7"}, 3, "must pair up"},
        {{"0.3", "A", "x", "B"}, 4, "'x' is not a weight"},
        {{"-1", "A", "1", "B"}, 4, "weight '-1' of A must be positive"},
        {{"0", "A", "1", "B"}, 4, "weight '0' of A must be positive"},
        {{NULL}, 0, "no dataset prefix"},
    };
    for (size_t c = 0; c < N_OF(bad); c++) {
        pl_status st = pl_blend_spec_parse(&b, bad[c].items, bad[c].n);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--data-path") &&
                  strstr(pl_error_msg(), bad[c].needle),
              "case %zu: %s", c, pl_error_msg());
    }
}

/* Two corpora for the end-to-end tests. */
static void corpora(char *a, char *b, size_t n)
{
    tmp_path(a, n, "corpus_a");
    tmp_path(b, n, "corpus_b");
    int la[60], lb[25];
    for (int i = 0; i < 60; i++)
        la[i] = (i * 37) % 23; /* 0..22, some empty */
    for (int i = 0; i < 25; i++)
        lb[i] = 1 + (i * 11) % 9;
    write_corpus(a, la, 60);
    write_corpus(b, lb, 25);
}

static pl_blend_config config(const char *cache_dir)
{
    pl_blend_config c;
    pl_gpt_dataset_config_defaults(&c.gpt);
    c.gpt.seq_length = 8;
    c.gpt.split = "80,10,10";
    pl_split_parse(c.gpt.split, &c.gpt.split_matrix);
    c.gpt.cache_dir = cache_dir;
    c.mid_level_dataset_surplus = 0.005;
    return c;
}

TEST(dataset_caches_under_megatron_names_and_reuses_them)
{
    char a[512], b[512], cache[512];
    corpora(a, b, sizeof a);
    tmp_path(cache, sizeof cache, "cache_reuse");
    rm_rf(cache);
    pl_blend_config cfg = config(cache);
    const char *items[] = {a};
    pl_blend_spec spec;
    CHECK_OK(pl_blend_spec_parse(&spec, items, 1));
    int64_t sizes[3] = {100, 10, 5};
    pl_blend_data d, again;
    CHECK_OK(pl_blend_build(&d, &spec, &cfg, sizes));
    CHECK(!d.blended && d.mid[0].built && d.mid[1].built && d.mid[2].built, "built");
    /* File names: md5 of the description, class, split, affix. */
    char hex[33], name[600];
    pl_md5_hex(d.mid[0].description, strlen(d.mid[0].description), hex);
    snprintf(name, sizeof name, "%s/%s-GPTDataset-train-shuffle_index.npy", cache, hex);
    CHECK(pl_file_exists(name), "%s", name);
    CHECK(strstr(d.mid[0].description, "\"class\": \"GPTDataset\"") &&
              strstr(d.mid[0].description, "\"num_samples\": 100,") &&
              strstr(d.mid[0].description, "\"split\": \"80,10,10\""),
          "%s", d.mid[0].description);
    CHECK(pl_blend_data_len(&d, PL_SPLIT_TRAIN) >= 100, "at least the requested samples");
    CHECK_OK(pl_blend_build(&again, &spec, &cfg, sizes));
    for (int s = 0; s < 3; s++) {
        CHECK(!again.mid[s].built, "split %d rebuilt", s);
        int64_t n = pl_npy_numel(&d.mid[s].shuffle_index);
        CHECK(n == pl_npy_numel(&again.mid[s].shuffle_index) &&
                  memcmp(d.mid[s].shuffle_index.data, again.mid[s].shuffle_index.data,
                         (size_t)n * 4) == 0,
              "split %d: cached shuffle index differs", s);
    }
    int32_t t1[9], t2[9];
    for (int64_t i = 0; i < pl_blend_data_len(&d, PL_SPLIT_TRAIN); i++) {
        CHECK_OK(pl_blend_data_get(&d, PL_SPLIT_TRAIN, i, t1, NULL, NULL, NULL));
        CHECK_OK(pl_blend_data_get(&again, PL_SPLIT_TRAIN, i, t2, NULL, NULL, NULL));
        CHECK(memcmp(t1, t2, sizeof t1) == 0, "sample %lld", (long long)i);
    }
    pl_blend_data_free(&again);
    /* A corrupt cache file is an error that names it. */
    char *shuffle = pl_strdup(d.mid[0].files[PL_GPT_SHUFFLE]);
    pl_blend_data_free(&d);
    CHECK(truncate(shuffle, 90) == 0, "truncate");
    pl_status st = pl_blend_build(&d, &spec, &cfg, sizes);
    CHECK(st == PL_ERR_FORMAT && strstr(pl_error_msg(), shuffle) &&
              strstr(pl_error_msg(), "delete it to rebuild"),
          "%s", pl_error_msg());
    pl_free(shuffle);
    pl_blend_spec_free(&spec);
}

TEST(blends_request_targets_plus_surplus_and_never_oversample)
{
    char a[512], b[512], cache[512];
    corpora(a, b, sizeof a);
    tmp_path(cache, sizeof cache, "cache_blend");
    rm_rf(cache);
    pl_blend_config cfg = config(cache);
    int64_t sizes[3] = {200, 20, 10};
    const char *weighted[] = {"3", a, "1", b};
    pl_blend_spec spec;
    CHECK_OK(pl_blend_spec_parse(&spec, weighted, 4));
    pl_blend_data d;
    CHECK_OK(pl_blend_build(&d, &spec, &cfg, sizes));
    /* targets ceil(200 * 0.75) = 150 and 50; requests ceil(150 * 1.005) = 151, ceil(50.25) = 51 */
    CHECK(d.blended && d.top[0].size == 200 && d.mid[0].num_samples == 151 &&
              d.mid[3].num_samples == 51,
          "size %lld requests %lld %lld", (long long)d.top[0].size,
          (long long)d.mid[0].num_samples, (long long)d.mid[3].num_samples);
    int64_t count[2] = {0, 0};
    for (int64_t i = 0; i < d.top[0].size; i++)
        count[pl_npy_get(&d.top[0].dataset_index, i)]++;
    CHECK(count[0] == 150 && count[1] == 50, "draws %lld %lld", (long long)count[0],
          (long long)count[1]);
    CHECK(d.top[0].built && d.top[0].files[0] && pl_file_exists(d.top[0].files[PL_BLEND_SAMPLE]),
          "blend cached with --data-cache-path");
    pl_blend_data_free(&d);
    pl_blend_spec_free(&spec);

    const char *plain[] = {a, b};
    CHECK_OK(pl_blend_spec_parse(&spec, plain, 2));
    CHECK_OK(pl_blend_build(&d, &spec, &cfg, sizes));
    /* No weights: one epoch each (num_samples None), size min(request, sum of lengths). */
    int64_t la = pl_gpt_dataset_len(&d.mid[0]), lb = pl_gpt_dataset_len(&d.mid[3]);
    CHECK(d.mid[0].num_samples < 0 && d.mid[0].num_epochs == 1, "one epoch");
    CHECK(d.top[0].size == (la + lb < 200 ? la + lb : 200), "size %lld of %lld + %lld",
          (long long)d.top[0].size, (long long)la, (long long)lb);
    pl_blend_data_free(&d);
    pl_blend_spec_free(&spec);
}

TEST(datasets_too_small_for_a_split_are_errors_naming_the_flag)
{
    char a[512], b[512], cache[512];
    corpora(a, b, sizeof a);
    tmp_path(cache, sizeof cache, "cache_small");
    pl_blend_config cfg = config(cache);
    cfg.gpt.split = "98,1.9,0.1"; /* test gets sequences [25, 25) of corpus b */
    CHECK_OK(pl_split_parse(cfg.gpt.split, &cfg.gpt.split_matrix));
    const char *items[] = {b};
    pl_blend_spec spec;
    CHECK_OK(pl_blend_spec_parse(&spec, items, 1));
    pl_blend_data d;
    pl_status st = pl_blend_build(&d, &spec, &cfg, (int64_t[3]){10, 2, 2});
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "--split") && strstr(pl_error_msg(), "test"),
          "%s", pl_error_msg());
    pl_blend_spec_free(&spec);
    const char *missing[] = {"/nonexistent/prefix"};
    CHECK_OK(pl_blend_spec_parse(&spec, missing, 1));
    st = pl_blend_build(&d, &spec, &cfg, (int64_t[3]){10, 2, 2});
    CHECK(st == PL_ERR_IO && strstr(pl_error_msg(), "--data-path '/nonexistent/prefix'"), "%s",
          pl_error_msg());
    pl_blend_spec_free(&spec);
}

/* Every allocation failure comes back as PL_ERR_NOMEM and leaks nothing, on
 * the build path (a fresh cache directory each time) and the reuse path. */
TEST(allocation_failures_are_reported_and_leak_nothing)
{
    char a[512], b[512], root[512], cache[600];
    corpora(a, b, sizeof a);
    tmp_path(root, sizeof root, "fault");
    rm_rf(root);
    const char *items[] = {"2", a, "1", b};
    int64_t sizes[3] = {60, 8, 4};
    for (int reuse = 0; reuse < 2; reuse++) {
        int64_t n = 0, live0 = pl_alloc_live();
        pl_status st;
        do {
            if (reuse)
                snprintf(cache, sizeof cache, "%s/reused", root);
            else
                snprintf(cache, sizeof cache, "%s/build_%lld", root, (long long)n);
            pl_blend_config cfg = config(cache);
            cfg.gpt.split = "1"; /* train only: fewer cache files, each one is fsync'd */
            pl_split_parse(cfg.gpt.split, &cfg.gpt.split_matrix);
            pl_blend_spec spec;
            pl_blend_data d;
            pl_alloc_fail_after(n);
            st = pl_blend_spec_parse(&spec, items, 4);
            if (st == PL_OK) {
                st = pl_blend_build(&d, &spec, &cfg, sizes);
                if (st == PL_OK)
                    pl_blend_data_free(&d);
                pl_blend_spec_free(&spec);
            }
            pl_alloc_fail_after(-1);
            CHECK(st == PL_OK || st == PL_ERR_NOMEM, "reuse %d, failure at %lld: %d %s", reuse,
                  (long long)n, st, pl_error_msg());
            CHECK(pl_alloc_live() == live0, "reuse %d, failure at %lld: %lld blocks leaked", reuse,
                  (long long)n, (long long)(pl_alloc_live() - live0));
            n++;
        } while (st != PL_OK && n < 10000);
        CHECK(st == PL_OK && n > 20, "reuse %d: succeeded after %lld failures", reuse, (long long)n);
        if (!reuse) {
            char keep[600];
            snprintf(keep, sizeof keep, "%s/reused", root);
            CHECK(rename(cache, keep) == 0, "keep the cache for the reuse pass");
        }
    }
    rm_rf(root);
}

int main(void)
{
    RUN(split_examples_from_the_fact_sheet);
    RUN(bad_split_strings_name_the_flag);
    RUN(samples_per_split_follow_training_py);
    RUN(epochs_cover_n_times_s_plus_one_tokens);
    RUN(final_epoch_is_separate_below_080_of_an_epoch);
    RUN(samples_cross_documents_and_overlap_by_one_token);
    RUN(sampler_gives_each_rank_its_slice_and_drops_the_last_chunk);
    RUN(sampler_resumed_from_consumed_samples_continues_the_run);
    RUN(blending_picks_the_largest_deficit_first_wins);
    RUN(data_path_forms_and_errors);
    RUN(dataset_caches_under_megatron_names_and_reuses_them);
    RUN(blends_request_targets_plus_surplus_and_never_oversample);
    RUN(datasets_too_small_for_a_split_are_errors_naming_the_flag);
    RUN(allocation_failures_are_reported_and_leak_nothing);
    return test_summary("gpt_dataset");
}
