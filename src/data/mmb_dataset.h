/* MegaMolBART's training samples: SMILES molecules from CSV files turned into
 * (encoder input, decoder input, labels) as MegaMolBART v0.2.0 builds them.
 *
 * Source followed: NVIDIA/MegaMolBART tag v0.2.0 (commit 09003ab7), on NeMo
 * v1.11.0 (its container, nemo_1.11_rc1):
 *   per-sample objective ...... nemo_chem/data/augment.py MoleculeEnumeration
 *                               (_smiles_augmeter_func, _prepare_tokens,
 *                               _check_seq_len, collate_fn, _mask_span)
 *   CSV files, split .......... nemo_chem/data/utils.py
 *                               build_train_valid_test_datasets,
 *                               csv_dataset.py (header_lines 1, data_col 1, ',')
 *   configuration ............. examples/chem/conf/megamolbart_pretrain_base.yaml
 *                               (seq_length 512, mask_prob 0.1, span_lambda 3,
 *                               encoder_augment/mask, decoder_augment on,
 *                               decoder_mask off, canonicalize_input true)
 *   tokens .................... NeMo v1.11.0 RegExTokenizer.text_to_tokens:
 *                               the regex's tokens and nothing else
 *
 * For molecule m = index mod n_molecules (MegaMolBART's sampler reads its
 * dataset in order):
 *   enc_smiles = encoder_augment ? random atom order (numpy shuffle) : SMILES
 *   dec_smiles = decoder_augment ? another random atom order of the same
 *                molecule : enc_smiles
 *   enc = tokens(enc_smiles), span-masked if encoder_mask, cut to seq_length
 *   dec = tokens(dec_smiles), span-masked if decoder_mask, cut to seq_length
 *   enc_tokens = enc                 (v0.2.0 adds no ^ or & to the encoder)
 *   dec_tokens = [^] + dec, labels = dec + [&]   (so dec_length <= seq_length + 1)
 * then padding with <PAD> (0) to the buffer sizes, labels -1 past dec_length.
 * MegaMolBART cuts a longer sequence silently (its preprocessing drops SMILES
 * over 150 characters, so it never happens on its ZINC files); here the cut is
 * reported in pl_mmb_sample_info.
 *
 * Randomness, a pure function of (seed, index), so any data-parallel layout and
 * a resume build the same sample: the atom orders come from numpy's
 * RandomState((seed + index) mod 2^32) (data/numpy_rng.h), the encoder's
 * shuffle first and the decoder's second, as MegaMolBART's global numpy stream
 * draws them within a sample; span masking uses plait's Philox
 * (data/span_mask.h) for (seed, stream 2*index encoder / 2*index+1 decoder).
 * MegaMolBART's own draws (a global numpy state, Python's random, torch's
 * Poisson, advancing across samples and DataLoader workers) cannot be
 * reproduced and are not: the distributions are the same.
 *
 * Different from MegaMolBART, on purpose or because it cannot be the same:
 *   - a randomised SMILES is plait's writer (data/smiles_graph.h), not RDKit's
 *     (the same molecule and start atom, not the same string; docs/data.md);
 *   - un-augmented sides use the input string as written, where MegaMolBART
 *     writes RDKit's MolToSmiles(mol, canonical=False) (identical for most
 *     RDKit-canonical inputs, which its preprocessing makes);
 *   - canonicalize_input changes no token in v0.2.0 (it only sets the
 *     validation target string and RDKit's rare fallback) and is accepted and
 *     ignored here: give RDKit-canonical input (MegaMolBART's CSVs are);
 *   - a SMILES that does not parse is an error naming the file and line
 *     (MegaMolBART stops in RDKit); so is a token outside the vocabulary
 *     unless map_unknown (MegaMolBART maps it to '?' silently);
 *   - the CSV is read with quoting (Python's csv rules, data/reader.h), where
 *     NeMo splits lines on ','; the same for MegaMolBART's unquoted files. The
 *     molecules are held in memory, not memory-mapped.
 *
 * Not here: batching (MegaMolBART pads to the longest in the batch, rounded up
 * to 8 when pad_size_divisible_by_8; a plait sample is padded to fixed sizes),
 * the binary dataset format ("bin"), mask_scheme "replace" (unused in v0.2.0). */
#ifndef PL_DATA_MMB_DATASET_H
#define PL_DATA_MMB_DATASET_H

#include "data/encdec_sample.h"
#include "data/tokenizer/tokenizer.h"

#include <stdint.h>


typedef struct pl_mmb_config {
    int64_t seq_length; /* MegaMolBART's model.seq_length: tokens kept per side, >= 1 */
    int encoder_augment, encoder_mask, decoder_augment, decoder_mask;
    int canonicalize_input; /* accepted, no effect on samples (see above) */
    double mask_prob;       /* [0, 1] */
    double span_lambda;     /* (0, 30] */
    uint32_t seed;
    /* A token not in the vocabulary: 0 = an error naming file and line; 1 =
     * its id is '?' (1), as MegaMolBART's vocab.get(token, unk) does, and
     * pl_mmb_sample_info counts it. A randomised SMILES can hold tokens its
     * input does not (a ring digit above the input's, @ for @@ in a bracket
     * atom), so the vocabulary should come from augmented SMILES. */
    int map_unknown;
} pl_mmb_config;

/* megamolbart_pretrain_base.yaml: seq_length 512, augment both sides, mask the
 * encoder only, mask_prob 0.1, span_lambda 3, canonicalize_input on, seed 42;
 * map_unknown off. */
void pl_mmb_config_default(pl_mmb_config *c);

/* The molecules of one split: one SMILES per CSV row. */
typedef struct pl_mmb_molecules {
    char *text;      /* every SMILES, each NUL-terminated */
    int64_t *offset; /* (n) start of molecule i in text */
    int64_t *line;   /* (n) 1-based line of molecule i in its file */
    int32_t *file;   /* (n) index into paths */
    char **paths;    /* (n_files) */
    int64_t n;
    int32_t n_files;
} pl_mmb_molecules;

/* Reads SMILES from field `column` (0-based; MegaMolBART's data_col 1 of
 * "zinc_id,smiles") of each path, after skipping header_lines lines of each
 * (MegaMolBART: 1), in path order. Format from the extension as `plait
 * preprocess` reads it (.csv ',' with quoting, .tsv, .smi blank-separated).
 * Blank rows are skipped; an empty SMILES field is an error. Errors name the
 * file and line. */
pl_status pl_mmb_molecules_load(pl_mmb_molecules *m, const char *const *paths, int32_t n_paths,
                                int64_t column, int64_t header_lines);
void pl_mmb_molecules_free(pl_mmb_molecules *m);

/* MegaMolBART's split layout: files dataset_path/<split>/<name>.csv, where
 * split is "train", "val" or "test" and spec is its data.dataset entry: one
 * name ("x000") or an inclusive range "x[000..146]" (digits zero-padded to
 * the width written; MegaMolBART expands it with braceexpand). *paths is
 * allocated (pl_mmb_paths_free). */
pl_status pl_mmb_split_paths(const char *dataset_path, const char *split, const char *spec,
                             char ***paths, int32_t *n_paths);
void pl_mmb_paths_free(char **paths, int32_t n_paths);

typedef struct pl_mmb_dataset pl_mmb_dataset;

/* The dataset over mols (borrowed, must outlive it) with tok, a
 * SmilesTokenizer whose ^ & <MASK> <PAD> have ids 2 3 4 0 (borrowed; only
 * read). PL_ERR_ARG for a configuration outside the ranges above, a
 * tokenizer that is not MegaMolBART's, or no molecules. */
pl_status pl_mmb_dataset_init(pl_mmb_dataset **out, const pl_mmb_config *cfg,
                              const pl_tokenizer *tok, const pl_mmb_molecules *mols);
void pl_mmb_dataset_free(pl_mmb_dataset *d);

/* Buffer sizes a sample needs: Te = seq_length, Td = seq_length + 1. */
void pl_mmb_dataset_dims(const pl_mmb_dataset *d, int64_t *Te, int64_t *Td);

/* What a sample was made from, for tests and logs; the strings belong to the
 * dataset and stay valid until its next pl_mmb_dataset_sample. */
typedef struct pl_mmb_sample_info {
    int64_t molecule;       /* index into the molecules */
    const char *enc_smiles; /* encoder SMILES before masking */
    const char *dec_smiles;
    int64_t enc_unmasked;             /* tokens of enc_smiles */
    int64_t enc_masks;                /* <MASK> tokens in enc_tokens */
    int enc_truncated, dec_truncated; /* cut to seq_length */
    int64_t unknown;                  /* tokens mapped to '?' (map_unknown) */
} pl_mmb_sample_info;

/* Builds sample `index` (>= 0) into s, whose arrays hold Te and Td ids
 * (pl_mmb_dataset_dims). info may be NULL. Allocates only while its scratch
 * grows to the largest molecule. Errors (PL_ERR_FORMAT) name the file and
 * line of the molecule: a SMILES that does not parse, a token not in the
 * vocabulary. Not thread-safe per dataset. */
pl_status pl_mmb_dataset_sample(pl_mmb_dataset *d, int64_t index, pl_encdec_sample *s,
                                pl_mmb_sample_info *info);

/* Parses and tokenizes every molecule as written, to report bad input before
 * training; the first error names its file and line. A token outside the
 * vocabulary is an error here whatever map_unknown says. */
pl_status pl_mmb_dataset_validate(pl_mmb_dataset *d);

#endif
