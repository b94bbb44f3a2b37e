/* Publishing a checkpoint so that the last good one is never lost.
 *
 * A save writes DIR/iter_N.tmp/ (every file fsynced by pl_wfile, every
 * directory fsynced), then, on rank 0:
 *   1. if DIR/iter_N exists (re-saving an iteration: Slurm's requeue with
 *      --load D --save D), rename it to DIR/iter_N.old and fsync DIR;
 *   2. rename iter_N.tmp to iter_N and fsync DIR;
 *   3. write latest_checkpointed_iteration.txt (temporary name, fsync, rename,
 *      fsync DIR);
 *   4. remove iter_N.old.
 * A crash at any point leaves a loadable checkpoint: before 1 the old iter_N;
 * between 1 and 2 iter_N.old, which loading uses when iter_N is missing
 * (ckpt/files.h) and the next save renames back; after 2 the new iter_N.
 *
 * At the start of every save, rank 0 cleans DIR of what killed saves leave:
 * iter_<digits>.tmp directories, latest_checkpointed_iteration.txt.tmp.<digits>
 * files, iter_<digits>.del directories (an interrupted removal, below), and
 * iter_<digits>.old when iter_<digits> exists (otherwise the .old copy is
 * renamed back). Nothing else in DIR is touched.
 *
 * Retention (--keep-last-n): an iteration is removed by renaming it to
 * iter_<digits>.del (fsync DIR), then removing that: a crash leaves either the
 * whole iteration or a .del that the next clean-up removes, never a partial
 * iteration under a loadable name.
 *
 * Test hook: PLAIT_TEST_CRASH_AT=<point> makes the process _exit(86) at that
 * point of the publication, so a test can stop a save at an exact moment.
 * Points: "ckpt-written" (iter_N.tmp complete, nothing published),
 * "ckpt-aside" (after step 1), "ckpt-renamed" (after 2), "ckpt-latest"
 * (after 3). It is always compiled in and does nothing unless set. */
#ifndef PL_CKPT_PUBLISH_H
#define PL_CKPT_PUBLISH_H

#include "base/status.h"

#include <stdint.h>

/* _exit(86) if PLAIT_TEST_CRASH_AT names point (a test hook). */
void pl_ckpt_crash_point(const char *point);

/* Creates dir if needed, then cleans and recovers as described above. */
pl_status pl_ckpt_prepare_dir(const char *dir);

/* Steps 1-4 for iteration it, whose files are complete in tmp (fsynced). */
pl_status pl_ckpt_publish(const char *dir, const char *tmp, int64_t it);

/* Keeps the newest `keep` (>= 1) published iterations of dir and the one
 * latest_checkpointed_iteration.txt names, and removes every other iter_<digits>
 * directory as described above; *removed counts them. */
pl_status pl_ckpt_keep_last(const char *dir, int64_t keep, int64_t *removed);

#endif
