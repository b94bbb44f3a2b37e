/* plait finetune's run (train/finetune.h): the trainer's set-up and step
 * (trainer_internal.h) with the task's head and rows instead of pretraining
 * data; evaluation every --eval-interval iterations and at each epoch's end on
 * the validation rows, and once on the test rows at the end
 * (train/finetune_eval.c). */
#include "train/finetune_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "ckpt/tools.h"

#include <errno.h>
#include <string.h>

/* DIR/evaluations.md opened for appending by rank 0, with its header when new. */
static pl_status open_table(pl_trainer *t, pl_train_ft *ft)
{
    if (!pl_train_is_root(t))
        return PL_OK;
    pl_status st = pl_mkdirs(ft->dir);
    if (st)
        return pl_error_wrap(st, "--results-dir %s", ft->dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/evaluations.md", ft->dir);
    ft->table = fopen(path, "a");
    if (!ft->table)
        return pl_errorf(PL_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    if (ftell(ft->table) == 0 && ft->task == PL_TASK_REGRESSION)
        fprintf(ft->table, "| iteration | epoch | split | loss | RMSE | MAE | Pearson | Spearman "
                           "| examples |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
    else if (ftell(ft->table) == 0)
        fprintf(ft->table, "| iteration | epoch | split | loss | %s | %s | %s |\n"
                           "|---:|---:|---|---:|---:|---:|---:|\n",
                ft->task == PL_TASK_SPAN ? "exact match" : "accuracy", ft->task == PL_TASK_TOKEN ? "entity F1" : ft->task == PL_TASK_SPAN ? "F1" : "macro-F1",
                ft->task == PL_TASK_TOKEN ? "words" : ft->task == PL_TASK_SPAN ? "questions" : "examples");
    return PL_OK;
}

/* The weights the run starts from: a fine-tuning checkpoint in --load (resumed),
 * else the pretrained ones (--pretrained-checkpoint, or --load with --finetune),
 * else --seed's. */
static pl_status starting_weights(pl_trainer *t)
{
    const pl_train_args *a = t->a;
    const char *pre = t->ft->fa->pretrained_checkpoint;
    if (t->ft->fa->evaluate_only) { /* the fine-tuned model itself (implied --finetune) */
        char dir[4096];
        int64_t it;
        pl_status st = pl_ckpt_resolve(a->load, -1, dir, sizeof dir, &it);
        if (!st && it == -1)
            st = pl_errorf(PL_ERR_ARG, "--load %s: no checkpoint to evaluate", a->load);
        if (!st)
            st = pl_train_load(t);
        t->iteration = it > 0 ? it : 0; /* the reports name the checkpoint's iteration */
        return st;
    }
    if (a->load && a->finetune)
        return pl_ft_load_pretrained(t, a->load);
    if (a->load) {
        char dir[4096];
        int64_t it;
        pl_status st = pl_ckpt_resolve(a->load, -1, dir, sizeof dir, &it);
        if (st)
            return st;
        if (it >= 0)
            return pl_train_load(t);
    }
    if (pre)
        return pl_ft_load_pretrained(t, pre);
    if (pl_train_is_root(t))
        pl_log_warn("no --pretrained-checkpoint: the whole model starts from --seed %lld",
                    (long long)a->seed);
    return PL_OK;
}

static pl_status setup(pl_trainer *t, pl_train_ft *ft, pl_train_args *a)
{
    pl_status st = PL_OK;
    PL_TRY(pl_train_setup_grid(t));
    PL_TRY(pl_ft_data_read(ft, pl_train_is_root(t)));
    const int64_t n_train = ft->split[PL_SPLIT_TRAIN].n;
    ft->iters_per_epoch = ft->fa->evaluate_only ? 1 : n_train / t->gbs;
    if (ft->iters_per_epoch < 1)
        return pl_errorf(PL_ERR_ARG, "--train-data %s: %lld examples, fewer than one global "
                         "batch (%lld)", ft->fa->train_data, (long long)n_train,
                         (long long)t->gbs);
    if (ft->fa->epochs > 0)
        a->train_iters = ft->fa->epochs * ft->iters_per_epoch;
    t->train_iters = ft->fa->evaluate_only ? 0 : a->train_iters;
    t->train_samples = t->train_iters * t->gbs;
    PL_TRY(pl_train_setup_model(t));
    PL_TRY(pl_ft_data_encode(ft, t->tok, t->cfg.seq_length, t->mbs));
    if (pl_train_is_root(t))
        for (int s = 0; s < PL_FT_SPLITS; s++)
            if (ft->split[s].n_truncated)
                pl_log_info("%s: %lld of %lld examples truncated to --seq-length %lld",
                            ft->split[s].path, (long long)ft->split[s].n_truncated,
                            (long long)ft->split[s].n, (long long)t->cfg.seq_length);
    PL_TRY(pl_train_optimizer_init(t));
    PL_TRY(pl_train_setup_schedule(t));
    PL_TRY(starting_weights(t));
    PL_TRY(pl_ft_topk_init(t));
    PL_TRY(open_table(t, ft));
    if (pl_train_is_root(t) && !ft->fa->evaluate_only) {
        for (int k = 0; k < 2; k++) { /* the ids of the classes (target scale), for evaluate */
            const char *d = k ? a->save : ft->dir;
            if (!d || (k && ft->dir == a->save))
                continue;
            PL_TRY(pl_mkdirs(d));
            PL_TRY(pl_ft_task_files_write(ft, d));
        }
    }
    PL_TRY(pl_train_open_metrics(t));
    PL_TRY(pl_train_tb_open(t));
    if (pl_train_is_root(t) && !ft->fa->evaluate_only) {
        pl_train_print_banner(t);
        pl_train_print_memory_plan(t);
        pl_log_info("fine-tuning %s: %lld iterations (%lld per epoch of %lld examples, global "
                    "batch %lld), head dropout %g", ft->fa->task, (long long)t->train_iters,
                    (long long)ft->iters_per_epoch, (long long)n_train, (long long)t->gbs,
                    (double)t->model.cfg.head_dropout);
    }
fail:
    return st;
}

static pl_status loop(pl_trainer *t, pl_train_ft *ft)
{
    const pl_train_args *a = t->a;
    pl_status st = PL_OK;
    pl_sampler sampler;
    const int valid = ft->split[PL_SPLIT_VALID].path != NULL;
    int64_t last_eval = -1, last_saved = -1, window = 0;
    pl_ft_eval e;
    if (t->iteration < t->train_iters)
        PL_TRY(pl_sampler_init(&sampler, t->train_samples, t->consumed_train, t->mbs,
                               t->grid.dp_rank, t->dp));
    double t_window = pl_time_now();
    while (!ft->fa->evaluate_only && t->iteration < t->train_iters) {
        step_result r = {0};
        double t0 = pl_time_now();
        PL_TRY(pl_train_step(t, &sampler, &r));
        pl_train_progress_step(t, &r, pl_time_now() - t0);
        window++;
        PL_TRY(pl_train_tb_iteration(t, &r));
        if (t->iteration % a->log_interval == 0 || t->iteration == t->train_iters) {
            double now = pl_time_now();
            PL_TRY(pl_train_log_iteration(t, &r, (now - t_window) * 1e3, window));
            PL_TRY(pl_train_tb_window(t, (now - t_window) / (double)window));
            window = 0;
            t_window = now;
        }
        const int64_t epoch = (t->iteration - 1) / ft->iters_per_epoch; /* 0-based, as NeMo */
        const int epoch_end = ft->fa->epochs > 0 && t->iteration % ft->iters_per_epoch == 0;
        /* evaluations and saves are not training time: the window's start moves past them */
        const double t_aside = pl_time_now();
        int save = a->save && pl_train_args_given(a, "--save-interval") &&
                   t->iteration % a->save_interval == 0;
        if (valid && (t->iteration % a->eval_interval == 0 || epoch_end)) {
            PL_TRY(pl_ft_evaluate(t, PL_SPLIT_VALID, epoch, &e));
            PL_TRY(pl_train_tb_eval(t, e.loss));
            PL_TRY(pl_ft_topk_update(t, epoch, &e));
            last_eval = t->iteration;
            save |= ft->fa->save_top_k > 0; /* NeMo's save_last: the latest beside the best */
        }
        const int stop = pl_train_args_given(a, "--exit-interval") &&
                         t->iteration % a->exit_interval == 0;
        if (a->save && (save || stop)) {
            PL_TRY(pl_train_save(t));
            last_saved = t->iteration;
        }
        t_window += pl_time_now() - t_aside;
        if (stop)
            return PL_OK; /* Megatron's --exit-interval: saved, no final evaluations */
    }
    PL_TRY(pl_train_log_peak_memory(t));
    const int64_t epoch = t->iteration > 0 && !ft->fa->evaluate_only
                              ? (t->iteration - 1) / ft->iters_per_epoch : 0;
    if (valid && last_eval != t->iteration) {
        PL_TRY(pl_ft_evaluate(t, PL_SPLIT_VALID, epoch, &e));
        PL_TRY(pl_ft_topk_update(t, epoch, &e));
    }
    if (a->save && last_saved != t->iteration && !ft->fa->evaluate_only)
        PL_TRY(pl_train_save(t));
    if (ft->split[PL_SPLIT_TEST].path)
        PL_TRY(pl_ft_evaluate(t, PL_SPLIT_TEST, epoch, &e));
    PL_TRY(pl_train_tb_close(t));
fail:
    return st;
}

pl_status pl_ft_run(const pl_ft_args *fa, pl_train_args *a, pl_dist *dist)
{
    pl_trainer t;
    pl_train_ft ft;
    memset(&t, 0, sizeof t);
    memset(&ft, 0, sizeof ft);
    t.a = a;
    t.dist = *dist;
    t.ft = &ft;
    ft.fa = fa;
    ft.dir = fa->results_dir ? fa->results_dir : a->save;
    ft.load_dir = a->load;
    pl_status st = setup(&t, &ft, a);
    if (!st)
        st = loop(&t, &ft);
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", pl_error_msg());
    const int echo = pl_error_echo_of();
    if (ft.table)
        fclose(ft.table);
    pl_free(ft.best);
    pl_ft_data_free(&ft);
    pl_train_free(&t);
    if (st)
        pl_error_echo(st, echo, "%s", keep);
    return st;
}
