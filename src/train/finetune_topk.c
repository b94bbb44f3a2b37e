/* plait finetune --save-top-k (train/finetune_internal.h): NeMo's ModelCheckpoint
 * with save_top_k, monitor and mode, over plait's checkpoint directories. Each kept
 * checkpoint is a whole plait save directory, SAVE/checkpoints/NAME/ (iter_NNNNNNN/ and
 * latest_checkpointed_iteration.txt), that --load, --pretrained-checkpoint and plait
 * ckpt take as they are; NAME carries the figure as NeMo's file names do:
 *   bert--val_loss=0.3500-epoch=0-step=50
 * A checkpoint is written to SAVE/checkpoints/.tmp-NAME and renamed to its name once
 * every rank has finished; the one it displaces is removed only after that. The list
 * is rebuilt from the names at start, so a resumed run ranks against what is on disk. */
#include "train/finetune_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double pick(const char *monitor, const pl_ft_eval *e)
{
    if (strcmp(monitor, "val_loss") == 0)
        return e->loss;
    if (strcmp(monitor, "val_f1") == 0)
        return e->f1;
    if (strcmp(monitor, "val_rmse") == 0)
        return e->reg.rmse;
    if (strcmp(monitor, "val_mae") == 0)
        return e->reg.mae;
    if (strcmp(monitor, "val_pearson") == 0)
        return e->reg.pearson;
    if (strcmp(monitor, "val_spearman") == 0)
        return e->reg.spearman;
    return e->accuracy; /* val_acc, val_em */
}

/* a better than b under the mode (NaN never better) */
static int better(const pl_train_ft *ft, double a, double b)
{
    return ft->maximize ? a > b : a < b;
}

/* Keeps ft->best sorted best first (ties: the earlier iteration first). */
static void insert(pl_train_ft *ft, const pl_ft_best *x)
{
    int64_t i = ft->n_best;
    while (i > 0 && (better(ft, x->value, ft->best[i - 1].value) ||
                     (x->value == ft->best[i - 1].value &&
                      x->iteration < ft->best[i - 1].iteration))) {
        ft->best[i] = ft->best[i - 1];
        i--;
    }
    ft->best[i] = *x;
    ft->n_best++;
}

/* Reads NAME back: bert--MONITOR=VALUE-epoch=E-step=S; 0 when it is not one. */
static int parse_name(const char *monitor, const char *name, pl_ft_best *out)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bert--%s=", monitor);
    const size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || strlen(name) >= sizeof out->name)
        return 0;
    char *end;
    const double v = strtod(name + n, &end);
    long long epoch, step;
    int used = 0;
    if (end == name + n || sscanf(end, "-epoch=%lld-step=%lld%n", &epoch, &step, &used) != 2 ||
        end[used] != 0 || !isfinite(v))
        return 0;
    out->value = v;
    out->iteration = step;
    memcpy(out->name, name, strlen(name) + 1); /* shorter than out->name: checked above */
    return 1;
}

pl_status pl_ft_topk_init(pl_trainer *t)
{
    pl_train_ft *ft = t->ft;
    const pl_ft_args *fa = ft->fa;
    ft->maximize = fa->monitor_mode ? strcmp(fa->monitor_mode, "max") == 0
                                    : strcmp(fa->monitor, "val_loss") != 0 &&
                                          strcmp(fa->monitor, "val_rmse") != 0 &&
                                          strcmp(fa->monitor, "val_mae") != 0;
    if (fa->save_top_k <= 0)
        return PL_OK;
    ft->best = pl_calloc((size_t)fa->save_top_k + 1, sizeof *ft->best);
    if (!ft->best)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints", t->a->save);
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? PL_OK
                               : pl_errorf(PL_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    struct dirent *e;
    pl_ft_best x;
    while ((e = readdir(d)) != NULL) /* more than K on disk: only the best K are ranked */
        if (parse_name(fa->monitor, e->d_name, &x)) {
            insert(ft, &x);
            if (ft->n_best > fa->save_top_k)
                ft->n_best = fa->save_top_k;
        }
    closedir(d);
    if (pl_train_is_root(t) && ft->n_best)
        pl_log_info("--save-top-k %lld: %lld checkpoint(s) already in %s, best %s = %g",
                    (long long)fa->save_top_k, (long long)ft->n_best, dir, fa->monitor,
                    ft->best[0].value);
    return PL_OK;
}

/* Rank 0's file work after the collective save (st: rank 0's status so far); its
 * status reaches every rank. */
static pl_status publish(pl_trainer *t, const char *tmp, const char *final, const char *evict,
                         pl_status st)
{
    if (pl_train_is_root(t) && !st) {
        if (pl_file_exists(final)) /* the same checkpoint (a resumed run): keep the first */
            st = pl_rmtree(tmp);
        else if (rename(tmp, final) != 0)
            st = pl_errorf(PL_ERR_IO, "renaming %s to %s: %s", tmp, final, strerror(errno));
        if (!st && evict)
            st = pl_rmtree(evict);
    }
    int32_t bad = st != PL_OK;
    pl_status cst = pl_comm_allreduce_i32(pl_grid_comm(&t->grid, PL_GRID_WORLD), &bad, 1,
                                          PL_COMM_MAX);
    if (!st && cst)
        st = cst;
    if (!st && bad)
        st = pl_error_echo(PL_ERR_IO, 0, "publishing the top-k checkpoint %s failed on rank 0",
                           final);
    return st;
}

pl_status pl_ft_topk_update(pl_trainer *t, int64_t epoch, const pl_ft_eval *e)
{
    pl_train_ft *ft = t->ft;
    const pl_ft_args *fa = ft->fa;
    if (fa->save_top_k <= 0)
        return PL_OK;
    const double v = pick(fa->monitor, e);
    const int full = ft->n_best >= fa->save_top_k;
    if (!isfinite(v) || (full && !better(ft, v, ft->best[ft->n_best - 1].value)))
        return PL_OK;
    for (int64_t i = 0; i < ft->n_best; i++)
        if (ft->best[i].iteration == t->iteration)
            return PL_OK; /* already kept (the final validation repeats the last one's) */
    pl_ft_best x = {v, t->iteration, ""};
    snprintf(x.name, sizeof x.name, "bert--%s=%.4f-epoch=%lld-step=%lld", fa->monitor, v,
             (long long)epoch, (long long)t->iteration);
    char tmp[4400], final[4400], evict[4400];
    snprintf(tmp, sizeof tmp, "%s/checkpoints/.tmp-%s", t->a->save, x.name);
    snprintf(final, sizeof final, "%s/checkpoints/%s", t->a->save, x.name);
    if (full)
        snprintf(evict, sizeof evict, "%s/checkpoints/%s", t->a->save,
                 ft->best[ft->n_best - 1].name);
    if (pl_train_is_root(t) && pl_file_exists(tmp))
        (void)pl_rmtree(tmp); /* a crash's leftover; if it stays, the save below says so */
    pl_status st = pl_train_save_to(t, tmp);
    if (st)
        return st;
    if (pl_train_is_root(t)) /* the label map (target scale), for plait evaluate */
        st = pl_ft_task_files_write(ft, tmp); /* publish tells every rank */
    if ((st = publish(t, tmp, final, full ? evict : NULL, st)))
        return st;
    if (full)
        ft->n_best--;
    insert(ft, &x);
    if (pl_train_is_root(t))
        pl_log_info(" top-%lld by %s (%s): %s%s%s", (long long)fa->save_top_k, fa->monitor,
                    ft->maximize ? "max" : "min", x.name, full ? "; removed " : "",
                    full ? strrchr(evict, '/') + 1 : "");
    return PL_OK;
}
