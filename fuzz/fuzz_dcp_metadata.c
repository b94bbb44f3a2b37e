/* libFuzzer target: the .metadata of a PyTorch Distributed Checkpoint (Megatron-LM's
 * --ckpt-format torch_dist, src/ckpt/megatron_dist.c) on arbitrary bytes: the restricted
 * pickle reader, then Metadata's state_dict_metadata and storage_data taken apart as the
 * import does (MetadataIndex -> _StorageInfo entries, relative paths, offsets, lengths,
 * torch.Size chunk offsets and sizes, each chunk's storage entry looked up). No file is
 * opened. Seeds: fuzz/seeds/fuzz_dcp_metadata/ (written by tests/scripts/torch_dist_write.py:
 * fuzz/make_dcp_seeds.py). */
#include "ckpt/megatron_internal.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)pl_mg_dist_metadata_check(data, size, "fuzz.metadata");
    return 0;
}
