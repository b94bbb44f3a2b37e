/* A writer of Python's pickle format, protocol 2, for the subset torch.save
 * uses for Megatron's checkpoints (the mirror of ckpt/pickle.h's reader):
 * None, bools, ints (any int64), floats, strings, tuples, dicts and
 * collections.OrderedDicts, an argparse.Namespace (NEWOBJ + BUILD of its
 * attribute dict, as Python pickles it), and tensors as torch saves them:
 *
 *   torch._utils._rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict())
 *
 * where storage is the persistent id ('storage', torch.FloatStorage |
 * torch.BFloat16Storage, key, 'cpu', numel) whose bytes the archive holds as
 * NAME/data/KEY (ckpt/torch_write.h). Nothing is memoised (no PUT/GET): every
 * value is written where it appears. Containers are written in bracketed
 * calls (begin, the items, end); the writer does not check that they nest,
 * the reader test does. Allocation failures are remembered and reported by
 * pl_pkw_finish, so the calls in between return nothing. */
#ifndef PL_CKPT_PICKLE_WRITE_H
#define PL_CKPT_PICKLE_WRITE_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pl_pkw {
    uint8_t *buf;
    size_t n, cap;
    int failed;
} pl_pkw;

/* Starts a pickle (PROTO 2). */
void pl_pkw_init(pl_pkw *w);
void pl_pkw_free(pl_pkw *w);

void pl_pkw_none(pl_pkw *w);
void pl_pkw_bool(pl_pkw *w, int v);
void pl_pkw_int(pl_pkw *w, int64_t v);
void pl_pkw_float(pl_pkw *w, double v);
void pl_pkw_str(pl_pkw *w, const char *s);

/* A tuple: begin, its items, end. */
void pl_pkw_tuple_begin(pl_pkw *w);
void pl_pkw_tuple_end(pl_pkw *w);
/* A dict (ordered: a collections.OrderedDict): begin, key, value, key, value, ..., end. */
void pl_pkw_dict_begin(pl_pkw *w, int ordered);
void pl_pkw_dict_end(pl_pkw *w);
/* An argparse.Namespace: begin, attribute name, value, ..., end. */
void pl_pkw_namespace_begin(pl_pkw *w);
void pl_pkw_namespace_end(pl_pkw *w);

/* A contiguous tensor of shape[0..ndim) over the whole storage key (its
 * elements: the shape's product), dtype "F32" or "BF16"; an unknown dtype is
 * reported by pl_pkw_finish. */
void pl_pkw_tensor(pl_pkw *w, const char *dtype, const char *key, int ndim, const int64_t *shape);

/* Ends the pickle (STOP): *data, *size point into w (freed by pl_pkw_free). */
pl_status pl_pkw_finish(pl_pkw *w, const uint8_t **data, size_t *size);

#endif
