/* A restricted reader of Python's pickle format: the subset torch.save writes
 * for state dicts (protocols 2-5), turned into a tree of values. Nothing is
 * ever executed: a GLOBAL opcode only names something, and only names on a
 * short allow list are accepted; a REDUCE, NEWOBJ or BUILD on them builds data:
 *
 *   collections.OrderedDict()                  an empty dict
 *   torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)
 *                                              a tensor view of a storage
 *   torch._utils._rebuild_parameter(tensor, ...)   the tensor
 *   torch.FloatStorage, torch.BFloat16Storage, ...  storage types, in the
 *                                              persistent ids ('storage', type,
 *                                              key, location, numel) of BINPERSID
 *   argparse.Namespace (NEWOBJ + BUILD)        an object whose attributes are
 *                                              the BUILD dict (Megatron's args)
 *   numpy.core.multiarray._reconstruct, numpy.ndarray, numpy.dtype,
 *   _codecs.encode                             opaque objects (the RNG states
 *                                              Megatron saves), kept as data
 *   torch.Size, deepspeed's ZeroStageEnum,     opaque objects too (DeepSpeed's ZeRO
 *   LossScaler, DynamicLossScaler,             shards and param_shapes)
 *   fragment_address
 *   builtins.getattr(allowed global, "name")   an object named "global.name" (an enum
 *                                              member as Python >= 3.11 pickles it)
 *   torch.distributed.checkpoint.metadata.     opaque objects: a PyTorch Distributed
 *     {Metadata, TensorStorageMetadata,        Checkpoint's .metadata (megatron_dist.c);
 *     BytesStorageMetadata, ChunkStorageMetadata,  TensorProperties and its encoding also
 *     MetadataIndex, TensorProperties,         under torch.distributed._shard.sharded_tensor.
 *     _MEM_FORMAT_ENCODING, StorageMeta},      metadata (before 2.4)
 *   torch.distributed.checkpoint.filesystem._StorageInfo,
 *   torch.serialization._get_layout, pathlib.PosixPath
 *   megatron.core's ModelType, AttnBackend,    opaque objects: Megatron's args and common
 *   CudaGraph*Scope, RerunMode/State/Diagnostic,  state (megatron/core/safe_globals.py's
 *   OptimizerConfig; types.SimpleNamespace,    list)
 *   signal.Signals, numpy.dtypes.UInt32DType
 *   torch.float32, torch.bfloat16, ...         dtypes as values (args.params_dtype): names
 *                                              only, never called
 *
 * Any other global is refused with its name ("os.system"); so is any opcode
 * outside the subset (named by its byte), a truncated stream, a memo index
 * never stored, a stack or memo beyond PL_PICKLE_MAX_*, and a tensor whose
 * view reaches past its storage's elements. Cycles (a list appended to
 * itself through the memo) and shared nodes are possible: walkers bound their
 * depth and visit each node once (pl_pk_enter). */
#ifndef PL_CKPT_PICKLE_H
#define PL_CKPT_PICKLE_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

/* Limits: every opcode makes at most one node (about 100 bytes), so a pickle
 * of N bytes takes at most ~100 N bytes, and never more than PL_PICKLE_MAX_NODES
 * nodes (a state dict's pickle holds a few per tensor; the tensors' data is in
 * the archive's other entries). */
enum { PL_PICKLE_MAX_STACK = 1 << 20, PL_PICKLE_MAX_MEMO = 1 << 22,
       PL_PICKLE_MAX_NODES = 1 << 22, PL_PK_MAX_DIMS = 8 };

typedef enum pl_pk_kind {
    PL_PK_NONE,
    PL_PK_BOOL,    /* i */
    PL_PK_INT,     /* i (up to 64 bits) */
    PL_PK_FLOAT,   /* f */
    PL_PK_STR,     /* s, n bytes (UTF-8, NUL-terminated) */
    PL_PK_BYTES,   /* s, n bytes */
    PL_PK_LIST,    /* v[0..n) */
    PL_PK_TUPLE,   /* v[0..n) */
    PL_PK_DICT,    /* v[0..n): key, value, key, value, ... (insertion order; n even) */
    PL_PK_GLOBAL,  /* s: "module.name" (allow-listed) */
    PL_PK_OBJECT,  /* s: its class or function; v[0] its args (a tuple), v[1] BUILD's state or NULL */
    PL_PK_STORAGE, /* s: the archive key; dtype; i: elements */
    PL_PK_TENSOR,  /* storage, i: storage offset, ndim, shape, stride (elements) */
} pl_pk_kind;

typedef struct pl_pk pl_pk;
struct pl_pk {
    pl_pk_kind kind;
    int64_t i;
    double f;
    char *s;
    int64_t n, cap;
    pl_pk **v;
    const char *dtype; /* STORAGE: "F32", "BF16", "F16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL" */
    pl_pk *storage;    /* TENSOR */
    const uint8_t *data; /* STORAGE: its bytes, set by the archive's reader (ckpt/torch_file.h) */
    int ndim;
    int64_t *shape, *stride; /* TENSOR: ndim each (one allocation owned by the node) */
    uint64_t stamp;          /* walkers' visit mark (pl_pk_enter) */
};

typedef struct pl_pickle pl_pickle;

/* Reads the pickle data[0..size) (what names it in errors) into *out. */
pl_status pl_pickle_parse(const uint8_t *data, size_t size, const char *what, pl_pickle **out);
void pl_pickle_free(pl_pickle *p);
const pl_pk *pl_pickle_root(const pl_pickle *p);

/* The memo lets one node appear many times (a list of the same list, 64 deep,
 * is 2^64 paths in a few hundred bytes) or hold itself: a depth-first walker
 * takes a fresh stamp and brackets each node with enter and leave. enter
 * returns 1 the first time (o is then on the path), 0 when o was walked before
 * (skip it), -1 when o is on the current path (a cycle). */
uint64_t pl_pickle_stamp(pl_pickle *p);
int pl_pk_enter(const pl_pk *o, uint64_t stamp);
void pl_pk_leave(const pl_pk *o, uint64_t stamp);

/* The value of string key in a dict, or an attribute of an object built from a
 * dict (argparse.Namespace); NULL when absent or o is neither. */
const pl_pk *pl_pk_get(const pl_pk *o, const char *key);
/* Bytes per element of a storage dtype name (0: unknown). */
int pl_pk_dtype_size(const char *dtype);

#endif
