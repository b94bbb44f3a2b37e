#!/usr/bin/python3
"""An independent reference of Megatron core's BERT and T5 pretraining datasets,
for tests/scripts/bert_dataset.sh and t5_dataset.sh. numpy only; it imports
nothing of plait.

Transcribed from NVIDIA/Megatron-LM:
  megatron/core/datasets/helpers.cpp       build_mapping (std::mt19937 targets,
                                           std::mt19937_64 shuffle; both C++
                                           generators written out below in Python)
  megatron/core/datasets/masked_dataset.py _build_sample_index, cache names,
                                           _create_masked_lm_predictions
  megatron/core/datasets/bert_dataset.py   __getitem__, _get_token_mask
  megatron/core/datasets/t5_dataset.py     T5's mapping length, __getitem__, _get_token_mask
  pretrain_t5.py                           T5's masking configuration
and from NVIDIA/NeMo, nemo/collections/nlp/data/language_modeling/megatron/:
  bart_dataset.py                          BARTDataset.__getitem__, pad_and_convert_to_numpy
  dataset_utils.py                         create_masked_lm_predictions (NeMo's own)
  megatron/core/datasets/megatron_dataset.py   the description and its md5
  megatron/core/datasets/blended_megatron_dataset_config.py / _builder.py   --split
  examples/bert/pretrain_bert.py           the masking configuration

Commands:
  check --dump FILE --prefix P --vocab V key=value...
      builds the reference dataset with the same keys as bert_samples dump,
      compares plait's cached description and sample_index.npy (numpy.load)
      and every sample in FILE (tokens, types, labels, length, is_random;
      with t5=1 the T5 dataset: enc, dec, labels and both lengths; with
      bart=1 NeMo's BART dataset, the same fields).
  cxx_check N SEED
      prints N outputs of std::mt19937(SEED) and of std::mt19937_64(SEED + 1)
      from the Python generators (the suite compares them with g++'s).
"""
import hashlib
import json
import os
import re
import struct
import sys
from collections import OrderedDict, deque

import numpy

DTYPE_CODES = {1: numpy.uint8, 2: numpy.int8, 3: numpy.int16, 4: numpy.int32, 5: numpy.int64,
               6: numpy.float64, 7: numpy.float32, 8: numpy.uint16}
LONG_SENTENCE_LEN = 512


# ---- the C++ standard's Mersenne Twisters -------------------------------------------------

class MT19937:
    """std::mt19937 (w 32, n 624, m 397, r 31)."""

    def __init__(self, seed):
        self.mt = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            prev = self.mt[-1]
            self.mt.append((1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF)
        self.i = 624

    def __call__(self):
        mt = self.mt
        if self.i >= 624:
            for k in range(624):
                y = (mt[k] & 0x80000000) | (mt[(k + 1) % 624] & 0x7FFFFFFF)
                mt[k] = mt[(k + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            self.i = 0
        y = mt[self.i]
        self.i += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y & 0xFFFFFFFF


class MT19937_64:
    """std::mt19937_64 (w 64, n 312, m 156, r 31)."""

    M64 = (1 << 64) - 1

    def __init__(self, seed):
        self.mt = [seed & self.M64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & self.M64)
        self.i = 312

    def __call__(self):
        mt = self.mt
        if self.i >= 312:
            for k in range(312):
                y = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                mt[k] = mt[(k + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
            self.i = 0
        y = mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & self.M64


def cxx_round(x):
    """C's round(): half away from zero."""
    return float(numpy.sign(x) * numpy.floor(abs(x) + 0.5))


# ---- helpers.cpp build_mapping -----------------------------------------------------------

def get_target_sample_len(short_seq_ratio, max_length, gen):
    if short_seq_ratio == 0:
        return max_length
    random_number = gen()
    if random_number % short_seq_ratio == 0:
        return 2 + random_number % (max_length - 1)
    return max_length


def build_mapping(docs, sizes, num_epochs, max_num_samples, max_seq_length, short_seq_prob, seed,
                  min_num_sent):
    short_seq_ratio = 0
    if short_seq_prob > 0:
        short_seq_ratio = int(cxx_round(1.0 / short_seq_prob))
    maps = []
    for iteration in range(2):  # the C++ runs twice (count, then fill) with the same seed
        gen = MT19937(seed)
        second = iteration == 1
        map_index = 0
        rows = []
        for epoch in range(num_epochs):
            if map_index >= max_num_samples:
                break
            assert not (epoch == 1 and map_index == 0), "no sample in an epoch: Megatron hangs"
            for doc in range(len(docs) - 1):
                first, last = int(docs[doc]), int(docs[doc + 1])
                prev_start_index = first
                num_remain_sent = last - first
                contains_long_sentence = False
                if num_remain_sent > 1:
                    for s in range(first, last):
                        if sizes[s] > LONG_SENTENCE_LEN:
                            contains_long_sentence = True
                            break
                if num_remain_sent >= min_num_sent and not contains_long_sentence:
                    seq_len = 0
                    num_sent = 0
                    target_seq_len = get_target_sample_len(short_seq_ratio, max_seq_length, gen)
                    for s in range(first, last):
                        seq_len += int(sizes[s])
                        num_sent += 1
                        num_remain_sent -= 1
                        if ((seq_len >= target_seq_len and num_remain_sent > 1 and
                             num_sent >= min_num_sent) or num_remain_sent == 0):
                            rows.append((prev_start_index, s + 1, target_seq_len))
                            map_index += 1
                            prev_start_index = s + 1
                            target_seq_len = get_target_sample_len(short_seq_ratio,
                                                                   max_seq_length, gen)
                            seq_len = 0
                            num_sent = 0
        if second:
            maps = rows
    num_samples = len(maps)
    gen64 = MT19937_64(seed + 1)
    for i in range(num_samples - 1, 0, -1):
        j = gen64() % (i + 1)
        maps[i], maps[j] = maps[j], maps[i]
    return numpy.array(maps, dtype=numpy.uint32).reshape(num_samples, 3)


# ---- the low-level dataset and the tokenizer -------------------------------------------------

class Indexed:
    """megatron/core/datasets/indexed_dataset.py, reading only."""

    def __init__(self, prefix):
        with open(prefix + ".idx", "rb") as f:
            buf = f.read()
        assert buf[:9] == b"MMIDIDX\x00\x00"
        dtype = DTYPE_CODES[buf[17]]
        s, d = struct.unpack("<QQ", buf[18:34])
        self.sequence_lengths = numpy.frombuffer(buf, numpy.int32, s, 34)
        self.pointers = numpy.frombuffer(buf, numpy.int64, s, 34 + 4 * s)
        self.document_indices = numpy.frombuffer(buf, numpy.int64, d, 34 + 12 * s)
        self.bin = numpy.memmap(prefix + ".bin", dtype=dtype, mode="r")
        self.itemsize = numpy.dtype(dtype).itemsize

    def __getitem__(self, i):
        start = int(self.pointers[i]) // self.itemsize
        return numpy.array(self.bin[start:start + int(self.sequence_lengths[i])], numpy.int64)


class Tokenizer:
    """What the dataset reads of Megatron's _BertWordPieceTokenizer: inv_vocab
    (vocab.txt's lines, stripped, then [BOS], [EOS] and --vocab-extra-ids
    <extra_id_i> appended unless present), the ids and
    additional_special_tokens_ids."""

    def __init__(self, vocab_file, vocab_extra_ids=0):
        vocab = OrderedDict()
        with open(vocab_file, "r", encoding="utf-8") as f:
            for line in f:
                vocab[line.strip()] = len(vocab)
        extras = ["<extra_id_{}>".format(i) for i in range(vocab_extra_ids)]
        for tok in ["[BOS]", "[EOS]"] + extras:
            if tok not in vocab:
                vocab[tok] = len(vocab)
        self.inv_vocab = {v: k for k, v in vocab.items()}
        self.cls, self.sep = vocab["[CLS]"], vocab["[SEP]"]
        self.mask, self.pad = vocab["[MASK]"], vocab["[PAD]"]
        self.bos, self.eos = vocab["[BOS]"], vocab["[EOS]"]
        self.additional_special_tokens_ids = [vocab[t] for t in extras]
        self.identifiers = OrderedDict([("class", "_BertWordPieceTokenizer"),
                                        ("tokenizer_path", [vocab_file])])


# ---- --split -----------------------------------------------------------------------------

def split_matrix(split):
    vec = [float(x) for x in re.findall(r"[.0-9]+", split)]
    vec = vec + [0.0] * (3 - len(vec))
    w = numpy.array(vec, dtype=numpy.float64)
    vec = (w / numpy.sum(w)).tolist()
    expansion = [0]
    for v in vec:
        expansion.append(expansion[-1] + v)
    return [None if hi - lo == 0 else (lo, hi) for lo, hi in zip(expansion[:-1], expansion[1:])]


def nemo_split(splits_string, size):
    """NeMo's base_dataset_utils.get_train_valid_test_split_ (BART's split)."""
    if splits_string.find(',') != -1:
        splits = [float(s) for s in splits_string.split(',')]
    elif splits_string.find('/') != -1:
        splits = [float(s) for s in splits_string.split('/')]
    else:
        splits = [float(splits_string)]
    if len(splits) != 3:
        raise ValueError("Invalid splits string")
    splits_sum = sum(splits)
    assert splits_sum > 0.0
    splits = [split / splits_sum for split in splits]
    splits_index = [0]
    for index, split in enumerate(splits):
        splits_index.append(splits_index[index] + int(round(split * float(size))))
    diff = splits_index[-1] - size
    for index in range(1, len(splits_index)):
        splits_index[index] -= diff
    return splits_index


# ---- the dataset ---------------------------------------------------------------------------

class BERTDataset:
    def __init__(self, low, path, split_name, indices, num_samples, cfg, tok):
        self.low, self.tok, self.cfg = low, tok, cfg
        self.token_lookup = sorted(tok.inv_vocab.keys())
        t5 = cfg.get("t5", False) or cfg.get("bart", False)
        name = ("BARTDataset" if cfg.get("bart", False) else "T5MaskedWordPieceDataset") if t5 \
            else "BERTMaskedWordPieceDataset"
        ids = OrderedDict()
        ids["class"] = name
        ids["dataset_path"] = path
        ids["num_samples"] = num_samples
        ids["index_split"] = split_name
        ids["random_seed"] = cfg["seed"]
        ids["sequence_length"] = cfg["seq"]
        ids["split"] = cfg["split"]
        ids["split_matrix"] = cfg["split_matrix"]
        ids["tokenizer"] = tok.identifiers
        ids["masking_probability"] = cfg["mask"]
        ids["short_sequence_probability"] = cfg["short"]
        ids["masking_max_ngram"] = cfg["ngram"]
        ids["masking_do_full_word"] = cfg["wholeword"]
        ids["masking_do_permutation"] = False
        ids["masking_use_longer_ngrams"] = False
        ids["masking_use_geometric_distribution"] = cfg.get("geometric", False)
        if cfg.get("bart", False):
            pass  # plait's own cache key for NeMo's dataset: the masked attributes only
        elif t5:
            ids["sequence_length_decoder"] = cfg["dec"]
        else:
            ids["classification_head"] = cfg["binary"]
        self.description = json.dumps(ids, indent=4)
        self.hash = hashlib.md5(self.description.encode("utf-8")).hexdigest()
        cache = cfg["cache"] or os.path.join(path, "cache", name + "_indices")
        base = os.path.join(cache, self.hash + "-" + name + "-")
        self.files = (base + "description.txt", base + "sample_index.npy")

        num_epochs = numpy.iinfo(numpy.int32).max - 1 if num_samples is not None else 1
        indices = numpy.append(indices, indices[-1] + 1)
        self.sample_index = build_mapping(
            low.document_indices[indices], low.sequence_lengths, num_epochs,
            num_samples if num_samples is not None else (1 << 64) - 1,
            cfg["seq"] - (2 if t5 else 3), cfg["short"], cfg["seed"], 2 if cfg["binary"] else 1)

    def __len__(self):
        return self.sample_index.shape[0]

    def __getitem__(self, idx):
        cfg, tok = self.cfg, self.tok
        idx_beg, idx_end, target_sequence_length = (int(v) for v in self.sample_index[idx])
        sample = [list(self.low[i]) for i in range(idx_beg, idx_end)]
        numpy_random_state = numpy.random.RandomState(seed=(cfg["seed"] + idx) % 2**32)
        assert target_sequence_length <= cfg["seq"]

        pivot = len(sample)
        is_next_random = False
        if cfg["binary"]:
            assert len(sample) > 1
            pivot = 1
            if len(sample) >= 3:
                pivot = numpy_random_state.randint(low=1, high=len(sample))
            is_next_random = numpy_random_state.random() < 0.5
        split_A = []
        for sample_a in sample[:pivot]:
            split_A.extend(sample_a)
        split_B = []
        for sample_b in sample[pivot:]:
            split_B.extend(sample_b)
        if is_next_random:
            split_A, split_B = split_B, split_A

        length_A, length_B = len(split_A), len(split_B)
        while length_A + length_B > target_sequence_length:
            split = split_A if length_A > length_B else split_B
            if numpy_random_state.random() < 0.5:
                del split[0]
            else:
                del split[-1]
            length_A, length_B = len(split_A), len(split_B)

        tokens = [tok.cls, *split_A, tok.sep]
        assignments = [0 for _ in range(1 + len(split_A) + 1)]
        if split_B:
            tokens += [*split_B, tok.sep]
            assignments += [1 for _ in range(len(split_B) + 1)]

        tokens, masked_positions, masked_labels = self.mask(
            tokens, target_sequence_length, numpy_random_state)

        length = len(tokens)
        pads = cfg["seq"] - length
        assert pads >= 0
        tokens = numpy.pad(numpy.array(tokens, numpy.int64), (0, pads), constant_values=tok.pad)
        assignments = numpy.pad(numpy.array(assignments, numpy.int64), (0, pads),
                                constant_values=tok.pad)
        labels = numpy.zeros(cfg["seq"], dtype=numpy.int64) - 1
        labels[masked_positions] = masked_labels
        return tokens, assignments, labels, length, int(is_next_random)

    def token_mask(self, rs):
        if self.cfg.get("t5", False):  # T5MaskedWordPieceDataset: always the mask id
            return self.tok.mask
        if rs.random() < 0.8:
            return self.tok.mask
        if rs.random() >= 0.5:
            return self.token_lookup[rs.randint(0, len(self.token_lookup))]
        return None

    def mask(self, token_ids, target_sequence_length, rs):
        """_create_masked_lm_predictions without permutation (pretrain_bert.py:
        max n-gram 3, whole words; pretrain_t5.py: 10, whole words, geometric)."""
        tok, p_mask, max_ngram = self.tok, self.cfg["mask"], self.cfg["ngram"]
        candidates = []
        for i, token_id in enumerate(token_ids):
            if token_id == tok.cls or token_id == tok.sep:
                continue
            if not tok.inv_vocab[token_id].startswith("##"):
                candidates.append([i])
            elif self.cfg["wholeword"] and len(candidates) > 0:
                candidates[-1].append(i)
            else:
                candidates.append([i])

        n_maskings = min(p_mask * target_sequence_length,
                         max(1, int(round(len(token_ids) * p_mask))))
        ngram_nvals = numpy.arange(max_ngram, dtype=numpy.int64) + 1
        nprobs = 1.0 / ngram_nvals
        nprobs = nprobs / nprobs.sum(keepdims=True)
        candidate_ngrams = [[candidates[idx:idx + n] for n in ngram_nvals]
                            for idx in range(len(candidates))]
        rs.shuffle(candidate_ngrams)

        masked_token_ids = list(token_ids)
        masked = []
        masked_spans = []
        masked_indices = set()
        for candidate_idx in range(len(candidate_ngrams)):
            n_ngrams = len(candidate_ngrams[candidate_idx])
            if len(masked) >= n_maskings:
                break
            if not candidate_ngrams[candidate_idx]:
                continue
            if self.cfg.get("geometric", False):
                n = min(rs.geometric(0.2), max_ngram)
            else:
                p = nprobs[:n_ngrams] / nprobs[:n_ngrams].sum(keepdims=True)
                n = rs.choice(ngram_nvals[:n_ngrams], p=p)
            while True:
                ngram_indices = sum(candidate_ngrams[candidate_idx][n - 1], [])
                n = n - 1
                if n_maskings >= len(masked) + len(ngram_indices):
                    skip_candidate = False
                    break
                if n == 0:
                    skip_candidate = True
                    break
            if skip_candidate:
                continue
            if any(map(lambda i: i in masked_indices, ngram_indices)):
                continue
            for index in ngram_indices:
                masked_indices.add(index)
                mask = self.token_mask(rs)
                masked_token_ids[index] = token_ids[index] if mask is None else mask
                masked.append((index, token_ids[index]))
            masked_spans.append((ngram_indices, [token_ids[index] for index in ngram_indices]))
        assert len(masked) <= n_maskings
        rs.shuffle(candidate_ngrams)
        masked = sorted(masked, key=lambda x: x[0])
        self.masked_spans = sorted(masked_spans, key=lambda x: x[0][0])
        return masked_token_ids, [m[0] for m in masked], [m[1] for m in masked]

    def nemo_mask(self, tokens, max_predictions_per_seq, np_rng):
        """NeMo's dataset_utils.create_masked_lm_predictions, masking_style "t5", with
        BARTDataset's arguments (no skip id, no permutation, mean_ngram_size None,
        favor_long_ngrams False). Returns output_tokens and masked_spans."""
        cfg, tok = self.cfg, self.tok
        masked_lm_prob, max_ngram_size = cfg["mask"], cfg["ngram"]
        whole_word_masking, geometric_dist = cfg["wholeword"], cfg["geometric"]
        cand_indexes = []
        for i, token in enumerate(tokens):
            if token == tok.cls or token == tok.sep:
                continue
            if whole_word_masking and len(cand_indexes) >= 1 and \
                    tok.inv_vocab[token].startswith("##"):
                cand_indexes[-1].append(i)
            else:
                cand_indexes.append([i])
        output_tokens = list(tokens)
        num_to_predict = min(max_predictions_per_seq,
                             max(1, int(round(len(tokens) * masked_lm_prob))))
        num_to_predict = max(1, num_to_predict)  # masking_style != "bert"
        ngrams = numpy.arange(1, max_ngram_size + 1, dtype=numpy.int64)
        if not geometric_dist:
            pvals = 1.0 / numpy.arange(1, max_ngram_size + 1)
            pvals /= pvals.sum(keepdims=True)
        ngram_indexes = []
        for idx in range(len(cand_indexes)):
            ngram_index = {}
            for n in ngrams:
                ngram_index[n] = cand_indexes[idx:idx + n]
            ngram_indexes.append(ngram_index)
        np_rng.shuffle(ngram_indexes)
        masked_lms, masked_spans = [], []
        covered_indexes = set()
        for cand_index_set in ngram_indexes:
            if len(masked_lms) >= num_to_predict:
                break
            if not cand_index_set:
                continue
            if not geometric_dist:
                available_ngrams = list(cand_index_set.keys())
                pvals_current = numpy.array([pvals[n - 1] for n in available_ngrams])
                n = np_rng.choice(available_ngrams, p=pvals_current / pvals_current.sum(keepdims=True))
            else:
                n = min(np_rng.geometric(0.2), max_ngram_size)
            index_set = sum(cand_index_set[n], [])
            n -= 1
            while len(masked_lms) + len(index_set) > num_to_predict:
                if n == 0:
                    break
                if n - 1 in cand_index_set:
                    index_set = sum(cand_index_set[n - 1], [])
                n -= 1
            if len(masked_lms) + len(index_set) > num_to_predict:
                continue
            if any(index in covered_indexes for index in index_set):
                continue
            for index in index_set:
                covered_indexes.add(index)
                output_tokens[index] = tok.mask
                masked_lms.append((index, tokens[index]))
            masked_spans.append((index_set, [tokens[index] for index in index_set]))
        assert len(masked_lms) <= num_to_predict
        np_rng.shuffle(ngram_indexes)
        masked_spans = sorted(masked_spans, key=lambda x: x[0][0])
        return output_tokens, masked_spans

    def bart_item(self, idx):
        """NeMo's BARTDataset.__getitem__ and pad_and_convert_to_numpy."""
        cfg, tok = self.cfg, self.tok
        np_rng = numpy.random.RandomState(seed=(cfg["seed"] + idx))
        start_index, end_index, seq_length = (int(v) for v in self.sample_index[idx])
        sample = [list(self.low[i]) for i in range(start_index, end_index)]
        tokens = [token for sentence in sample for token in sentence]
        max_num_tokens = seq_length
        tokens = tokens[:max_num_tokens]
        max_predictions_per_seq = cfg["mask"] * max_num_tokens
        output_tokens, masked_spans = self.nemo_mask(tokens, max_predictions_per_seq, np_rng)
        bart_decoder_in = [tok.bos] + tokens
        bart_decoder_out = tokens + [tok.eos]
        bart_input = []
        start_index = 0
        for span in masked_spans:
            end_index = span[0][0]
            bart_input.extend(output_tokens[start_index:end_index])
            if np_rng.rand() >= cfg["delete"]:
                bart_input.append(tok.mask)
            start_index = span[0][-1] + 1
        bart_input.extend(output_tokens[start_index:])
        num_tokens = len(bart_input)
        padding_length = cfg["seq"] - num_tokens
        assert padding_length >= 0
        tokens_enc = numpy.array(bart_input + [tok.pad] * padding_length, dtype=numpy.int64)
        num_tokens_dec = len(bart_decoder_in)
        padding_length_dec = cfg["seq"] - num_tokens_dec
        assert padding_length_dec >= 0
        tokens_dec_in = numpy.array(bart_decoder_in + [tok.pad] * padding_length_dec,
                                    dtype=numpy.int64)
        labels = numpy.array(bart_decoder_out + [-1] * padding_length_dec, dtype=numpy.int64)
        loss_mask = numpy.array([1] * num_tokens_dec + [0] * padding_length_dec, dtype=numpy.int64)
        enc_mask = (tokens_enc != tok.pad).astype(numpy.int64)
        assert numpy.array_equal(loss_mask, (labels != -1).astype(numpy.int64))
        assert int(enc_mask.sum()) == num_tokens  # no [PAD] in the text
        return tokens_enc, tokens_dec_in, labels, num_tokens, num_tokens_dec, len(masked_spans)

    def t5_item(self, idx):
        """t5_dataset.py __getitem__: encoder input, decoder input, labels, lengths."""
        cfg, tok = self.cfg, self.tok
        idx_beg, idx_end, target_sequence_length = (int(v) for v in self.sample_index[idx])
        sample = [list(self.low[i]) for i in range(idx_beg, idx_end)]
        numpy_random_state = numpy.random.RandomState(seed=(cfg["seed"] + idx) % 2**32)
        assert target_sequence_length <= cfg["seq"]
        tokens = [token for sentence in sample for token in sentence]
        tokens = tokens[:target_sequence_length]
        tokens, _, _ = self.mask(tokens, target_sequence_length, numpy_random_state)
        sentinels = deque(tok.additional_special_tokens_ids)
        encoder_input = []
        decoder_input = [tok.bos]
        decoder_output = []
        idx_beg = 0
        for indices, labels in self.masked_spans:
            sentinel = sentinels.popleft()
            idx_end = indices[0]
            encoder_input.extend(tokens[idx_beg:idx_end])
            encoder_input.append(sentinel)
            decoder_input.append(sentinel)
            decoder_input.extend(labels)
            decoder_output.append(sentinel)
            decoder_output.extend(labels)
            idx_beg = indices[-1] + 1
        encoder_input.extend(tokens[idx_beg:])
        decoder_output.append(tok.eos)
        length_toks_encoder = len(encoder_input)
        length_toks_decoder = len(decoder_input)
        length_pads_encoder = cfg["seq"] - length_toks_encoder
        length_pads_decoder = cfg["dec"] - length_toks_decoder
        if length_pads_encoder < 0 or length_pads_decoder < 0:
            return None  # Megatron's asserts
        encoder_input = numpy.pad(numpy.array(encoder_input, numpy.int64),
                                  (0, length_pads_encoder), constant_values=tok.pad)
        decoder_input = numpy.pad(numpy.array(decoder_input, numpy.int64),
                                  (0, length_pads_decoder), constant_values=tok.pad)
        decoder_output = numpy.pad(numpy.array(decoder_output, numpy.int64),
                                   (0, length_pads_decoder), constant_values=-1)
        loss_mask = numpy.zeros(cfg["dec"], dtype=numpy.int64)
        loss_mask[:length_toks_decoder] = 1
        assert numpy.array_equal(loss_mask, (decoder_output != -1).astype(numpy.int64))
        return encoder_input, decoder_input, decoder_output, length_toks_encoder, \
            length_toks_decoder, len(self.masked_spans)


# ---- comparing with plait -------------------------------------------------------------------

def parse_keys(argv):
    keys = {"split": "969, 30, 1", "which": "train", "n": "-1", "seq": "128", "seed": "1234",
            "mask": "0.15", "short": "0.1", "binary": None, "cache": None, "ngram": None,
            "wholeword": "1", "t5": "0", "dec": "128", "extra": None, "geometric": None,
            "bart": "0", "delete": "0"}
    rest = []
    for a in argv:
        k, _, v = a.partition("=")
        if _ and k in keys:
            keys[k] = v
        elif _ and k in ("first", "count"):
            pass
        else:
            rest.append(a)
    return keys, rest


def check(argv):
    opts = {}
    keys, rest = parse_keys(argv)
    while rest:
        opts[rest[0].lstrip("-")] = rest[1]
        rest = rest[2:]
    bart = keys["bart"] == "1"
    t5 = keys["t5"] == "1" or bart
    for k, bert, t5_default in (("binary", "1", "0"), ("ngram", "3", "10"), ("extra", "0", "100"),
                                ("geometric", "0", "1")):
        if keys[k] is None:
            keys[k] = t5_default if t5 and not (bart and k == "extra") else bert
    cfg = {"split": keys["split"], "split_matrix": split_matrix(keys["split"]),
           "seq": int(keys["seq"]), "seed": int(keys["seed"]), "mask": float(keys["mask"]),
           "short": float(keys["short"]), "binary": keys["binary"] == "1", "cache": keys["cache"],
           "ngram": int(keys["ngram"]), "wholeword": keys["wholeword"] == "1", "t5": t5,
           "dec": int(keys["dec"]), "geometric": keys["geometric"] == "1",
           "bart": bart, "delete": float(keys["delete"])}
    n = int(keys["n"])
    n = None if n < 0 else n
    low = Indexed(opts["prefix"])
    tok = Tokenizer(opts["vocab"], int(keys["extra"]))
    which = keys["which"]
    s = {"train": 0, "valid": 1, "test": 2}[which]
    n_docs = low.document_indices.shape[0] - 1
    if bart:
        idx = nemo_split(keys["split"], n_docs)
        beg, end = idx[s], idx[s + 1]
    else:
        lo, hi = cfg["split_matrix"][s]
        beg, end = int(round(lo * float(n_docs))), int(round(hi * float(n_docs)))
    indices = numpy.arange(start=beg, stop=end, step=1, dtype=numpy.int32)
    ds = BERTDataset(low, opts["prefix"], which, indices, n, cfg, tok)

    errors = []
    with open(opts["dump"]) as f:
        lines = f.read().split("\n")
    files = lines[0].split()[1:]
    if files != list(ds.files):
        errors.append("cache files %s, Megatron's %s" % (files, list(ds.files)))
    if not all(map(os.path.isfile, ds.files)):
        print("MISMATCH Megatron's cache files %s are not there" % list(ds.files))
        return 1
    with open(ds.files[0]) as f:
        if f.read() != ds.description:
            errors.append("the cached description differs from Megatron's")
    cached = numpy.load(ds.files[1])
    if cached.dtype != numpy.uint32 or cached.shape != ds.sample_index.shape:
        errors.append("sample_index %s %s, Megatron's %s %s" % (
            cached.dtype, cached.shape, ds.sample_index.dtype, ds.sample_index.shape))
    elif not numpy.array_equal(cached, ds.sample_index):
        bad = int(numpy.argwhere(cached != ds.sample_index)[0][0])
        errors.append("sample_index row %d: %s, Megatron's %s" % (
            bad, cached[bad].tolist(), ds.sample_index[bad].tolist()))
    if int(lines[2].split()[1]) != len(ds):
        errors.append("len %s, Megatron's %d" % (lines[2], len(ds)))

    samples = masked = randoms = 0
    names = ("enc", "dec", "labels") if t5 else ("tokens", "types", "labels")
    scalars = "enc_length dec_length" if t5 else "length is_random"
    i = 3
    while i + 3 < len(lines) and lines[i].startswith("sample"):
        _, idx, a, b = lines[i].split()
        idx = int(idx)
        got = [numpy.array(lines[i + k].split()[1:], dtype=numpy.int64) for k in (1, 2, 3)]
        ref = ds.bart_item(idx) if bart else ds.t5_item(idx) if t5 else ds[idx]
        if ref is None:
            errors.append("sample %d: Megatron asserts (a sequence over its length)" % idx)
            break
        for name, g, r in zip(names, got, ref[:3]):
            if not numpy.array_equal(g, r):
                bad = int(numpy.argwhere(g != r)[0][0]) if g.shape == r.shape else -1
                errors.append("sample %d %s differ at %d: plait %s, Megatron %s" % (
                    idx, name, bad, g[max(bad, 0):bad + 6].tolist(), r[max(bad, 0):bad + 6].tolist()))
        if int(a) != ref[3] or int(b) != ref[4]:
            errors.append("sample %d: %s %s %s, Megatron's %d %d" % (idx, scalars, a, b, ref[3],
                                                                   ref[4]))
        samples += 1
        if bart:  # the text's tokens that are in spans
            masked += (ref[4] - 1) - (ref[3] - int(numpy.sum(ref[0] == tok.mask)))
            randoms += ref[5]
        elif t5:
            masked += ref[4] - 1 - ref[5]
            randoms += ref[5]
        else:
            masked += int(numpy.sum(ref[2] >= 0))
            randoms += ref[4]
        i += 4
        if len(errors) > 5:
            break
    for e in errors[:6]:
        print("MISMATCH " + e)
    print("configuration: %s; %d documents [%d, %d), %d samples in the mapping" % (
        " ".join("%s=%s" % kv for kv in keys.items()), n_docs, beg, end, len(ds)))
    print("compared %d samples (%d masked positions, %d %s) and %d mapping rows" % (
        samples, masked, randoms, "spans" if t5 else "swapped", ds.sample_index.shape[0]))
    return 1 if errors or samples == 0 else 0


def cxx_check(n, seed):
    g32, g64 = MT19937(seed), MT19937_64(seed + 1)
    print(" ".join(str(g32()) for _ in range(n)))
    print(" ".join(str(g64()) for _ in range(n)))
    return 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "check":
        return check(sys.argv[2:])
    if len(sys.argv) == 4 and sys.argv[1] == "cxx_check":
        return cxx_check(int(sys.argv[2]), int(sys.argv[3]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
