/* plait finetune's command-line split and its shuffle (src/train/finetune*.c): which
 * flags are fine-tuning's and which plait train's, what fine-tuning implies, the
 * refusals; each epoch's rows a permutation keyed by (seed, epoch) alone. The runs
 * themselves (every task and layout) are tests/scripts/finetune.sh. */
#include "base/alloc.h"
#include "train/finetune_internal.h"
#include "test.h"

#include <string.h>

static int has(char **v, int n, const char *a, const char *b)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i], a) == 0 && (!b || (i + 1 < n && strcmp(v[i + 1], b) == 0)))
            return 1;
    return 0;
}

TEST(flags_split_between_finetune_and_train_with_what_finetuning_implies)
{
    char *argv[] = {"--task", "token_classification", "--train-data=a.conll", "--lr", "1e-3",
                    "--epochs", "2", "--num-layers", "2", "--header", "--save-top-k", "3"};
    const int argc = (int)(sizeof argv / sizeof *argv);
    pl_ft_args fa;
    char **rest;
    int n;
    CHECK_OK(pl_ft_args_parse(&fa, argc, argv, &rest, &n));
    CHECK(strcmp(fa.task, "token_classification") == 0 && strcmp(fa.train_data, "a.conll") == 0,
          "task %s data %s", fa.task, fa.train_data);
    CHECK(fa.epochs == 2 && fa.header == 1 && fa.save_top_k == 3, "epochs %lld header %d k %lld",
          (long long)fa.epochs, fa.header, (long long)fa.save_top_k);
    CHECK(strcmp(fa.monitor, "val_loss") == 0 && fa.doc_stride == 128 && fa.label_column == -1,
          "defaults: monitor %s stride %lld", fa.monitor, (long long)fa.doc_stride);
    CHECK(has(rest, n, "--lr", "1e-3") && has(rest, n, "--num-layers", "2"), "train flags kept");
    CHECK(!has(rest, n, "--task", NULL) && !has(rest, n, "--epochs", NULL) &&
              !has(rest, n, "--header", NULL),
          "fine-tuning flags not passed on");
    CHECK(has(rest, n, "--mock-data", NULL) && has(rest, n, "--model", "bert") &&
              has(rest, n, "--tokenizer-type", "BertWordPieceLowerCase") &&
              has(rest, n, "--train-iters", NULL),
          "implied flags");
    pl_free(rest);
    pl_ft_args_free(&fa);
    char *iters[] = {"--train-data", "t.tsv", "--train-iters", "5", "--model", "gpt"};
    CHECK_OK(pl_ft_args_parse(&fa, 6, iters, &rest, &n));
    CHECK(!has(rest, n, "--train-iters", "1000000000") && has(rest, n, "--train-iters", "5") &&
              !has(rest, n, "--model", "bert"),
          "the user's --train-iters and --model win");
    pl_free(rest);
    pl_ft_args_free(&fa);
}

TEST(refusals_name_the_flags)
{
    pl_ft_args fa;
    char **rest;
    int n;
    char *both[] = {"--train-data", "t.tsv", "--epochs", "1", "--train-iters", "5"};
    CHECK(pl_ft_args_parse(&fa, 6, both, &rest, &n) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "exactly one of --epochs"),
          "%s", pl_error_msg());
    char *neither[] = {"--train-data", "t.tsv"};
    CHECK(pl_ft_args_parse(&fa, 2, neither, &rest, &n) == PL_ERR_ARG, "neither");
    char *data[] = {"--train-data", "t.tsv", "--epochs", "1", "--data-path", "x"};
    CHECK(pl_ft_args_parse(&fa, 6, data, &rest, &n) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "--data-path"),
          "%s", pl_error_msg());
    char *task[] = {"--task", "summarization", "--epochs", "1"};
    CHECK(pl_ft_args_parse(&fa, 4, task, &rest, &n) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "--task"),
          "%s", pl_error_msg());
    char *eval[] = {"--test-data", "t.tsv", "--epochs", "1", "--load", "x"};
    CHECK(pl_ft_args_parse_evaluate(&fa, 6, eval, &rest, &n) == PL_ERR_ARG &&
              strstr(pl_error_msg(), "not --train-data, --epochs"),
          "%s", pl_error_msg());
}

TEST(each_epoch_is_a_permutation_keyed_by_seed_and_epoch_only)
{
    enum { N = 23, GBS = 4, IPE = N / GBS, PER = IPE * GBS };
    pl_train_ft ft;
    memset(&ft, 0, sizeof ft);
    int64_t perm[N], first[3][PER];
    ft.perm = perm;
    ft.perm_epoch = -1;
    ft.iters_per_epoch = IPE;
    ft.split[PL_SPLIT_TRAIN].n = N;
    for (int e = 0; e < 3; e++) {
        int seen[N] = {0};
        for (int64_t i = 0; i < PER; i++) {
            first[e][i] = pl_ft_train_row(&ft, e * PER + i, GBS, 7);
            CHECK(first[e][i] >= 0 && first[e][i] < N && !seen[first[e][i]]++,
                  "epoch %d sample %lld: row %lld repeated or out of range", e, (long long)i,
                  (long long)first[e][i]);
        }
    }
    CHECK(memcmp(first[0], first[1], sizeof first[0]) != 0, "epochs 0 and 1 shuffled alike");
    /* any order of access (a resumed run, another DP rank) gives the same rows */
    for (int64_t i = 3 * PER - 1; i >= 0; i -= 5)
        CHECK(pl_ft_train_row(&ft, i, GBS, 7) == first[i / PER][i % PER], "sample %lld",
              (long long)i);
    CHECK(pl_ft_train_row(&ft, 0, GBS, 8) != first[0][0] ||
              pl_ft_train_row(&ft, 1, GBS, 8) != first[0][1] ||
              pl_ft_train_row(&ft, 2, GBS, 8) != first[0][2],
          "another seed, the same order");
}

int main(void)
{
    RUN(flags_split_between_finetune_and_train_with_what_finetuning_implies);
    RUN(refusals_name_the_flags);
    RUN(each_epoch_is_a_permutation_keyed_by_seed_and_epoch_only);
    return test_summary("finetune_cmd");
}
